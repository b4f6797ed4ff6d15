"""The evidence report: one self-contained HTML page per run (or trial), checked as text (in a real
browser and on the evidence of a real run: tests/live/test_report_live.py)."""

from __future__ import annotations

import html
import json
import re

import yaml

from kailab.report import render_report, write_report

from helpers import assert_self_contained_page
from report_sample import FIGURES, PREFIX, make_evidence


def _chart(page: str) -> str:
    m = re.search(r'<svg class="chart timeline".*?</svg>', page, re.S)
    assert m, "no timeline chart in the page"
    return m.group(0)


def test_report_page_from_synthetic_evidence(tmp_path):
    d = make_evidence(tmp_path)
    page = render_report([d])
    verdict = json.loads((d / "verdict.json").read_text())
    assert_self_contained_page(page)

    # every exercise, with the verdict from verdict.json
    sections = re.findall(r'<section class="run" id="run-\d+" data-exercise="([^"]*)" data-verdict="([^"]*)">', page)
    assert sections == [("reclaim-lite", verdict["verdict"])]
    assert '<span class="badge v-passed">passed</span>' in page

    # expectations: expected and observed strings verbatim (escaped only), numbers as written
    for r in verdict["expectations"]:
        assert html.escape(r["expected"]) in page, r["expected"]
        assert html.escape(r["observed"]) in page, r["observed"]
        assert html.escape(r["what"]) in page
        if r["at"] is not None:
            assert f'{json.dumps(r["at"])}s' in page
    assert "&gt;= 4 &amp; &lt;= 8" in page and "4 &lt;of 4 requested&gt;" in page
    assert "prod-train-4, prod-train-5, prod-train-6, prod-train-7" in page
    assert ">0.012 s<" in page and "gang research-train: bind spread" in page  # figures verbatim

    # the timeline chart: one series per (leaf) queue, by logical name; quota and limit lines
    chart = _chart(page)
    series = re.findall(r'<polyline class="series" data-queue="([^"]+)"', chart)
    assert sorted(series) == ["prod", "research"]
    quota = re.findall(r'<polyline class="quota" data-queue="([^"]+)"', chart)
    assert sorted(quota) == ["prod", "research"]
    assert re.findall(r'<polyline class="limit" data-queue="([^"]+)"', chart) == ["prod"]  # research: unlimited
    assert PREFIX not in "".join(series + quota)
    assert chart.count('class="tick tick-bind"') >= 2 and chart.count('class="tick tick-evict"') == 1
    assert "4 evicted: prod-train-4, prod-train-5, prod-train-6, prod-train-7" in chart
    # prod peaks at 8 GPUs, then 4; research holds 2 x 2 GPUs (from pods.yaml) = 4
    assert "prod: GPUs held (peak 8, at the end 4)" in chart
    assert "research: GPUs held (peak 4, at the end 4)" in chart

    # node occupancy: a bar per node per snapshot (2 steps + final)
    assert len(re.findall(r'<rect class="node-bar" data-node="n-[01]"', page)) == 6
    assert ">4/4<" in page

    # podgroup conditions with KAI's reason
    assert "NonPreemptibleOverQuota" in page and "pg-inference-0" in page
    # raw files linked relatively
    assert 'href="steps/02-research-comes-back/podgroups.yaml"' in page
    assert 'href="timeline.jsonl"' in page and 'href="verdict.json"' in page
    # the summary's key figures in words and units; the machine keys only on hover (title)
    summary = page[page.index('<section class="summary">'):]
    summary = summary[:summary.index("</section>")]
    shown = re.sub(r'title="[^"]*"', "", summary)
    assert "gang bind spread" in shown and "research-train 0.012 s" in shown
    assert '<span class="fig-label">binds</span> 10<' in shown and "evictions</span> 4<" in shown
    assert "gang_bind_spread_s." not in shown and "gang_bind_spread_s.research-train=0.012" in summary
    assert "1 exercise run (1 passed)." in page

    # header
    for text in ("v0.17.0", "pytest-1-tiny", "binary", "tiny"):
        assert f"<dd>{text}</dd>" in page


def test_write_report_places_the_page(tmp_path):
    one = make_evidence(tmp_path / "a")
    two = make_evidence(tmp_path / "b")
    assert write_report([one]) == one / "report.html"
    several = write_report([one, two])
    assert several == tmp_path / "report.html"
    page = several.read_text()
    assert page.count('data-exercise="reclaim-lite"') == 2
    assert 'href="a/20250101T120000.00Z-reclaim-lite/verdict.json"' in page


