"""`pytest exercises/ --kailab-on KUBECONFIG [-n N]`: each item a fanned-out run of its own on that
cluster (kailab/fanout) instead of a run on a local lab — an exercise one unit, a fill one per design
and seed, a replay one per variant — its evidence brought back and read as a local run's, so the
summary, report.html and the verdicts are the same. N workers keep N items' pods on the cluster at once;
no local lab is started. The lab image is loaded once, by the controlling process, where the cluster is
a kailab kind lab."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from .. import evidence, versions
from ..exercise.checks import Result
from ..exercise.runner import Outcome
from ..replay import fill_units as fanout_fill
from ..replay import units as fanout_replay
from ..fanout.run import FanOut, load_image_into_kind
from ..fanout.unit import exercise_unit
from ..images.lab import LabImage
from ..paths import evidence_dir
from ..replay import session
from ..replay.fill import FillPlan
from ..errors import KailabError

OPTION = "--kailab-on"


def add_options(group) -> None:
    group.addoption(OPTION, default=None, metavar="KUBECONFIG",
                    help="run each item as Jobs on this cluster, a lab of its own in each pod (the lab image: "
                         "`kailab tools lab-image`), instead of on local labs")
    group.addoption("--kailab-kai-version", default=os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
                    help="with --kailab-on: the KAI version the pods' labs run")
    group.addoption("--kailab-unit-cpu", default=None, help="with --kailab-on: each pod's CPU request (default: "
                    "the unit's, from its kind's measured cost)")
    group.addoption("--kailab-unit-memory", default=None, help="with --kailab-on: each pod's memory request "
                    "(default: the unit's)")


@dataclass(frozen=True)
class Cluster:
    kubeconfig: str
    kai_version: str
    cpu: str | None
    memory: str | None

    @property
    def image(self) -> str:
        return LabImage(self.kai_version).ref

    def run(self, units, root: Path) -> tuple[FanOut, list]:
        # a replay's or a fill's file may name another KAI version: its image, if the cluster lacks it, is
        # an image-pull error named at once (the controller loaded --kailab-kai-version's)
        images = {v: LabImage(v).ref for v in {u.kai_version for u in units}}
        fan = FanOut(units, self.kubeconfig, images, root, cpu=self.cpu, memory=self.memory,
                     say=lambda text: None)  # the record (fanout.json, each pod's log) keeps what it said
        return fan, fan.run()


def cluster_of(config) -> Cluster | None:
    kubeconfig = config.getoption(OPTION)
    if not kubeconfig:
        return None
    return Cluster(kubeconfig, versions.normalise(config.getoption("--kailab-kai-version")),
                   config.getoption("--kailab-unit-cpu"), config.getoption("--kailab-unit-memory"))


def configure(config) -> None:
    """Refused up front: --kailab-on with --kailab-lab, or a kubeconfig that is not there. The
    controlling process loads the lab image into a kailab kind lab, once for every worker."""
    c = cluster_of(config)
    if c is None:
        return
    if config.getoption("--kailab-lab"):
        raise pytest.UsageError(f"{OPTION} runs every item on that cluster: drop --kailab-lab")
    if not Path(c.kubeconfig).is_file():
        raise pytest.UsageError(f"{OPTION} {c.kubeconfig}: no such file (give the cluster's kubeconfig)")
    if not hasattr(config, "workerinput"):
        try:
            load_image_into_kind(c.kubeconfig, c.image, lambda text: None)
        except KailabError as err:
            raise pytest.UsageError(f"{OPTION}: {err}") from None


def exercise(c: Cluster, path: Path, root: Path | None) -> Outcome:
    """One exercise as one unit; its outcome read from the run folder it brought back, or an error
    naming what went wrong on the cluster."""
    unit = exercise_unit(path, 0, c.kai_version)
    fan, [r] = c.run([unit], root or evidence_dir())
    if r.evidence:
        return outcome_of_run(Path(r.evidence))
    return Outcome(path.stem, "error", error=f"on {c.kubeconfig}: {r.error} (record: {fan.record_dir})",
                   evidence=str(fan.record_dir))


def outcome_of_run(run: Path) -> Outcome:
    """The outcome a run folder records (its verdict.json): a run made in a pod reads back as if it had
    run here."""
    v = evidence.read_verdict(run)
    return Outcome(exercise=v["exercise"], verdict=v["verdict"], results=[Result(**r) for r in v.get("expectations", [])],
                   evidence=str(run), error=v.get("error", ""), figures=v.get("figures") or {},
                   wall=v.get("wall_seconds") or {}, not_checked=v.get("not_checked") or [], lab=v.get("lab", ""),
                   start_retries=v.get("lab_start_retries") or [])


def replay(c: Cluster, plan: session.Plan, root: Path | None) -> Path:
    units = fanout_replay.replay_units(plan, plan.trace.path)
    fan, results = c.run(units, root or evidence_dir())
    return fanout_replay.merge_units(plan, units, results, fan.record_dir, root)


def fill(c: Cluster, plan: FillPlan, root: Path | None) -> Path:
    units = fanout_fill.fill_units(plan)
    fan, results = c.run(units, root or evidence_dir())
    merged = fanout_fill.merge_units(plan, units, results, fan.record_dir, root)
    if merged is None:
        raise KailabError(f"on {c.kubeconfig}: no unit brought a fill back (record: {fan.record_dir})")
    return merged
