"""Fan-out on a cluster, for real: `kailab run --on KUBECONFIG` runs each exercise as a Job on a kind
host of three nodes (a control plane and two workers, `kailab up --runtime kind --workers 2`, nothing
scheduling there but Kubernetes), each pod a binary lab with KAI of its own from the lab image; the
evidence comes back here as if run here; a pod deleted mid-unit is named with its log kept; Ctrl-C
leaves nothing of the run on the cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kailab.fanout.costs import requests_for
from kailab.fanout.unit import RUN_LABEL
from kailab.fleet import load_fleet
from kailab.kube import Kube
from kailab import labs
from kailab.labs import LabSpec
from kailab.paths import PROJECT_ROOT, state_dir
from kailab.runtimes.kind.workers import worker_names
from kailab.runtimes.waits import wait_until
from kailab.testing.labs import LAB_PREFIX, kind_docker, owner_pid
from kailab.testing.tiny_trace import two_teams, write_clusterdata
from kailab.twin.plan import make_plan
from kailab.twin.snapshot import load_snapshot
from twin_sample import plant_secrets

from helpers import KAILAB, kailab_cli

# in the `alone` phase: its host of three kind nodes, each unit pod a binary lab, beside the main phase's
# labs held 2 cores saturated (load average 46 in a fresh CI; the units never left Pending); beside the
# vCluster trial, load ~35 (by hand, 2026-12-01): after it, on the same worker (the heavy stream)
pytestmark = [pytest.mark.kind, pytest.mark.kai, pytest.mark.lab, pytest.mark.alone, pytest.mark.xdist_group("kind_heavy")]
# the host is a 2-core machine whose three kind nodes share its cores with the labs inside the pods:
# each pod asks for little, as a user's cluster would be asked for more (the default: 1 CPU)
SMALL = ["--unit-cpu", "100m", "--unit-memory", "512Mi"]
WORKERS = 2
TOKEN = "f4n-0ut-s3cr3t"  # planted in a snapshot: no evidence may hold it (what is shipped: tests/unit/test_fanout_twin.py)


@pytest.fixture(scope="module")
def host():
    """A kind lab of a control plane and two workers, no scheduler and no metrics: a plain cluster to
    fan out on, down at the module's end (named for the session: a dead session's is reaped)."""
    spec = LabSpec(name=f"{LAB_PREFIX}{os.getpid()}-kind-fanout", runtime="kind", fleet="tiny", stack="none", metrics=False, workers=WORKERS)
    try:
        with kind_docker():
            rec = labs.up(spec).record
            info = labs.open(rec).status()
        assert [c["state"] for n, c in info["components"].items() if n.startswith("worker ")] == ["running"] * WORKERS, info
        yield rec
    finally:
        with kind_docker():
            labs.down(spec.name, "kind")
            left = subprocess.run(["docker", "ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster=kailab-{spec.name}",
                                   "--format", "{{.Names}}"], capture_output=True, text=True, check=True).stdout.split()
        assert left == [], f"the host's nodes outlived its down: {left}"


def _workers(host) -> list[str]:
    return worker_names(f"kailab-{host.name}", WORKERS)


def _cli(*args: str, env: dict | None = None) -> subprocess.Popen:
    with kind_docker():  # kind load reaches the lab's Docker engine
        return subprocess.Popen([*KAILAB, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})})


def _runs_left(kube: Kube) -> list[str]:
    return [n["metadata"]["name"] for n in kube.list("v1", "Namespace", label_selector=RUN_LABEL)]


def _ran(evidence: Path, titles: list[str], *args: str) -> dict:
    """A fanned-out command run to its end, its evidence in `evidence`: exit 0 and each unit, in order,
    collected and passed; its run's record."""
    p = _cli(*args, env={"KAILAB_EVIDENCE": str(evidence)})
    out, _ = p.communicate(timeout=1200)
    assert p.returncode == 0, out
    record = _record(evidence)
    assert [(u["title"], u["state"], u["verdict"]) for u in record["units"]] == [(t, "collected", "passed") for t in titles], record
    return record


