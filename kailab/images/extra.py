"""A scheduler stack's own images and chart for a kind lab (Kueue's, Volcano's), built here by the same
means as the lab's base set (`kailab tools images --stack NAME`): single-layer images under the
upstream names from binaries in kailab's cache, charts `helm package`d from the registered source
tree into the cache. The stack (above this layer) says what they are (`ImageSpec`s, `Chart`s); this
module makes what is missing and nothing made from the same inputs twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import versions
from ..errors import BuildError
from ..paths import cache_dir
from ..toolchain import Recipe, build_all, kubernetes_recipe
from . import artifacts_dir, assemble, docker, recipes, rootfs
from .assemble import ImageSpec
from .build import _helm_package


@dataclass(frozen=True)
class Chart:
    """A chart directory of a source tree, packaged as its release pipeline stamps it."""

    source: Path       # the chart's directory in the tree
    version: str       # the chart's version (a leading v is dropped, as helm wants)
    app_version: str   # the image tag the chart defaults to
    out: Path          # the packaged .tgz in the cache (chart_path)


def chart_path(name: str, version: str) -> Path:
    """Where a stack's packaged chart lives in the cache (pure)."""
    return artifacts_dir() / "charts" / f"{name}-{version.lstrip('v')}.tgz"


def binary(recipe: Recipe, name: str) -> Path:
    """A cached binary of a recipe (built by `build_binaries`)."""
    return cache_dir() / "bin" / recipe.component / recipe.version / name


def kubectl_recipe() -> Recipe:
    """The lab's own Kubernetes build (kubectl for images that run it, as the node's)."""
    return kubernetes_recipe(versions.kai_release(versions.DEFAULT_KAI).kubernetes)


def kubectl() -> Path:
    return binary(kubectl_recipe(), "kubectl")


def build_binaries(rs: list[Recipe], console=None) -> None:
    """The stack's Go binaries and helm (what packages its chart), cached like every build."""
    if not docker.answers():
        raise BuildError("no Docker engine answers (DOCKER_HOST or /var/run/docker.sock): images are built "
                         "into one; on a host without a Docker service: eval \"$(kailab/data/docker-host.sh start)\"")
    helm = [r for r in recipes.host_tools() if r.component == "helm"]
    build_all([*rs, *helm], console)


def slim_rootfs(phase) -> Path:
    """The Debian base of images that need a shell and tools (the base set's `slim`, cached)."""
    p = recipes.pins()
    with open(_log(), "a") as log:
        return rootfs.ensure("slim", p["node"]["debian_suite"], p["slim"]["packages"], log, phase)


def make(specs: list[ImageSpec], charts: list[Chart], phase) -> list[str]:
    """Assemble each image and package each chart unless already made from the same inputs; returns
    the images made now. An image still missing afterwards is one line naming the log."""
    made = [s.ref for s in specs if assemble.ensure(s, phase, artifacts_dir() / "work")]
    helm = binary(next(r for r in recipes.host_tools() if r.component == "helm"), "helm")
    with open(_log(), "a") as log:
        for chart in charts:
            if not chart.out.is_file():
                phase(f"packaging {chart.out.name}")
            _helm_package(helm, chart.source, chart.version, chart.app_version, chart.out, log)
    missing = [s.ref for s in specs if not docker.has(s.ref)] + [str(c.out) for c in charts if not c.out.is_file()]
    if missing:
        raise BuildError(f"still missing after the build: {', '.join(missing)} (see {_log()})")
    return made


def _log() -> Path:
    path = artifacts_dir() / "build.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
