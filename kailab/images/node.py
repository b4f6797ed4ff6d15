"""The kind node image, assembled here as kind's own images/base/Dockerfile and node-image builder
make it — `kind build node-image` itself cannot run without a registry (it fetches etcd, CoreDNS,
pause, kindnetd and local-path images):

1. base: a Debian rootfs (mmdebstrap) + kind's base files from the kind module (entrypoint,
   containerd config, systemd units, kubelet drop-ins) + the Dockerfile's clean-up and
   `systemctl enable` + containerd, runc, CNI plugins, crictl, kubeadm, kubelet and kubectl built
   from source + `/kind/version`; kindnetd lives in another repository, so a static ptp +
   host-local CNI config stands in for it (the cluster sets `networking.disableDefaultCNI`);
2. the control-plane images `kubeadm config images list` names (apiserver, controller manager,
   scheduler, proxy, etcd, CoreDNS, pause), each built from source, imported into the node's
   containerd (pinned, as kind pins them) and the container committed.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import tarfile
import time
from importlib import resources
from pathlib import Path

from ..errors import BuildError
from ..paths import cache_dir
from ..toolchain import Recipe, build_all, etcd_recipe, own_main
from .. import versions
from . import ImageSet, assemble, docker, image_set, recipes
from .assemble import ImageSpec
from .gomod import module_dir

KIND_ENTRYPOINT = '["/usr/local/bin/entrypoint","/sbin/init"]'
# kind's images/base/Dockerfile clean-up (paths under /lib are /usr/lib with Debian's merged /usr)
DROPPED = ["usr/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
           "usr/lib/systemd/system/multi-user.target.wants/*", "etc/systemd/system/*.wants/*",
           "usr/lib/systemd/system/local-fs.target.wants/*", "usr/lib/systemd/system/sockets.target.wants/*udev*",
           "usr/lib/systemd/system/sockets.target.wants/*initctl*", "usr/lib/systemd/system/basic.target.wants/*"]
ENABLED = ["kubelet.service", "containerd.service", "undo-mount-hacks.service"]


def _dropped(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in DROPPED)


def kind_base_files() -> Path:
    """kind's images/base/files from the kind module (Go module proxy)."""
    return module_dir("sigs.k8s.io/kind", recipes.pins()["kind"]) / "images" / "base" / "files"


def _kind_files(files: Path) -> list[tuple[str, Path, int]]:
    """The Dockerfile's COPY lines: executables 0755, everything else 0644."""
    out = []
    for p in sorted(files.rglob("*")):
        if not p.is_file():
            continue
        rel = str(p.relative_to(files))
        executable = rel.startswith("usr/local/bin/") or rel.startswith("kind/bin/")
        out.append(("/" + rel, p, 0o755 if executable else 0o644))
    return out


def _cri_base_spec(ctr: Path) -> bytes:
    """`ctr oci spec` with kind's changes: the product-files hook, no rlimits."""
    out = subprocess.run([str(ctr), "oci", "spec"], capture_output=True, text=True)
    if out.returncode != 0:
        raise BuildError(f"`ctr oci spec` failed: {out.stderr.strip()[-200:]}")
    spec = json.loads(out.stdout)
    spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
    spec.get("process", {}).pop("rlimits", None)
    return json.dumps(spec, indent=2).encode()


