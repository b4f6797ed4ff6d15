"""The same exercise files on the kueue and kueue+kai stacks (issue #41): quota, borrow, reclaim, gang
and starvation run on a binary lab where Kueue admits and kube-scheduler (kueue) or KAI (kueue+kai)
places, each asserting what was measured there (expectations with `stacks:` where the stacks differ),
and a GPU fraction is refused by name before anything is made."""

from __future__ import annotations

import os

import pytest

from helpers import refused_with_nothing_made
from kailab.exercise.runner import run_exercise
from kailab.exercise.load import resolve_exercise
from kailab import labs
from kailab.labs import LabSpec

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("kueue_labs")]  # its labs one at a time, beside the own_labs group

FIVE = ["quota", "borrow", "reclaim", "gang", "starvation"]
STACKS = ["kueue", "kueue+kai"]
# Sampled on kueue+kai (docs/dev/testing.md): `make test` runs quota and gang, whose expectations name
# kueue+kai (`stacks:` lines: KAI's NonPreemptibleOverQuota under Kueue's admission, a gang Kueue admits
# whole), and reclaim, where Kueue evicts what KAI placed; borrow and starvation expect there what they
# expect on kueue, and run on kueue+kai in `make test-full` (~100 CPU-s, ~2 min of a worker)
FULL_ONLY = {"kueue+kai-borrow", "kueue+kai-starvation"}  # marked `full` by tests/conftest.py


@pytest.fixture(scope="module", params=STACKS)
def kueue_small(request):
    stack = request.param
    name = f"{stack.replace('+', '-')}-x-{os.getpid()}"
    rec = labs.up(LabSpec(name=name, runtime="binary", fleet="small", stack=stack,
                        metrics=False)).record
    try:
        yield rec
    finally:
        labs.down(name)


@pytest.mark.parametrize("exercise", FIVE)
def test_the_exercise_passes_on_kueue(kueue_small, exercise, tmp_path):
    out = run_exercise(resolve_exercise(exercise), kueue_small, tmp_path)
    assert out.verdict == "passed", out.report()
    verdict = (tmp_path / os.path.basename(out.evidence) / "verdict.json").read_text()
    stack = kueue_small.stack["name"]
    assert f'"stack": "{stack}"' in verdict
    # Kueue's own objects are the run's evidence: its ClusterQueues and Workloads (and KAI's, when it places)
    final = tmp_path / os.path.basename(out.evidence) / "final"
    assert (final / "clusterqueues.yaml").is_file() and (final / "workloads.yaml").is_file()
    assert (final / "podgroups.yaml").exists() == (stack == "kueue+kai")
    if exercise == "gang":  # what differs from KAI is checked here; KAI's own expectation is named, not counted
        loose = [r for r in out.results if r.what.startswith("workload loose-job") and r.step.startswith("the same job")]
        assert {(r.what, r.observed) for r in loose} == {("workload loose-job bound", "0"), ("workload loose-job pending", "0")}
        assert any("(for kai, volcano only" in n and "loose-job" in n for n in out.not_checked), out.not_checked


def test_a_gpu_fraction_is_refused_by_name_and_nothing_is_made(kueue_small, tmp_path):
    error = refused_with_nothing_made(kueue_small, resolve_exercise("fractional"),
                                      ("kueue.x-k8s.io/v1beta2", "ClusterQueue"), tmp_path)
    stack = kueue_small.stack["name"]
    assert "fractional.yaml: step" in error and f" share: not on the {stack} stack: Kueue " in error


def test_kueue_and_kai_coexist_each_pod_choosing_or_the_exercise_is_refused_by_name(kueue_small, tmp_path):
    """exercises/stacks/coexistence.yaml: Kueue's batch Jobs (placed by kube-scheduler) beside KAI's GPU
    pods, neither touching the other's, both finishing - on kueue+kai; any other stack refuses it."""
    from kailab.paths import exercises_dir

    out = run_exercise(exercises_dir() / "stacks" / "coexistence.yaml", kueue_small, tmp_path)
    if kueue_small.stack["name"] == "kueue+kai":
        assert out.verdict == "passed", out.report()
        assert not out.not_checked
    else:
        assert out.verdict == "error" and "coexistence.yaml: stacks: the exercise runs on kueue+kai" in out.error