def _nothing_left(host) -> None:
    """No namespace of any fan-out run is left on the host."""
    kube = Kube(host.kubeconfig)
    try:
        assert _runs_left(kube) == []
    finally:
        kube.close()


def _labs_the_run_made(before: set[str]) -> list[str]:
    """Labs that appeared since `before` and are not this session's: the exercise plugin names its labs
    pytest-<worker pid>-…, and in the main phase this session's other workers make and remove labs of
    their own in the same state folder (their pids: the xdist controller's children)."""
    session = {os.getpid()}
    for task in Path(f"/proc/{os.getppid()}/task").glob("*/children"):
        session |= {int(pid) for pid in task.read_text().split()}
    new = {d.name for d in state_dir().iterdir()} - before
    return sorted(n for n in new if owner_pid(n) not in (None, *session))


def _record(root: Path) -> dict:
    records = sorted(root.glob("*-fanout/fanout.json"))
    assert len(records) == 1, records
    return json.loads(records[0].read_text())


def test_pytest_runs_exercise_items_as_jobs_with_two_workers_and_reads_them_as_local_runs(host, tmp_path):
    """`pytest exercises/ --kailab-on KUBECONFIG -n 2`: each worker's item a Job of its own on the cluster,
    no local lab; the summary and report.html read the runs the pods made."""
    labs_before = {d.name for d in state_dir().iterdir()}
    with kind_docker():
        p = subprocess.Popen([sys.executable, "-m", "pytest", "exercises/borrow.yaml", "exercises/gang.yaml", "-n", "2",
                              "--kailab-on", host.kubeconfig, "--kailab-unit-cpu", "100m", "--kailab-unit-memory", "512Mi",
                              "--kailab-evidence", str(tmp_path), "-p", "no:cacheprovider", "-o", "addopts=", "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=PROJECT_ROOT,
                             env={**os.environ, "NO_COLOR": "1"})
    out, _ = p.communicate(timeout=900)
    assert p.returncode == 0, out
    assert "2 passed" in out and "report: " in out, out[-3000:]
    runs = sorted(tmp_path.glob("*-borrow/run.json")) + sorted(tmp_path.glob("*-gang/run.json"))
    assert len(runs) == 2, runs
    for r in runs:  # each in a binary lab inside a pod of its own run (its own namespace, its own record)
        assert json.loads(r.read_text())["runtime"] == "binary"
    assert len(list(tmp_path.glob("*-fanout/fanout.json"))) == 2
    assert _labs_the_run_made(labs_before) == []  # no lab was made here
    _nothing_left(host)


def test_exercises_as_jobs_pass_in_labs_of_their_own_and_their_evidence_comes_back(host, tmp_path):
    p = _cli("run", "gang", "--on", host.kubeconfig, *SMALL, "--evidence", str(tmp_path))
    out, _ = p.communicate(timeout=900)
    assert p.returncode == 0, out
    record = _record(tmp_path)
    assert [(u["title"], u["state"], u["verdict"]) for u in record["units"]] == [("gang.yaml", "collected", "passed")], record
    for u in record["units"]:  # each ran in a binary lab inside its own pod, on one of the host's workers
        # its container's CPU, not the machine's (which is thousands of seconds by now)
        assert 1 < u["cpu_seconds"] < u["seconds"] * (os.cpu_count() or 2), u
        run = json.loads((Path(u["evidence"]) / "run.json").read_text())
        assert run["runtime"] == "binary" and run["kai_version"] == "v0.17.0", run
        assert u["pod"].startswith(u["unit"]) and u["node"] in _workers(host), u
        assert Path(u["evidence"]).parent == tmp_path
    _nothing_left(host)


def _wait_for_pod(kube: Kube, what: str) -> dict:
    def running():
        pods = [p for ns in _runs_left(kube) for p in kube.list("v1", "Pod", ns)]
        return next((p for p in pods if (p.get("status") or {}).get("phase") == "Running"), None)

    return wait_until(what, running, timeout=300)


def test_a_pod_deleted_mid_unit_is_named_with_its_log_and_nothing_is_left(host, tmp_path):
    kube = Kube(host.kubeconfig)
    try:
        p = _cli("run", "borrow", "--on", host.kubeconfig, *SMALL, "--evidence", str(tmp_path))
        pod = _wait_for_pod(kube, "the unit's pod to run")
        name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]
        time.sleep(5)  # its lab on its way up: there is a log to keep
        kube.delete("v1", "Pod", name, ns, grace=0)
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 1, out
        unit = _record(tmp_path)["units"][0]
        assert unit["state"] == "failed" and unit["pod"] == name and name in unit["error"], unit
        assert "before its unit was done" in unit["error"] or "is gone" in unit["error"], unit
        assert f"borrow: error  {unit['error']}" in out
        assert _runs_left(kube) == []
    finally:
        kube.close()


