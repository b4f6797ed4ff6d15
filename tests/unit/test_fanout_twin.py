"""`kailab twin … --on`: twins side by side fanned out, a unit per twin. What travels is the snapshot
reduced to what a twin reads (a twin made from it is the twin made from the whole one, and no secret is
in it); the twins' folders come together here into one comparison, a unit that brought nothing back that
twin's error. The Jobs run on a kind host in tests/live/test_fanout_live.py."""

from __future__ import annotations

import json
import shlex

import pytest

from kailab.fanout.unit import UnitResult
from kailab.twin.compare import variants_for
from kailab.twin.design import AS_IS, load_twin_design
from kailab.twin.kept import kept_snapshot
from kailab.twin.plan import make_plan
from kailab.twin.snapshot import load_snapshot
from kailab.twin.units import SNAPSHOT, merge_units, twin_units
from twin_sample import TOKEN, as_zip, snapshot

from helpers import kailab_cli

PLAN_FIELDS = ("namespaces", "objects", "bound", "pending", "conf", "args", "not_reproduced", "unknown", "params")


@pytest.fixture
def snap(tmp_path):
    data = snapshot(newTopLevel={"a": 1})
    data["rawObjects"]["someFutureKind"] = [{"metadata": {"name": "x"}, "spec": {"secret": TOKEN}}]
    done = json.loads(json.dumps(data["rawObjects"]["pods"][0]))
    done["metadata"]["name"], done["status"] = "done-0", {"phase": "Succeeded"}
    data["rawObjects"]["pods"].append(done)
    return as_zip(tmp_path, data)


@pytest.mark.parametrize("anonymise", [False, True])
def test_the_kept_snapshot_makes_the_same_twin_and_holds_no_secret(tmp_path, snap, anonymise):
    kept = kept_snapshot(load_snapshot(snap))
    text = json.dumps(kept)
    assert TOKEN not in text and "registry.example.com" not in text and "regcred" not in text and "API_TOKEN" not in text
    (tmp_path / "kept.json").write_text(text)
    whole, reduced = make_plan(load_snapshot(snap), "t", anonymise), make_plan(load_snapshot(tmp_path / "kept.json"), "t", anonymise)
    for f in PLAN_FIELDS:
        assert getattr(reduced, f) == getattr(whole, f), f
    assert reduced.fleet.nodes == whole.fleet.nodes
    assert any("owner not reproduced" in n for ns in reduced.not_reproduced.values() for n in ns)  # said there too


def _design(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"design: {name}\n{body}")
    return load_twin_design(path)


def test_versions_are_a_unit_each_with_the_kept_snapshot_and_its_own_part(snap):
    units = twin_units(snap, variants_for(["v0.16.8", "v0.17.0"], []), "tw", False, 20.0, 300.0)
    assert [(u.part, u.kai_version, u.kind.name) for u in units] == [(("v0.16.8",), "v0.16.8", "twin"),
                                                                     (("v0.17.0",), "v0.17.0", "twin")]
    for u in units:
        argv = shlex.split(u.command)
        assert argv[3:5] == ["twin", f"/unit/{SNAPSHOT}"]
        opts = dict(zip(argv[5::2], argv[6::2]))
        assert opts == {"--part": u.kai_version, "--name": "tw", "--settle": "20.0", "--timeout": "300.0",
                        "--kai-versions": "v0.16.8,v0.17.0"}
        assert set(dict(u.files)) == {SNAPSHOT} and TOKEN not in dict(u.files)[SNAPSHOT]


def test_designs_are_the_snapshot_as_it_was_and_a_unit_per_design_with_the_design_files(tmp_path, snap):
    more = _design(tmp_path, "more", "queues: {team-a: {gpu: {limit: 12}}}\n")
    units = twin_units(snap, variants_for(["v0.17.0"], [more]), "tw", True, 30.0, 600.0)
    assert [u.part for u in units] == [(AS_IS,), ("more",)]
    argv = shlex.split(units[1].command)
    assert "--anonymise" in argv and argv[argv.index("--designs") + 1] == "/unit/more.yaml"
    assert argv[argv.index("--kai-version") + 1] == "v0.17.0" and "--kai-versions" not in argv
    assert dict(units[0].files)["more.yaml"] == (tmp_path / "more.yaml").read_text()


def test_a_design_naming_a_queue_the_snapshot_lacks_is_refused_before_any_unit(tmp_path, snap):
    bad = _design(tmp_path, "bad", "queues: {team-z: {gpu: {quota: 4}}}\n")
    with pytest.raises(Exception, match="the snapshot has no such queue"):
        twin_units(snap, variants_for(["v0.17.0"], [bad]), "tw", False, 30.0, 600.0)


def _twin_folder(root, label: str, version: str, placed: dict) -> str:
    """What a unit's pod brings back: a side-by-side of its one twin."""
    d = root / f"twins-{label}"
    (d / label).mkdir(parents=True)
    (d / label / "twin.json").write_text(json.dumps({
        "kai_version": version, "design": AS_IS, "seconds": {"total": 40.0}, "queues_gpus": {},
        "decided": {"placed": placed, "still_pending": {}, "evicted": [], "settled": True}}))
    (d / "comparison.json").write_text("{}")
    return str(d)


def test_the_twins_come_together_into_one_comparison_and_a_missing_one_is_its_error(tmp_path, snap):
    units = twin_units(snap, variants_for(["v0.16.8", "v0.17.0"], []), "tw", False, 30.0, 600.0)
    results = [UnitResult(u.name, u.title, state="collected", verdict="passed",
                          evidence=_twin_folder(tmp_path / "units", u.kai_version, u.kai_version, {"ml/wait-0": node}))
               for u, node in zip(units, ("gpu-a", "gpu-b"))]
    out = merge_units(snap, units, results, tmp_path / "record", root=tmp_path / "evidence")
    c = json.loads((out / "comparison.json").read_text())
    assert c["ok"] and set(c["variants"]) == {"v0.16.8", "v0.17.0"} and c["placed_differently"] == 1
    assert json.loads((out / "plan.json").read_text())["fanout"] == str(tmp_path / "record")
    assert (out / "comparison.md").is_file() and (out / "report.html").is_file()

    results[1] = UnitResult(units[1].name, units[1].title, state="failed", error="pod y ended before its unit was done")
    out = merge_units(snap, units, results, tmp_path / "record", root=tmp_path / "evidence2")
    c = json.loads((out / "comparison.json").read_text())
    assert not c["ok"] and c["variants"]["v0.17.0"]["error"] == f"pod y ended before its unit was done (fan-out unit {units[1].name})"


@pytest.mark.parametrize("extra, said", [
    ([], "give --kai-versions vA,vB or --designs"),
    (["--kai-versions", "v0.16.8,v0.17.0", "--keep"], "leave out --keep and --against-snapshot-tool"),
    (["--kai-versions", "v0.16.8,v0.17.0", "--part", "v0.15.0"], "--part v0.15.0: no such twin"),
])
def test_a_bad_on_combination_is_one_line_and_nothing_is_made(tmp_path, snap, extra, said):
    on = [] if "--part" in extra else ["--on", str(snap)]  # any existing file: refused before it is read
    p = kailab_cli("twin", str(snap), *on, *extra,
                   env={"KAILAB_EVIDENCE": str(tmp_path / "ev"), "KAILAB_STATE": str(tmp_path / "st")})
    assert p.returncode != 0 and said in p.stderr + p.stdout, p.stderr
    assert len([ln for ln in p.stderr.splitlines() if ln.strip()]) == 1, p.stderr
    assert not (tmp_path / "ev").exists() and not (tmp_path / "st" / "labs").exists()
