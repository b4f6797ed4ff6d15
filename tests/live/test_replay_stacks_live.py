"""One trace on two scheduler stacks (issue #41): `kailab replay --stacks kai,kueue` plays the same jobs
on a KAI lab and on a Kueue lab (Kueue admits, kube-scheduler places), one queue design, and the
comparison reports every queue's waits side by side. What each stack did is read from its own lab's
evidence: the design made into each stack's own objects, the pods placed by KAI on one lab and by
kube-scheduler on the other. (The shipped 80-job file, exercises/stacks/replay-kai-vs-kueue.yaml, is the
same run at full length; its measured figures are in docs/stacks.md and bench/results.)"""

from __future__ import annotations

import json

import pytest

from kailab.paths import PROJECT_ROOT, state_dir
from kailab.replay import session

from helpers import kailab_cli

# two labs of their own (kai and kueue), beside the kueue exercises' worker
pytestmark = [pytest.mark.lab, pytest.mark.kai, pytest.mark.xdist_group("kueue_labs")]

DESIGN = PROJECT_ROOT / "exercises" / "replays" / "designs" / "team-a-first.yaml"


def test_one_trace_on_kai_and_on_kueue_reports_each_queues_waits_side_by_side(tmp_path):
    trace = tmp_path / "t.csv"
    env = {"KAILAB_EVIDENCE": str(tmp_path / "evidence")}
    gen = kailab_cli("trace", "generate", str(trace), "--jobs", "16", "--hours", "0.1", "--fleet", "small", "--load", "1.5",
                     "--seed", "3", env=env, timeout=60)
    assert gen.returncode == 0, gen.stderr
    run = kailab_cli("replay", str(trace), "--designs", str(DESIGN), "--stacks", "kai,kueue", "--whole-gpus", "--fleet",
                     "small", "--compress", "30", "--repeat", "1", env=env, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [out] = sorted((tmp_path / "evidence").glob("replay-*"))
    c = json.loads((out / session.COMPARISON).read_text())
    assert c["errors"] == {"kai": [], "kueue": []}, c["errors"]
    m = c["medians"]
    queues = sorted({j["queue"] for j in json.loads((out / "kai" / "run-1" / "records.json").read_text())["jobs"]})
    assert queues == ["team-a", "team-b"]
    for stack in ("kai", "kueue"):
        assert m[stack]["all.jobs"] == 16
        for queue in queues:  # the per-queue waits, on both sides
            assert f"{queue}.wait_p50" in m[stack] and f"{queue}.wait_p95" in m[stack], sorted(m[stack])
    assert "| figure | kai | kueue |" in run.stdout and "kai = kai, kueue = kueue" in run.stdout
    rows = [line for line in run.stdout.splitlines() if line.startswith("| team-a.wait_p50 ")]
    assert len(rows) == 1 and rows[0].count("|") == 4, rows  # the figure, then one cell per stack

    # each stack got the design in its own objects: KAI's Queues, Kueue's Cohort, ClusterQueues, LocalQueues
    kinds = {stack: {o["kind"] for o in json.loads((out / stack / "run-1" / "queues.json").read_text())}
             for stack in ("kai", "kueue")}
    assert kinds["kai"] == {"Queue"}
    assert {"Cohort", "ClusterQueue", "LocalQueue", "ResourceFlavor"} <= kinds["kueue"], kinds

    # who placed the pods (the watch's record of each pod's schedulerName): KAI on one lab, kube-scheduler on the other
    placed_by = {stack: {i["scheduler"] for i in json.loads((out / stack / "run-1" / "records.json").read_text())["pod_intervals"]}
                 for stack in ("kai", "kueue")}
    assert placed_by == {"kai": {"kai-scheduler"}, "kueue": {"default-scheduler"}}, placed_by
    # this replay's labs only (replay-<its time>-<label>): another group's replay may run beside it
    assert not list(state_dir().glob(f"{out.name.lower()}-*")), "the replay's labs were not taken down"
