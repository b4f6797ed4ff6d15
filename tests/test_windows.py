"""The runner's waits on a real API server: a `stays` window fails at the first breach seen on the
watch stream and passes only when the condition held throughout; `expect` waits for the truth.
The test places pods itself (standing in for a scheduler): this checks the runner, not KAI."""

from __future__ import annotations

import threading
import time

import pytest
import yaml

from kailab import workloads
from kailab.exercise.runner import ExerciseRun
from kailab.exercise.spec import Exercise
from kailab.waits import wait_until

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


def place(r: ExerciseRun, name: str, node: str | None = "a100-0") -> None:
    pod = workloads.pods(name, r.names.namespace, r.names.queue("q"), 1, priority_class=None)[0]
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"][workloads.OWNER_LABEL] = "w"
    pod["spec"]["schedulerName"] = "kailab-test-placer"
    if node:
        pod["spec"]["nodeName"] = node
    r.kube.apply(pod)


def test_stays_window_passes_when_the_condition_holds_throughout(run):
    place(run, "w-0", node=None)  # pending, never bound
    start = time.time()
    run._stays(run.ex.steps[0], 0)
    assert time.time() - start >= 4
    (result,) = run.outcome.results
    assert result.passed and result.observed == "0 throughout"
    assert result.what == "workload w bound for 4s"


def test_stays_window_fails_at_the_first_breach(run):
    threading.Timer(1.0, place, args=(run, "w-1")).start()
    start = time.time()
    run._stays(run.ex.steps[0], 0)
    elapsed = time.time() - start
    (result,) = run.outcome.results
    assert not result.passed
    assert result.observed.startswith("1 at t=")
    assert result.offending == ["w-1@a100-0"]
    assert 0.9 <= elapsed < 4  # stopped at the breach, not at the end of the window


def test_expect_waits_until_true_and_reports_expected_vs_observed(run):
    threading.Timer(1.0, place, args=(run, "w-2")).start()
    threading.Timer(1.5, place, args=(run, "w-3")).start()
    step = run.ex.steps[1]
    run._expect(step, 0, time.time(), 20)
    (result,) = run.outcome.results
    assert result.passed and (result.expected, result.observed) == ("2", "2")
