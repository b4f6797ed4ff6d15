"""`kailab compare --on`: a unit per column (KAI's columns: its placements and configurations), each pod
a part of the comparison; the columns' folders brought together into one comparison whose matrix is read
from every run's verdict, a unit that brought nothing back its column's lab error. Another stack's column
is refused in one line (the lab image holds KAI only). The Jobs run on a kind host in
tests/live/test_fanout_live.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kailab import versions
from kailab.compare import compare_units, merge_fanned_out
from kailab.errors import KailabError
from kailab.exercise.load import resolve_exercise
from kailab.fanout.unit import UnitResult

from helpers import kailab_cli

COLUMNS = ["kai", "kai:spread"]


def test_a_comparison_is_one_unit_per_column_each_a_part_with_its_column_alone():
    units = compare_units(COLUMNS, ["borrow"], "small", 2)
    assert [(u.part, u.kind.name, u.name) for u in units] == [(("kai",), "compare", "u00-kai"),
                                                              (("kai:spread",), "compare", "u01-kai-spread")]
    for u in units:
        argv = shlex.split(u.command)
        assert argv[3:5] == ["compare", "--part"]
        opts = dict(zip(argv[5::2], argv[6::2]))
        assert opts == {"--stacks": u.part[0], "--exercises": "/unit/borrow.yaml", "--fleet": "small", "--repeat": "2",
                        "--kai-version": versions.DEFAULT_KAI}
        assert dict(u.files)["borrow.yaml"] == resolve_exercise("borrow").read_text() and "fleets/small.yaml" in dict(u.files)


@pytest.mark.parametrize("columns", [["kai", "kueue"], ["volcano", "kai:spread"]])
def test_another_stacks_column_is_refused_in_one_line(columns):
    with pytest.raises(KailabError) as e:
        compare_units(columns, ["borrow"], "small", 1)
    assert "with --on: the lab image runs KAI only" in str(e.value) and "\n" not in str(e.value)


def test_a_part_of_one_column_is_for_the_pods_only_and_parallel_has_no_meaning_with_on(tmp_path):
    one = kailab_cli("compare", "--stacks", "kai")
    assert one.returncode != 0 and "at least two stacks" in one.stderr + one.stdout
    both = kailab_cli("compare", "--stacks", "kai,kai:spread", "--labs", "2", "--on", __file__)
    assert both.returncode != 0 and "leave out --labs" in both.stderr + both.stdout


def _part(root: Path, column: str, verdict: str) -> str:
    """What a unit's pod brings back: a comparison of its one column, borrow's run verdict."""
    d = root / f"compare-{column}"
    run = d / column / "run-1" / "20261128T000000Z-borrow"
    run.mkdir(parents=True)
    (run / "verdict.json").write_text(json.dumps({"exercise": "borrow", "verdict": verdict, "figures": {"binds": 3}}))
    (d / "matrix.json").write_text("{}")
    return str(d)


def test_the_columns_come_together_into_one_comparison_and_a_missing_one_is_its_lab_error(tmp_path):
    units = compare_units(COLUMNS, ["borrow"], "small", 1)
    results = [UnitResult(u.name, u.title, state="collected", verdict="passed",
                          evidence=_part(tmp_path / "units", u.part[0], "passed")) for u in units]
    out = merge_fanned_out(COLUMNS, ["borrow"], "small", 1, "", units, results, tmp_path / "record", tmp_path / "evidence")
    m = json.loads((out / "matrix.json").read_text())
    assert m["axis"] == "scheduler stack" and m["versions"] == COLUMNS
    assert {c: cell["verdict"] for c, cell in m["exercises"]["borrow"].items()} == {"kai": "passed", "kai:spread": "passed"}
    assert json.loads((out / "plan.json").read_text())["fanout"] == str(tmp_path / "record")
    assert (out / "matrix.md").is_file() and (out / "report.html").is_file()

    results[1] = UnitResult(units[1].name, units[1].title, state="failed", error="pod z ended before its unit was done")
    out = merge_fanned_out(COLUMNS, ["borrow"], "small", 1, "", units, results, tmp_path / "record", tmp_path / "evidence2")
    cell = json.loads((out / "matrix.json").read_text())["exercises"]["borrow"]["kai:spread"]
    assert cell["verdict"] == "not run" and cell["error"] == f"pod z ended before its unit was done (fan-out unit {units[1].name})"
