"""Version trials: refused up front for bad versions; the matrix comes from the runs' verdicts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kailab.errors import KailabError
from kailab.trial import build_matrix, matrix_markdown, parse_versions, promises_broken

from helpers import kailab_cli


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
    out = kailab_cli("trial", "--kai-versions", versions, env={"KAILAB_STATE": str(state)})
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1].startswith("kailab: error: ")
    assert not (state / "labs").exists() or not any((state / "labs").iterdir())


def _verdict(root: Path, version: str, exercise: str, verdict: str, figures: dict, run: int = 1) -> None:
    d = root / version / f"run-{run}" / f"20260101T000000Z-{exercise}"
    d.mkdir(parents=True)
    (d / "verdict.json").write_text(json.dumps({"exercise": exercise, "verdict": verdict, "figures": figures,
                                                "error": "", "expectations": []}))


def _plan(tmp_path, repeat: int, exercises=("reclaim", "gang")) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"versions": ["v0.16.8", "v0.17.0"], "fleet": "small",
                                                    "repeat": repeat,
                                                    "exercises": [f"exercises/{e}.yaml" for e in exercises]}))


def test_matrix_cells_are_read_from_verdict_files(tmp_path):
    _plan(tmp_path, 1)
    _verdict(tmp_path, "v0.16.8", "reclaim", "passed", {"evictions": 16})
    _verdict(tmp_path, "v0.17.0", "reclaim", "passed", {"evictions": 16})
    _verdict(tmp_path, "v0.16.8", "gang", "failed", {"gang_bind_spread_s.gang-job": 1.2})
    (tmp_path / "v0.17.0" / "lab-error.txt").write_text("lab failed\n")
    m = build_matrix(tmp_path)
    assert m["exercises"]["reclaim"]["v0.17.0"]["verdict"] == "passed"
    assert m["exercises"]["reclaim"]["v0.16.8"]["figures"] == {"evictions": 16}
    assert m["exercises"]["gang"]["v0.16.8"]["verdict"] == "failed"
    assert m["exercises"]["gang"]["v0.17.0"]["verdict"] == "not run"
    assert m["exercises"]["gang"]["v0.17.0"]["error"] == "lab failed"
    assert m["differing"] == []  # one run each proves no difference


def test_the_matrix_says_why_each_run_that_did_not_pass_failed(tmp_path):
    """A cell's "failed 0/1" alone made a CI failure unreadable: each failed run's first failed
    expectation (or its error) is a line under the table, with its evidence folder."""
    _plan(tmp_path, 1, ("gang",))
    _verdict(tmp_path, "v0.16.8", "gang", "passed", {})
    _verdict(tmp_path, "v0.17.0", "gang", "failed", {})
    run = tmp_path / "v0.17.0" / "run-1" / "20260101T000000Z-gang" / "verdict.json"
    v = json.loads(run.read_text())
    v["expectations"] = [{"step": "inference fills 24 GPUs", "what": "web", "expected": "bound=24",
                          "observed": "bound=6", "passed": False}]
    run.write_text(json.dumps(v))
    md = matrix_markdown(build_matrix(tmp_path))
    assert ("- gang on v0.17.0: failed: inference fills 24 GPUs: web: expected bound=24, observed bound=6 "
            "(v0.17.0/run-1/20260101T000000Z-gang)") in md, md
    assert "gang on v0.16.8" not in md


def test_a_flake_is_not_a_version_difference_but_a_repeated_one_is(tmp_path):
    """The trial that put quota first: passed on one version, failed once on the other - a flake."""
    _plan(tmp_path, 3, ("quota", "gang", "reclaim"))
    for run in (1, 2, 3):
        _verdict(tmp_path, "v0.16.8", "quota", "passed", {"binds": 44}, run)
        _verdict(tmp_path, "v0.17.0", "quota", "failed" if run == 2 else "passed", {"binds": 44}, run)
        # bind spreads that vary run to run, with overlapping ranges: not a difference
        _verdict(tmp_path, "v0.16.8", "gang", "passed", {"gang_bind_spread_s.g": [0.40, 0.46, 0.43][run - 1]}, run)
        _verdict(tmp_path, "v0.17.0", "gang", "passed", {"gang_bind_spread_s.g": [0.45, 0.41, 0.50][run - 1]}, run)
        # a real difference: every run fails on one version
        _verdict(tmp_path, "v0.16.8", "reclaim", "passed", {"evictions": 16}, run)
        _verdict(tmp_path, "v0.17.0", "reclaim", "failed", {"evictions": 12}, run)
    m = build_matrix(tmp_path)
    assert m["exercises"]["quota"]["v0.17.0"]["verdict"] == "mixed (2/3 passed)"
    assert m["flaky"] == ["quota"]
    assert m["differing"] == ["reclaim"]
    assert m["why_differing"]["reclaim"] == ["verdict: v0.16.8 passed, v0.17.0 failed",
                                             "evictions: v0.16.8 16..16 vs v0.17.0 12..12"]
    assert m["exercises"]["gang"]["v0.16.8"]["figures"] == {"gang_bind_spread_s.g": "0.4-0.46"}
    md = matrix_markdown(m)
    assert md.splitlines()[4].startswith("| reclaim ≠ | **passed 3/3")  # differing rows first
    assert "reclaim differs: verdict: v0.16.8 passed, v0.17.0 failed" in md


def test_a_vcluster_verdict_is_set_against_the_versions_own_on_a_binary_lab(tmp_path):
    """A vCluster trial's binary/ runs: a verdict the vCluster changed is named, and fails the trial."""
    _plan(tmp_path, 2)
    for run in (1, 2):
        for root in (tmp_path, tmp_path / "binary"):
            _verdict(root, "v0.16.8", "reclaim", "passed", {}, run)
            _verdict(root, "v0.17.0", "reclaim", "passed", {}, run)
            _verdict(root, "v0.17.0", "gang", "passed", {}, run)
        _verdict(tmp_path, "v0.16.8", "gang", "failed", {}, run)  # in its vCluster only
        _verdict(tmp_path / "binary", "v0.16.8", "gang", "passed", {}, run)
    m = build_matrix(tmp_path)
    assert m["against_binary"]["reclaim"]["v0.16.8"]["same"] and m["against_binary"]["gang"]["v0.17.0"]["same"]
    assert m["against_binary"]["gang"]["v0.16.8"] == {"vcluster": "failed", "binary": "passed", "vcluster_passed": "0/2",
                                                      "binary_passed": "2/2", "same": False}
    assert promises_broken(m) == ["gang on v0.16.8: failed (0/2) in its vCluster, passed (2/2) on a binary lab"]
    md = matrix_markdown({**m, "promises": {}})
    assert "| gang | failed 0/2 | passed 2/2 | **no** | passed 2/2 | passed 2/2 | yes |" in md


