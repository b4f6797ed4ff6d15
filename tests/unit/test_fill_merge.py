"""`kailab fill-merge`: fills of one plan run apart (a seed a session) read as one fill — every seed's
curve, the seeds' spread in the table, the picture, the report — and fills that are not of one plan,
or a design and seed found twice, refused in one line with nothing written. The folders are written
here in a fill's own layout (the live fill is tests/live/test_fill_exercise_live.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kailab.errors import KailabError
from kailab.replay.fill_merge import merge

from helpers import kailab_cli

PLAN = {"trace": "/tmp/x/trace.csv", "tasks_in_trace": 100, "fleet": "/tmp/x/fleet.yaml", "fleet_name": "ali",
        "target": 1.3, "step": 0.5, "settle_s": 3.0, "runtime": "binary", "kai_version": "v0.17.0",
        "metrics": False, "expectations": []}


def fill(root: Path, name: str, seeds: list[int], allocated: dict[str, list[float]], error: str = "",
         **plan) -> Path:
    """A fill's evidence folder: per design and seed, steps at 50 %, 100 % and 130 % arrived whose
    allocated share is `allocated[design][i]` at step i (the same for every seed of the folder)."""
    d = root / name
    d.mkdir(parents=True)
    designs = list(allocated)
    (d / "plan.json").write_text(json.dumps({**PLAN, **plan, "seeds": seeds,
                                             "designs": [{"name": n, "file": f"/tmp/x/{n}.yaml"} for n in designs]}))
    for n, values in allocated.items():
        for s in seeds:
            sd = d / n / f"seed-{s}"
            sd.mkdir(parents=True)
            rows = [{"step": i, "arrived_pct": a, "allocated_pct": v, "fragmented_pct": 100 - v,
                     "unplaced_gpu_pct": max(0.0, a - v)} for i, (a, v) in enumerate(zip((50, 100, 130), values), 1)]
            (sd / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            (sd / "run.json").write_text(json.dumps({"seed": s, "wall_s": 10.0}))
        (d / n / "up.json").write_text("{}")
    if error:
        (d / designs[-1] / "error.txt").write_text(error + "\n")
    return d


def test_two_fills_of_one_plan_read_as_one_with_both_seeds(tmp_path):
    a = fill(tmp_path, "fill-a", [1], {"binpack": [50, 91, 92], "spread": [48, 83, 87]})
    b = fill(tmp_path, "fill-b", [2], {"binpack": [50, 89, 90], "spread": [47, 84, 88]})
    out = merge([str(a), str(b)], root=tmp_path / "evidence")
    s = json.loads((out / "fill.json").read_text())
    assert s["plan"]["seeds"] == [1, 2] and s["ok"], s["errors"]
    assert s["table"]["binpack"]["allocated_pct@100%"] == [89, 91]
    assert s["table"]["spread"]["allocated_pct@130%"] == [87, 88]
    assert {(m["design"], m["seed"], Path(m["evidence"]).name) for m in s["plan"]["merged_from"]} == {
        ("binpack", 1, "fill-a"), ("spread", 1, "fill-a"), ("binpack", 2, "fill-b"), ("spread", 2, "fill-b")}
    assert "89.0-91.0 %" in (out / "fill.md").read_text()
    assert (out / "fill.svg").read_text().startswith("<svg") and (out / "binpack" / "seed-2" / "run.json").is_file()
    report = (out / "report.html").read_text()
    assert "fill-merged-" in report and "binpack" in report and "<svg" in report


def test_a_design_re_run_alone_replaces_the_seed_that_stopped(tmp_path):
    first = fill(tmp_path, "fill-a", [1], {"binpack": [50, 91, 92], "spread": [48, 83]},
                 error="interrupted at step 3 of 3")
    again = fill(tmp_path, "fill-b", [1], {"spread": [48, 84, 88]})
    with pytest.raises(KailabError) as err:  # spread seed 1 is in both
        merge([str(first), str(again)], root=tmp_path / "evidence")
    text = str(err.value)
    assert "\n" not in text and "spread seed 1" in text and "fill-a" in text and f"{first}:binpack" in text, text
    assert not (tmp_path / "evidence").exists()
    out = merge([f"{first}:binpack", str(again)], root=tmp_path / "evidence")
    s = json.loads((out / "fill.json").read_text())
    assert s["ok"] and s["errors"] == {} and s["table"]["spread"]["allocated_pct@130%"] == [88, 88]
    # without the pick, the stopped design's error goes with its seed
    out = merge([str(first), str(fill(tmp_path, "fill-c", [2], {"binpack": [50, 90, 91], "spread": [48, 83, 86]}))],
                root=tmp_path / "evidence2")
    s = json.loads((out / "fill.json").read_text())
    assert not s["ok"] and "interrupted at step 3 of 3" in s["errors"]["spread"] and "fill-a" in s["errors"]["spread"]
    # the table says which marks rest on fewer seeds than the fill has
    assert "| spread | 83.0 % | 83.0 % | 83.0 % | 86.0 % (1 of 2 seeds) | 86.0 % (1 of 2 seeds) |" in (out / "fill.md").read_text()
    assert "<td>86 % (1 of 2 seeds)</td>" in (out / "report.html").read_text()


@pytest.mark.parametrize("field, value", [("step", 0.01), ("kai_version", "v0.16.8"), ("trace_sha256", "b" * 64)])
def test_fills_of_different_plans_are_refused_naming_the_field(tmp_path, field, value):
    a = fill(tmp_path, "fill-a", [1], {"binpack": [50, 91, 92]}, trace_sha256="a" * 64)
    b = fill(tmp_path, "fill-b", [2], {"binpack": [50, 90, 91]}, **{"trace_sha256": "a" * 64, field: value})
    with pytest.raises(KailabError) as err:
        merge([str(a), str(b)], root=tmp_path / "evidence")
    text = str(err.value)
    assert "\n" not in text and field in text and "fill-a" in text and "fill-b" in text, text
    assert not (tmp_path / "evidence").exists()


def test_a_plan_without_fingerprints_merges_on_what_it_records(tmp_path):
    """Fills written before plans carried the trace's and fleet's fingerprints merge on the rest."""
    a = fill(tmp_path, "fill-a", [1], {"binpack": [50, 91, 92]})
    b = fill(tmp_path, "fill-b", [2], {"binpack": [50, 90, 91]}, trace_sha256="a" * 64, fleet_sha256="f" * 64)
    out = merge([str(a), str(b)], root=tmp_path / "evidence")
    assert json.loads((out / "plan.json").read_text())["seeds"] == [1, 2]


def test_the_cli_refuses_in_one_line_and_leaves_nothing(tmp_path):
    env = {"KAILAB_EVIDENCE": str(tmp_path / "evidence")}
    a = fill(tmp_path, "fill-a", [1], {"binpack": [50, 91, 92]})
    cases = [[str(a)], [str(a), str(tmp_path)], [str(a), f"{a}:spread"]]
    for args in cases:
        run = kailab_cli("fill-merge", *args, env=env, timeout=60)
        lines = run.stderr.strip().splitlines()
        assert run.returncode != 0 and len(lines) == 1, (args, run.stderr)
    assert "two fills or more" in kailab_cli("fill-merge", str(a), env=env).stderr
    assert not (tmp_path / "evidence").exists()
    b = fill(tmp_path, "fill-b", [2], {"binpack": [50, 89, 90]})
    run = kailab_cli("fill-merge", str(a), str(b), env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    [merged] = (tmp_path / "evidence").glob("fill-merged-*")
    assert f"merged: {merged}" in run.stdout and "89.0-91.0 %" in run.stdout


def test_the_bench_fills_only_the_imported_designs_it_is_given(tmp_path):
    """`kailab bench fill … --designs`: a name that is not an imported design is one line, before
    any import or lab."""
    run = kailab_cli("bench", "fill", str(tmp_path / "nowhere"), "--designs", "spread,packed",
                     env={"KAILAB_EVIDENCE": str(tmp_path / "evidence")}, timeout=60)
    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0 and len(lines) == 1 and "'packed'" in lines[0] and "binpack,spread" in lines[0], run.stderr
    assert not (tmp_path / "evidence").exists()


def test_a_bench_record_is_read_as_its_evidence_folder_was(tmp_path):
    """The record `kailab bench fill` commits keeps the plan and every seed's steps, so a fill whose
    evidence stayed on another machine still merges: the same figures as from the folder."""
    from kailab.bench.fill import kept
    from kailab.replay.fill import write_outputs

    a = fill(tmp_path, "fill-a", [1], {"binpack": [50, 91, 92]})
    b = fill(tmp_path, "fill-b", [1], {"spread": [48, 83, 87]})
    record = tmp_path / "bench" / "2026-11-26-fill-x.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"date": "2026-11-26", "errors": {},
                                  "runs": {"binpack": {"up": {"up_wall_s": 18.0}, "seeds": {1: {"seed": 1, "wall_s": 10.0}}}},
                                  **kept(write_outputs(a))}))
    from_folders = json.loads((merge([str(a), str(b)], root=tmp_path / "e1") / "fill.json").read_text())
    out = merge([str(record), str(b)], root=tmp_path / "e2")
    from_record = json.loads((out / "fill.json").read_text())
    assert from_record["ok"] and from_record["table"] == from_folders["table"]
    assert from_record["curves"] == from_folders["curves"]
    assert json.loads((out / "binpack" / "seed-1" / "run.json").read_text())["wall_s"] == 10.0
    assert json.loads((out / "binpack" / "up.json").read_text())["up_wall_s"] == 18.0
    assert {m["evidence"] for m in from_record["plan"]["merged_from"]} == {str(record), str(b)}


def test_a_record_without_steps_is_refused_in_one_line(tmp_path):
    old = tmp_path / "2026-11-25-fill-default.json"
    old.write_text(json.dumps({"date": "2026-11-25", "table": {}, "runs": {}}))
    b = fill(tmp_path, "fill-b", [1], {"spread": [48, 83, 87]})
    with pytest.raises(KailabError) as err:
        merge([str(old), str(b)], root=tmp_path / "evidence")
    assert "\n" not in str(err.value) and str(old) in str(err.value) and "evidence folder" in str(err.value)
    assert not (tmp_path / "evidence").exists()
