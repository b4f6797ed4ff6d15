"""The Go builds behind a kind lab's images and host tools: toolchain Recipes, cached like every
binary (`~/.cache/kailab/bin/<component>/<version>/`), never rebuilt once complete."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml

from .. import versions
from ..toolchain import Recipe, kai_recipe, kubernetes_recipe, metrics_recipes

# KAI's binaries a chart install runs beyond the five a binary lab runs
KAI_INSTALL_BINARIES = ("operator", "admission")
FGO_BINARIES = ("status-updater", "kwok-gpu-device-plugin", "topology-server", "status-exporter",
                "status-exporter-kwok")


@lru_cache(maxsize=1)
def pins() -> dict:
    kind = yaml.safe_load(resources.files("kailab").joinpath("data/kind.yaml").read_text())
    return {"kind": kind["kind"]["version"], **kind["local_images"]}


def host_tools() -> list[Recipe]:
    """kind and helm for the host (kubectl comes with the node's Kubernetes build)."""
    p = pins()
    return [Recipe("kind", p["kind"], "sigs.k8s.io/kind", {"kind": "sigs.k8s.io/kind"}, optimize=False),
            Recipe("helm", p["helm"], "helm.sh/helm/v3", {"helm": "helm.sh/helm/v3/cmd/helm"})]


def node_recipes(kubernetes: str) -> list[Recipe]:
    """What the node image runs: Kubernetes' node binaries and control plane, the container
    runtime, CNI plugins and crictl (these three, run per container or by hand, and kind's CLI compiled
    quickly: Recipe.optimize)."""
    p = pins()
    containerd = "github.com/containerd/containerd/v2"
    cni = "github.com/containernetworking/plugins/plugins/"
    return [
        kubernetes_recipe(kubernetes, node=True),
        # kind's own build tags for containerd; cgo as kind builds it
        Recipe("containerd", p["containerd"], containerd,
               {"containerd": f"{containerd}/cmd/containerd", "ctr": f"{containerd}/cmd/ctr",
                "containerd-shim-runc-v2": f"{containerd}/cmd/containerd-shim-runc-v2"},
               tags=("no_aufs", "no_zfs", "no_btrfs", "no_devmapper")),
        # runc's nsenter is C, and seccomp needs libseccomp (Debian: libseccomp-dev)
        Recipe("runc", p["runc"], "github.com/opencontainers/runc",
               {"runc": "github.com/opencontainers/runc"}, cgo=True, tags=("seccomp",), optimize=False),
        Recipe("cni-plugins", p["cni_plugins"], "github.com/containernetworking/plugins",
               {"host-local": cni + "ipam/host-local", "loopback": cni + "main/loopback",
                "ptp": cni + "main/ptp", "portmap": cni + "meta/portmap"}, optimize=False),
        Recipe("crictl", p["crictl"], "sigs.k8s.io/cri-tools", {"crictl": "sigs.k8s.io/cri-tools/cmd/crictl"},
               repository="cri-tools", vendor=True, optimize=False),
    ]


def component_recipes(kai_version: str) -> list[Recipe]:
    """The binaries inside KWOK's, KAI's and fake-gpu-operator's images."""
    release = versions.kai_release(kai_version)
    kai = kai_recipe(release)
    fgo = "github.com/run-ai/fake-gpu-operator"
    return [
        Recipe("kwok", versions.KWOK_VERSION, "sigs.k8s.io/kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
        kai,
        Recipe("kai-install", kai.version, kai.module,
               {n: f"{kai.module}/cmd/{n}" for n in KAI_INSTALL_BINARIES}, source=kai.source, repository="kai"),
        Recipe("fake-gpu-operator", pins()["fake_gpu_operator"], fgo,
               {n: f"{fgo}/cmd/{n}" for n in FGO_BINARIES}, repository="fake-gpu-operator"),
    ]


def all_recipes(kai_version: str) -> list[Recipe]:
    release = versions.kai_release(kai_version)
    return [*host_tools(), *node_recipes(release.kubernetes), *component_recipes(kai_version), *metrics_recipes()]
