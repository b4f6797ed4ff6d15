"""`pytest exercises/ -n N --kailab-lab NAME` (`make exercises`, `kailab run --labs N`): exercises on labs side by
side, one per pytest-xdist worker — the first worker on NAME's lab, the others on labs of their own of
the same runtime and KAI version, brought down at the end; one summary and one report for the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kailab.paths import exercises_dir, state_dir
from kailab.testing.labs import LAB_PREFIX

from helpers import KAILAB, kailab_cli

pytestmark = [pytest.mark.kai, pytest.mark.lab]
# two short exercises of the small fleet: one lands on each worker
EXERCISES = ("what-kai-writes", "node-labels")


def test_two_workers_run_on_two_labs_and_the_controller_writes_one_summary(kailab_labs, tmp_path):
    """`kailab run --labs 2 NAME PATH` (pytest -n 2 underneath, as `make exercises`): an exercise by
    name and one from a user's own directory, on the named lab and a second lab of the same kind."""
    lab = kailab_labs.get("small")
    own = tmp_path / "mine" / f"{EXERCISES[1]}.yaml"  # a user's exercise, outside exercises/
    own.parent.mkdir()
    own.write_text((exercises_dir() / f"{EXERCISES[1]}.yaml").read_text())
    evidence = tmp_path / "evidence"
    run = kailab_cli("run", "--labs", "2", "--name", lab.name, "--evidence", str(evidence), EXERCISES[0], str(own),
                     timeout=None)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    runs = [json.loads(p.read_text()) for p in evidence.glob("*/run.json")]
    assert sorted(r["exercise"] for r in runs) == sorted(EXERCISES)
    labs = {r["lab"] for r in runs}
    assert len(labs) == 2 and lab.name in labs, labs  # the named lab, and the second worker's own
    assert {r["runtime"] for r in runs} == {lab.runtime} and {r["kai_version"] for r in runs} == {lab.kai_version}
    # the summary, written by the controlling process from its workers' reports: a line per exercise
    for name in EXERCISES:
        assert f"{name}: passed" in run.stdout, run.stdout[-3000:]
    page = evidence / "report.html"
    assert page.exists() and all(name in page.read_text() for name in EXERCISES)
    # the second worker's lab is down and gone
    (other,) = labs - {lab.name}
    assert other.startswith(LAB_PREFIX) and not (state_dir() / other).exists()


def test_side_by_side_is_refused_on_a_cluster_kailab_cannot_make_a_second_of(kailab_labs):
    source = kailab_labs.get("tiny")
    name = f"adopted-side-{os.getpid()}"
    up = subprocess.run([*KAILAB, "up", "--runtime", "existing", "--kubeconfig", source.kubeconfig, "--name", name],
                        capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", str(exercises_dir() / "quota.yaml"), "-n", "2",
                              "-p", "no:cacheprovider", "--kailab-lab", name], capture_output=True, text=True)
        assert run.returncode != 0
        assert f"--kailab-lab {name} is a cluster kailab cannot make a second of (existing runtime)" in run.stderr
        assert "workers" not in run.stdout  # refused before any worker started
    finally:
        subprocess.run([*KAILAB, "down", "--name", name], capture_output=True, text=True)