def test_report_copes_with_an_early_error_run(tmp_path):
    d = tmp_path / "20250101T120000.00Z-quota"
    d.mkdir()
    (d / "exercise.yaml").write_text("exercise: quota\nfleet: small\n")
    (d / "run.json").write_text(json.dumps({"exercise": "quota", "lab": "l", "runtime": "binary",
                                            "kai_version": "v0.17.0", "fleet": "small", "queues": {}}))
    error = "lab 'l' has no KAI (CRD queues.scheduling.run.ai is missing): bring up a lab with KAI (`kailab up`)"
    (d / "verdict.json").write_text(json.dumps({"exercise": "quota", "verdict": "error", "error": error,
                                                "expectations": [], "figures": {}}))
    page = render_report([d])
    assert_self_contained_page(page)
    assert 'data-verdict="error"' in page
    assert html.escape(error) in page
    assert "timeline.jsonl: missing" in page


def test_trial_matrix_comes_first_with_differing_cells(tmp_path):
    trial = tmp_path / "trial-20250101T120000Z"
    run_a = make_evidence(trial / "v0.16.8")
    run_b = make_evidence(trial / "v0.17.0")
    verdict = json.loads((run_b / "verdict.json").read_text())
    verdict["verdict"] = "failed"
    (run_b / "verdict.json").write_text(json.dumps(verdict))
    cells = {"reclaim-lite": {"v0.16.8": {"verdict": "passed", "figures": FIGURES,
                                          "evidence": str(run_a.relative_to(trial))},
                              "v0.17.0": {"verdict": "failed", "figures": FIGURES,
                                          "evidence": str(run_b.relative_to(trial))}},
             "gang": {"v0.16.8": {"verdict": "passed", "figures": {"binds": 10}, "evidence": ""},
                      "v0.17.0": {"verdict": "passed", "figures": {"binds": 10}, "evidence": ""}}}
    (trial / "matrix.json").write_text(json.dumps({"versions": ["v0.16.8", "v0.17.0"], "exercises": cells}))
    out = write_report([trial])
    assert out == trial / "report.html"
    page = out.read_text()
    assert_self_contained_page(page)
    assert page.index('<section class="matrix">') < page.index('<section class="summary">')
    matrix = page[page.index('<section class="matrix">'):page.index('<section class="summary">')]
    assert matrix.index("reclaim-lite") < matrix.index("gang")  # differing row first
    assert matrix.count('<td class="differs">') == 2
    assert sorted(re.findall(r'data-verdict="([a-z]+)"', page)) == ["failed", "passed"]


def test_cli_report_defaults_to_the_newest_run(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from kailab.cli import cli

    older = make_evidence(tmp_path / "tmp-a")
    older = older.rename(tmp_path / older.name)
    newer = make_evidence(tmp_path / "tmp-b")
    newer = newer.rename(tmp_path / "20250102T090000.12Z-reclaim-lite")
    monkeypatch.setenv("KAILAB_EVIDENCE", str(tmp_path))
    res = CliRunner().invoke(cli, ["report"])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == str(newer.resolve() / "report.html")
    assert not (older / "report.html").exists()
    res = CliRunner().invoke(cli, ["report", str(older)])
    assert res.exit_code == 0 and res.output.strip() == str(older.resolve() / "report.html")


def test_report_survives_damaged_files_and_a_large_fleet(tmp_path):
    d = make_evidence(tmp_path)
    (d / "timeline.jsonl").write_text((d / "timeline.jsonl").read_text() + "{not json\n[1, 2]\n")
    (d / "steps/01-prod-borrows-research-s-idle-share/podgroups.yaml").write_text("key: [unclosed\n")
    (d / "steps/02-research-comes-back/pods.yaml").write_text("just a string\n")
    (d / "exercise.yaml").write_text("- a list, not a mapping\n")
    nodes = {f"h100-{i}": {"allocatable": 8, "used": 8 if i % 3 else 0, "pods": []} for i in range(1000)}
    (d / "final/nodes.yaml").write_text(yaml.safe_dump(nodes))
    page = render_report([d])
    assert_self_contained_page(page)
    assert 'data-verdict="passed"' in page
    assert "timeline.jsonl: 2 unreadable lines skipped" in page
    assert "exercise: not a mapping" in page
    assert page.count('class="node-bar"') >= 1000  # a grid of cells for 1000 nodes
    assert "1000 nodes, 5328/8000 GPUs used" in page
    assert "steps/01-prod-borrows-research-s-idle-share/podgroups.yaml: unreadable" in page
    assert "steps/02-research-comes-back/pods.yaml: unexpected shape, ignored" in page
