"""The same exercise files on the volcano stack (issue #43): quota, borrow, reclaim, gang and starvation
run on one binary lab where Volcano queues and places, each asserting what was measured there
(expectations with `stacks:` where Volcano differs, with their why), the scheduler's configuration
recorded in every run's evidence, and a GPU fraction refused by name before anything is made."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from helpers import refused_with_nothing_made, stack_lab
from kailab.exercise.runner import run_exercise
from kailab.exercise.load import resolve_exercise
from kailab.stacks.volcano import install

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("volcano_labs")]  # one lab, its runs one at a time

FIVE = ["quota", "borrow", "reclaim", "gang", "starvation"]


@pytest.fixture(scope="module")
def volcano_small():
    with stack_lab("volcano", fleet="small") as rec:
        yield rec


@pytest.mark.parametrize("exercise", FIVE)
def test_the_exercise_passes_on_volcano(volcano_small, exercise, tmp_path):
    out = run_exercise(resolve_exercise(exercise), volcano_small, tmp_path)
    assert out.verdict == "passed", out.report()
    run = tmp_path / os.path.basename(out.evidence)
    assert json.loads((run / "verdict.json").read_text())["stack"] == "volcano"
    # the scheduler's configuration the run ran under, and Volcano's own objects, are its evidence
    assert yaml.safe_load((run / "scheduler-conf" / "00-lab.yaml").read_text()) == install.scheduler_conf()
    queues = yaml.safe_load((run / "final" / "queues.yaml").read_text())
    assert queues and {q["kind"] for q in queues} == {"Queue"}
    assert (run / "final" / "podgroups.yaml").is_file() and not (run / "final" / "bindrequests.yaml").exists()
    checked = {(r.step, r.what) for r in out.results}
    if exercise == "gang":  # Volcano's PodGroup of minMember 1 takes what fits, as KAI does: asserted, not skipped
        assert ("the same job without a gang size", "workload loose-job bound") in checked
    if exercise == "quota":  # what differs from KAI is checked here; KAI's own expectation is named, not counted
        assert ("non-preemptible work stops at its quota", "queue serving bound") in checked
        assert any("(for kai, kueue+kai only" in n and "'bound': 8" in n for n in out.not_checked)


def test_a_gpu_fraction_is_refused_by_name_and_nothing_is_made(volcano_small, tmp_path):
    error = refused_with_nothing_made(volcano_small, resolve_exercise("fractional"), (install.API, "Queue"), tmp_path)
    assert "fractional.yaml: step" in error and " share: not on the volcano stack: Volcano shares" in error


def test_an_exercise_for_other_stacks_is_refused_by_name(volcano_small, tmp_path):
    from kailab.paths import exercises_dir

    out = run_exercise(Path(exercises_dir()) / "stacks" / "coexistence.yaml", volcano_small, tmp_path)
    assert out.verdict == "error" and "coexistence.yaml: stacks: the exercise runs on kueue+kai" in out.error
