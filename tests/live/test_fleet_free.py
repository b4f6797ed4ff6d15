"""An exercise starts on its whole fleet: pods left on the fleet's nodes (a run before it whose pods are
still going, a user's own) are waited for, and a pod that stays is an error verdict naming it — never
a verdict about a smaller fleet than the exercise was written for."""

from __future__ import annotations

import threading
import time

import pytest
import yaml

from kailab import workloads
from kailab.exercise.load import load_exercise
from kailab.exercise.runner import ExerciseRun
from kailab.fleet import load_fleet
from kailab.kube import Kube
from kailab.runtimes import waits

pytestmark = [pytest.mark.lab, pytest.mark.kai]

NS = "leftover"


def _one_pod(tmp_path, name: str):
    """An exercise of one pod on the tiny fleet: it passes on the whole fleet, whatever else it asks."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "exercise": name, "title": name, "concept": "a run starts on its whole fleet", "fleet": "tiny",
        "queues": {"root": {"gpu": {"quota": -1, "limit": -1}, "children": {"q": {"gpu": {"quota": 8, "limit": -1}}}}},
        "steps": [{"name": "one pod", "apply": [{"pods": {"name": "a", "queue": "q", "count": 1}}],
                   "expect": [{"queue": "q", "bound": 1}]}]}, sort_keys=False))
    return path


def _later(act, seconds: float = 3) -> threading.Thread:
    """`act` done `seconds` after now, in a thread (joined by the caller once the run is over)."""
    def run():
        time.sleep(seconds)
        act()
    actor = threading.Thread(target=run)
    actor.start()
    return actor


def _leftover(kube: Kube, node: str) -> None:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NS}})
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "held", "namespace": NS},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": workloads.IMAGE,
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})


def _gone(kube: Kube) -> None:
    kube.delete("v1", "Namespace", NS)
    deadline = time.time() + 60
    while time.time() < deadline and kube.list("v1", "Pod", NS):
        time.sleep(0.5)


def test_an_exercise_waits_for_pods_left_on_its_fleet_and_names_one_that_stays(kai_lab, tmp_path, monkeypatch):
    kube = Kube(kai_lab.kubeconfig)
    node = load_fleet("tiny").node_manifests(kai_lab.fleet_prefix or "")[0]["metadata"]["name"]
    path = _one_pod(tmp_path, "fleet-free")
    try:
        # a pod that goes 3 s after the run starts: waited for, then the run goes on and passes
        _leftover(kube, node)
        actor = _later(lambda: kube.delete("v1", "Pod", "held", NS, grace=0))
        try:
            outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
        finally:
            actor.join()
        assert outcome.verdict == "passed", outcome.report()
        assert outcome.wall["set-up"] >= 2, outcome.wall  # it waited (the pod went ~3 s after the start)

        # a pod that stays: an error naming it (the named wait shortened here, 120 s by default)
        _leftover(kube, node)
        monkeypatch.setitem(waits.WAITS, "exercise-clean-up", 3)
        outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
        assert outcome.verdict == "error", outcome.report()
        assert f"{NS}/held on {node}" in outcome.error and "whole fleet" in outcome.error, outcome.error
        assert not outcome.results  # nothing ran: no step, no check
    finally:
        _gone(kube)
        kube.close()


def test_a_node_still_marked_not_ready_is_waited_for_not_taken_for_another_fleet(kai_lab, tmp_path):
    """A node back from a fault is Ready a moment before the node controller takes its not-ready taint
    off; the next run met it as "another fleet" in a CI. Now it waits, then runs on the whole fleet."""
    kube = Kube(kai_lab.kubeconfig)
    node = load_fleet("tiny").node_manifests(kai_lab.fleet_prefix or "")[1]["metadata"]["name"]
    path = _one_pod(tmp_path, "fleet-ready")
    taint = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    kube.dynamic.patch(kube.resource("v1", "Node"), name=node, body={"spec": {"taints": [taint]}},
                       content_type="application/merge-patch+json")
    actor = _later(lambda: kube.dynamic.patch(kube.resource("v1", "Node"), name=node, body={"spec": {"taints": None}},
                                              content_type="application/merge-patch+json"))
    try:
        outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
    finally:
        actor.join()
        kube.close()
    assert outcome.verdict == "passed", outcome.report()