def test_ctrl_c_leaves_nothing_of_the_run_on_the_cluster(host, tmp_path):
    kube = Kube(host.kubeconfig)
    try:
        p = _cli("run", "gang", "--on", host.kubeconfig, *SMALL, "--evidence", str(tmp_path))
        _wait_for_pod(kube, "the unit's pod to run")
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=300)
        assert p.returncode != 0, out
        assert _runs_left(kube) == [], out
        assert _record(tmp_path)["units"][0]["state"] in ("pending", "running")  # recorded as it was left
    finally:
        kube.close()


def test_a_cluster_that_refuses_the_pods_capabilities_is_named_at_once(host, tmp_path):
    """Pod Security `baseline` on the run's namespace forbids SYS_ADMIN: the Job controller cannot make
    the pod, and the run says so in its unit's error at once, not after the unit's hour."""
    kube = Kube(host.kubeconfig)
    try:
        p = _cli("run", "borrow", "--on", host.kubeconfig, *SMALL, "--evidence", str(tmp_path),
                 "--namespace-label", "pod-security.kubernetes.io/enforce=baseline")
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 1, out
        unit = _record(tmp_path)["units"][0]
        assert unit["state"] == "failed" and unit["pod"] == "", unit
        assert unit["error"].startswith("the cluster refused its pod: ") and "SYS_ADMIN" in unit["error"], unit
        assert unit["seconds"] < 120, unit
        assert _runs_left(kube) == []
    finally:
        kube.close()


def test_a_fill_fanned_out_is_one_job_per_design_merged_here_into_one_fill(host, tmp_path):
    """`kailab fill --on`: binpack and spread of a small fleet in the Alibaba trace's format, each a Job
    whose pod runs `kailab fill` of its design on a lab of its own; their folders come back into the
    run's record and merge into one fill here, read as a local fill is (its invariants, its page)."""
    imported = tmp_path / "imported"
    imp = kailab_cli("trace", "import", "alibaba-gpu-2023", str(write_clusterdata(tmp_path)), "--out", str(imported),
                     timeout=None)
    assert imp.returncode == 0, imp.stderr
    evidence = tmp_path / "evidence"
    # each pod's requests its own: from what fill units cost
    record = _ran(evidence, ["fill binpack seed 1", "fill spread seed 1"], "fill", str(imported / "trace.csv"), "--fleet",
                  str(imported / "fleet.yaml"), "--designs", f"{imported}/design-binpack.yaml,{imported}/design-spread.yaml",
                  "--seeds", "1", "--step", "0.1", "--expect", "binpack/arrived-130.allocated_pct > 50", "--on", host.kubeconfig)
    # the default scheduler spreads them: the control plane holds the host's own pods' requests
    assert {u["node"] for u in record["units"]} <= set(_workers(host)), record
    cpu, memory = requests_for("fill", load_fleet(str(imported / "fleet.yaml")).nodes_total)
    assert all(u["requests"] == {"cpu": cpu, "memory": memory} and u["memory_peak_mib"] > 100 for u in record["units"]), record
    [merged] = evidence.glob("fill-merged-*")
    s = json.loads((merged / "fill.json").read_text())
    assert s["ok"] and [e["held"] for e in s["expectations"]] == [True], s["expectations"]
    assert s["plan"]["trace"] == str(imported / "trace.csv") and Path(s["plan"]["fanout"]).name.endswith("-fanout")
    for m in s["plan"]["merged_from"]:  # each design's seed from its unit's folder, in the run's record
        assert Path(m["evidence"]).parent.parent == Path(s["plan"]["fanout"]), m
    for name, seeds in s["curves"].items():
        rows = seeds["1"]
        assert rows[-1]["arrived_pct"] >= 130, rows[-1]
        for r in rows:  # placed GPU never exceeds what arrived, nor the fleet
            assert r["allocated_pct"] <= r["arrived_pct"] + 1e-6 and r["allocated_pct"] <= 100, (name, r)
        run = json.loads((merged / name / "seed-1" / "run.json").read_text())
        assert run["steps"] == len(rows)
    assert "| binpack |" in (merged / "fill.md").read_text() and (merged / "report.html").is_file()
    _nothing_left(host)




