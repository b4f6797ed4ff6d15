"""`kailab trial --on`: a unit per KAI version, each pod a part of the trial (its version alone, on
that version's lab image); the versions' folders brought together into one trial whose matrix is read
from every run's verdict, a unit that brought nothing back its version's lab error. The Jobs run on a
kind lab in tests/live/test_fanout_live.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kailab.errors import InputError
from kailab.exercise.load import resolve_exercise
from kailab.fanout.unit import UnitResult
from kailab.trial import all_passed, merge_fanned_out as merge_units, trial_units

from helpers import kailab_cli

VERSIONS = ["v0.16.8", "v0.17.0"]


def test_a_trial_is_one_unit_per_version_each_a_part_of_the_trial_with_its_version_alone():
    units = trial_units(VERSIONS, ["borrow", "gang"], "small", 2)
    assert [(u.part, u.kai_version, u.kind.name) for u in units] == [(("v0.16.8",), "v0.16.8", "trial"),
                                                                     (("v0.17.0",), "v0.17.0", "trial")]
    for u in units:
        argv = shlex.split(u.command)
        assert argv[3:5] == ["trial", "--part"]
        opts = dict(zip(argv[5::2], argv[6::2]))
        assert opts == {"--kai-versions": u.kai_version, "--exercises": "/unit/borrow.yaml,/unit/gang.yaml",
                        "--fleet": "small", "--repeat": "2", "--runtime": "binary"}
        files = dict(u.files)
        assert files["borrow.yaml"] == resolve_exercise("borrow").read_text() and "fleets/small.yaml" in files
        assert dict(u.env)["KAILAB_FLEETS"] == "/unit/fleets"


def test_a_trial_part_of_one_version_is_for_the_pods_only():
    """Without --part a trial still needs two versions; a bad --on combination is one line."""
    one = kailab_cli("trial", "--kai-versions", "v0.17.0")
    assert one.returncode != 0 and "at least two KAI versions" in one.stderr + one.stdout
    both = kailab_cli("trial", "--kai-versions", "v0.16.8,v0.17.0", "--runtime", "kind", "--on", __file__)
    assert both.returncode != 0 and "leave out --runtime" in both.stderr + both.stdout


def test_an_exercise_sized_for_another_fleet_is_refused_before_any_unit():
    with pytest.raises(Exception) as e:
        trial_units(VERSIONS, ["borrow"], "medium", 1)
    assert "sized for fleet small" in str(e.value)


def _part(root: Path, version: str, verdicts: dict[str, str]) -> Path:
    """What a unit's pod brings back: a trial of its one version, each exercise's run verdict."""
    d = root / f"trial-{version}"
    for ex, verdict in verdicts.items():
        run = d / version / "run-1" / f"20261128T000000Z-{ex}"
        run.mkdir(parents=True)
        (run / "verdict.json").write_text(json.dumps({"exercise": ex, "verdict": verdict, "figures": {"bound": 3}}))
    (d / "matrix.json").write_text("{}")
    return d


def test_the_versions_come_together_into_one_trial_and_a_missing_one_is_its_lab_error(tmp_path):
    units = trial_units(VERSIONS, ["borrow", "gang"], "small", 1)
    results = [UnitResult(u.name, u.title, state="collected", verdict="passed",
                          evidence=str(_part(tmp_path / "units", u.kai_version, {"borrow": "passed", "gang": "passed"})))
               for u in units]
    out = merge_units(VERSIONS, ["borrow", "gang"], "small", 1, units, results, tmp_path / "record", tmp_path / "evidence")
    m = json.loads((out / "matrix.json").read_text())
    assert all_passed(m) and m["versions"] == VERSIONS and set(m["exercises"]) == {"borrow", "gang"}
    assert m["exercises"]["gang"]["v0.16.8"]["evidence"] == "v0.16.8/run-1/20261128T000000Z-gang"
    assert json.loads((out / "plan.json").read_text())["fanout"] == str(tmp_path / "record")
    assert (out / "matrix.md").is_file() and (out / "report.html").is_file()

    results[1] = UnitResult(units[1].name, units[1].title, state="failed", error="pod x ended before its unit was done")
    out = merge_units(VERSIONS, ["borrow", "gang"], "small", 1, units, results, tmp_path / "record", tmp_path / "evidence2")
    m = json.loads((out / "matrix.json").read_text())
    assert not all_passed(m)
    cell = m["exercises"]["borrow"]["v0.17.0"]
    assert cell["verdict"] == "not run" and cell["error"] == f"pod x ended before its unit was done (fan-out unit {units[1].name})"


def test_an_exercise_whose_fleet_is_a_path_is_refused_in_one_line(tmp_path):
    fleet = f"{tmp_path}/small.yaml"
    Path(fleet).write_text((resolve_exercise("borrow").parent.parent / "fleets" / "small.yaml").read_text())
    path = tmp_path / "borrow.yaml"
    path.write_text(resolve_exercise("borrow").read_text().replace("fleet: small", f"fleet: {fleet}"))
    with pytest.raises(InputError) as e:
        trial_units(VERSIONS, [str(path)], fleet, 1)
    assert str(e.value).startswith(f"{path}: fleet: ") and "name a fleet of fleets/" in str(e.value)
    assert "\n" not in str(e.value)
