"""The report of a real run that ended in error."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from kailab.report import write_report

from helpers import assert_self_contained_page


@pytest.mark.lab
def test_report_from_a_real_run_that_ended_in_error(infra_lab, tmp_path):
    from kailab.exercise.runner import ExerciseRun
    from kailab.exercise.load import load_exercise
    from kailab.paths import exercises_dir

    path = exercises_dir() / "reclaim.yaml"
    outcome = ExerciseRun(load_exercise(path), path, infra_lab, tmp_path).run()
    run_dir = Path(outcome.evidence)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    # the session lab is the tiny fleet (and may lack KAI): reclaim (small fleet) stops at preflight
    assert verdict["verdict"] == "error" and verdict["error"], verdict

    out = write_report([run_dir])
    assert out == run_dir / "report.html"
    page = out.read_text()
    assert_self_contained_page(page)
    assert re.findall(r'data-verdict="([^"]*)"', page) == [verdict["verdict"]]
    assert verdict["error"] in html.unescape(page)
    run = json.loads((run_dir / "run.json").read_text())
    assert html.escape(run["lab"]) in page and "reclaim" in page
