"""A two-version trial on binary labs ran the versions it claims."""

from __future__ import annotations

import json

import pytest

from kailab.trial import run_trial


@pytest.mark.lab
@pytest.mark.kai
@pytest.mark.xdist_group("own_labs")  # labs of its own: one such test at a time beside the rest
def test_two_version_trial_ran_the_versions_it_claims(tmp_path):
    """Not circular: each version's cells are checked against what its lab really ran - the
    binaries' manifest and the scheduler's own version output - not only the verdict files."""
    from kailab import kai_source, toolchain

    versions_ = ["v0.16.8", "v0.17.0"]
    # fractional: its runs take seconds (gang's 45 s each x 4 were 180 s of CI); which exercise does not matter here
    trial_dir = run_trial(versions_, ["fractional"], "small", parallel=1, root=tmp_path, repeat=2)
    matrix = json.loads((trial_dir / "matrix.json").read_text())
    for version in versions_:
        ran = matrix["kai"][version]
        assert ran["scheduler_version"] == version, ran
        manifest = toolchain.manifest("kai", version)
        assert ran["binaries"] == manifest["binaries"]
        if manifest["source"]["kind"] == "repository":
            assert ran["scheduler_commit"] == kai_source.commit_of(version) == manifest["source"]["commit"]
    assert matrix["kai"]["v0.16.8"]["binaries"] != matrix["kai"]["v0.17.0"]["binaries"]
    for exercise, row in matrix["exercises"].items():
        for version, cell in row.items():
            assert cell["runs"] == 2, (exercise, version, cell)
            for ev in cell["evidence_all"]:
                run = json.loads((trial_dir / ev / "run.json").read_text())
                assert run["kai_version"] == version
    assert (trial_dir / "report.html").is_file()
