"""Replay against real KAI: a trace played on labs side by side, every job's times recorded from
the watch, the figures and the comparison written, expectations enforced (exit 1 when one fails),
and the shipped what-if (exercises/replays/quota-what-if.yaml) showing the direction KAI's quotas
promise. Each replay brings up its own labs (one per design) and takes them down."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from kailab.paths import PROJECT_ROOT, state_dir
from kailab.replay import session
from kailab.replay.spec import load_replay
from kailab.testing.tiny_trace import two_teams

from helpers import KAILAB, kailab_cli

# labs of their own, two at a time: one such test at a time beside the rest (pytest -n)
pytestmark = [pytest.mark.lab, pytest.mark.kai, pytest.mark.xdist_group("own_labs")]

DESIGN = two_teams()


def _replay_dirs(root):
    return sorted(p for p in root.iterdir() if p.name.startswith("replay-"))


def test_a_replay_records_every_job_and_a_false_expectation_fails_it(tmp_path):
    trace, design = tmp_path / "t.csv", tmp_path / "even.yaml"
    design.write_text(DESIGN)
    env = {"KAILAB_EVIDENCE": str(tmp_path / "evidence")}
    gen = kailab_cli("trace", "generate", str(trace), "--jobs", "12", "--hours", "0.15", "--fleet", "tiny", "--load", "1.5",
                     "--seed", "5", env=env, timeout=60)
    assert gen.returncode == 0, gen.stderr
    run = kailab_cli("replay", str(trace), "--designs", str(design), "--fleet", "tiny", "--compress", "40", "--repeat", "1",
                     "--expect", "all.completed >= 1", "--expect", "all.completed > 1000", env=env, timeout=1200)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    [out] = _replay_dirs(tmp_path / "evidence")
    figures = json.loads((out / "even" / "run-1" / "figures.json").read_text())
    done = figures["all"]["completed"]
    assert f"FAILED (even/all.completed = {done} > 1000)" in run.stdout, run.stdout[-3000:]
    assert "expect `all.completed >= 1`: held" in run.stdout
    rec = json.loads((out / "even" / "run-1" / "records.json").read_text())
    jobs = {j["name"]: j for j in rec["jobs"]}
    assert len(jobs) == 12 and not rec["timed_out"]
    unbound_jobs = {u["job"] for u in rec["deleted_before_bound"]}
    for j in jobs.values():  # times in order; the trace's own clock: planned == arrival
        assert j["planned"] == pytest.approx(j["arrival_s"], abs=0.01), j
        assert j["submitted"] is not None and j["planned"] <= j["submitted"], j
        assert j["started"] is None or j["submitted"] <= j["started"], j
        if j["finished"] is not None:
            assert j["started"] <= j["finished"] and j["outcome"] in ("", "Complete (CompletionsReached)"), j
        else:  # a bare fractional pod KAI evicted never finishes (nothing recreates it), bound or not
            # yet (KAI deleting a pod whose bind was in flight), nor does a Job that failed
            assert (j["gpus"] < 1 and (j["evicted_pods"] >= 1 or j["name"] in unbound_jobs)) \
                or j["outcome"].startswith("Failed"), j
    for i in rec["pod_intervals"]:
        if i["ended"] == "succeeded":  # a pod ran at least as long as the trace says (trace seconds)
            assert i["to"] - i["from"] >= jobs[i["job"]]["duration_s"] * 0.99, i
    evicted = sum(j["evicted_pods"] for j in jobs.values())
    assert figures["all"]["evicted_pods"] == evicted
    unbound = len(rec["deleted_before_bound"])  # single-pod jobs here: only KAI deletes a pending pod
    # KAI's own counter (this lab ran nothing else) holds every eviction the watch saw; it may hold more: a pod
    # KAI evicts just as its run time ends is Succeeded, a completion to the watch (CI: consolidation 2, watch 1)
    assert sum(rec["evicted_by_action"]["by_action"].values()) >= evicted + unbound, rec["evicted_by_action"]
    assert (out / "even" / "run-1" / "logs" / "scheduler.log").stat().st_size > 0
    assert figures["all"]["wait_max"] > 0  # offered 1.5x the fleet: someone waited
    assert max(u for _, u in figures["fleet"]["utilisation_series"]) <= 1.0
    assert 0 < figures["fleet"]["utilisation_mean"] <= 1.0
    page = (out / "report.html").read_text()
    assert "Replay replay-" in page and 'class="chart replay-util"' in page
    assert json.loads((out / "comparison.json").read_text())["ok"] is False
    # this replay's labs only (replay-<its time>-<label>): another group's replay may run beside it
    assert not list(state_dir().glob(f"{out.name.lower()}-*")), "the replay's lab was not taken down"


@pytest.mark.full  # two labs for ~5 min: `make test-full`, and `make exercises-all` runs the same file
def test_the_shipped_what_if_more_quota_waits_less(tmp_path):
    _, plan = load_replay(PROJECT_ROOT / "exercises" / "replays" / "quota-what-if.yaml")
    out = session.run_replay(plan, tmp_path, echo=lambda text: None)
    c = json.loads((out / session.COMPARISON).read_text())
    assert c["errors"] == {"team-a-first": [], "team-b-first": []}, c["errors"]
    assert [e["held"] for e in c["expectations"]] == [True, True], session.markdown(c)
    m = c["medians"]
    for design in ("team-a-first", "team-b-first"):
        assert m[design]["all.jobs"] == 80
        assert "submit.lag_p99_wall_s" in m[design]  # recorded (its size is a benchmark's, not asserted)


def test_a_scheduler_killed_while_a_replays_lab_starts_leaves_its_whole_logs(tmp_path):
    """#46, as CI saw it: a replay lab's KAI scheduler dies while the lab starts. The replay goes on to
    its clean-up (`down`), and what it says points at a folder that still holds every component's whole
    log afterwards, with the death classified in one line."""
    import signal
    import time

    from kailab.runtimes import processes

    trace, design = tmp_path / "t.csv", tmp_path / "even.yaml"
    design.write_text(DESIGN)
    evidence = tmp_path / "evidence"
    env = {**os.environ, "KAILAB_EVIDENCE": str(evidence), "NO_COLOR": "1"}
    gen = subprocess.run([*KAILAB, "trace", "generate", str(trace), "--jobs", "4",
                          "--hours", "0.05", "--fleet", "tiny", "--seed", "2"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert gen.returncode == 0, gen.stderr
    before = {p.name for p in state_dir().glob("replay-*")}
    proc = subprocess.Popen([*KAILAB, "replay", str(trace), "--designs", str(design),
                             "--fleet", "tiny", "--compress", "40", "--repeat", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline, pidfile = time.time() + 300, None
        while time.time() < deadline and pidfile is None:  # the replay's lab, once its scheduler started
            assert proc.poll() is None, proc.communicate()
            labs = [p for p in state_dir().glob("replay-*") if p.name not in before]
            pidfile = next((p / "pids" / "scheduler.json" for p in labs if (p / "pids" / "scheduler.json").exists()), None)
            time.sleep(0.05)
        assert pidfile is not None, "the replay's lab never started KAI's scheduler"
        lab = pidfile.parent.parent
        log = lab / "logs" / "scheduler.log"
        while time.time() < deadline and not (log.exists() and log.stat().st_size):  # its Go runtime is up
            time.sleep(0.02)
        os.kill(processes.records(lab)["scheduler"].pid, signal.SIGQUIT)  # a Go crash report, as in CI
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out[-2000:] + err[-2000:]
    [replay] = _replay_dirs(evidence)
    said = (replay / "even" / "error.txt").read_text()
    assert "scheduler exited while waiting for" in said and "signal: SIGQUIT: quit" in said, said
    kept = next((evidence / "failed-starts").glob(f"*-{lab.name}"))
    assert str(kept) in said.replace("\n", " ")  # the place the message names, after the replay's down
    assert not lab.exists(), "the replay's clean-up did not take its lab down"
    whole = (kept / "scheduler.log").read_text()
    assert "SIGQUIT: quit" in whole and len(whole.splitlines()) > 15
    assert {"etcd.log", "kube-apiserver.log", "binder.log", "deaths.txt"} <= {p.name for p in kept.iterdir()}
    assert "scheduler: signal: SIGQUIT: quit" in (kept / "deaths.txt").read_text()
