"""A twin for real: an exercise run's own scheduler snapshot (evidence/…/scheduler-snapshot.zip, taken by
the real KAI) twins into a binary lab that holds the original's state — its nodes, queues and PodGroups,
every bound pod on its node, every pending pod — before KAI acts; then KAI, on the snapshot's
configuration, decides the pending work as the original did. One snapshot taken with work pending
(borrow: prod's pods over its limit), one at rest (reclaim). Secrets planted in the snapshot's pods
reach neither the lab nor any evidence file. `down` leaves nothing. (A bad snapshot refused in one line
with nothing made: tests/unit/test_twin_units.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kailab.exercise.runner import run_exercise
from kailab.kube import Kube
from kailab import labs
from kailab.labs import LabRecord
from kailab.paths import exercises_dir, lab_dir
from kailab.testing.labs import LAB_PREFIX
from kailab.twin.plan import make_plan
from kailab.twin.run import make_twin
from kailab.twin.snapshot import load_snapshot
from twin_sample import plant_secrets

pytestmark = [pytest.mark.lab, pytest.mark.kai]
TOKEN = "tw1n-s3cr3t-t0ken"


def _plant_secrets(src: Path, dst: Path) -> None:
    plant_secrets(src, dst, TOKEN)


@pytest.mark.parametrize("exercise, pending", [("borrow", True), ("reclaim", False)])
def test_an_exercise_runs_snapshot_twins_into_a_lab_holding_its_state(kailab_labs, tmp_path, monkeypatch,
                                                                     exercise, pending):
    lab = kailab_labs.get("small")
    outcome = run_exercise(exercises_dir() / f"{exercise}.yaml", lab, tmp_path / "runs")
    assert outcome.verdict == "passed", outcome.report()
    snap = tmp_path / "snapshot.zip"
    _plant_secrets(Path(outcome.evidence) / "scheduler-snapshot.zip", snap)
    plan = make_plan(load_snapshot(snap), "x")
    counts = plan.counts()
    assert counts["pods_bound"] > 0 and (counts["pods_pending"] > 0) == pending, counts

    monkeypatch.setenv("KAILAB_EVIDENCE", str(tmp_path / "twins"))
    name = f"{LAB_PREFIX}{os.getpid()}-twin"
    try:
        out = make_twin(snap, name, settle_s=10, timeout_s=300, echo=print)
        record = json.loads((out / "twin.json").read_text())
        # the round trip, read back from the twin's API server before KAI acted
        assert record["round_trip"]["differences"] == [], record["round_trip"]
        checked = record["round_trip"]["checked"]
        assert (checked["bound"], checked["pending"], checked["nodes"]) == (
            counts["pods_bound"], counts["pods_pending"], counts["nodes"])
        # KAI on the snapshot's configuration: its scheduler runs the snapshot's actions and flags
        kube = Kube(LabRecord.load(name).kubeconfig)
        try:
            text = json.dumps(kube.list("v1", "Pod"))
        finally:
            kube.close()
        args = " ".join(open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
                        for pid in _pids(name, "scheduler"))
        assert "--scheduler-conf=" in args and "--schedule-period=" in args and "--max-consolidation-preemptees=" in args
        # the original's decision stands: borrow's pods over prod's limit stay pending, nobody is evicted
        decided = record["decided"]
        assert decided["settled"] and decided["evicted"] == [] and decided["moved"] == {}, decided
        assert decided["placed"] == {} and len(decided["still_pending"]) == counts["pods_pending"], decided
    finally:
        labs.down(name)
    assert not lab_dir(name).exists()
    # no planted secret reached the lab or any file of the twin's evidence
    assert TOKEN not in text
    for path in (tmp_path / "twins").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def _pids(lab: str, component: str) -> list[str]:
    from kailab.runtimes import processes

    return [str(r.pid) for name, r in processes.records(lab_dir(lab)).items() if name == component and r.alive()]


def test_twins_side_by_side_decide_a_design_differently(kailab_labs, tmp_path, monkeypatch):
    """borrow's snapshot (prod at its limit of 28, 4 pods pending OverLimit) twinned as it was and with
    prod's limit raised to 32: the twin as it was leaves the 4 pending, saying why; the design's places
    them; the comparison lists those 4 as decided differently and prod's GPUs as 28 and 32; the labs go."""
    from kailab.twin.compare import lab_name, run_side_by_side, variants_for
    from kailab.twin.design import load_twin_design

    lab = kailab_labs.get("small")
    outcome = run_exercise(exercises_dir() / "borrow.yaml", lab, tmp_path / "runs")
    assert outcome.verdict == "passed", outcome.report()
    snap = Path(outcome.evidence) / "scheduler-snapshot.zip"
    plan = make_plan(load_snapshot(snap), "x")
    [prod] = [q for q in plan.queue_names() if q.endswith("-prod")]
    pending = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in plan.pending}
    assert len(pending) == 4, pending
    design = tmp_path / "prod-32.yaml"
    design.write_text(f"design: prod-32\nqueues:\n  {prod}: {{gpu: {{limit: 32}}}}\n")

    monkeypatch.setenv("KAILAB_EVIDENCE", str(tmp_path / "twins"))
    base = f"{LAB_PREFIX}{os.getpid()}-tw"
    variants = variants_for(["v0.17.0"], [load_twin_design(design)])
    out = run_side_by_side(snap, variants, base, settle_s=10, timeout_s=300, against_tool=True)
    c = json.loads((out / "comparison.json").read_text())
    assert c["ok"], c["variants"]
    assert {k: (v["placed"], v["still_pending"], v["evicted"]) for k, v in c["variants"].items()} == \
        {"as-is": (0, 4, 0), "prod-32": (4, 0, 0)}, c["variants"]
    rows = {r["pod"]: r for r in c["differences"]}
    assert set(rows) == pending and all(r["kind"] == "decision" for r in rows.values()), rows
    for r in rows.values():  # KAI's own words for the ones left pending
        assert r["outcomes"]["as-is"].startswith("pending: ") and "OverLimit" in r["outcomes"]["as-is"], r
        assert r["outcomes"]["prod-32"].startswith("on "), r
    assert c["queues_gpus"][prod] == {"before": 28, "as-is": 28, "prod-32": 32}, c["queues_gpus"]
    assert (out / "prod-32" / "design.yaml").exists() and (out / "comparison.md").read_text().count(prod) >= 1
    # KAI's own snapshot tool on each twin's state: nothing to decide as it was; the design's 4 placements
    # in its one session, as in the twin's first (a difference only with its cause)
    tools = {v.label: json.loads((out / v.label / "twin.json").read_text())["against_snapshot_tool"] for v in variants}
    assert tools["as-is"]["pods_decided"] == 0 and tools["as-is"]["agreement"] == 1.0, tools["as-is"]
    t = tools["prod-32"]
    assert len(t["tool_session"]["placed"]) == 4 and len(t["twin_first_session"]["placed"]) >= 1, t
    assert t["alike"] + len(t["differences"]) == t["pods_decided"] and all(d["cause"] for d in t["differences"]), t
    for v in variants:  # taken down by default
        assert LabRecord.load(lab_name(base, v.label)) is None and not lab_dir(lab_name(base, v.label)).exists()
