"""The `existing` runtime adopts a running cluster; exercises do not depend on the runtime."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kailab.exercise.faults import ProcessFault
from kailab.exercise.load import load_exercise
from kailab.paths import exercises_dir, lab_dir
from kailab.runtimes.base import LabRecord
from helpers import KAILAB

pytestmark = pytest.mark.lab


def test_adopting_a_cluster_without_kai_is_refused_with_what_is_missing(kailab_labs):
    bare = kailab_labs.get("tiny", stack="none")
    name = f"adopt-nokai-{os.getpid()}"
    out = subprocess.run([*KAILAB, "up", "--runtime", "existing", "--kubeconfig", bare.kubeconfig,
                          "--name", name], capture_output=True, text=True)
    assert out.returncode != 0
    line = out.stderr.strip().splitlines()[-1]
    assert "CRD queues.scheduling.run.ai is missing" in line
    assert "no KAI scheduler" in line
    assert not lab_dir(name).exists()


def _adoptable(ex) -> bool:
    return ex.fleet == "small" and not any(s.scheduler or any(isinstance(f.fault, ProcessFault) for f in s.faults)
                                           for s in ex.steps)


# Exercises do not depend on the runtime: the existing runtime only adopts the cluster, so a sample of
# what KAI does there (reclaim: quota, borrowing and KAI's evictions) proves the adoption path; every
# adoptable exercise on an adopted lab is `make exercises NAME=<adopted lab>` (docs/dev/testing.md).
ADOPTED_SAMPLE = ("reclaim",)


@pytest.mark.kai
def test_exercises_pass_through_the_existing_runtime(kailab_labs, tmp_path):
    """A binary-runtime lab with KAI, adopted as 'existing': `pytest exercises/` must pass on it."""
    source = kailab_labs.get("small")
    name = f"adopted-{os.getpid()}"
    up = subprocess.run([*KAILAB, "up", "--runtime", "existing", "--kubeconfig", source.kubeconfig,
                         "--name", name], capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    assert LabRecord.load(name).runtime == "existing"
    # the existing runtime adopts the cluster as it is: it cannot restart KAI's scheduler with another
    # configuration or kill its processes, and the small cluster has no racks
    eligible = [str(exercises_dir() / f"{n}.yaml") for n in ADOPTED_SAMPLE]
    assert all(_adoptable(load_exercise(p)) for p in eligible), eligible
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", *eligible, "-q", "--kailab-lab", name,
                              "--kailab-evidence", str(tmp_path / "evidence"), "-p", "no:cacheprovider"],
                             capture_output=True, text=True)
        assert run.returncode == 0 and f"{len(eligible)} passed" in run.stdout, run.stdout[-4000:]
    finally:
        subprocess.run([*KAILAB, "down", "--name", name], capture_output=True, text=True)
