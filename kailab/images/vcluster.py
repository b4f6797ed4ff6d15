"""vCluster, built here from source (`kailab tools images --vcluster`), for version trials on hosts
that reach no registry and no GitHub release:

- the CLI and the syncer from the registered repository `vcluster` at the pinned tag (the Go module
  proxy refuses github.com/loft-sh/vcluster), inside its own module: with its vendor/ when the
  repository has all of it, else through the module proxy with its go.sum (toolchain._despite_missing);
- the chart `helm package`d from the same tree's chart/, stamped with the release's version;
- the syncer's image under the OSS image's upstream name (`ghcr.io/loft-sh/vcluster-oss:<version>`,
  `/vcluster start`, as its Dockerfile.release lays it out);
- the virtual control plane's image under the chart's name (`ghcr.io/loft-sh/kubernetes:<tag>`):
  what its init container copies to /binaries — kube-apiserver, kube-controller-manager and
  kube-scheduler from **the binary runtime's own Kubernetes build** (kubernetes-node, stamped), and
  kine (the embedded database the syncer starts; sqlite needs cgo, hence the Debian base, which the
  syncer's image shares so the copied binaries find their libc).

`vcluster_set` is pure (names and paths); `build_vcluster` makes what is missing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from .. import sources, versions
from ..errors import BuildError
from ..paths import cache_dir
from ..toolchain import Recipe, build_all, kubernetes_recipe
from . import artifacts_dir, assemble, docker, recipes, rootfs
from .build import _helm_package

MODULE = "github.com/loft-sh/vcluster"
SYNCER_IMAGE = "ghcr.io/loft-sh/vcluster-oss"  # the OSS syncer's published image (the chart's default is -pro)
KUBERNETES_IMAGE = "ghcr.io/loft-sh/kubernetes"
CHART_DIR = "chart"


@lru_cache(maxsize=1)
def pins() -> dict:
    """The vcluster: section of kailab/data/kind.yaml (the pins of kind hosts)."""
    return yaml.safe_load(resources.files("kailab").joinpath("data/kind.yaml").read_text())["vcluster"]


@dataclass(frozen=True)
class VClusterSet:
    """vCluster's pieces for one pinned release and one Kubernetes version (the lab's)."""

    version: str          # v0.36.1
    kubernetes: str       # v1.36.3: the virtual control plane's (the binary runtime's)
    syncer_image: str     # ghcr.io/loft-sh/vcluster-oss:0.36.1
    kubernetes_image: str  # ghcr.io/loft-sh/kubernetes:v1.36.3
    chart: Path           # helm-packaged chart (.tgz)

    @property
    def images(self) -> list[str]:
        return [self.syncer_image, self.kubernetes_image]

    @property
    def chart_version(self) -> str:
        return self.version.lstrip("v")


def vcluster_set(kubernetes: str | None = None) -> VClusterSet:
    """The names and paths of the pinned vCluster for a lab of Kubernetes `kubernetes` (pure)."""
    v = pins()["version"]
    k8s = kubernetes or versions.kai_release(versions.DEFAULT_KAI).kubernetes
    return VClusterSet(version=v, kubernetes=k8s, syncer_image=f"{SYNCER_IMAGE}:{v.lstrip('v')}",
                       kubernetes_image=f"{KUBERNETES_IMAGE}:{k8s}",
                       chart=artifacts_dir() / "charts" / f"vcluster-{v.lstrip('v')}.tgz")


def vcluster_recipe() -> Recipe:
    """The CLI (`vclusterctl`, which its release names `vcluster`) and the syncer (its cmd/vcluster),
    stamped with the version as its release build stamps them."""
    v = pins()["version"]
    return Recipe("vcluster", v, MODULE, {"vclusterctl": f"{MODULE}/cmd/vclusterctl", "syncer": f"{MODULE}/cmd/vcluster"},
                  repository="vcluster", vendor=True,
                  stamp=(("main.version", v.lstrip("v")),
                         (f"{MODULE}/pkg/telemetry.SyncerVersion", v.lstrip("v"))))


def kine_recipe() -> Recipe:
    """kine, the etcd shim the syncer runs over sqlite (cgo: mattn/go-sqlite3)."""
    v = pins()["kine"]
    return Recipe("kine", v, "github.com/k3s-io/kine", {"kine": "github.com/k3s-io/kine"}, cgo=True,
                  stamp=(("github.com/k3s-io/kine/pkg/version.Version", v),))


def all_recipes(kubernetes: str) -> list[Recipe]:
    return [vcluster_recipe(), kine_recipe(), kubernetes_recipe(kubernetes)]


def _bin(r: Recipe, name: str) -> Path:
    return cache_dir() / "bin" / r.component / r.version / name


def cli_path() -> Path | None:
    """The CLI as built here, if it is."""
    path = _bin(vcluster_recipe(), "vclusterctl")
    return path if path.is_file() else None


def image_specs(s: VClusterSet, slim: Path) -> list[assemble.ImageSpec]:
    vc, kine, k8s = vcluster_recipe(), kine_recipe(), kubernetes_recipe(s.kubernetes)
    syncer = assemble.ImageSpec(s.syncer_image, (("/vcluster", _bin(vc, "syncer"), 0o755),), base=slim,
                                entrypoint=("/vcluster", "start"), workdir="/")
    control_plane = tuple((f"/kubernetes/{n}", _bin(k8s, n), 0o755)
                          for n in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"))
    kubernetes = assemble.ImageSpec(s.kubernetes_image, (*control_plane, ("/kubernetes/kine", _bin(kine, "kine"), 0o755)),
                                    base=slim)
    return [syncer, kubernetes]


def missing(s: VClusterSet) -> list[str]:
    """What of the set is not here: the CLI, the images in Docker, the chart."""
    out = [] if cli_path() else [f"the vcluster CLI {s.version}"]
    out += [ref for ref in s.images if not docker.has(ref)]
    return out + ([str(s.chart)] if not s.chart.is_file() else [])


def build_vcluster(kubernetes: str, console=None, phase=print) -> VClusterSet:
    """Build whatever of the vCluster set is missing; returns it."""
    s = vcluster_set(kubernetes)
    started = time.time()
    rs = all_recipes(s.kubernetes)
    build_all([*recipes.host_tools(), *rs], console)
    p = recipes.pins()
    log_path = artifacts_dir() / "build.log"
    made: list[str] = []
    with open(log_path, "a") as log:
        slim = rootfs.ensure("slim", p["node"]["debian_suite"], p["slim"]["packages"], log, phase)
        for spec in image_specs(s, slim):
            if assemble.ensure(spec, phase, artifacts_dir() / "work"):
                made.append(spec.ref)
        tree = sources.export_tree("vcluster", s.version)
        sources.needed_but_missing("vcluster", s.version, tree, [CHART_DIR])
        phase("packaging vCluster's chart")
        helm = _bin(next(r for r in recipes.host_tools() if r.component == "helm"), "helm")
        _helm_package(helm, tree / CHART_DIR, s.version, s.chart_version, s.chart, log)
    left = missing(s)
    if left:
        raise BuildError(f"vCluster pieces still missing after the build: {', '.join(left)} (see {log_path})")
    (artifacts_dir() / f"vcluster-{s.version}.json").write_text(json.dumps(
        {"version": s.version, "kubernetes": s.kubernetes, "images": s.images, "chart": str(s.chart),
         "cli": str(cli_path()), "made_now": made, "seconds": round(time.time() - started, 1)}, indent=2))
    return s