@pytest.mark.full  # `make test-full`: in `make test` the fill's fan-out covers units made from a plan and merged
# here, `test_twin_live.py` twins side by side locally, and the unit tier the twins' merge (test_fanout_twin.py)
def test_twins_fanned_out_are_one_job_per_twin_brought_together_into_one_comparison(host, tmp_path):
    """`kailab twin … --designs … --on`: borrow's own scheduler snapshot (taken by KAI in a unit's lab and
    brought back with its evidence; secrets planted in it) twinned as it was and with prod's limit raised,
    each twin a Job on a lab of its own, only what a twin reads of the snapshot shipped; one comparison
    here as a local side-by-side writes it: the 4 pods left pending OverLimit as it was, placed by the design."""
    runs = tmp_path / "runs"
    p = _cli("run", "borrow", "--on", host.kubeconfig, *SMALL, "--evidence", str(runs))
    out, _ = p.communicate(timeout=900)
    assert p.returncode == 0, out
    [taken] = runs.glob("*-borrow/scheduler-snapshot.zip")
    snap = tmp_path / "snapshot.zip"
    plant_secrets(taken, snap, TOKEN)
    [prod] = [q for q in make_plan(load_snapshot(snap), "x").queue_names() if q.endswith("-prod")]
    design = tmp_path / "prod-32.yaml"
    design.write_text(f"design: prod-32\nqueues:\n  {prod}: {{gpu: {{limit: 32}}}}\n")
    evidence = tmp_path / "evidence"
    record = _ran(evidence, ["twin as-is", "twin prod-32"], "twin", str(snap), "--designs", str(design), "--settle", "10",
                  "--timeout", "300", "--on", host.kubeconfig)  # each pod's requests its own
    cpu, memory = requests_for("twin")
    assert all(u["requests"] == {"cpu": cpu, "memory": memory} and u["node"] in _workers(host) for u in record["units"]), record
    [twins] = evidence.glob("twins-*")
    c = json.loads((twins / "comparison.json").read_text())
    assert c["ok"], c["variants"]
    assert {k: (v["placed"], v["still_pending"], v["evicted"]) for k, v in c["variants"].items()} == \
        {"as-is": (0, 4, 0), "prod-32": (4, 0, 0)}, c["variants"]
    assert c["decided_differently"] == 4 and c["queues_gpus"][prod] == {"before": 28, "as-is": 28, "prod-32": 32}
    assert json.loads((twins / "plan.json").read_text())["fanout"] == str(Path(record["units"][0]["evidence"]).parent.parent)
    for f in evidence.rglob("*"):  # neither the twins' evidence nor the run's record holds a secret
        assert not f.is_file() or TOKEN.encode() not in f.read_bytes(), f
    _nothing_left(host)