def test_the_vcluster_bench_page_sets_each_verdict_beside_the_binary_and_kind_ones():
    """`kailab bench vcluster`'s page: the trial's own against-binary table, beside a plain kind lab's."""
    from kailab.bench.vcluster import _cell, vcluster_markdown

    table = {"quota": {"v0.16.8": {"vcluster": "passed", "binary": "passed", "vcluster_passed": "2/2",
                                   "binary_passed": "2/2", "same": True},
                       "v0.17.0": {"vcluster": "failed", "binary": "passed", "vcluster_passed": "0/2",
                                   "binary_passed": "2/2", "same": False}}}
    assert _cell(table, "quota", "v0.17.0", "vcluster") == "failed 0/2"
    assert _cell(table, "gang", "v0.17.0", "binary") == "not run"
    vs = ["v0.16.8", "v0.17.0"]
    r = {"versions": vs, "exercises": ["quota"], "repeat": 2, "machine": {"cores": 2, "memory_gib": 24},
         "host_up_s": 70.0, "setup_s": {"v0.16.8": 110.0, "v0.17.0": 137.0}, "exercises_s": 900.0,
         "rollback_s": {"v0.16.8": 32.9, "v0.17.0": 15.1}, "rollback_objects": {}, "promises": {},
         "vcluster_trial": {"wall_s": 2000.0},
         "in_vcluster_wall_s": {v: {"quota": 150.0} for v in vs},
         "plain_kind": {v: {"up_s": 100.0, "exercise_wall_s": {"quota": 90.0}, "verdicts": {"quota": "passed"}} for v in vs},
         "verdicts": {"quota": {v: {"vcluster": _cell(table, "quota", v, "vcluster"), "binary": _cell(table, "quota", v, "binary"),
                                    "kind": "passed"} for v in vs}},
         "verdicts_equal": False}
    md = vcluster_markdown(r)
    assert "| quota | passed 2/2 | passed 2/2 | passed | failed 0/2 | passed 2/2 | passed |" in md
    assert "| quota | 150.0 | 90.0 | 150.0 | 90.0 |" in md
    assert "vCluster verdicts equal the binary trial's: **False**" in md


def test_bench_vcluster_refuses_a_folder_that_is_not_a_finished_vcluster_trial(tmp_path):
    def bench(folder: Path) -> subprocess.CompletedProcess:
        return kailab_cli("bench", "vcluster", "v0.16.8,v0.17.0", "--trial", str(folder),
                          env={"KAILAB_EVIDENCE": str(tmp_path / "evidence")})

    out = bench(tmp_path)
    assert out.returncode != 0 and "no plan.json and matrix.json there" in out.stderr, out.stderr
    (tmp_path / "plan.json").write_text(json.dumps({"versions": ["v0.16.8", "v0.17.0"], "exercises": [], "runtime": "binary"}))
    (tmp_path / "matrix.json").write_text("{}")
    out = bench(tmp_path)
    assert out.returncode != 0 and "plan.json: runtime is 'binary', not a vCluster trial" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "evidence").exists()  # nothing half-made
