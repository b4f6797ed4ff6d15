"""Each exercise must FAIL when its key condition is broken: proof that it can fail at all.

Every case copies a shipped exercise, breaks the one setting the behaviour depends on (or asks a
deliberately wrong number), runs it on a small-fleet lab with KAI, and reads the failure report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kailab.exercise.runner import ExerciseRun
from kailab.exercise.load import load_exercise
from kailab.inputs import read_yaml
from kailab.paths import exercises_dir

pytestmark = [pytest.mark.lab, pytest.mark.kai]


def _set_workload(doc, name, **changes):
    for step in doc["steps"]:
        for item in step.get("apply", []):
            for w in item.values():
                if w["name"] == name:
                    w.update(changes)


def _first_expect(doc, step_index, **changes):
    doc["steps"][step_index]["expect"][0].update(changes)


def _unshare(doc, name):
    for step in doc["steps"]:
        for item in step.get("apply", []):
            w = item.get("pods")
            if w and w["name"] == name:
                w.pop("gpuFraction")
                w["gpus"] = 1


def _manifest(doc, name):
    """The object of the `manifest` workload `name` (the first step that applies it)."""
    return next(item["manifest"]["object"] for step in doc["steps"] for item in step.get("apply", [])
                if "manifest" in item and item["manifest"]["object"]["metadata"]["name"] == name)


def _drop_faults(doc, step_index):
    doc["steps"][step_index].pop("faults")


BROKEN = {
    # exercise: (how it is broken, the step that must fail, the check in it that must fail)
    "quota": (lambda d: _set_workload(d, "serve", priorityClass="train"),
              "non-preemptible work stops at its quota", "queue serving bound"),
    "borrow": (lambda d: d["queues"]["lab"]["children"]["prod"]["gpu"].update(limit=16),
               "prod borrows research's idle share", "queue prod bound"),
    "reclaim": (lambda d: d["steps"][1]["expect"][0].update(bound=20),
                "research comes back", "queue prod bound"),
    "gang": (lambda d: _set_workload(d, "gang-job", gang=None),
             "a 10-pod gang meets 8 free GPUs", "workload gang-job bound"),
    # a guarantee from the start (the fleet split 28 + 4): KAI reclaims for the starved queue at
    # once - the window breaks when flood loses its first pod (the eviction precedes the bind)
    "starvation": (lambda d: (d["queues"]["lab"]["children"]["starved"]["gpu"].update(quota=4),
                              d["queues"]["lab"]["children"]["flood"]["gpu"].update(quota=28)),
                   "the starved queue asks", "queue flood bound"),
    "preemption": (lambda d: _set_workload(d, "a-urgent", priorityClass="train"),
                   "a higher-priority job arrives in team-a", "workload a-low bound"),
    "pitfall-deployment-borrow": (lambda d: _set_workload(d, "web", priorityClass="train"),
                                  "the Deployment stops at quota", "workload web bound"),
    # the node dies without taking anything with it: nothing lost, nothing replaced
    "node-failure": (lambda d: _drop_faults(d, 1), "h100-0 dies", "workload serve bound"),
    # the trap: the same pods without the spread strategy pile onto one node
    "placement": (lambda d: d["steps"][1].pop("scheduler"), "spreading", "workload spread nodes"),
    # without the required rack the gang spreads over both racks at once
    "topology": (lambda d: d["steps"][1]["apply"][0]["job"].pop("topology"),
                 "a 12-pod gang that must stay in one rack", "workload strict bound"),
    # non-preemptible training cannot be moved: the big pod never fits
    "consolidation": (lambda d: _set_workload(d, "train", priorityClass="build"),
                      "the placeholders leave and an 8-GPU pod arrives", "workload train evicted"),
    # the trap: the same pods asking for whole GPUs take a device each
    "fractional": (lambda d: _unshare(d, "halves"), "four half-GPU pods", "workload halves devices"),
    # the trap: a rigid gang (minimum = every pod) cannot shrink, so reclaim takes all of it
    "elastic": (lambda d: d["steps"][0]["apply"][0]["elastic"].update(minMember=32),
                "research comes back and the workload shrinks to its minimum", "workload train bound"),
    # the wrong nodes labelled: the pods follow the label to the A100s, not the L40S nodes
    "node-labels": (lambda d: d["steps"][1]["nodes"][0].update(nodeSelector={"kailab.io/pool": "a100"}),
                    "the L40S nodes are labelled", "workload train on kailab.io/pool=l40s bound"),
    # a limit with room: nothing waits, so no condition explains a wait
    "what-kai-writes": (lambda d: d["queues"]["lab"]["children"]["team"]["gpu"].update(limit=16),
                        "one more pod waits", "PodGroup of over matching"),
    # h100-1 stays in rack-a: no rack has room for the waiting gang
    "rack-placement": (lambda d: d["steps"][3].pop("nodes"), "h100-1 moves to rack-b",
                       "workload second on kailab.io/rack=rack-b bound"),
    # a limit with room: the claim over the old limit is bound, no OverLimit on its PodGroup
    "dra-claims": (lambda d: d["queues"]["lab"]["children"]["team"]["gpu"].update(limit=16),
                   "one claim over the limit", "podgroup condition of over"),
    # KAI left at its default (no DisruptionTarget on its evictions): the second Job fails like the first
    "job-eviction": (lambda d: d["steps"][2].pop("scheduler"), "research comes back, and the Job survives",
                     "workload b-train evicted"),  # 6: the failed Job stopped them all
    # usage off: the two equal queues split the fleet 4 and 4
    "time-based-fairness": (lambda d: d["steps"][0]["scheduler"].pop("usage"),
                            "both ask for more than the fleet", "queue beta bound"),
    # the kind's gang undone: a PyTorchJob whose schedulingPolicy asks for 1 pod starts 3 of its 4
    "pytorchjob-gang": (lambda d: _manifest(d, "train")["spec"].update(
                            runPolicy={"schedulingPolicy": {"minAvailable": 1}}),
                        "a PyTorchJob of 1 master and 3 workers meets 3 free GPUs", "workload train bound"),
    # a rigid PyTorchJob (no elasticPolicy): its minimum is all 16 workers
    "pytorchjob-elastic": (lambda d: _manifest(d, "train")["spec"].pop("elasticPolicy"),
                           "an elastic PyTorchJob grows into idle GPUs", "PodGroup of train matching"),
    # InOrder undone (JobSet's default, AnyOrder): the driver waits with the workers
    "jobset-startup-order": (lambda d: _manifest(d, "inorder")["spec"].pop("startupPolicy"),
                             "the same JobSet with InOrder starts its driver alone", "Pod of inorder matching"),
    # no minReplicas: the whole worker group is the minimum, and the reclaim finds no workers above it
    "raycluster-reclaim": (lambda d: _manifest(d, "ray")["spec"]["workerGroupSpecs"][0].update(minReplicas=16),
                           "a RayCluster of 16 GPU workers borrows research's idle GPUs", "PodGroup of ray matching"),
    # no rack required: the first group spreads over both racks
    "lws-rack": (lambda d: _manifest(d, "lws")["metadata"].pop("annotations"),
                 "an LWS of 2 groups of 4 that must each stay in one rack", "workload lws on kailab.io/rack=rack-b bound"),
}


# The failing step's timeout: KAI reaches the exercises' expected states within 1-10 s of a step's start
# (their runs' expected_after_s, 2026-11-30), so a state the broken variant has not reached in 30 s
# is one the unbroken exercise would have reached — a third of a worker's time in these 24 tests was
# this wait at 45 s
VARIANT_TIMEOUT = "30s"
# steps that wait on Kubernetes' clocks: the pod GC fails a vanished node's pods 40-60 s after it goes
# (its quarantine and period); node-failure's step held after 49-107 s here, under load
SLOW_STEPS = {"node-failure": "150s"}


def test_every_exercise_has_a_broken_variant():
    assert set(BROKEN) == {p.stem for p in exercises_dir().glob("*.yaml")}


def _variant_params():
    """Exercises of another fleet than small go to one worker (pytest -n), which alone brings up the
    dra, racks and tiny labs they need."""
    def marks(ex):
        if ex.operators:  # on the session's lab with the workload operators, beside their own live tests
            return [pytest.mark.xdist_group("operator_labs")]
        return [] if ex.fleet == "small" else [pytest.mark.xdist_group("other_fleets")]

    return [pytest.param(name, id=name, marks=marks(load_exercise(exercises_dir() / f"{name}.yaml")))
            for name in sorted(BROKEN)]


@pytest.mark.parametrize("name", _variant_params())
def test_exercise_fails_when_its_key_condition_is_broken(name, kailab_labs, tmp_path):
    breaker, failing_step, failing_check = BROKEN[name]
    doc = read_yaml(exercises_dir() / f"{name}.yaml")  # YAML 1.2 booleans, as kailab reads it: `on:` stays a key
    breaker(doc)
    # the step that must fail waits VARIANT_TIMEOUT, not its own 120-300 s: a broken variant never reaches
    # its state, and waiting longer proves no more. The steps before it keep their own timeouts: they
    # must pass, and return as soon as they do (a slow machine fails them only if their own time is out)
    assert failing_step in [s["name"] for s in doc["steps"]], failing_step
    for step in doc["steps"]:
        if step["name"] == failing_step:
            step["timeout"] = SLOW_STEPS.get(name, VARIANT_TIMEOUT)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    ex = load_exercise(path)
    lab = kailab_labs.get(ex.fleet, operators=tuple(ex.operators))
    # the first failure is what this test reads: the steps after it would only wait out their timeouts
    outcome = ExerciseRun(ex, path, lab, tmp_path / "evidence", fail_fast=True).run()
    assert outcome.verdict == "failed", outcome.report()
    failed = [r for r in outcome.results if not r.passed]
    # the first failure is the one the breakage causes, not an unrelated one
    assert failed[0].step == failing_step and failing_check in failed[0].what, outcome.report()
    later = len(ex.steps) - 1 - [s.name for s in ex.steps].index(failing_step)
    assert not later or f"fail-fast: {later} step(s) after" in " ".join(outcome.warnings), outcome.warnings
    assert {r.step for r in outcome.results} - {"whole run"} <= {s.name for s in ex.steps[:len(ex.steps) - later]}
    report = outcome.report()
    assert "expected" in report and "observed" in report
    verdict = json.loads((Path(outcome.evidence) / "verdict.json").read_text())
    assert verdict["verdict"] == "failed"
    assert len(verdict["expectations"]) == len(outcome.results)
    if name == "job-eviction":  # the run says why the Job failed: the eviction of its pod, at backoffLimit 0
        assert any(x.startswith("Job b-train failed on an eviction: its pod b-train-") for x in verdict["why"]), verdict["why"]
        assert "why: Job b-train failed on an eviction" in report, report


def test_evidence_directory_holds_every_promised_file(kailab_labs, tmp_path):
    path = exercises_dir() / "reclaim.yaml"
    ex = load_exercise(path)
    outcome = ExerciseRun(ex, path, kailab_labs.get(ex.fleet), tmp_path).run()
    root = Path(outcome.evidence)
    for rel in ("exercise.yaml", "run.json", "timeline.jsonl", "verdict.json", "scheduler-snapshot.zip",
                "logs/scheduler.log", "logs/binder.log", "final/podgroups.yaml"):
        assert (root / rel).is_file(), rel
    step_dirs = sorted(p.name for p in (root / "steps").iterdir())
    assert len(step_dirs) == len(ex.steps)
    for d in step_dirs:
        for f in ("queues.yaml", "podgroups.yaml", "pods.yaml", "nodes.yaml", "events.yaml", "bindrequests.yaml"):
            assert (root / "steps" / d / f).is_file()
    verdict = json.loads((root / "verdict.json").read_text())
    assert all({"expected", "observed", "passed"} <= set(r) for r in verdict["expectations"])
    # where the run's time went: set-up, each kind of step operation, each part of the evidence, clean-up
    wall = verdict["wall_seconds"]
    assert {"set-up", "apply", "expect", "evidence", "evidence: final snapshot", "evidence: scheduler snapshot",
            "evidence: KAI logs", "clean-up"} <= set(wall), wall
    assert all(v >= 0 for v in wall.values())
    assert wall == outcome.wall


@pytest.mark.parametrize("name", ["consolidation", "fractional"])
def test_clean_up_leaves_nothing_for_the_next_exercise(kailab_labs, tmp_path, name):
    """Clean-up deletes the pods itself (the namespace controller takes seconds): nothing of the
    run may be left, or come back - consolidation's ReplicaSets would recreate deleted pods in a
    namespace that still took them; fractional's shared devices are held by KAI's reservation pods."""
    import time

    from kailab.stacks.kai.install import RESERVATION_NAMESPACE
    from kailab.kube import Kube
    from kailab.workloads import GPU_GROUP_LABEL

    path = exercises_dir() / f"{name}.yaml"
    ex = load_exercise(path)
    lab = kailab_labs.get(ex.fleet)
    outcome = ExerciseRun(ex, path, lab, tmp_path).run()
    assert outcome.verdict == "passed" and not outcome.warnings, outcome.report()
    root = Path(outcome.evidence)
    namespace = json.loads((root / "run.json").read_text())["namespace"]
    pods = yaml.safe_load((root / "final" / "pods.yaml").read_text())
    groups = {p["gpu_group"] for p in pods if p.get("gpu_group")}
    assert bool(groups) == (name == "fractional")
    kube = Kube(lab.kubeconfig)
    try:
        def left() -> list[str]:
            mine = [p["metadata"]["name"] for p in kube.list("v1", "Pod", namespace)]
            held = [p["metadata"]["name"] for p in kube.list("v1", "Pod", RESERVATION_NAMESPACE)
                    if (p["metadata"].get("labels") or {}).get(GPU_GROUP_LABEL) in groups]
            return mine + held
        end = time.monotonic() + 5  # stays empty: a recreated pod would show up within this window
        while time.monotonic() < end:
            assert not left(), left()
            time.sleep(0.2)
    finally:
        kube.close()
