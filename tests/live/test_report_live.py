"""The report in a real browser (headless Chromium: a screenshot kept with the evidence, no console
error, the charts drawn), and the report of a real run that ended in error."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest

from kailab.report import write_report

from helpers import assert_self_contained_page
from report_sample import make_evidence

CHROMIUM = Path("/usr/bin/chromium")


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


def _chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={tmp}", "--host-resolver-rules=MAP * ~NOTFOUND"]
    return subprocess.run([str(CHROMIUM), *flags, *args], capture_output=True, text=True, timeout=180)


@pytest.mark.browser
def test_report_renders_in_a_real_browser(tmp_path):
    if not CHROMIUM.exists():
        pytest.fail("this test needs a real browser: /usr/bin/chromium is missing; install it with "
                    "`apt-get install -y chromium` (CI installs it)", pytrace=False)
    d = make_evidence(tmp_path / "evidence")
    report = write_report([d])
    shot = d / "report.png"  # kept with the evidence
    shown = _chromium(f"--screenshot={shot}", "--window-size=1280,2000", f"file://{report}",
                      tmp=tmp_path / "profile-shot")
    assert shot.exists(), f"no screenshot; chromium said:\n{shown.stderr[-3000:]}"
    assert shot.stat().st_size > 10_000, f"screenshot is {shot.stat().st_size} bytes: blank page?"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    dom = _chromium("--enable-logging=stderr", "--v=0", "--dump-dom", f"file://{report}",
                    tmp=tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-3000:]
    console = [ln for ln in dom.stderr.splitlines()
               if "CONSOLE" in ln or "Uncaught" in ln or "Failed to load resource" in ln]
    assert not console, "browser console reported:\n" + "\n".join(console)
    assert '<svg class="chart timeline"' in dom.stdout
    assert len(re.findall(r'<polyline class="series"', dom.stdout)) == 2
    assert len(re.findall(r'<rect class="node-bar"', dom.stdout)) == 6
    assert 'data-verdict="passed"' in dom.stdout
    # as the browser shows it: the summary's figures have labels and units, no machine key is shown
    summary = dom.stdout[dom.stdout.index('<section class="summary">'):]
    shown = re.sub(r'title="[^"]*"', "", summary[:summary.index("</section>")])
    assert "gang bind spread" in shown and "research-train 0.012 s" in shown
    assert not re.search(r"[a-z_]+_s\.|[a-z]+=[0-9]", shown), shown


