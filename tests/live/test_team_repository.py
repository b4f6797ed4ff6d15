"""A team keeps its exercises in its own repository: `pytest exercises/ --kailab-lab X` run there
writes the evidence into that repository's evidence/ (not kailab's checkout), and pytest's summary
says where and why."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kailab.paths import PROJECT_ROOT, exercises_dir

pytestmark = [pytest.mark.kai, pytest.mark.lab]
EXERCISE = "what-kai-writes"  # short, of the small fleet


def test_pytest_in_a_teams_repository_keeps_its_evidence_there(kailab_labs, tmp_path):
    lab = kailab_labs.get("small")
    team = tmp_path / "team-repo"
    (team / "exercises").mkdir(parents=True)  # found by walking a folder named exercises/, as kailab's own
    (team / "exercises" / f"{EXERCISE}.yaml").write_text((exercises_dir() / f"{EXERCISE}.yaml").read_text())
    before = set((PROJECT_ROOT / "evidence").glob(f"*-{EXERCISE}"))
    env = {k: v for k, v in os.environ.items() if k != "KAILAB_EVIDENCE"}
    run = subprocess.run([sys.executable, "-m", "pytest", "exercises/", "--kailab-lab", lab.name,
                          "-p", "no:cacheprovider"], cwd=team, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    [verdict] = (team / "evidence").glob(f"*-{EXERCISE}/verdict.json")
    assert json.loads(verdict.read_text())["verdict"] == "passed"
    assert f"evidence: {team / 'evidence'} (evidence/ in the current folder)" in run.stdout, run.stdout[-3000:]
    assert f"report: {team / 'evidence'}" in run.stdout
    assert set((PROJECT_ROOT / "evidence").glob(f"*-{EXERCISE}")) == before  # nothing in kailab's checkout
