"""Building blocks every runtime shares: the per-lab lock, KWOK's configuration, the fleet's
nodes, the probe pod KAI must bind before a lab counts as up, and the check that a second `up`
asks for the lab that is already there."""

from __future__ import annotations

import contextlib
import fcntl
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import yaml

from ..errors import LabError
from ..fleet import Fleet
from ..kube import Kube
from ..paths import state_dir
from .base import LabRecord, LabSpec
from .waits import wait_until

PROBE_NAMESPACE = "kailab-system"


@contextlib.contextmanager
def lab_lock(name: str):
    """One `up`/`down` at a time per lab name."""
    state_dir().mkdir(parents=True, exist_ok=True)
    with open(state_dir() / f".{name}.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabError(f"lab {name!r} is busy: another kailab up/down holds its lock") from None
        yield


def kwok_config_text() -> str:
    """kwok's configuration: its options plus kailab's stages (shared by every runtime)."""
    stages = resources.files("kailab").joinpath("data/kwok-stages.yaml").read_text()
    options = {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
               "options": {"podPlayStageParallelism": 16, "nodePlayStageParallelism": 16,
                           "nodeLeaseParallelism": 16, "podsOnNodeSyncParallelism": 4}}
    return yaml.safe_dump(options, sort_keys=False) + "---\n" + stages


def create_fleet(kube: Kube, fleet: Fleet) -> None:
    """Create the fleet's nodes (in parallel) with their GPU capacity, as a device plugin would."""
    def one(node: dict) -> None:
        kube.apply({k: v for k, v in node.items() if k != "status"})
        kube.apply_status(node)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, fleet.node_manifests()))


def probe(kube: Kube, lab: Path | None = None, hint: str = "") -> None:
    """KAI must bind one real GPU pod before the lab counts as up."""
    from ..workloads import probe_objects

    objs = probe_objects(PROBE_NAMESPACE)
    for obj in objs:
        # retried: the namespace's ServiceAccount (and on clusters, KAI's admission webhook) may
        # still be coming up
        wait_until(f"the API server to accept {obj['kind']} {obj['metadata']['name']}",
                   lambda o=obj: kube.apply(o) or True, timeout=120, lab=lab, component="kube-controller-manager"
                   if lab else None)
    pod = next(o for o in objs if o["kind"] == "Pod")["metadata"]["name"]
    wait_until("KAI to bind the probe pod",
               lambda: kube.core.read_namespaced_pod(pod, PROBE_NAMESPACE).spec.node_name,
               timeout="probe-pod-bound", lab=lab, component="scheduler" if lab else None,
               hint=hint or "check the scheduler and binder logs, and `kubectl get podgroups -A`")
    kube.delete("v1", "Pod", pod, PROBE_NAMESPACE, grace=0)


def refuse_other_lab(rec: LabRecord, spec: LabSpec, runtime: str, fleet: str, kai_version: str) -> None:
    """A second `up` must ask for the lab that is there; otherwise one line naming the difference."""
    wanted = {"runtime": runtime, "fleet": fleet, "kai_version": kai_version if spec.with_kai else "none",
              "with_kai": spec.with_kai}
    have = {"runtime": rec.runtime, "fleet": rec.fleet, "kai_version": rec.kai_version, "with_kai": rec.with_kai}
    if wanted != have:
        diff = ", ".join(f"{k} {have[k]} (asked {wanted[k]})" for k in wanted if wanted[k] != have[k])
        raise LabError(f"lab {rec.name!r} is already up with {diff}: run `kailab down` first, "
                       "or use --name for a second lab")
