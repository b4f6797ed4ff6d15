"""Version trials: refused up front for bad versions; the matrix comes from the runs' verdicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kailab.errors import KailabError
from kailab.trial import build_matrix, matrix_markdown, parse_versions, run_trial


def test_versions_are_normalised_and_checked():
    assert parse_versions("0.16.8, v0.17.0") == ["v0.16.8", "v0.17.0"]
    for bad, words in [("v0.17.0,v0.99.0", "unknown KAI version v0.99.0"),
                       ("v0.17.0,v0.14.0", "predates kailab's support"),
                       ("v0.17.0,0.17.0", "twice"), ("v0.17.0", "at least two")]:
        with pytest.raises(KailabError, match=words):
            parse_versions(bad)


@pytest.mark.parametrize("versions", ["v0.17.0,v0.99.0", "v0.12.0,v0.17.0"])
def test_a_bad_version_fails_before_any_lab_starts(versions, tmp_path):
    state = tmp_path / "state"
    out = subprocess.run([sys.executable, "-m", "kailab.cli", "trial", "--versions", versions],
                         capture_output=True, text=True, env={**os.environ, "KAILAB_STATE": str(state)})
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1].startswith("kailab: error: ")
    assert not (state / "labs").exists() or not any((state / "labs").iterdir())


def _verdict(root: Path, version: str, exercise: str, verdict: str, figures: dict) -> None:
    d = root / version / f"20260101T000000Z-{exercise}"
    d.mkdir(parents=True)
    (d / "verdict.json").write_text(json.dumps({"exercise": exercise, "verdict": verdict, "figures": figures,
                                                "error": "", "expectations": []}))


def test_matrix_cells_are_read_from_verdict_files(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps({"versions": ["v0.16.8", "v0.17.0"], "fleet": "small",
                                                    "exercises": ["exercises/reclaim.yaml", "exercises/gang.yaml"]}))
    _verdict(tmp_path, "v0.16.8", "reclaim", "passed", {"evictions": 16})
    _verdict(tmp_path, "v0.17.0", "reclaim", "passed", {"evictions": 16})
    _verdict(tmp_path, "v0.16.8", "gang", "failed", {"gang_bind_spread_s.gang-job": 1.2})
    (tmp_path / "v0.17.0").mkdir(exist_ok=True)
    (tmp_path / "v0.17.0" / "lab-error.txt").write_text("lab failed\n")
    m = build_matrix(tmp_path)
    assert m["exercises"]["reclaim"]["v0.17.0"]["verdict"] == "passed"
    assert m["exercises"]["reclaim"]["v0.16.8"]["figures"] == {"evictions": 16}
    assert m["exercises"]["gang"]["v0.16.8"]["verdict"] == "failed"
    assert m["exercises"]["gang"]["v0.17.0"] == {"verdict": "not run", "figures": {}, "error": "lab failed",
                                                  "evidence": ""}
    assert m["differing"] == ["gang"]
    md = matrix_markdown(m)
    assert md.splitlines()[2].startswith("| gang ≠ | **failed")  # differing rows first


@pytest.mark.lab
@pytest.mark.kai
def test_two_version_trial_matrix_matches_each_run(tmp_path):
    trial_dir = run_trial(["v0.16.8", "v0.17.0"], ["reclaim", "gang"], "small", parallel=2, root=tmp_path)
    matrix = json.loads((trial_dir / "matrix.json").read_text())
    for exercise, row in matrix["exercises"].items():
        for version, cell in row.items():
            verdict = json.loads((trial_dir / cell["evidence"] / "verdict.json").read_text())
            assert (cell["verdict"], cell["figures"]) == (verdict["verdict"], verdict["figures"])
            assert verdict["kai_version"] == version
