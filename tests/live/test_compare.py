"""`kailab compare` on real labs: one binary lab per stack side by side, the same exercise on each,
and a matrix, markdown and report read back from the runs' verdicts (issue #41)."""

from __future__ import annotations

import json

import pytest
import yaml

from kailab.paths import lab_dir

from helpers import kailab_cli

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("own_labs")]  # labs of its own, one such test at a time


def test_compare_runs_an_exercise_on_kai_and_kueue_and_writes_the_matrix(tmp_path):
    out = kailab_cli("compare", "--stacks", "kai,kueue", "--exercises", "gang", "--repeat", "1", "--labs", "2",
                     env={"KAILAB_EVIDENCE": str(tmp_path)}, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (cdir,) = [p for p in tmp_path.iterdir() if p.name.startswith("compare-")]
    matrix = json.loads((cdir / "matrix.json").read_text())
    assert matrix["axis"] == "scheduler stack" and matrix["versions"] == ["kai", "kueue"]
    for stack in ("kai", "kueue"):
        cell = matrix["exercises"]["gang"][stack]
        assert (cell["verdict"], cell["runs"], cell["passed"]) == ("passed", 1, 1), cell  # repeats: test_trial.py
        assert all((cdir / e / "verdict.json").is_file() for e in cell["evidence_all"])
        assert json.loads((cdir / cell["evidence"] / "verdict.json").read_text())["stack"] == stack
    # what the file expects of one stack only, with its why, is part of the comparison
    per_stack = matrix["per_stack"]["gang"]
    assert any("kai" in it["stacks"] and it["expects"].get("workload") == "loose-job" for it in per_stack)
    assert any("kueue" in it["stacks"] and "admits a Job whole" in it["why"] for it in per_stack)
    md = (cdir / "matrix.md").read_text()
    assert "| gang" in md and "gang: written per stack" in md
    assert "exercise &times; scheduler stack" in (cdir / "report.html").read_text()
    assert "gang" in out.stdout and str(cdir) in out.stdout
    assert not list(lab_dir("x").parent.glob(f"compare-{cdir.name.split('-', 1)[1]}-*"))  # every lab went down


def test_compare_refuses_an_unknown_or_single_stack_in_one_line(tmp_path):
    for arg, words in (("kai,volcanoo", "'volcanoo' is not a scheduler stack"), ("kai", "at least two stacks"),
                       ("kai,none", "'none' is not a scheduler stack"),
                       ("volcano,volcano:fair", "'fair' is no configuration kailab ships"),
                       ("kai,kueue:spread", "the Kueue stack has no scheduler configuration to change"),
                       ("kai,volcano:spread:binpack", "at most one placement")):
        out = kailab_cli("compare", "--stacks", arg, env={"KAILAB_EVIDENCE": str(tmp_path)}, timeout=None)
        assert out.returncode != 0 and words in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not any(tmp_path.iterdir())


def test_compare_takes_volcanos_configuration_as_a_design_input(tmp_path):
    """Two columns of one stack: Volcano as its lab starts (capacity, binpack) and Volcano with its
    proportion plugin and no binpack; each lab runs the exercise under its own configuration, which
    its stack.json, every run's evidence and the matrix record."""
    out = kailab_cli("compare", "--stacks", "volcano,volcano:proportion:spread", "--exercises", "borrow", "--repeat", "1",
                     "--labs", "1", env={"KAILAB_EVIDENCE": str(tmp_path)}, timeout=1800)
    (cdir,) = [p for p in tmp_path.iterdir() if p.name.startswith("compare-")]
    matrix = json.loads((cdir / "matrix.json").read_text())
    assert matrix["versions"] == ["volcano", "volcano:proportion:spread"]
    plugins = {}
    for column in matrix["versions"]:
        cell = matrix["exercises"]["borrow"][column]
        assert cell["runs"] == 1 and cell["verdict"] in ("passed", "failed"), cell  # ran, under its configuration
        ran = yaml.safe_load((cdir / cell["evidence"] / "scheduler-conf" / "00-lab.yaml").read_text())
        plugins[column] = {p["name"] for t in ran["tiers"] for p in t["plugins"]}
    assert {"capacity", "binpack"} <= plugins["volcano"] and "proportion" not in plugins["volcano"]
    assert "proportion" in plugins["volcano:proportion:spread"]
    assert not {"capacity", "binpack"} & plugins["volcano:proportion:spread"]
    assert set(matrix["configurations"]) == {"volcano:proportion:spread"}
    assert "volcano:proportion:spread ran its scheduler with actions" in (cdir / "matrix.md").read_text()
    assert out.returncode in (0, 1), out.stderr[-3000:]  # 1: a column's verdict was not `passed` (a result)
