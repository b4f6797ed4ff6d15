"""`kailab bench`'s experiments are its subcommands (`kailab bench soak 50`); plain `kailab bench`, `--quick`
and `--repeat N` run as before. The mode flags they replaced (`kailab bench --soak 50`) still work for one
release, hidden from --help: each calls the same kailab.bench function with the same arguments, with one
line on stderr spelling the command anew. Argument plumbing only: every kailab.bench function is replaced
by one that records how it was called."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import kailab.bench as bench_mod
from helpers import kailab_cli
from kailab.bench import figures, top, twin_scale, vcluster
from kailab.cli import every_verb

cli = every_verb()  # the whole tree: a verb's module is imported when the verb is named
from kailab.cli import bench as bench_cli
from kailab.paths import PROJECT_ROOT

SUBCOMMANDS = ["churn", "compare-labs", "e2e", "endings", "fill", "peer", "record-twins", "render-docs", "repeat-exercises",
               "replay-scale", "scale", "side-by-side", "soak", "top", "twin-scale", "vcluster"]
NO_FORMER_FLAG = ("e2e",)  # subcommands born after the mode flags went
NOTE = re.compile(r"^kailab: note: (--[\w-]+) is deprecated \(kept for one release\): use (.+)$")


@pytest.fixture
def calls(monkeypatch, tmp_path):
    """Every function a bench mode calls, recording (name, args, kwargs but echo); each returns a result
    that passes (a record page to show, nothing died, verdicts equal)."""
    record = tmp_path / "r.json"
    record.with_suffix(".md").write_text("the record's page\n")
    result = {"written": str(record), "clean_cycles": 1, "cycles": 1, "died": [], "errors": {}, "verdicts_equal": True,
              "agree": 1, "total": 1, "passed": 1}
    seen: list[tuple] = []

    def recorder(name, returns=result):
        def call(*args, **kwargs):
            seen.append((name, args, {k: v for k, v in kwargs.items() if k != "echo"}))
            return returns
        return call

    for name in ("run", "soak", "churn", "endings", "fill_bench", "exercises_side_by_side", "replay_scale",
                 "compare_labs", "scale", "peer_comparison", "record_peer", "repeatability"):
        monkeypatch.setattr(bench_mod, name, recorder(name))
    for name in ("markdown", "compare_markdown", "repeatability_markdown"):
        monkeypatch.setattr(bench_mod, name, lambda results: "the page")
    monkeypatch.setattr(top, "top_cost", recorder("top_cost"))
    monkeypatch.setattr(twin_scale, "twin_scale", recorder("twin_scale"))
    monkeypatch.setattr(twin_scale, "record_twins", recorder("record_twins"))
    monkeypatch.setattr(vcluster, "vcluster_bench", recorder("vcluster_bench"))
    monkeypatch.setattr(figures, "render_docs", recorder("render_docs", []))
    return seen


def _bench(*args: str):
    return CliRunner().invoke(cli, ["bench", *args])


@pytest.fixture
def twins(tmp_path):
    folder = tmp_path / "twins-1"
    folder.mkdir()
    return str(folder)


# (the former spelling, the new one, what kailab.bench was called with); {twins}: a folder that exists
SPELLINGS = [
    ("--top", "top", [("top_cost", ("large",), {})]),
    ("--top --scale-fleet medium", "top --fleet medium", [("top_cost", ("medium",), {})]),
    ("--record-twins {twins} --twins-label x", "record-twins {twins} --label x", [("record_twins", ("{twins}", "x"), {})]),
    ("--twin-scale 20 --twin-sample 8", "twin-scale 20 --sample 8", [("twin_scale", (20,), {"sample": 8})]),
    ("--render-docs", "render-docs", [("render_docs", (), {})]),
    ("--vcluster v0.16.8,v0.17.0 --exercises quota --repeat 3", "vcluster v0.16.8,v0.17.0 --exercises quota --repeat 3",
     [("vcluster_bench", (["v0.16.8", "v0.17.0"], ["quota"], 3), {"trial_dir": None})]),
    ("--endings 50", "endings 50", [("endings", (50, "small", 2), {})]),
    ("--endings 50 --scale-fleet tiny --repeats 4", "endings 50 --fleet tiny --repeat 4", [("endings", (50, "tiny", 4), {})]),
    ("--fill clone --fill-tasks t --fill-seeds 1,2 --fill-sample 8 --fill-step 0.02 --fill-designs spread --fill-repeat 2",
     "fill clone --tasks t --seeds 1,2 --sample 8 --step 0.02 --designs spread --repeat 2",
     [("fill_bench", ("clone", "t", [1, 2], 8, 0.02), {"repeat": 2, "designs": ["spread"]})]),
    ("--fill clone", "fill clone", [("fill_bench", ("clone", "default", [1, 2, 3], 1, 0.01),
                                     {"repeat": 1, "designs": ["binpack", "spread"]})]),
    ("--exercises-side-by-side 0,2 --repeat 3", "side-by-side 0,2 --repeat 3", [("exercises_side_by_side", ([0, 2], 3), {})]),
    ("--replay-scale", "replay-scale", [("replay_scale", (), {})]),
    ("--compare-labs a,b --exercises quota,gang", "compare-labs a,b --exercises quota,gang",
     [("compare_labs", (["a", "b"], ["quota", "gang"]), {})]),
    ("--scale jobs --scale-count 10 --scale-fleet small", "scale jobs --count 10 --fleet small",
     [("scale", (["jobs"], 10, "small"), {})]),
    ("--peer", "peer", [("peer_comparison", (), {"runs": 5}), ("record_peer", (), {})]),
    ("--peer --repeat 3", "peer --repeat 3", [("peer_comparison", (), {"runs": 3}), ("record_peer", (), {})]),
    ("--churn 6 --churn-at-once 3 --churn-load 'make exercises'", "churn 6 --at-once 3 --load 'make exercises'",
     [("churn", (6, 3), {"load": "make exercises"})]),
    ("--soak 4", "soak 4", [("soak", (4,), {})]),
    ("--repeat-exercises 2 --exercises quota --name l1", "repeat-exercises 2 --exercises quota --name l1",
     [("repeatability", (2, ["quota"], "l1"), {})]),
]


def _expected(calls_spec, twins):
    expected = []
    for name, args, kwargs in calls_spec:
        args = tuple(Path(twins) if a == "{twins}" else a for a in args)
        expected.append((name, args, kwargs))
    return expected


def _without_results(seen):
    """record_peer is called with what peer_comparison returned: compare its name only."""
    return [(n, a, k) if n != "record_peer" else (n,) for n, a, k in seen]


def test_the_subcommands_are_these_and_each_has_its_help():
    group = cli.commands["bench"]
    assert isinstance(group, click.Group) and sorted(group.commands) == SUBCOMMANDS
    for name in SUBCOMMANDS:
        run = _bench(name, "--help")
        assert run.exit_code == 0 and f"Usage: cli bench {name}" in run.output, run.output
    helptext = _bench("--help").output
    assert all(re.search(rf"^  {name} ", helptext, re.M) for name in SUBCOMMANDS), helptext
    shown = {o for p in group.params if not p.hidden for o in p.opts}
    assert shown == {"--quick", "--repeat"}, "`kailab bench --help` shows only its own flags"
    assert not any(re.search(rf"(?<![\w-]){re.escape(m.flag)}(?![\w-])", helptext) for m in bench_cli._MODES)


def test_every_former_flag_is_one_modes_or_goes_to_one():
    """Each hidden flag of the group is a former mode flag or one of its `With --X:` options."""
    group = cli.commands["bench"]
    hidden = {p.name for p in group.params if p.hidden and p.expose_value}
    taken = {m.param for m in bench_cli._MODES} | {o for m in bench_cli._MODES for o in m.options}
    assert hidden == taken - {"repeats"}
    # every subcommand but those born after the mode flags went (they never had one)
    assert sorted(m.command.name for m in bench_cli._MODES) == [c for c in SUBCOMMANDS if c not in NO_FORMER_FLAG]


@pytest.mark.parametrize(("before", "now", "spec"), SPELLINGS, ids=[s[0].split()[0] + " " + s[1] for s in SPELLINGS])
def test_a_former_mode_flag_calls_what_its_subcommand_calls_and_names_it(before, now, spec, calls, twins):
    new = _bench(*shlex.split(now.format(twins=twins)))
    assert new.exit_code == 0 and new.stderr == "", new.output
    by_new = list(calls)
    calls.clear()
    old = _bench(*shlex.split(before.format(twins=twins)))
    assert old.exit_code == 0, old.output
    assert _without_results(calls) == _without_results(by_new) == _without_results(_expected(spec, twins))
    notes = [NOTE.match(line) for line in old.stderr.splitlines()]
    assert all(notes), old.stderr
    [mode] = [n for n in notes if n.group(1) == before.split()[0]]  # (--repeats says its own)
    assert mode.group(2).startswith("kailab bench ")
    calls.clear()  # the spelling the line names, run as it is written: the same calls again
    again = _bench(*shlex.split(mode.group(2))[2:])
    assert again.exit_code == 0 and again.stderr == "", again.output
    assert _without_results(calls) == _without_results(by_new)


def test_the_line_names_the_new_spelling(calls):
    run = _bench("--fill", "clone", "--fill-seeds", "1,2", "--fill-designs", "spread")
    assert run.stderr == ("kailab: note: --fill is deprecated (kept for one release): "
                          "use kailab bench fill clone --seeds 1,2 --designs spread\n")
    assert "the record's page" in run.stdout


@pytest.mark.parametrize(("args", "quick", "repeats"), [((), False, None), (("--quick",), True, None),
                                                        (("--repeat", "4"), False, 4), (("--quick", "--repeat", "2"), True, 2)])
def test_plain_bench_runs_as_before(args, quick, repeats, calls):
    run = _bench(*args)
    assert run.exit_code == 0 and run.stderr == "", run.output
    assert calls == [("run", (), {"quick": quick, "repeats": repeats})]
    assert "the page" in run.stdout and "written: " in run.stdout


@pytest.mark.parametrize(("args", "error"), [
    (["--quick", "soak", "3"], "--quick before soak: a subcommand takes its own options after its name"),
    (["--repeat", "2", "peer"], "--repeat before peer: a subcommand takes its own options after its name"),
    (["--fill-seeds", "1", "fill", "x"], "--fill-seeds before fill: a subcommand takes its own options after its name"),
    (["--soak", "3", "soak", "3"], "--soak is the old spelling of `kailab bench soak`: give one of them"),
])
def test_the_groups_flags_before_a_subcommand_are_refused(args, error, calls):
    run = _bench(*args)
    assert run.exit_code == 2 and error in run.stderr, run.stderr
    assert calls == []


def test_the_former_lab_flag_still_names_the_lab(calls):
    """`--lab`, --name's former spelling, on the former mode flag's path too: each line, and the same call."""
    run = _bench("--repeat-exercises", "2", "--lab", "l1")
    assert run.exit_code == 0 and calls == [("repeatability", (2, None, "l1"), {})]
    assert run.stderr.splitlines() == [
        "kailab: note: --lab is deprecated (kept for one release): use --name",
        "kailab: note: --repeat-exercises is deprecated (kept for one release): use kailab bench repeat-exercises 2 --name l1"]
    both = _bench("--repeat-exercises", "2", "--lab", "l1", "--name", "l2")
    assert both.exit_code == 2 and "--lab is the old spelling of --name: give one of them" in both.stderr


@pytest.mark.parametrize(("before", "now"), [
    (["--soak", "0"], ["soak", "0"]),
    (["--scale", "jobs,nodes"], ["scale", "jobs,nodes"]),
    (["--vcluster", "v0.17.0"], ["vcluster", "v0.17.0"]),
    (["--exercises-side-by-side", "2,x"], ["side-by-side", "2,x"]),
    (["--compare-labs", "one"], ["compare-labs", "one"]),
    (["--fill", "x", "--fill-seeds", "one"], ["fill", "x", "--seeds", "one"]),
], ids=lambda a: " ".join(a))
def test_bad_input_is_one_line_and_exit_2_in_either_spelling(before, now, tmp_path):
    env = {"KAILAB_EVIDENCE": str(tmp_path / "evidence"), "KAILAB_STATE": str(tmp_path / "state")}
    new = kailab_cli("bench", *now, env=env)
    errors = [line for line in new.stderr.splitlines() if line.startswith("kailab: error:")]
    assert new.returncode == 2 and len(errors) == 1, new.stderr
    assert new.stderr.strip().splitlines()[-1] == errors[0] and "kailab: note:" not in new.stderr
    old = kailab_cli("bench", *before, env=env)
    assert old.returncode == 2 and [line for line in old.stderr.splitlines() if line.startswith("kailab: error:")], old.stderr
    assert not (tmp_path / "evidence").exists()


def test_no_page_writes_a_former_mode_flag():
    """README, the Makefile and docs/ show the subcommands (bench/results/ records are dated history; the
    table of former spellings in docs/cli.md names them)."""
    old = {m.flag for m in bench_cli._MODES}
    pattern = re.compile(r"bench\s+(--[\w-]+)")
    pages = [PROJECT_ROOT / "README.md", PROJECT_ROOT / "Makefile", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        text = page.read_text()
        if page.name == "cli.md":
            text = re.sub(r"^## Renamed flags$.*?(?=^## )", "", text, flags=re.M | re.S)
        found += [f"{page.relative_to(PROJECT_ROOT)}: {m.group(0)}" for m in pattern.finditer(text) if m.group(1) in old]
    assert not found, f"pages still telling to run a former bench mode flag: {found}"
