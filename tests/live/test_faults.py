"""Faults during exercises (binary runtime with KAI): a dying KAI component is reported as such,
not as a wrong outcome; a restarted scheduler resumes scheduling; Ctrl-C keeps the evidence."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

from kailab.exercise.runner import ExerciseRun
from kailab.exercise.load import load_exercise
from kailab.runtimes import processes
from helpers import KAILAB

pytestmark = [pytest.mark.lab, pytest.mark.kai]


def exercise(tmp_path: Path, name: str, steps: list[dict]) -> Path:
    doc = {"exercise": name, "title": name, "concept": "fault test", "fleet": "tiny",
           "queues": {"root": {"gpu": {"quota": -1, "limit": -1},
                               "children": {"q": {"gpu": {"quota": 8, "limit": -1}}}}},
           "steps": steps}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_beside(run: ExerciseRun, act):
    """The run's outcome, while `act` does something to the lab from outside (a thread, joined)."""
    actor = threading.Thread(target=act)
    actor.start()
    try:
        return run.run()
    finally:
        actor.join()


def test_scheduler_dying_mid_exercise_is_reported_as_a_component_death(kai_lab, tmp_path):
    path = exercise(tmp_path, "fault-death", [
        {"name": "two pods", "apply": [{"pods": {"name": "a", "queue": "q", "count": 2}}],
         "expect": [{"queue": "q", "bound": 2}]},
        {"name": "a long window", "stays": {"for": "20s", "that": [{"queue": "q", "bound": {"min": 2}}]}},
    ])
    run = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev")

    def kill_later():
        deadline = time.time() + 60
        while time.time() < deadline and not any(r.step == "two pods" for r in run.outcome.results):
            time.sleep(0.2)
        time.sleep(2)
        processes.kill(processes.records(kai_lab.dir)["scheduler"])

    try:
        outcome = run_beside(run, kill_later)
    finally:
        if not processes.records(kai_lab.dir)["scheduler"].alive():
            from kailab.runtimes.binary import BinaryRuntime

            BinaryRuntime().restart(kai_lab, "scheduler")
    assert outcome.verdict == "error", outcome.report()
    assert outcome.error.startswith("KAI component died: scheduler")
    assert "\x1b" not in outcome.error  # KAI's colour codes stay in the raw log, out of the message
    assert (Path(outcome.evidence) / "logs" / "scheduler.log").is_file()
    assert json.loads((Path(outcome.evidence) / "verdict.json").read_text())["verdict"] == "error"


def test_killed_then_restarted_scheduler_resumes_scheduling(kai_lab, tmp_path):
    path = exercise(tmp_path, "fault-restart", [
        {"name": "scheduler down", "faults": [{"kill": "scheduler"}],
         "apply": [{"pods": {"name": "w", "queue": "q", "count": 2}}],
         "stays": {"for": "8s", "that": [{"queue": "q", "bound": 0}]}},
        {"name": "scheduler back", "faults": [{"restart": "scheduler"}],
         "expect": [{"queue": "q", "bound": 2}]},
    ])
    outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
    assert outcome.verdict == "passed", outcome.report()
    timeline = (Path(outcome.evidence) / "timeline.jsonl").read_text()
    assert "fault: killed scheduler" in timeline and "fault: restarted scheduler" in timeline
    assert processes.records(kai_lab.dir)["scheduler"].alive()


def test_a_window_on_a_gang_lasts_until_kais_podgrouper_has_grouped_it(kai_lab, tmp_path):
    """The CI flake of the topology variant: KAI's podgrouper grouped a gang 17 s late (its PodGroup
    updates conflicted and backed off), the 10 s window saw nothing bound and passed. Here the
    podgrouper is down while the gang is submitted and comes back 8 s later, after a 6 s window would
    have passed: the window must last 6 s past the grouping, and so see KAI bind the gang."""
    from kailab.runtimes.binary import BinaryRuntime

    path = exercise(tmp_path, "fault-intake-late", [
        {"name": "podgrouper down", "faults": [{"kill": "podgrouper"}]},
        {"name": "a gang that fits", "apply": [{"job": {"name": "g", "queue": "q", "parallelism": 2, "gang": 2}}],
         "stays": {"for": "6s", "that": [{"workload": "g", "bound": 0}]}, "timeout": "60s"},
    ])
    run = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev")

    def restart_later():
        deadline = time.time() + 60
        while time.time() < deadline and not run.observer.state.workload_pods("g"):
            time.sleep(0.2)
        time.sleep(8)
        BinaryRuntime().restart(kai_lab, "podgrouper")

    outcome = run_beside(run, restart_later)
    assert outcome.verdict == "failed", outcome.report()
    (result,) = [r for r in outcome.results if not r.passed]
    assert (result.step, result.kind, result.what) == ("a gang that fits", "stays", "workload g bound for 6s")
    assert processes.records(kai_lab.dir)["podgrouper"].alive()


