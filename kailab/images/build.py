"""`kailab tools images`: every image a kind lab needs, built here from source.

Order: the Go binaries (toolchain cache), the Debian root filesystems (mmdebstrap, cached tarballs),
the component images (KWOK, KAI, fake-gpu-operator, the control plane's), the node image (its
base, then the control-plane images imported into its containerd and the container committed, as
kind's own node-image builder does), then the charts and KWOK's manifest. Each step skips what is
already made from the same inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

from .. import versions
from ..errors import BuildError
from ..paths import cache_dir
from ..toolchain import Recipe, build_all
from . import FAKE_GPU_OPERATOR_VERSION, ImageSet, KAI_IMAGES, artifacts_dir, assemble, docker, image_set, node, recipes, rootfs
from .assemble import NONROOT, ImageSpec
from .gomod import module_dir
from .. import sources, toolchain


def _bin(r: Recipe, name: str) -> Path:
    return cache_dir() / "bin" / r.component / r.version / name


def _by_component(rs: list[Recipe]) -> dict[str, Recipe]:
    return {r.component: r for r in rs}


def component_images(s: ImageSet, rs: dict[str, Recipe], slim: Path, kai_tree: Path) -> list[ImageSpec]:
    """KWOK's, KAI's, fake-gpu-operator's and the metrics images, each under its upstream name, with the
    upstream image's paths, entrypoint and user."""
    out: list[ImageSpec] = []
    by_repo = {ref.rsplit(":", 1)[0].rsplit("/", 1)[-1]: ref for ref in s.images}
    out.append(ImageSpec(by_repo["kwok"], ((("/usr/local/bin/kwok"), _bin(rs["kwok"], "kwok"), 0o755),),
                         entrypoint=("/usr/local/bin/kwok",)))
    for name in KAI_IMAGES:
        ref = by_repo[name]
        if name == "crd-upgrader":
            # KAI's deployments/crd-upgrader/Dockerfile: bash + kubectl + the chart's CRDs + its script
            out.append(ImageSpec(ref, (
                ("/usr/bin/kubectl", _bin(rs["kubernetes-node"], "kubectl"), 0o755),
                ("/internal-crds", kai_tree / "deployments/kai-scheduler/crds", 0o644),
                ("/apply-crds.sh", kai_tree / "deployments/crd-upgrader/apply-crds.sh", 0o755)),
                base=slim, cmd=("/apply-crds.sh",), user=f"{NONROOT}:{NONROOT}"))
            continue
        recipe = rs["kai-install"] if name in recipes.KAI_INSTALL_BINARIES else rs["kai"]
        # KAI's Dockerfile (prod stage): /workspace/app, USER 65532
        out.append(ImageSpec(ref, (("/workspace/app", _bin(recipe, name), 0o755),),
                             entrypoint=("/workspace/app",), user=f"{NONROOT}:{NONROOT}", workdir="/workspace"))
    fgo = rs["fake-gpu-operator"]
    # fake-gpu-operator's Dockerfile: each binary in /bin (status-exporter's in /usr/local/bin)
    for name in ("status-updater", "kwok-gpu-device-plugin", "topology-server"):
        out.append(ImageSpec(by_repo[name], ((f"/bin/{name}", _bin(fgo, name), 0o755),),
                             entrypoint=(f"/bin/{name}",)))
    out.append(ImageSpec(by_repo["status-exporter"], (
        ("/usr/local/bin/status-exporter", _bin(fgo, "status-exporter"), 0o755),
        ("/usr/local/bin/status-exporter-kwok", _bin(fgo, "status-exporter-kwok"), 0o755)),
        entrypoint=("/usr/local/bin/status-exporter",)))
    # the lab's metrics, as their upstream images lay them out: /bin/prometheus, /kube-state-metrics
    metrics = versions.metrics_images()
    out.append(ImageSpec(metrics["prometheus"], (("/bin/prometheus", _bin(rs["prometheus"], "prometheus"), 0o755),),
                         entrypoint=("/bin/prometheus",), user=f"{NONROOT}:{NONROOT}", workdir="/prometheus",
                         dirs=("prometheus",)))
    out.append(ImageSpec(metrics["kube-state-metrics"],
                         (("/kube-state-metrics", _bin(rs["kube-state-metrics"], "kube-state-metrics"), 0o755),),
                         entrypoint=("/kube-state-metrics",), user=f"{NONROOT}:{NONROOT}"))
    return out


