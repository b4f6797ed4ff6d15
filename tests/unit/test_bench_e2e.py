"""`kailab bench e2e`: KAI's specs counted as KAI writes them, and the record made from the runs' summaries
(the runs themselves are KAI's e2e on labs: `kailab bench e2e`, recorded under bench/results/)."""

from __future__ import annotations

import pytest

from kailab.bench.e2e import count_specs, render
from kailab.errors import KailabError


def test_specs_are_its_and_entries_in_the_suites(tmp_path):
    suites = tmp_path / "test" / "e2e" / "suites" / "quota"
    suites.mkdir(parents=True)
    (suites / "quota_test.go").write_text(
        'var _ = Describe("q", func() {\n\tIt("one", func() {})\n\tDescribeTable("t",\n'
        '\t\tEntry("a", 1),\n\t\tEntry("b", 2),\n\t)\n\t// It("commented out") is no spec\n})\n')
    (suites / "helpers.go").write_text("func It2() {}\n")
    assert count_specs(tmp_path) == 3
    with pytest.raises(KailabError, match="no KAI e2e suites"):
        count_specs(tmp_path / "nowhere")


def _run(args, tests, passed, failed, skipped):
    suite = {"tests": tests, "passed": passed, "failed": failed, "skipped": skipped, "seconds": 12.0, "specs": []}
    return {"args": args, "exit": 1 if failed else 0, "wall_s": 100.0, "evidence": "$KAILAB_EVIDENCE/e2e-x",
            "cpu_seconds": 150.0, "busy_cores_mean": 1.5, "load_avg_max": 4.0,
            "summary": {"lanes": [{"label": "v0.17.0-binary", "suites": {"quota": suite}, "error": ""}],
                        "totals": {k: suite[k] for k in ("tests", "passed", "failed", "skipped")}}}


def test_the_record_says_the_coverage_and_each_runs_suites():
    results = {"kai_version": "v0.17.0", "kai_specs": 210, "specs_run": 12, "specs_passed": 11, "wall_s": 200.0,
               "cpu_seconds": 300.0, "machine": {"cores": 2, "memory_gib": 24},
               "runs": {"all": _run(["--all"], 12, 9, 1, 2), "dra": _run(["--dra"], 4, 2, 0, 2)}}
    text = render(results)
    assert "**12 of KAI v0.17.0's 210 e2e specs ran on kailab, 11 passed**" in text
    assert "## `kailab e2e --all`" in text and "## `kailab e2e --dra`" in text
    assert "10 ran, 9 passed, 1 failed, 2 skipped; exit 1" in text
    assert "| v0.17.0-binary | quota | 10 | 9 | 1 | 2 | 12 |" in text