def test_a_window_on_pods_kai_never_grouped_fails_naming_them(kai_lab, tmp_path):
    path = exercise(tmp_path, "fault-intake-never", [
        {"name": "podgrouper down", "faults": [{"kill": "podgrouper"}]},
        {"name": "pods KAI cannot see", "apply": [{"pods": {"name": "p", "queue": "q", "count": 2}}],
         "stays": {"for": "3s", "that": [{"workload": "p", "bound": 0}]}, "timeout": "8s"},
    ])
    outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
    assert outcome.verdict == "failed", outcome.report()
    (result,) = [r for r in outcome.results if not r.passed]
    assert result.what == "KAI took in this step's workloads within the window", outcome.report()
    assert result.observed == "p: 2 pod(s) not taken in (p-0, p-1)"
    assert processes.records(kai_lab.dir)["podgrouper"].alive()  # the run restarts what its faults killed


def test_what_faults_take_away_lasts_until_a_fault_or_the_runs_end_puts_it_back(kai_lab, tmp_path):
    """The registry's bookkeeping on a real lab: a node taken away and brought back by `nodeUp` is not
    brought back again at the end; a node and a process still away when the run ends are put back
    then; a process the run killed is no component death."""
    from kailab.fleet import load_fleet
    from kailab.kube import Kube

    first, second = [n["metadata"]["name"] for n in load_fleet("tiny").node_manifests()][:2]
    path = exercise(tmp_path, "fault-lasting", [
        {"name": "a node and the binder down", "faults": [{"nodeDown": first}, {"kill": "binder"}, {"pause": "1s"}]},
        {"name": "the node back", "faults": [{"nodeUp": first}]},
        {"name": "another node down", "faults": [{"nodeDown": second}]},
    ])
    away: list[dict] = []
    run = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev",
                      after_step=lambda i, step, results: away.append({k: sorted(v) for k, v in run.faulted.items()}))
    outcome = run.run()
    assert outcome.verdict == "passed", outcome.report()
    assert away == [{"nodeDown": [first], "kill": ["binder"]}, {"nodeDown": [], "kill": ["binder"]},
                    {"nodeDown": [second], "kill": ["binder"]}]
    assert run.faulted == {"nodeDown": set(), "kill": set()}  # all put back at the end
    notes = [json.loads(line)["detail"] for line in (Path(outcome.evidence) / "timeline.jsonl").read_text().splitlines()
             if json.loads(line)["what"] == "fault"]
    assert notes == [f"fault: node {first} gone", "fault: killed binder", f"fault: node {first} back",
                     f"fault: node {second} gone"]
    kube = Kube(kai_lab.kubeconfig)
    try:
        for name in (first, second):
            node = kube.get("v1", "Node", name)
            assert node is not None and int(node["status"]["allocatable"]["nvidia.com/gpu"]) > 0, name
    finally:
        kube.close()
    assert processes.records(kai_lab.dir)["binder"].alive()


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupted_run_keeps_evidence_and_removes_its_workloads(kailab_labs, tmp_path, sig):
    import signal
    import subprocess
    import sys

    from kailab.kube import Kube

    lab = kailab_labs.get("small")
    proc = subprocess.Popen([*KAILAB, "run", "gang", "--name", lab.name,
                             "--evidence", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob("*/steps/02-*")):
        time.sleep(0.5)  # interrupt during the gang's 15 s stays-window
    proc.send_signal(getattr(signal, sig))
    proc.communicate(timeout=180)
    assert proc.returncode != 0
    (run_dir,) = list(tmp_path.iterdir())
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["verdict"] == "interrupted"
    run = json.loads((run_dir / "run.json").read_text())
    kube = Kube(lab.kubeconfig)
    assert kube.get("v1", "Namespace", run["namespace"]) is None or not kube.core.list_namespaced_pod(run["namespace"]).items
    assert all(kube.get("scheduling.run.ai/v2", "Queue", q) is None for q in run["queues"].values())
