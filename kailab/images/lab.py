"""The lab image: kailab and everything a binary lab runs, in one image, so a Kubernetes pod can bring
a lab up inside itself (fanning a run out over a cluster's nodes: docs/dev/fan-out-design.md).

Built here by the same means as the kind images, air-gapped for containers: a Debian rootfs with
Python (mmdebstrap, from Debian's packages), kailab's own package, fleets and exercises, its Python
dependencies (pip, from the package index, cached by their list), and the Go binaries a binary lab of
one KAI version runs, copied from kailab's cache to the same paths in the image's cache (with KAI's
source tree, whose CRDs a lab installs), so kailab inside finds them cached and builds nothing. Nothing
of it is ever committed: the image lives in Docker's store (`kind load` puts it on a kind cluster).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import toolchain, versions
from ..errors import BuildError
from ..paths import PROJECT_ROOT, cache_dir
from . import artifacts_dir, assemble, recipes, rootfs
from .assemble import ImageSpec

REPOSITORY = "kailab/lab"
# inside the image: its HOME, and so kailab's default cache there (paths.cache_dir's default under HOME)
IMAGE_HOME = "/root"
IMAGE_CACHE = f"{IMAGE_HOME}/.cache/kailab"
APP = "/opt/kailab"
EVIDENCE = "/evidence"
# Debian's Python 3.11 (bookworm) runs the cp311 wheels pip resolves with this machine's 3.11
PACKAGES = ["python3", "ca-certificates"]
KAILAB_PACKAGE_DATA = ("data",)


@dataclass(frozen=True)
class LabImage:
    """What a lab image of one KAI version is made of (pure: `spec` reads the cache)."""

    kai_version: str

    @property
    def ref(self) -> str:
        return f"{REPOSITORY}:kai-{self.kai_version}"

    def recipes(self) -> list[toolchain.Recipe]:
        """The binaries a binary lab of this KAI version runs, with its metrics."""
        return toolchain.recipes_for(self.kai_version) + toolchain.metrics_recipes()


def python_requirements() -> list[str]:
    """kailab's run-time dependencies as pyproject.toml declares them."""
    import tomllib

    return list(tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def _site_packages(log, phase) -> Path:
    """kailab's dependencies installed into one folder, made once per dependency list."""
    reqs = python_requirements()
    key = hashlib.sha256("\n".join([sys.version.split()[0][:4], *reqs]).encode()).hexdigest()[:12]
    out = artifacts_dir() / "lab" / f"site-{key}"
    if (out / ".complete").is_file():
        return out
    phase(f"pip install --target ({len(reqs)} requirements)")
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(out),
                           *reqs], stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise BuildError(f"pip could not install kailab's dependencies for the lab image (exit {proc.returncode}): "
                         f"see {log.name}")
    (out / ".complete").write_text("")
    return out


def _stage(src: Path, dest: Path) -> Path:
    """A copy of one of the project's folders without caches, so its digest is its content."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def _cache_files(image: LabImage) -> tuple[list[tuple[str, Path, int]], list[tuple[str, bytes, int]]]:
    """The cached binaries and KAI's tree, at the image cache's paths; the manifests rewritten to
    name the tree where the image has it. A binary not built yet is one line naming the build."""
    files, generated = [], []
    missing = [r.key for r in image.recipes() if not toolchain.is_cached(r)]
    if missing:
        raise BuildError(f"the lab image needs {', '.join(missing)} built first: "
                         f"kailab tools build --kai-version {image.kai_version}")
    for r in image.recipes():
        folder = cache_dir() / "bin" / r.component / r.version
        dest = f"{IMAGE_CACHE}/bin/{r.component}/{r.version}"
        for name in r.binaries:
            files.append((f"{dest}/{name}", folder / name, 0o755))
        manifest = toolchain.manifest(r.component, r.version) or {}
        tree = (manifest.get("source") or {}).get("tree")
        if r.component == "kai":
            image_tree = f"{IMAGE_CACHE}/src/kai/{r.version}"
            files.append((image_tree, toolchain.kai_tree(r), 0o644))
            manifest = {**manifest, "source": {**manifest["source"], "tree": image_tree}}
            render = cache_dir() / "bin" / "kai-render" / r.version
            if render.is_dir():  # the scheduler configuration's renderer, built for this tree
                for p in sorted(render.rglob("*")):
                    if p.is_file():
                        files.append((f"{IMAGE_CACHE}/bin/kai-render/{r.version}/{p.relative_to(render)}", p, 0o755))
        elif tree:
            manifest = {**manifest, "source": {**manifest["source"], "tree": ""}}
        generated.append((f"{dest}/manifest.json", json.dumps(manifest, indent=2).encode(), 0o644))
    return files, generated


def spec(image: LabImage, log, phase) -> ImageSpec:
    """The image's content: Debian with Python, kailab, its dependencies and the lab's binaries."""
    p = recipes.pins()
    base = rootfs.ensure("lab", p["node"]["debian_suite"], PACKAGES, log, phase)
    stage = artifacts_dir() / "lab" / "stage"
    site = _site_packages(log, phase)
    files = [(f"{APP}/kailab", _stage(PROJECT_ROOT / "kailab", stage / "kailab"), 0o644),
             (f"{APP}/fleets", _stage(PROJECT_ROOT / "fleets", stage / "fleets"), 0o644),
             (f"{APP}/exercises", _stage(PROJECT_ROOT / "exercises", stage / "exercises"), 0o644),
             (f"{APP}/site", site, 0o755)]
    cached, generated = _cache_files(image)
    return ImageSpec(
        ref=image.ref, base=base, files=(*files, *cached), generated=tuple(generated),
        entrypoint=("python3", "-m", "kailab.cli"), workdir=IMAGE_HOME, dirs=(EVIDENCE.strip("/"), IMAGE_HOME.strip("/")),
        env=("PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin", f"HOME={IMAGE_HOME}",
             f"PYTHONPATH={APP}:{APP}/site", f"KAILAB_FLEETS={APP}/fleets", f"KAILAB_EXERCISES={APP}/exercises",
             f"KAILAB_EVIDENCE={EVIDENCE}", "PYTHONDONTWRITEBYTECODE=1"),
    )


def ensure(kai_version: str, phase) -> tuple[str, bool]:
    """The lab image for `kai_version` in Docker, made unless it is there from the same inputs."""
    image = LabImage(versions.kai_release(kai_version).version)
    log_path = artifacts_dir() / "build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        s = spec(image, log, phase)
    return image.ref, assemble.ensure(s, phase, artifacts_dir() / "work")
