"""Building blocks every runtime shares: the per-lab lock, KWOK's configuration, the fleet's
nodes, the probe pod KAI must bind before a lab counts as up, and the check that a second `up`
asks for the lab that is already there."""

from __future__ import annotations

import contextlib
import fcntl
import re
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from .. import kwok_stages
from ..errors import KailabError, LabBusy, LabError
from ..kube import Kube
from ..paths import state_dir
from .addon import addon_of
from .base import TERMINATION_GRACE_S, LabRecord, LabSpec
from .waits import abandon, resume, wait_until

if TYPE_CHECKING:  # a fleet's model loads pydantic, which `down` does not need
    from ..fleet import Fleet

PROBE_NAMESPACE = "kailab-system"


@contextlib.contextmanager
def lab_lock(name: str):
    """One `up`/`down` at a time per lab name. The lock file goes with the lab: once the block leaves
    no lab directory (a `down`, a failed `up`), it is removed too."""
    state_dir().mkdir(parents=True, exist_ok=True)
    path = state_dir() / f".{name}.lock"
    with open(path, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabBusy(f"lab {name!r} is busy: another kailab up/down holds its lock") from None
        try:
            yield
        finally:
            if not (state_dir() / name).exists():
                path.unlink(missing_ok=True)


class Phases:
    """When each part of an `up` started and how long it took (seconds from the start of `up`):
    kept in the lab record, printed by `up`, and read by `kailab bench`."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.spans: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def timed(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.spans[name] = [round(start - self.t0, 2), round(time.perf_counter() - start, 2)]

    def summary(self) -> str:
        ordered = sorted(self.spans.items(), key=lambda kv: kv[1][0])
        return ", ".join(f"{name} {span[1]:.1f}s" for name, span in ordered)


def run_together(lab: Path, tasks: dict[str, object], phases: Phases) -> None:
    """Run independent parts of an `up` in parallel threads, each timed as a phase. The first
    failure abandons every other wait on the lab (so nothing keeps polling a lab being torn
    down) and is raised as is."""
    resume(lab)
    pool = ThreadPoolExecutor(max_workers=len(tasks), thread_name_prefix="kailab-up")

    def timed(name, fn):
        with phases.timed(name):
            return fn()

    futures = [pool.submit(timed, name, fn) for name, fn in tasks.items()]
    try:
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
    except BaseException:  # Ctrl-C / SIGTERM: the caller tears the lab down; stop waiting on it
        abandon(lab)
        pool.shutdown(wait=True, cancel_futures=True)
        resume(lab)
        raise
    failed = next((f for f in futures if f in done and f.exception() is not None), None)
    if failed is not None:
        abandon(lab)
    pool.shutdown(wait=True)  # abandoned waits end at their next poll
    resume(lab)  # only this `up`'s waits were abandoned
    if failed is not None:
        raise failed.exception()


# a fleet's nodes report their status (the heartbeat stage) at most this often in all; a larger
# fleet's nodes report less often, as its Leases renew less often (binary.node_lease_seconds)
NODE_STATUS_REPORTS_PER_S = 1.0
# kwok-stages.yaml's heartbeat delay: between 4 and 5 min (KWOK draws it from [duration, jitter])
HEARTBEAT_MS, HEARTBEAT_JITTER_MS = 240000, 300000


# kwok-stages.yaml's bound, replaced by the lab's (kailab-pod-terminate's delay)
_GRACE_IN_FILE = 'duration("1s")'


def kwok_stages_text(termination_grace_s: float = TERMINATION_GRACE_S, user_stages: str = "",
                     without: tuple[str, ...] = ()) -> str:
    """kailab's KWOK stages (data/kwok-stages.yaml) with the lab's termination grace, but those named in
    `without`, then the user's own (`kailab up --stages`: kailab/kwok_stages.py), verbatim."""
    stages = resources.files("kailab").joinpath("data/kwok-stages.yaml").read_text()
    assert stages.count(_GRACE_IN_FILE) == 2, "kwok-stages.yaml's termination grace changed"
    stages = stages.replace(_GRACE_IN_FILE, f'duration("{round(termination_grace_s * 1000)}ms")')
    if without:
        docs = stages.split("\n---\n")
        kept = [d for d in docs if not any(re.search(rf"^  name: {re.escape(n)}$", d, re.M) for n in without)]
        assert len(docs) - len(kept) == len(without), f"kwok-stages.yaml has no stage named {without}"
        stages = "\n---\n".join(kept)
    return _then(stages, user_stages)


def user_stages(spec: LabSpec) -> list[dict]:
    """The user's own KWOK Stages the spec names (`--stages`), checked: one line for a bad one."""
    return kwok_stages.load(spec.stages) if spec.stages else []


def user_stage_names(spec: LabSpec) -> list[str]:
    return [s["metadata"]["name"] for s in user_stages(spec)]


def _then(stages: str, user_stages: str) -> str:
    if not user_stages:
        return stages
    return stages + ("" if stages.endswith("\n") else "\n") + user_stages


def kwok_config_text(nodes: int = 0, termination_grace_s: float = TERMINATION_GRACE_S, user_stages: str = "") -> str:
    """kwok's configuration: its options plus kailab's stages (shared by every runtime). For a fleet
    of more nodes than report once a second at the stages' pace (270 nodes), the heartbeat stage is
    slowed in proportion: 1,213 nodes reporting every 4.5 min on average were 4.5 node writes a
    second, each sent to every node watcher, through the whole of a fill."""
    stages = kwok_stages_text(termination_grace_s)
    factor = nodes / ((HEARTBEAT_MS + HEARTBEAT_JITTER_MS) / 2000 * NODE_STATUS_REPORTS_PER_S)
    if factor > 1:
        for ms in (HEARTBEAT_MS, HEARTBEAT_JITTER_MS):
            assert stages.count(f"Milliseconds: {ms}\n") == 1, "kwok-stages.yaml's heartbeat delay changed"
            stages = stages.replace(f"Milliseconds: {ms}\n", f"Milliseconds: {round(ms * factor)}\n")
    options = {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
               "options": {"podPlayStageParallelism": 16, "nodePlayStageParallelism": 16,
                           "nodeLeaseParallelism": 16, "podsOnNodeSyncParallelism": 4}}
    stages = _then(stages, user_stages)  # after the heartbeat's scaling, which is of kailab's stages only
    return yaml.safe_dump(options, sort_keys=False) + "---\n" + stages


def create_fleet(kube: Kube, fleet: Fleet) -> None:
    """Create the fleet's nodes (in parallel) with their GPU capacity, as a device plugin would."""
    def one(node: dict) -> None:
        kube.apply({k: v for k, v in node.items() if k != "status"})
        kube.apply_status(node)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, fleet.node_manifests()))
    for obj in fleet.dra_objects():  # what a DRA driver would publish for the DRA pools' nodes
        kube.apply(obj)


def refuse_other_lab(rec: LabRecord, spec: LabSpec, runtime: str, fleet: str, kai_version: str) -> None:
    """A second `up` must ask for the lab that is there; otherwise one line naming the difference."""
    asked = addon_of(spec)
    wanted = {"runtime": runtime, "fleet": fleet, "kai_version": asked.kai_version(kai_version),
              "scheduler": asked.name, "termination grace": spec.termination_grace, "workers": spec.workers,
              "operators": sorted(asked.record().get("operators", {}).items()),
              "stages": user_stage_names(spec)}
    have = {"runtime": rec.runtime, "fleet": rec.fleet, "kai_version": rec.kai_version,
            "scheduler": (rec.stack or {}).get("name"), "termination grace": rec.termination_grace,
            "workers": rec.workers, "operators": sorted((rec.stack or {}).get("operators", {}).items()),
            "stages": list(rec.stages)}
    if wanted != have:
        diff = ", ".join(f"{k} {have[k]} (asked {wanted[k]})" for k in wanted if wanted[k] != have[k])
        # refused before anything ran (exit 2): the lab as it was is untouched
        raise KailabError(f"lab {rec.name!r} is already up with {diff}: run `kailab down --name {rec.name}` first, "
                          "or use --name for a second lab")