def _helm_package(helm: Path, chart_dir: Path, version: str, app_version: str, out: Path, log) -> None:
    """`helm package` a chart from a source tree, stamped with the release version as its release
    pipeline stamps it (the app version is the image tag the chart defaults to)."""
    if out.is_file():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".partial-{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    proc = subprocess.run([str(helm), "package", str(chart_dir), "--version", version.lstrip("v"),
                           "--app-version", app_version, "--destination", str(tmp)], stdout=log, stderr=subprocess.STDOUT)
    made = list(tmp.glob("*.tgz"))
    if proc.returncode != 0 or len(made) != 1:
        raise BuildError(f"`helm package {chart_dir}` failed: see {log.name}")
    os.replace(made[0], out)
    tmp.rmdir()


def _kwok_manifest(kubectl: Path, s: ImageSet, log) -> None:
    """KWOK's controller manifest as its release renders it: its kustomize/kwok in the Go module."""
    if s.kwok_manifest.is_file():
        return
    kustomize = module_dir("sigs.k8s.io/kwok", versions.KWOK_VERSION) / "kustomize" / "kwok"
    out = subprocess.run([str(kubectl), "kustomize", str(kustomize)], capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildError(f"`kubectl kustomize {kustomize}` failed: {out.stderr.strip()[-200:]}")
    # the release pins its image tag in the same way (kustomize `images:` at release time)
    text = out.stdout.replace("image: registry.k8s.io/kwok/kwok\n",
                              f"image: registry.k8s.io/kwok/kwok:{versions.KWOK_VERSION}\n")
    s.kwok_manifest.parent.mkdir(parents=True, exist_ok=True)
    s.kwok_manifest.write_text(text)


def build_images(kai_version: str, console=None, phase=print) -> ImageSet:
    """Build whatever is missing for a kind lab of `kai_version`; returns its ImageSet."""
    s = image_set(kai_version)
    if not docker.answers():
        raise BuildError("no Docker engine answers (DOCKER_HOST or /var/run/docker.sock): images are built "
                         "into one; on a host without a Docker service: eval \"$(kailab/data/docker-host.sh start)\"")
    started = time.time()
    all_rs = recipes.all_recipes(s.kai_version)
    build_all(all_rs, console)
    rs = _by_component(all_rs)
    p = recipes.pins()
    log_path = artifacts_dir() / "build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    work = artifacts_dir() / "work"
    made: list[str] = []
    with open(log_path, "a") as log:
        node_fs = rootfs.ensure("node", p["node"]["debian_suite"], p["node"]["packages"], log, phase)
        slim_fs = rootfs.ensure("slim", p["node"]["debian_suite"], p["slim"]["packages"], log, phase)

        kai_tree = toolchain.kai_tree(toolchain.kai_recipe(versions.kai_release(s.kai_version)))
        for spec in component_images(s, rs, slim_fs, kai_tree):
            if assemble.ensure(spec, phase, work):
                made.append(spec.ref)
        made += node.ensure_node_image(s, rs, node_fs, slim_fs, work, log, phase)
        helm = _bin(rs["helm"], "helm")
        phase("packaging charts")
        _helm_package(helm, kai_tree / "deployments/kai-scheduler", s.kai_version, s.kai_version, s.kai_chart, log)

        fgo_tree = sources.export_tree("fake-gpu-operator", p["fake_gpu_operator"])
        _helm_package(helm, fgo_tree / "deploy/fake-gpu-operator", p["fake_gpu_operator"],
                      FAKE_GPU_OPERATOR_VERSION, s.fgo_chart, log)
        _kwok_manifest(_bin(rs["kubernetes-node"], "kubectl"), s, log)
    missing = [ref for ref in s.built_images if not docker.has(ref)]
    if missing:
        raise BuildError(f"images still missing after the build: {', '.join(missing)} (see {log_path})")
    record = {"kai_version": s.kai_version, "kubernetes": s.kubernetes, "images": s.built_images,
              "made_now": made, "seconds": round(time.time() - started, 1),
              "charts": [str(s.kai_chart), str(s.fgo_chart)], "kwok_manifest": str(s.kwok_manifest)}
    (artifacts_dir() / f"set-{s.kai_version}.json").write_text(json.dumps(record, indent=2))
    return s


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