@pytest.mark.full  # `make test-full`: the fill's fan-out above covers the merge path in `make test`
def test_a_replay_fanned_out_is_one_job_per_design_brought_together_here(host, tmp_path):
    """`kailab replay --on`: two designs of a generated trace, each a Job replaying its design alone on
    a lab of its own; one replay here, compared from disk against the expectation given."""
    trace = tmp_path / "t.csv"
    for name, a in (("even", 4), ("a-first", 6)):
        (tmp_path / f"{name}.yaml").write_text(two_teams(name, a))
    gen = kailab_cli("trace", "generate", str(trace), "--jobs", "12", "--hours", "0.15", "--fleet", "tiny", "--load",
                     "1.5", "--seed", "5", timeout=None)
    assert gen.returncode == 0, gen.stderr
    evidence = tmp_path / "evidence"
    record = _ran(evidence, ["replay even", "replay a-first"], "replay", str(trace), "--designs",
                  f"{tmp_path}/even.yaml,{tmp_path}/a-first.yaml", "--fleet", "tiny", "--compress", "40", "--repeat", "1",
                  "--expect", "all.completed >= 1", "--on", host.kubeconfig, *SMALL)
    [replay] = evidence.glob("replay-*")
    c = json.loads((replay / "comparison.json").read_text())
    assert c["ok"] and c["runs"] == {"even": 1, "a-first": 1} and c["plan"]["fanout"] == str(Path(record["units"][0]["evidence"]).parent.parent)
    assert {e["expect"]: e["held"] for e in c["expectations"]} == {"all.completed >= 1": True}
    for label in ("even", "a-first"):  # every job of the trace recorded in each variant's run, on a binary lab in its pod
        rec = json.loads((replay / label / "run-1" / "records.json").read_text())
        assert len(rec["jobs"]) == 12 and not rec["timed_out"], label
        assert json.loads((replay / label / "lab.json").read_text())["runtime"] == "binary"
    _nothing_left(host)


@pytest.mark.full  # `make test-full` (and v0.16.8's lab image: `kailab tools lab-image --kai-version v0.16.8`)
def test_a_two_version_trial_fanned_out_is_one_job_per_version_brought_together_here(host, tmp_path):
    """`kailab trial --on`: each KAI version a Job on its own version's lab image, a part of the trial
    in its pod; one trial here whose matrix is read from the runs' verdicts."""
    evidence = tmp_path / "evidence"
    record = _ran(evidence, ["trial v0.16.8", "trial v0.17.0"], "trial", "--kai-versions", "v0.16.8,v0.17.0", "--exercises",
                  "borrow", "--repeat", "1", "--on", host.kubeconfig, *SMALL)
    assert set(record["images"]) == {"v0.16.8", "v0.17.0"}
    [trial] = evidence.glob("trial-*")
    m = json.loads((trial / "matrix.json").read_text())
    assert {v: c["verdict"] for v, c in m["exercises"]["borrow"].items()} == {"v0.16.8": "passed", "v0.17.0": "passed"}
    for v in ("v0.16.8", "v0.17.0"):  # each version's lab ran that version's KAI, built here
        kai = json.loads((trial / v / "kai.json").read_text())
        assert kai["lab_kai_version"] == v and kai["manifest_version"] == v, kai
        run = json.loads(next((trial / v / "run-1").glob("*-borrow/run.json")).read_text())
        assert run["runtime"] == "binary" and run["kai_version"] == v
    _nothing_left(host)


@pytest.mark.full  # `make test-full`: the fill's fan-out covers the same path in `make test`
def test_a_comparison_of_kais_placements_fanned_out_is_one_job_per_column_brought_together_here(host, tmp_path):
    """`kailab compare --stacks kai,kai:spread --on`: each column a Job, a part of the comparison in its pod
    (KAI with its scheduler's placement as the design input); one matrix here, read from the runs' verdicts."""
    evidence = tmp_path / "evidence"
    _ran(evidence, ["compare kai", "compare kai:spread"], "compare", "--stacks", "kai,kai:spread", "--exercises",
           "borrow", "--repeat", "1", "--on", host.kubeconfig)
    [compared] = evidence.glob("compare-*")
    m = json.loads((compared / "matrix.json").read_text())
    assert {c: cell["verdict"] for c, cell in m["exercises"]["borrow"].items()} == {"kai": "passed", "kai:spread": "passed"}
    stack = json.loads((compared / "kai:spread" / "stack.json").read_text())  # the column's lab ran its placement
    assert stack["column"] == "kai:spread" and stack["configuration"], stack
    _nothing_left(host)
