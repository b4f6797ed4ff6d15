"""The run summary where no terminal is attached (a CI log, `| tee`): nothing cut."""

from __future__ import annotations

import io
import subprocess
import sys

from rich.console import Console

from kailab.exercise.runner import Outcome
from kailab.exercise.summary import print_summary

LONG = "/work/somewhere/rather/deep/evidence/20261123T082344.504Z-fractional-with-a-long-name"


def _outcomes():
    return [Outcome("fractional", "passed", evidence=LONG,
                    figures={"binds": 34, "evictions": 0, "expected_after_s.01": 2.183, "expected_after_s.02": 1.678})]


def test_without_a_terminal_every_path_and_figure_is_whole():
    buf = io.StringIO()
    print_summary(Console(file=buf, width=80), _outcomes())
    text = buf.getvalue()
    # figures in words and units, as the report names them; never the verdict's machine keys
    assert LONG in text and "step 2: held after 1.7 s" in text and "…" not in text
    assert "expected_after_s" not in text
    assert text.splitlines()[0] == "exercises: 1 passed" and text.splitlines()[1].startswith("fractional: passed")


def test_on_a_terminal_the_table_stays():
    buf = io.StringIO()
    print_summary(Console(file=buf, width=200, force_terminal=True), _outcomes())
    assert "┏" in buf.getvalue() and "exercise" in buf.getvalue()


def test_a_piped_console_prints_whole_lines():
    """The CLI's console writing into a pipe (as `kailab run ... | tee` does) takes the plain form."""
    from pathlib import Path

    code = ("from rich.console import Console; from kailab.exercise.summary import print_summary; "
            "from tests.unit.test_summary import _outcomes; print_summary(Console(soft_wrap=True), _outcomes())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2], env={"PATH": "/usr/bin:/bin", "TERM": "xterm"})
    assert LONG in out.stdout and "┏" not in out.stdout, out.stderr


def test_a_bench_mode_writes_its_json_and_markdown(tmp_path):
    """Every `kailab bench` mode records through one writer: bench/results/<date><suffix>.json/.md."""
    import json as _json

    from kailab.bench import _record, compare_markdown

    labs = {"a": {"runtime": "binary", "verdict": "passed", "seconds": 40.0, "failed": []},
            "b": {"runtime": "kind", "verdict": "passed", "seconds": 41.0, "failed": []}}
    results = {"date": "2026-11-23T00:00:00+00:00", "fleet": "small", "kai_version": "v0.17.0",
               "labs": {"a": "binary", "b": "kind"}, "agree": 1, "total": 1,
               "rows": [{"exercise": "quota", "agree": True, "labs": labs}]}
    out = _record(results, "-runtimes", compare_markdown(results), tmp_path)
    written = _json.loads(open(out["written"]).read())
    assert written["agree"] == 1 and out["written"].endswith("-runtimes.json")
    md = open(out["written"].replace(".json", ".md")).read()
    assert "| quota | passed (40) | passed (41) | yes |" in md and "**1 / 1**" in md
    # a second run of the mode the same day is written beside the first, never over it
    first = open(out["written"]).read()
    again = _record({**results, "agree": 0}, "-runtimes", compare_markdown(results), tmp_path)
    assert again["written"].endswith("-runtimes-2.json") and open(out["written"]).read() == first
    assert len(list(tmp_path.glob("*-runtimes*.md"))) == 2


def test_start_retries_are_counted_once_per_lab():
    retry = {"component": "kube-state-metrics", "reason": "exited with status 1 with an empty log (attempt 1 of 3)"}
    outcomes = [Outcome("gang", "passed", lab="a", start_retries=[retry]),
                Outcome("quota", "passed", lab="a", start_retries=[retry]),
                Outcome("borrow", "passed", lab="b")]
    buf = io.StringIO()
    print_summary(Console(file=buf, width=200), outcomes)
    text = buf.getvalue()
    assert "lab start retries: 1" in text and "a: kube-state-metrics: exited with status 1" in text
    buf = io.StringIO()
    print_summary(Console(file=buf, width=200), [Outcome("borrow", "passed", lab="b")])
    assert "retries" not in buf.getvalue()


def test_a_watched_runs_last_picture_ends_its_line_in_a_file():
    """`kailab run --watch > log`: the summary's heading starts a line of its own, never glued to the
    picture's last line ("none yetexercises")."""
    from kailab.top.screen import watching

    buf = io.StringIO()
    console = Console(file=buf, width=100)
    snap = {"cluster": {"utilisation": 0}}
    import kailab.top.screen as screen
    real = screen.render
    screen.render = lambda *a, **k: "last evictions: none yet"
    try:
        with watching(lambda: snap, "lab", console, interval=0.1):
            pass
    finally:
        screen.render = real
    print_summary(console, _outcomes())
    lines = buf.getvalue().splitlines()
    assert "exercises: 1 passed" in lines and not any(line.endswith("none yetexercises: 1 passed") for line in lines), lines


def test_expectations_for_other_schedulers_are_named_with_the_schedulers():
    o = Outcome("quota", "passed", not_checked=[
        "step 'a' expect: {} (for kueue, volcano only; this lab runs kai)", "step 'b' expect: {} (for volcano only; this lab runs kai)"])
    assert o.report().splitlines()[-1] == ("  not checked on kai: 2 expectation(s) the file keeps for kueue, volcano "
                                           "(verdict.json: not_checked)")


def test_the_clis_consoles_are_200_columns_wide_into_a_pipe_unless_columns_says():
    from pathlib import Path

    code = "from kailab.cli.base import console, out; print(out.width, console.width)"
    root = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "TERM": "xterm"}
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env)
    assert piped.stdout.split() == ["200", "200"], piped.stderr
    told = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env={**env, "COLUMNS": "90"})
    assert told.stdout.split() == ["90", "90"], told.stderr
