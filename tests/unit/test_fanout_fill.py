"""`kailab fill --on`: a unit per design and seed (what each pod is given and runs), a bad plan refused
before anything reaches a cluster, and the units' fills merged into one whose expectations are read on
the whole, with a unit that brought nothing back its design's error. The units' folders are written
here in a fill's own layout; the Jobs run on a kind lab in tests/live/test_fanout_live.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kailab.errors import KailabError
from kailab.replay.fill_units import fill_units, merge_units
from kailab.fanout.unit import UnitResult
from kailab.fanout.unit import objects
from kailab.replay.design import load_designs
from kailab.replay.fill import FillPlan
from kailab.replay.trace import load_trace
from kailab.testing.tiny_trace import write_clusterdata

from helpers import kailab_cli


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    out = root / "imported"
    kailab_cli("trace", "import", "alibaba-gpu-2023", str(write_clusterdata(root)), "--out", str(out), check=True)
    return out


def plan(imported: Path, **kw) -> FillPlan:
    return FillPlan(trace=load_trace(imported / "trace.csv"), fleet=str(imported / "fleet.yaml"),
                    designs=load_designs(f"{imported}/design-binpack.yaml,{imported}/design-spread.yaml"),
                    **{"seeds": [1, 2], "step": 0.1, **kw})


def test_a_fill_is_one_unit_per_design_and_seed_with_its_files_shipped(imported):
    p = plan(imported, expectations=["binpack/arrived-100.allocated_pct >= 50"])
    units = fill_units(p)
    assert [u.part for u in units] == [("binpack", "1"), ("binpack", "2"), ("spread", "1"), ("spread", "2")]
    assert len({u.name for u in units}) == 4 and all(u.kind.name == "fill" and u.kind.own_folder for u in units)
    for u in units:
        files = dict(u.files)
        assert files["trace.csv"] == (imported / "trace.csv").read_text()
        assert files["fleet.yaml"] == (imported / "fleet.yaml").read_text()
        assert files["design.yaml"] == (imported / f"design-{u.part[0]}.yaml").read_text()
        argv = shlex.split(u.command)
        assert argv[:4] == ["python3", "-m", "kailab.cli", "fill"] and argv[4] == "/unit/trace.csv"
        opts = dict(zip(argv[5::2], argv[6::2]))
        assert opts["--seeds"] == u.part[1] and opts["--designs"] == "/unit/design.yaml" and opts["--labs"] == "1"
        assert opts["--fleet"] == "/unit/fleet.yaml" and float(opts["--step"]) == 0.1
        assert "--expect" not in argv  # one design and seed a unit: the expectations are read on the merge
        config, job = objects(u, "ns", "run", "img", "1", "2Gi")
        items = job["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"]
        assert {config["data"][i["key"]] for i in items} == set(files.values())
        assert {i["path"] for i in items} == set(files)


def test_a_bad_fill_plan_is_refused_before_any_unit_exists(imported):
    with pytest.raises(KailabError) as e:
        fill_units(plan(imported, step=0.9))
    assert "--step 0.9" in str(e.value) and "\n" not in str(e.value)


def unit_fill(root: Path, p: FillPlan, design: str, seed: int, allocated: list[float]) -> Path:
    """What a unit's pod brings back: a fill of one design and seed, its plan the pod's own."""
    d = root / f"fill-{design}-{seed}"
    pj = p.as_json()
    pj.update({"trace": "/unit/trace.csv", "fleet": "/unit/fleet.yaml", "seeds": [seed], "expectations": [],
               "designs": [{"name": design, "file": "/unit/design.yaml"}]})
    sd = d / design / f"seed-{seed}"
    sd.mkdir(parents=True)
    (d / "plan.json").write_text(json.dumps(pj))
    rows = [{"step": i, "arrived_pct": a, "allocated_pct": v, "fragmented_pct": 100 - v, "unplaced_gpu_pct": max(0.0, a - v)}
            for i, (a, v) in enumerate(zip((50, 100, 130), allocated), 1)]
    (sd / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (sd / "run.json").write_text(json.dumps({"seed": seed}))
    return d


def test_the_units_fills_merge_into_one_read_against_the_users_expectations(imported, tmp_path):
    p = plan(imported, expectations=["binpack/arrived-100.allocated_pct > spread/arrived-100.allocated_pct"])
    units = fill_units(p)
    values = {("binpack", 1): [50, 91, 92], ("binpack", 2): [50, 89, 90], ("spread", 1): [48, 83, 87], ("spread", 2): [47, 84, 88]}
    results = [UnitResult(u.name, u.title, state="collected", verdict="passed",
                          evidence=str(unit_fill(tmp_path / "units", p, u.part[0], int(u.part[1]), values[(u.part[0], int(u.part[1]))])))
               for u in units]
    out = merge_units(p, units, results, tmp_path / "record", root=tmp_path / "evidence")
    s = json.loads((out / "fill.json").read_text())
    assert s["ok"] and s["plan"]["seeds"] == [1, 2] and s["table"]["binpack"]["allocated_pct@100%"] == [89, 91]
    assert [e["held"] for e in s["expectations"]] == [True]
    # the plan is the user's: local files, the fan-out's record named
    assert s["plan"]["trace"] == str(imported / "trace.csv") and s["plan"]["fanout"] == str(tmp_path / "record")
    assert {d["file"] for d in s["plan"]["designs"]} == {str(imported / "design-binpack.yaml"), str(imported / "design-spread.yaml")}


def test_a_unit_that_brought_nothing_back_is_its_designs_error_and_the_fill_not_ok(imported, tmp_path):
    p = plan(imported)
    units = fill_units(p)
    results = []
    for u in units:
        if u.part == ("spread", "2"):
            results.append(UnitResult(u.name, u.title, state="failed", error="pod x ended before its unit was done"))
        else:
            results.append(UnitResult(u.name, u.title, state="collected", verdict="passed",
                                      evidence=str(unit_fill(tmp_path / "units", p, u.part[0], int(u.part[1]), [50, 90, 91]))))
    out = merge_units(p, units, results, tmp_path / "record", root=tmp_path / "evidence")
    s = json.loads((out / "fill.json").read_text())
    assert not s["ok"] and "seed 2: pod x ended before its unit was done" in s["errors"]["spread"]
    assert set(s["curves"]["spread"]) == {"1"} and set(s["curves"]["binpack"]) == {"1", "2"}
    none = [UnitResult(u.name, u.title, state="failed", error="refused") for u in units]
    assert merge_units(p, units, none, tmp_path / "record", root=tmp_path / "evidence2") is None
