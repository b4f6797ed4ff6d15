"""Images a kind lab needs, built here from source (`kailab tools images`), for hosts that reach no
container registry.

What a kind lab runs, and where each piece comes from when it is built here:
- the node image (Debian rootfs + kind's base files + Kubernetes, containerd, runc, CNI plugins and
  crictl built from source, the control-plane images preloaded), tagged `kailab/node:<kubernetes>`;
- KWOK's, KAI's, fake-gpu-operator's and the lab's metrics (Prometheus, kube-state-metrics) images
  under their **upstream names and tags**, so charts and
  manifests need no renaming (only KAI's `global.registry` is pointed at KAI's upstream path);
- the charts (KAI's from the registered KAI repository, fake-gpu-operator's from its registered
  repository) packaged into the cache, and KWOK's manifest rendered from its Go module.

`image_set` is pure: the names and paths for a KAI version, which the kind runtime's plan uses and
`images.build` makes real. Nothing here is ever committed: binaries, trees and images live in
kailab's cache and in Docker's store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import versions
from ..paths import cache_dir
from .recipes import host_tools, node_recipes

# fake-gpu-operator's release the kind lab installs (KAI's own kind e2e setup uses it)
FAKE_GPU_OPERATOR_VERSION = "0.0.74"
FGO_REGISTRY = "ghcr.io/run-ai/fake-gpu-operator"
# the components of fake-gpu-operator whose pods run on kind's real node (the rest sit on KWOK
# nodes, where no image is ever pulled)
FGO_IMAGES = ["status-updater", "kwok-gpu-device-plugin", "topology-server", "status-exporter"]
KAI_REGISTRY = "ghcr.io/kai-scheduler/kai-scheduler"
# KAI's images a chart install pulls on the real node: the operator, what it deploys, and the
# crd-upgrader image its hooks run (resourcereservation pods sit on KWOK nodes: never pulled)
KAI_IMAGES = ["operator", "scheduler", "binder", "podgrouper", "podgroupcontroller", "queuecontroller",
              "admission", "crd-upgrader"]
NODE_REPOSITORY = "kailab/node"


@dataclass(frozen=True)
class ImageSet:
    """Everything a kind lab of one KAI version uses when its images are built here."""

    kai_version: str
    kubernetes: str
    node_image: str                      # kailab/node:v1.36.3
    kai_registry: str                    # the chart's global.registry
    images: list[str]                    # every image to have in Docker and `kind load` into the node
    kai_chart: Path                      # helm-packaged KAI chart (.tgz) from the registered repository
    fgo_chart: Path                      # helm-packaged fake-gpu-operator chart (.tgz)
    kwok_manifest: Path                  # KWOK's controller manifest, rendered from its Go module
    extra: dict = field(default_factory=dict)
    kai_images: list[str] = field(default_factory=list)  # KAI's among `images` (the kai stack's)

    @property
    def built_images(self) -> list[str]:
        """The node image and every component image: what `kailab tools images` makes."""
        return [self.node_image, *self.images]

    @property
    def base_images(self) -> list[str]:
        """What every kind lab runs whatever schedules in it (KWOK, fake-gpu-operator, the metrics):
        a lab's scheduler adds its own (its Addon's `local_images`)."""
        return [ref for ref in self.images if ref not in self.kai_images]


def artifacts_dir() -> Path:
    return cache_dir() / "images"


def image_set(kai_version: str) -> ImageSet:
    """The names and paths a kind lab of `kai_version` uses with images built here (pure)."""
    release = versions.kai_release(kai_version)
    v = release.version
    images = [f"registry.k8s.io/kwok/kwok:{versions.KWOK_VERSION}"]
    kai = [f"{KAI_REGISTRY}/{name}:{v}" for name in KAI_IMAGES]
    images += kai
    images += [f"{FGO_REGISTRY}/{name}:{FAKE_GPU_OPERATOR_VERSION}" for name in FGO_IMAGES]
    images += list(versions.metrics_images().values())  # the lab's Prometheus and kube-state-metrics
    art = artifacts_dir()
    return ImageSet(
        kai_version=v, kubernetes=release.kubernetes,
        node_image=f"{NODE_REPOSITORY}:{release.kubernetes}",
        kai_registry=KAI_REGISTRY, images=images,
        kai_chart=art / "charts" / f"kai-scheduler-{v}.tgz",
        fgo_chart=art / "charts" / f"fake-gpu-operator-{FAKE_GPU_OPERATOR_VERSION}.tgz",
        kwok_manifest=art / "manifests" / f"kwok-{versions.KWOK_VERSION}.yaml",
        kai_images=kai,
    )


def cached_tool(name: str) -> Path | None:
    """kind, helm or kubectl as `kailab tools images` built them into the binary cache, if there."""
    for recipe in [*host_tools(), *node_recipes(versions.kai_release(versions.DEFAULT_KAI).kubernetes)]:
        path = cache_dir() / "bin" / recipe.component / recipe.version / name
        if name in recipe.binaries and path.is_file():
            return path
    return None
