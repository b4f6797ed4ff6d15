"""The fill experiment's arithmetic, on data: tasks inflated to a target and seeded, steps bounded
by the step size, fragmentation as the next task would meet it, the table at the arrived marks,
and the page's picture. The lab part is tests/live/test_fill_live.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from kailab.fleet import load_fleet
from kailab.replay.fill import at_mark, fleet_nodes, markdown, shape, steps_of, summarise, tasks_for
from kailab.replay.fragmentation import Node, Shape, fragmented_milli, unusable_milli
from kailab.replay.trace import Trace, TraceJob
from kailab.report import render_report


def _trace(gpus: list[float]) -> Trace:
    return Trace(Path("t.csv"), [TraceJob(name=f"j{i}", arrival_s=i, queue="q", pods=1, gpus=g, duration_s=10)
                                 for i, g in enumerate(gpus)])


def test_tasks_reach_the_target_in_a_seeded_order():
    trace = _trace([1, 0.5, 2, 0, 4])
    a, b = tasks_for(trace, 40, 1.3, 7), tasks_for(trace, 40, 1.3, 7)
    assert [t.gpus for t in a] == [t.gpus for t in b]
    total = sum(t.gpus for t in a)
    assert 52 <= total < 52 + 4  # reached 130 % of 40, by at most one task more
    assert [t.gpus for t in tasks_for(trace, 40, 1.3, 8)] != [t.gpus for t in a]
    assert len({t.name for t in a}) == len(a) and all(t.priority == "train" for t in a)


def test_a_step_asks_at_most_its_share():
    tasks = tasks_for(_trace([1, 0.5, 2, 0, 4]), 100, 1.0, 1)
    steps = steps_of(tasks, 100, 0.05)
    assert [t for s in steps for t in s] == tasks
    assert all(sum(t.gpus for t in s) <= 5 or len(s) == 1 for s in steps)


def test_fragmentation_counts_what_the_next_task_cannot_use():
    n = Node(gpus=4, cpu_milli=8000, memory_mib=8192, whole_used=2, shared={"g1": 700})
    assert n.free_whole == 1 and n.free_milli == 1300 and n.used_milli == 2700
    assert unusable_milli(n, Shape(2000, 1000, 1024)) == 1300  # needs 2 whole GPUs, 1 free: all lost
    assert unusable_milli(n, Shape(1000, 1000, 1024)) == 300  # the shared device's rest
    assert unusable_milli(n, Shape(500, 1000, 1024)) == 300  # 0.3 left < 0.5
    assert unusable_milli(n, Shape(200, 1000, 1024)) == 0  # fits the 0.3 left
    assert unusable_milli(n, Shape(200, 9000, 1024)) == 1300  # no CPU for it: every free GPU lost
    assert unusable_milli(n, Shape(0, 1000, 1024)) == 0
    frag = fragmented_milli({"a": n}, Counter({Shape(1000, 1000, 1024): 3, Shape(200, 1000, 1024): 1}))
    assert frag == 225  # (3 x 300 + 1 x 0) / 4


def test_a_gpu_model_the_task_refuses_is_all_fragment_to_it():
    t4 = Node(gpus=2, cpu_milli=8000, memory_mib=8192, shared={"g1": 400}, product="T4")
    v100 = Node(gpus=2, cpu_milli=8000, memory_mib=8192, product="V100M16")
    only_v100 = Shape(500, 1000, 1024, frozenset({"V100M16", "V100M32"}))
    assert unusable_milli(t4, only_v100) == 1600  # every free GPU of the T4 node, though 0.5 would fit
    assert unusable_milli(v100, only_v100) == 0
    assert unusable_milli(t4, Shape(500, 1000, 1024)) == 0  # no constraint: the T4's free whole GPU takes it
    assert unusable_milli(t4, Shape(0, 1000, 1024, frozenset({"V100M16"}))) == 0  # asks no GPU: loses none
    tasks = tasks_for(Trace(Path("t.csv"), [TraceJob(name="j", arrival_s=0, queue="q", pods=1, gpus=0.5,
                                                     duration_s=10, gpu_models="V100M16|V100M32")]), 4, 1.0, 1)
    assert {(shape(t).milli, shape(t).models) for t in tasks} == {(500, only_v100.models)}  # the trace's models
    assert TraceJob(name="k", arrival_s=0, queue="q", pods=1, gpus=1, duration_s=1,
                    gpu_models="V100M16|V100M32|V100M32").models == ["V100M16", "V100M32"]  # the trace's own duplicate
    assert t4.empty() == Node(gpus=2, cpu_milli=8000, memory_mib=8192, product="T4")  # a step's count starts bare
    products = {p.product for p in load_fleet("small").pools}
    assert {n.product for n in fleet_nodes("small").values()} == products  # and the nodes their model


def _fill_dir(tmp_path: Path, expectations: list[str] | None = None) -> Path:
    out = tmp_path / "fill-x"
    plan = {"trace": "t.csv", "fleet": "f", "seeds": [1, 2], "target": 1.3, "step": 0.1, "settle_s": 3,
            "kai_version": "v0.17.0", "designs": [{"name": "binpack", "file": "b.yaml"}, {"name": "spread", "file": "s.yaml"}],
            **({"expectations": expectations} if expectations is not None else {})}
    out.mkdir()
    (out / "plan.json").write_text(json.dumps(plan))
    for d, loss in (("binpack", 0), ("spread", 5)):
        for seed in (1, 2):
            sdir = out / d / f"seed-{seed}"
            sdir.mkdir(parents=True)
            rows = [{"step": i, "arrived_pct": 10.0 * i, "allocated_pct": min(10.0 * i, 100 - loss - seed),
                     "fragmented_pct": loss, "unplaced_gpu_pct": max(0, 10 * i - 100 + loss)} for i in range(1, 14)]
            (sdir / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_the_summary_reads_back_and_the_page_draws_it(tmp_path):
    out = _fill_dir(tmp_path)
    s = summarise(out)
    assert s["ok"] and s["table"]["spread"]["allocated_pct@100%"] == [93.0, 94.0]
    assert s["table"]["binpack"]["allocated_pct@80%"] == [80.0, 80.0]
    assert at_mark(s["curves"]["binpack"]["1"], 1.4, "allocated_pct") is None  # the fill stopped at 130 %
    md = markdown(s)
    assert "| spread | 80.0 % | 90.0 % | 93.0-94.0 % |" in md
    (out / "fill.json").write_text(json.dumps(s))
    page = render_report([out], base=tmp_path)
    assert page.count('<polyline class="design"') == 2 and 'class="spread"' in page
    assert "1 fill experiment." in page


def test_expectations_judge_the_median_over_the_seeds_and_a_failed_one_fails_the_fill(tmp_path):
    out = _fill_dir(tmp_path, ["binpack/arrived-100.allocated_pct >= 98",  # seeds 99 and 98: median 98.5
                               "binpack/arrived-100.allocated_pct > spread/arrived-100.allocated_pct",
                               "arrived-100.fragmented_pct <= 4",  # every design: spread's 5 fails
                               "spread/arrived-100.no_such_figure > 1"])
    s = summarise(out)
    assert s["figures"]["binpack"]["arrived-100.allocated_pct"] == 98.5
    assert s["figures"]["spread"]["arrived-100.allocated_pct"] == 93.5
    held = [(e["expect"], e["held"]) for e in s["expectations"]]
    assert held == [("binpack/arrived-100.allocated_pct >= 98", True),
                    ("binpack/arrived-100.allocated_pct > spread/arrived-100.allocated_pct", True),
                    ("arrived-100.fragmented_pct <= 4", True), ("arrived-100.fragmented_pct <= 4", False),
                    ("spread/arrived-100.no_such_figure > 1", False)]
    assert "no_such_figure" in s["expectations"][-1]["figures"] and not s["ok"]
    assert "- expect `arrived-100.fragmented_pct <= 4`: FAILED (spread/arrived-100.fragmented_pct = 5.0 <= 4)" \
        in markdown(s)


def test_the_repeat_spread_is_each_figures_range_over_the_runs(tmp_path):
    from kailab.bench.fill import repeat_spread, spread_lines

    runs = []
    for i in range(3):
        (tmp_path / f"run-{i}").mkdir()
        out = _fill_dir(tmp_path / f"run-{i}")
        s = summarise(out)
        for rows in s["curves"]["binpack"].values():
            for r in rows:
                r["allocated_pct"] -= i  # each run allocates one point less
        runs.append(s)
    spread = repeat_spread(runs)
    assert spread["binpack"]["1"]["allocated_pct@100%"] == [97.0, 99.0, 3]
    assert spread["spread"]["2"]["allocated_pct@100%"] == [93.0, 93.0, 3]
    assert "| binpack | 1 | 78.0-80.0 | 88.0-90.0 | 97.0-99.0 |" in "\n".join(spread_lines(spread, 3))


def test_a_plan_fingerprints_its_tasks_and_fleet_by_content(tmp_path):
    """What `kailab fill-merge` compares: the same jobs from another file are the same trace; one job
    changed is another."""
    from dataclasses import replace

    from kailab.replay.fill import FillPlan

    a = _trace([1, 0.5, 2])
    same = Trace(tmp_path / "elsewhere.csv", list(a.jobs))
    other = Trace(a.path, [replace(a.jobs[0], gpus=4), *a.jobs[1:]])
    plans = [FillPlan(trace=t, designs=[], fleet="tiny", seeds=[1]).as_json() for t in (a, same, other)]
    assert plans[0]["trace_sha256"] == plans[1]["trace_sha256"] != plans[2]["trace_sha256"]
    assert len({p["fleet_sha256"] for p in plans}) == 1
    assert FillPlan(trace=a, designs=[], fleet="small", seeds=[1]).as_json()["fleet_sha256"] != plans[0]["fleet_sha256"]


def _pod(name: str, node: str | None = None) -> dict:
    return {"metadata": {"name": name, "labels": {}, "annotations": {}}, "spec": {"nodeName": node} if node else {}}


def test_a_step_settles_without_a_bound_pod_somebody_else_deleted(tmp_path):
    """KAI's binder may delete a bound shared-GPU pod: the step must not wait for it to come back,
    and the pod is named in the evidence with the log lines that name it."""
    import time

    from kailab.replay.fill import FleetState, _settle, log_lines

    state = FleetState(None, "ns", {})
    for n in ("t1", "t2", "t3"):
        state.expect(n, 1, Shape(500, 1000, 1024))
        state._see("ADDED", _pod(n))
        state._see("MODIFIED", _pod(n, "node-a"))
    state._see("MODIFIED", {**_pod("t2", "node-a"), "metadata": {"name": "t2", "deletionTimestamp": "now"}})
    state._see("DELETED", _pod("t2", "node-a"))  # a second event for the same deletion counts once
    assert state.removed(1) == 1 and state.gone_pods == {"t2": 1}
    t0 = time.monotonic()
    assert _settle(state, None, "ns", 1, 3, quiet_s=30, limit_s=60) == set()
    assert time.monotonic() - t0 < 5
    state.ours.add("t3")  # deleted by the run as unplaced: not somebody else's
    state._see("DELETED", _pod("t3", "node-a"))
    assert state.removed(1) == 1
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "binder.log").write_text("binding t1\nFound pod without reservation, deleting t2\nt22 other\n")
    (logs / "kwok.log").write_text("nothing here\n")
    assert log_lines(logs, {"t2"}) == "== binder.log\nFound pod without reservation, deleting t2\n"
    assert "no log" in log_lines(tmp_path / "absent", {"t2"})


def test_the_bench_record_names_pods_a_component_deleted_after_they_were_bound():
    from kailab.bench.fill import where_the_time_goes

    runs = {"binpack": {"up": {}, "seeds": {"1": {"wall_s": 10, "tasks": 5, "cpu_seconds": {"scheduler": 4},
                                                  "deleted_after_bound": {"t00007": 3}}},
                        },
            "spread": {"up": {}, "seeds": {"1": {"wall_s": 10, "tasks": 5, "cpu_seconds": {"scheduler": 4}}}}}
    rows = [{"arrived_pct": 50, "settle_s": 30.0, "submit_s": 24.0}, {"arrived_pct": 100, "settle_s": 10.0, "submit_s": 6.0}]
    lines = where_the_time_goes(runs, {"curves": {"binpack": {"1": rows}, "spread": {"1": [{"arrived_pct": 50, "settle_s": 3}]}}})
    assert [line for line in lines if "submitting" in line] == [
        "binpack, seed 1: submitting the steps' pods took 30 s of the 40 s the steps took (75 %)."]
    said = [line for line in lines if "deleted by a lab component" in line]
    assert len(said) == 1 and "binpack, seed 1: 1 pod(s)" in said[0] and "t00007" in said[0]
    assert "binpack/seed-1/deleted-pods.log" in said[0]
