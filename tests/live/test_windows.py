"""The runner's waits on a real API server: a `stays` window fails at the first breach seen on the
watch stream and passes only when the condition held throughout; `expect` waits for the truth.
The test places pods itself (standing in for a scheduler): this checks the runner, not KAI."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import place_pod
import yaml

from kailab import workloads
from kailab.exercise.runner import ExerciseRun
from kailab.exercise.actions import ACTIONS, StepContext
from kailab.exercise.spec import Exercise, seconds
from kailab.runtimes.waits import wait_until

pytestmark = pytest.mark.lab


@pytest.fixture
def run(infra_lab, tmp_path):
    doc = {"exercise": "windows", "title": "t", "concept": "c", "fleet": "tiny",
           "queues": {"q": {"gpu": {"quota": 8}}},
           "steps": [{"name": "window", "stays": {"for": "4s", "that": [{"workload": "w", "bound": 0}]}},
                     {"name": "eventually", "expect": [{"workload": "w", "bound": 2}], "timeout": "20s"}]}
    path = tmp_path / "windows.yaml"
    path.write_text(yaml.safe_dump(doc))
    # model only: the cross-file checks would (rightly) refuse a workload no step applies
    r = ExerciseRun(Exercise.model_validate(doc), path, infra_lab, tmp_path / "evidence")
    r.kube.apply(workloads.namespace(r.names.namespace))
    wait_until("ServiceAccount", lambda: r.kube.core.read_namespaced_service_account("default", r.names.namespace),
               timeout=60)
    r.observer.start()
    yield r
    r.observer.stop()
    r.kube.delete("v1", "Namespace", r.names.namespace)
    r.kube.close()


def act(r: ExerciseRun, step, key: str, since: float = 0) -> None:
    """Run one operation of a step through the action registry, as the runner does."""
    ACTIONS[key].run(StepContext(r, step, 0, since, time.time(), seconds(step.timeout)), getattr(step, key))


def place(r: ExerciseRun, name: str, node: str | None = "a100-0") -> None:
    place_pod(r.kube, r.names.namespace, name, node, r.names.queue("q"))


def test_stays_window_passes_when_the_condition_holds_throughout(run):
    place(run, "w-0", node=None)  # pending, never bound
    start = time.time()
    act(run, run.ex.steps[0], "stays")
    assert time.time() - start >= 4
    (result,) = run.outcome.results
    assert result.passed and result.observed == "0 throughout"
    assert result.what == "workload w bound for 4s"


def test_stays_window_fails_at_the_first_breach(run):
    threading.Timer(1.0, place, args=(run, "w-1")).start()
    start = time.time()
    act(run, run.ex.steps[0], "stays")
    elapsed = time.time() - start
    (result,) = run.outcome.results
    assert not result.passed
    assert result.observed.startswith("1 at t=")
    assert result.offending == ["w-1@a100-0"]
    assert 0.9 <= elapsed < 4  # stopped at the breach, not at the end of the window


def test_expect_waits_until_true_and_reports_expected_vs_observed(run):
    threading.Timer(1.0, place, args=(run, "w-2")).start()
    threading.Timer(1.5, place, args=(run, "w-3")).start()
    act(run, run.ex.steps[1], "expect")
    (result,) = run.outcome.results
    assert result.passed and (result.expected, result.observed) == ("2", "2")


def test_node_down_fault_orphans_pods_that_the_pod_gc_removes_and_node_up_restores_it(infra_lab, tmp_path):
    """A fleet node disappears under a running pod: kube-controller-manager's pod GC marks the pod
    Failed and deletes it (not an eviction); the exercise's end brings the node back."""
    from kailab.exercise.spec import Step

    doc = {"exercise": "nodefail", "title": "t", "concept": "c", "fleet": "tiny",
           "queues": {"q": {"gpu": {"quota": 8}}}, "steps": [{"name": "s"}]}
    r = ExerciseRun(Exercise.model_validate(doc), tmp_path / "nodefail.yaml", infra_lab, tmp_path / "ev")
    r.kube.apply(workloads.namespace(r.names.namespace))
    wait_until("ServiceAccount", lambda: r.kube.core.read_namespaced_service_account("default", r.names.namespace),
               timeout=60)
    r.observer.start()
    try:
        place(r, "on-doomed-node", node="a100-1")
        assert r.observer.wait_for(lambda s: any(p.running for p in s.pods.values() if p.name == "on-doomed-node"), 30)
        act(r, Step.model_validate({"name": "node dies", "faults": [{"nodeDown": "a100-1"}]}), "faults")
        assert r.kube.get("v1", "Node", "a100-1") is None
        gone = r.observer.wait_for(lambda s: not any(p.name == "on-doomed-node" for p in s.pods.values()), 150)
        with r.observer.state.cond:
            seen = [e.what for e in r.observer.state.timeline if e.pod == "on-doomed-node"]
        assert gone, f"pod GC never removed the orphaned pod; timeline: {seen}"
        assert "failed" in seen and "deleted" in seen and "evicted" not in seen, seen
        r.restore_faults()
        wait_until("node a100-1 Ready again", lambda: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (r.kube.get("v1", "Node", "a100-1") or {}).get("status", {}).get("conditions", [])), timeout=60)
        assert r.kube.get("v1", "Node", "a100-1")["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        with r.observer.state.cond:
            notes = [e.detail for e in r.observer.state.timeline if e.what == "fault"]
        assert notes == ["fault: node a100-1 gone"]
    finally:
        r.observer.stop()
        r.kube.delete("v1", "Namespace", r.names.namespace)
        r.kube.close()