def cni_conflist(subnet: str) -> bytes:
    return json.dumps({"cniVersion": "1.0.0", "name": "kailab", "plugins": [
        {"type": "ptp", "ipMasq": True, "mtu": 1500,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]], "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}, indent=2).encode()


def _journald(base: Path) -> bytes:
    with tarfile.open(base) as tar:
        for m in tar:
            if m.name.removeprefix("./") == "etc/systemd/journald.conf":
                return tar.extractfile(m).read() + b"ReadKMsg=no\n"
    return b"[Journal]\nReadKMsg=no\n"


def base_spec(s: ImageSet, rs: dict[str, Recipe], node_fs: Path) -> ImageSpec:
    b = lambda comp, name: cache_dir() / "bin" / rs[comp].component / rs[comp].version / name  # noqa: E731
    files = _kind_files(kind_base_files())
    files += [(f"/usr/local/bin/{n}", b("containerd", n), 0o755) for n in ("containerd", "ctr", "containerd-shim-runc-v2")]
    files += [("/usr/local/bin/crictl", b("crictl", "crictl"), 0o755), ("/usr/local/sbin/runc", b("runc", "runc"), 0o755)]
    files += [(f"/opt/cni/bin/{n}", b("cni-plugins", n), 0o755) for n in ("host-local", "loopback", "ptp", "portmap")]
    files += [(f"/usr/bin/{n}", b("kubernetes-node", n), 0o755) for n in ("kubeadm", "kubelet", "kubectl")]
    generated = (("/etc/containerd/cri-base.json", _cri_base_spec(b("containerd", "ctr")), 0o644),
                 ("/kind/version", f"{s.kubernetes}\n".encode(), 0o644),
                 ("/etc/cni/net.d/10-kailab.conflist", cni_conflist(recipes.pins()["node"]["pod_subnet"]), 0o644),
                 ("/etc/systemd/journald.conf", _journald(node_fs), 0o644))
    links = tuple((f"/etc/systemd/system/multi-user.target.wants/{u}", f"/etc/systemd/system/{u}") for u in ENABLED)
    links += (("/etc/systemd/system/systemd-binfmt.service", "/dev/null"),)
    return ImageSpec(f"kailab/node-base:{s.kubernetes}", tuple(files), base=node_fs, generated=generated,
                     links=links, dirs=("/etc/kubernetes/manifests",), drop=_dropped,
                     env=("container=docker", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
                     entrypoint=("/usr/local/bin/entrypoint", "/sbin/init"))


def control_plane_refs(kubeadm: Path, kubernetes: str) -> list[str]:
    out = subprocess.run([str(kubeadm), "config", "images", "list", "--kubernetes-version", kubernetes],
                         capture_output=True, text=True)
    refs = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or not refs:
        raise BuildError(f"`kubeadm config images list` failed: {out.stderr.strip()[-200:]}")
    return refs


def _pause_binary(k8s_module_dir: Path, out: Path, log) -> Path:
    if out.is_file():
        return out
    src = k8s_module_dir / "build" / "pause" / "linux" / "pause.c"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["gcc", "-Os", "-static", "-o", str(out) + ".partial", str(src)],
                          stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise BuildError(f"cannot compile pause from {src} (gcc and a static libc are needed: "
                         "Debian: apt-get install gcc libc6-dev)")
    os.replace(str(out) + ".partial", out)
    return out


def coredns_recipe(tag: str) -> Recipe:
    """CoreDNS at kubeadm's version with only the plugins a lab's Corefiles use (kailab/data/coredns-lab.go.tmpl:
    kubeadm's and vCluster's), a main of kailab's own: CoreDNS's main links every plugin, cloud SDKs among them
    (1,094 packages to compile against 550). A kind lab's DNS answers a few lookups: compiled quickly too."""
    main = resources.files("kailab").joinpath("data/coredns-lab.go.tmpl").read_text()
    return Recipe("coredns-lab", tag, "github.com/coredns/coredns", {"coredns": own_main("coredns-lab", "coredns")},
                  optimize=False, main_source=main)


def control_plane_specs(s: ImageSet, rs: dict[str, Recipe], slim_fs: Path, log, phase) -> list[ImageSpec]:
    """The images kubeadm runs, under the names it asks for, each built from source at the version
    its tag names."""
    kn = cache_dir() / "bin" / "kubernetes-node" / s.kubernetes
    refs = control_plane_refs(kn / "kubeadm", s.kubernetes)
    by: dict[str, Recipe] = {}  # an image's name -> the recipe of its binary
    for ref in refs:
        name, tag = ref.rsplit("/", 1)[-1].split(":")
        if name == "etcd":
            by[name] = etcd_recipe("v" + tag.split("-")[0])
        elif name == "coredns":
            by[name] = coredns_recipe(tag)
    build_all(list(by.values()))
    specs = []
    for ref in refs + ["registry.k8s.io/pause:3.10"]:  # kind's containerd config pins pause:3.10
        name = ref.rsplit("/", 1)[-1].split(":")[0]
        if name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            specs.append(ImageSpec(ref, ((f"/usr/local/bin/{name}", kn / name, 0o755),)))
        elif name == "kube-proxy":  # needs iptables
            specs.append(ImageSpec(ref, (("/usr/local/bin/kube-proxy", kn / name, 0o755),), base=slim_fs))
        elif name in ("etcd", "coredns"):
            r = by[name]
            path = "/usr/local/bin/etcd" if name == "etcd" else "/coredns"
            specs.append(ImageSpec(ref, ((path, cache_dir() / "bin" / r.component / r.version / name, 0o755),),
                                   entrypoint=(path,) if name == "coredns" else ()))
        elif name == "pause":
            pause = _pause_binary(module_dir("k8s.io/kubernetes", s.kubernetes), cache_dir() / "bin" / "pause" / s.kubernetes / "pause", log)
            specs.append(ImageSpec(ref, (("/pause", pause, 0o755),), entrypoint=("/pause",), user="65535:65535"))
        else:
            raise BuildError(f"kubeadm asks for {ref}, which kailab does not know how to build")
    return specs


def ensure_node_image(s: ImageSet, rs: dict[str, Recipe], node_fs: Path, slim_fs: Path, work: Path,
                      log, phase) -> list[str]:
    """The node image, unless Docker has it from the same inputs. Returns the images made now."""
    made = []
    base = base_spec(s, rs, node_fs)
    if assemble.ensure(base, phase, work):
        made.append(base.ref)
    cp = control_plane_specs(s, rs, slim_fs, log, phase)
    for spec in cp:
        if assemble.ensure(spec, phase, work):
            made.append(spec.ref)
    # and what a kind lab runs (built before this): `kind load` at a lab's `up` then skips them
    # (kind/runtime.py's _preload). The images every lab runs whatever schedules in it (KWOK,
    # fake-gpu-operator, the metrics), and the default KAI version's when Docker has them — the node
    # image serves every version, so whichever set is built it holds the same ones and is not made again
    default_kai = image_set(versions.DEFAULT_KAI).kai_images
    inputs = {ref: docker.inputs_of(ref) for ref in [*s.base_images, *default_kai]}  # None: Docker lacks it
    extra = [*s.base_images, *(default_kai if all(inputs[ref] is not None for ref in default_kai) else [])]
    baked = [*(c.ref for c in cp), *extra]
    key = (assemble.inputs_key(base) + "+" + "+".join(assemble.inputs_key(c)[:8] for c in cp)
           + "+" + "+".join((inputs[ref] or "?")[:8] for ref in extra))
    if docker.inputs_of(s.node_image) == key:
        return made
    phase(f"preloading {len(cp)} control-plane images and {len(extra)} a lab runs into {s.node_image}")
    work.mkdir(parents=True, exist_ok=True)
    archive = work / "control-plane-images.tar"
    docker.run("save", "-o", str(archive), *baked)
    cid = docker.run("run", "-d", "--privileged", "--entrypoint", "sleep", "-v", f"{work}:/kailab-build:ro",
                     base.ref, "infinity").strip()
    try:
        docker.run("exec", cid, "bash", "-c", "nohup containerd >/var/log/containerd-build.log 2>&1 &")
        deadline = time.time() + 60
        while subprocess.run([docker.client(), "exec", cid, "ctr", "version"], capture_output=True).returncode != 0:
            if time.time() > deadline:
                raise BuildError("containerd did not start inside the node image being built "
                                 f"(docker exec {cid} cat /var/log/containerd-build.log)")
            time.sleep(1)
        docker.run("exec", cid, "ctr", "-n", "k8s.io", "images", "import", "--no-unpack",
                   "--label=io.cri-containerd.pinned=pinned", "/kailab-build/control-plane-images.tar")
        docker.run("exec", cid, "bash", "-c", "pkill containerd; sleep 2", check=False)
        # the build container ran `sleep infinity`: give the image kind's entrypoint back, no CMD
        docker.run("commit", "--change", f"ENTRYPOINT {KIND_ENTRYPOINT}", "--change", "CMD []",
                   "--change", "ENV container=docker", "--change", f"LABEL {docker.INPUTS_LABEL}={key}",
                   cid, s.node_image)
    finally:
        docker.run("rm", "-f", cid, check=False)
        archive.unlink(missing_ok=True)
    made.append(s.node_image)
    return made
