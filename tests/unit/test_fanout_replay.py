"""`kailab replay --on`: a unit per variant (a design or a KAI version), each a replay of that variant
alone; a stack the lab image cannot run refused before any unit exists; the units' variant folders
brought together into one replay compared from disk, against the user's expectations, a unit that
brought nothing back its variant's error. The Jobs run on a kind lab in tests/live/test_fanout_live.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kailab.errors import KailabError
from kailab.replay.units import merge_units, replay_units
from kailab.fanout.unit import UnitResult
from kailab.paths import PROJECT_ROOT
from kailab.replay import figures as figs
from kailab.replay import session
from kailab.replay.design import load_designs
from kailab.replay.trace import load_trace

from test_replay_units import _records  # a run's records, as the player writes them

REPLAYS = PROJECT_ROOT / "exercises" / "replays"
TRACE = REPLAYS / "quota-what-if.csv"
DESIGNS = f"{REPLAYS}/designs/team-a-first.yaml,{REPLAYS}/designs/team-b-first.yaml"


def plan(versions=(), stacks=None, designs=DESIGNS, **kw) -> session.Plan:
    ds = load_designs(designs)
    return session.Plan(trace=load_trace(TRACE), variants=session.variants_for(ds, list(versions), stacks), fleet="small",
                        compress=30, **kw)


def test_a_replay_is_one_unit_per_variant_each_replaying_it_alone():
    units = replay_units(plan(repeat=2, expectations=["team-a.wait_p99 <= 1h"]), TRACE, "0:30m")
    assert [u.part for u in units] == [("team-a-first", "team-a-first"), ("team-b-first", "team-b-first")]
    for u in units:
        argv = shlex.split(u.command)
        assert argv[3] == "replay" and argv[4] == "/unit/trace.csv" and u.kind.name == "replay" and u.kind.own_folder
        opts = dict(zip(argv[5::2], argv[6::2]))
        assert opts["--designs"] == "/unit/design.yaml" and opts["--fleet"] == "/unit/fleet.yaml"
        # one version and KAI (the only stack with --on): `--stacks` takes two or more, so none is given
        assert opts["--kai-versions"] == u.kai_version == "v0.17.0" and "--stacks" not in argv
        assert float(opts["--compress"]) == 30 and opts["--repeat"] == "2" and opts["--window"] == "0:30m"
        assert "--expect" not in argv  # they compare variants: read on the whole
        files = dict(u.files)
        assert files["trace.csv"] == TRACE.read_text()
        assert files["design.yaml"] == (REPLAYS / "designs" / f"{u.part[1]}.yaml").read_text()
        assert "name: small" in files["fleet.yaml"]
    by_version = replay_units(plan(versions=["v0.16.8", "v0.17.0"], designs=f"{REPLAYS}/designs/team-a-first.yaml"), TRACE)
    assert [(u.part, u.kai_version) for u in by_version] == [(("v0.16.8", "team-a-first"), "v0.16.8"),
                                                             (("v0.17.0", "team-a-first"), "v0.17.0")]


def test_a_stack_the_lab_image_cannot_run_is_refused_before_any_unit():
    with pytest.raises(KailabError) as e:
        replay_units(plan(stacks=["kai", "kueue"], designs=f"{REPLAYS}/designs/team-a-first.yaml"), TRACE)
    assert "--stacks kueue with --on" in str(e.value) and "\n" not in str(e.value)


def unit_replay(root: Path, design: str, runs: list[dict]) -> Path:
    """What a unit's pod brings back: a replay of one variant, under its design's name."""
    d = root / f"replay-{design}"
    for i, rec in enumerate(runs, 1):
        rdir = d / design / f"run-{i}"
        rdir.mkdir(parents=True)
        (rdir / "figures.json").write_text(json.dumps(figs.run_figures(rec, 4)))
    (d / "comparison.json").write_text(json.dumps({"ok": True}))
    return d


def test_the_variants_come_together_into_one_replay_read_against_the_users_expectations(tmp_path):
    p = plan(expectations=["team-a-first/team-a.wait_mean < team-b-first/team-a.wait_mean"])
    units = replay_units(p, TRACE)
    runs = {"team-a-first": [_records([0, 10], [50])], "team-b-first": [_records([40, 60], [5])]}
    results = [UnitResult(u.name, u.title, state="collected", verdict="passed",
                          evidence=str(unit_replay(tmp_path / "units", u.part[1], runs[u.part[0]]))) for u in units]
    out = merge_units(p, units, results, tmp_path / "record", root=tmp_path / "evidence")
    c = json.loads((out / session.COMPARISON).read_text())
    assert c["ok"] and c["runs"] == {"team-a-first": 1, "team-b-first": 1}
    assert [e["held"] for e in c["expectations"]] == [True]
    assert c["plan"]["fanout"] == str(tmp_path / "record") and c["plan"]["runtime"] == "binary"
    assert (out / "trace.csv").read_text() == TRACE.read_text() and (out / "report.html").is_file()


def test_a_variant_whose_unit_brought_nothing_back_is_its_error_and_the_replay_not_ok(tmp_path):
    p = plan(versions=["v0.16.8", "v0.17.0"], designs=f"{REPLAYS}/designs/team-a-first.yaml")
    units = replay_units(p, TRACE)
    results = [UnitResult(units[0].name, units[0].title, state="failed", error="the cluster refused its pod: quota"),
               UnitResult(units[1].name, units[1].title, state="collected", verdict="passed",
                          evidence=str(unit_replay(tmp_path / "units", "team-a-first", [_records([0], [5])])))]
    out = merge_units(p, units, results, tmp_path / "record", root=tmp_path / "evidence")
    c = json.loads((out / session.COMPARISON).read_text())
    assert not c["ok"] and c["runs"]["v0.17.0"] == 1
    assert c["errors"]["v0.16.8"] == [f"the cluster refused its pod: quota (fan-out unit {units[0].name})"]
