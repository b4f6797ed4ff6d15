"""Replay's pure parts: the trace format and its one-line errors, the seeded generator, the
figures and the expectations. No cluster (the replay itself is tested in test_replay_live.py)."""

from __future__ import annotations


from pathlib import Path

import pytest

from kailab.errors import KailabError

from kailab.replay import figures as figs
from kailab.replay import generate as gen
from kailab.replay.design import load_design, load_designs
from kailab.replay.trace import check_against, load_trace, write_trace

from helpers import assert_one_line_input_error, kailab_cli

HEADER = "arrival_s,queue,pods,gpus,duration_s"


def _csv(tmp_path, *rows, header=HEADER, name="t.csv"):
    p = tmp_path / name
    p.write_text("\n".join([header, *rows]) + "\n")
    return p


def test_csv_and_yaml_traces_read_the_same(tmp_path):
    c = _csv(tmp_path, "0,team-a,1,1,60", "5,team-b,2,8,120", "5,team-a,1,0.5,30",
             header=HEADER)
    y = tmp_path / "t.yaml"
    y.write_text("jobs:\n- {arrival_s: 0, queue: team-a, pods: 1, gpus: 1, duration_s: 60}\n"
                 "- {arrival_s: 5, queue: team-b, pods: 2, gpus: 8, duration_s: 120}\n"
                 "- {arrival_s: 5, queue: team-a, pods: 1, gpus: 0.5, duration_s: 30}\n")
    a, b = load_trace(c), load_trace(y)
    assert [j.as_row() for j in a.jobs] == [j.as_row() for j in b.jobs]
    assert a.jobs[2].fractional and not a.jobs[1].fractional
    assert a.jobs[0].name == "job-1" and a.span_s == 125


@pytest.mark.parametrize("suffix", [".csv", ".yaml"])
def test_written_trace_reads_back(tmp_path, suffix):
    jobs = gen.generate(gen.Profile(jobs=50, span_s=600, queues={"team-a": 1, "team-b": 2}, fleet_gpus=32, seed=3))
    p = tmp_path / f"g{suffix}"
    write_trace(p, jobs)
    assert [j.as_row() for j in load_trace(p).jobs] == [j.as_row() for j in jobs]


@pytest.mark.parametrize("rows, header, fragments", [
    (["0,team-a,1,1"], "arrival_s,queue,pods,gpus", ["column duration_s", "missing"]),
    (["0,team-a,1,1,-5"], HEADER, ["row 1, field duration_s", "-5 is not positive"]),
    (["0,team-a,1,1,0"], HEADER, ["row 1, field duration_s"]),
    (["10,team-a,1,1,5", "3,team-a,1,1,5"], HEADER, ["row 2, field arrival_s", "before row 1", "sort the trace"]),
    (["0,team-a,0,1,5"], HEADER, ["row 1, field pods", "at least 1 pod"]),
    (["0,team-a,1,1.5,5"], HEADER, ["row 1, field gpus", "fraction in (0, 1)"]),
    (["0,team-a,1,x,5"], HEADER, ["row 1, field gpus", "not a number"]),
    (["0,team-a,1,1,5,gold"], HEADER + ",priority", ["row 1, field priority", "unknown priority class 'gold'"]),
    (["0,team-a,2,1,5,3"], HEADER + ",min_members", ["row 1, field min_members", "between 1 and pods"]),
    (["0,team-a,2,0.5,5,2"], HEADER + ",min_members", ["row 1, field min_members", "GPU-fraction"]),
    (["0,team-a,1,1,5,a", "1,team-a,1,1,5,a"], HEADER + ",name", ["row 2, field name", "row 1's name"]),
    (["0,Team_A,1,1,5"], HEADER, ["row 1, field queue", "not a queue name"]),
    (["0,team-a,1,1,5"], HEADER + ",durration", ["column 'durration'", "unknown"]),
    (["0,team-a,1,1,5,7"], HEADER, ["row 1", "cells for 5 columns"]),
    ([], HEADER, ["jobs", "no jobs"]),
])
def test_bad_traces_get_one_line(tmp_path, rows, header, fragments):
    p = _csv(tmp_path, *rows, header=header)
    assert_one_line_input_error(load_trace, p, *fragments)


def test_bad_yaml_trace_rows(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("jobs:\n- {arrival_s: 0, queue: team-a, pods: 1, gpus: 1}\n")
    assert_one_line_input_error(load_trace, p, "row 1: field duration_s", "missing")
    p.write_text("jobs: [3]\n")
    assert_one_line_input_error(load_trace, p, "row 1", "expected a mapping")
    p.write_text("jobz: []\n")
    assert_one_line_input_error(load_trace, p, "jobz", "unknown field")


def test_trace_checked_against_a_design_and_the_fleet(tmp_path):
    d = tmp_path / "d.yaml"
    d.write_text("design: d\nqueues:\n  org:\n    gpu: {quota: -1}\n    children:\n"
                 "      team-a: {gpu: {quota: 8}}\n      team-b: {gpu: {quota: 8}}\n")
    design = load_design(d)
    assert design.leaf_queues() == {"team-a", "team-b"}
    t = load_trace(_csv(tmp_path, "0,team-a,1,1,5", "1,team-c,1,1,5"))
    with pytest.raises(Exception) as info:
        check_against(t, design.leaf_queues(), f"design {d}", 32)
    msg = str(info.value)
    assert "row 2, field queue" in msg and "'team-c' is not a leaf queue" in msg and "team-a, team-b" in msg
    t = load_trace(_csv(tmp_path, "0,team-a,5,8,5", name="big.csv"))
    with pytest.raises(Exception, match="row 1, field pods.*more than the fleet's 32"):
        check_against(t, design.leaf_queues(), "d", 32)
    t = load_trace(_csv(tmp_path, "0,org,1,1,5", name="parent.csv"))
    with pytest.raises(Exception, match="'org' is not a leaf queue"):
        check_against(t, design.leaf_queues(), "d", 32)


def test_designs_need_distinct_names(tmp_path):
    for n in ("a", "b"):
        (tmp_path / f"{n}.yaml").write_text("design: same\nqueues: {team-a: {gpu: {quota: 1}}}\n")
    assert_one_line_input_error(lambda p: load_designs(f"{tmp_path / 'a.yaml'},{p}"), tmp_path / "b.yaml",
                                "design", "also the name of")
    (tmp_path / "c.yaml").write_text("design: c\nqueues: {team-a: {gpu: {qouta: 1}}}\n")
    assert_one_line_input_error(load_design, tmp_path / "c.yaml", "queues.team-a.gpu.qouta", "unknown field")


def test_cli_trace_check_refuses_a_bad_trace_in_one_line(tmp_path):
    p = _csv(tmp_path, "0,team-a,1,1,-1")
    out = kailab_cli("trace", "check", str(p))
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "row 1, field duration_s" in lines[0] and str(p) in lines[0], out.stderr


def test_generator_is_seeded_and_sized(tmp_path):
    prof = dict(jobs=300, span_s=3600, queues={"team-a": 2, "team-b": 1}, fleet_gpus=32, load=1.0)
    a = gen.generate(gen.Profile(**prof, seed=7))
    b = gen.generate(gen.Profile(**prof, seed=7))
    c = gen.generate(gen.Profile(**prof, seed=8))
    assert a == b and a != c
    assert len(a) == 300
    assert [j.arrival_s for j in a] == sorted(j.arrival_s for j in a)
    share_a = sum(1 for j in a if j.queue == "team-a") / len(a)
    assert share_a == pytest.approx(2 / 3, abs=0.01)
    assert all(j.pods * j.gpus <= 16 for j in a)  # nothing bigger than half the fleet
    assert any(j.min_members > 1 for j in a) and any(j.fractional for j in a)
    # durations are scaled to the load asked for (bounds clip a few)
    assert gen.offered_load(a, 32) == pytest.approx(1.0, rel=0.15)
    p1, p2 = tmp_path / "1.csv", tmp_path / "2.csv"
    write_trace(p1, a)
    write_trace(p2, b)
    assert p1.read_bytes() == p2.read_bytes()


def test_generator_burst():
    jobs = gen.generate(gen.Profile(jobs=100, span_s=3600, queues={"team-a": 1, "team-b": 1}, fleet_gpus=32,
                                    burst=gen.Burst("team-b", 1200, 30, 60)))
    in_burst = [j for j in jobs if 1200 <= j.arrival_s <= 1260 and j.queue == "team-b"]
    assert len(in_burst) >= 30 and len(jobs) == 100


def test_percentile_is_nearest_rank():
    assert figs.percentile([], 0.5) is None
    assert figs.percentile([5], 0.99) == 5
    assert figs.percentile(list(range(1, 101)), 0.5) == 50
    assert figs.percentile(list(range(1, 101)), 0.99) == 99
    assert figs.percentile(list(range(1, 11)), 0.95) == 10


def _records(waits_a, waits_b, evicted=0):
    jobs, intervals = [], []
    for q, waits in (("team-a", waits_a), ("team-b", waits_b)):
        for i, w in enumerate(waits):
            name = f"{q}-{i}"
            started = None if w is None else 10.0 + w
            jobs.append({"name": name, "queue": q, "pods": 1, "gpus": 2, "min_members": 1, "duration_s": 100,
                         "priority": "train", "arrival_s": 10.0, "planned": 10.0, "submitted": 10.0,
                         "started": started, "finished": None if started is None else started + 100,
                         "evicted_pods": 0, "refused": ""})
            if started is not None:
                intervals.append({"job": name, "gpus": 2, "node": "n", "from": started, "to": started + 100,
                                  "ended": "succeeded"})
    if evicted:
        intervals.append({"job": "team-a-0", "gpus": 2, "node": "n", "from": 0, "to": evicted, "ended": "evicted"})
    return {"compress": 10, "span": 400.0, "timed_out": False, "submit_lag_wall_s": [0.01, 0.02],
            "jobs": jobs, "pod_intervals": intervals}


def test_run_figures():
    f = figs.run_figures(_records([0, 10, 20, None], [5], evicted=36), fleet_gpus=4)
    a = f["queues"]["team-a"]
    assert (a["jobs"], a["started"], a["completed"], a["not_started"]) == (4, 3, 3, 1)
    assert (a["wait_p50"], a["wait_max"], a["wait_mean"]) == (10, 20, 10)
    assert a["gpu_hours_requested"] == round(4 * 2 * 100 / 3600, 2)
    assert a["gpu_hours_delivered"] == round(3 * 2 * 100 / 3600, 2)
    assert a["gpu_hours_lost_to_evictions"] == round(2 * 36 / 3600, 2)
    assert f["all"]["jobs"] == 5
    series = dict((t, u) for t, u in f["fleet"]["utilisation_series"])
    assert series[0.0] == 0.5  # the evicted pod's 2 GPUs of 4
    assert f["submit"]["lag_p99_wall_s"] == 0.02


def test_a_trace_of_several_priority_classes_is_read_per_class_too():
    rec = _records([0, 10, 20], [5])
    rec["jobs"][0]["priority"] = "inference"
    f = figs.run_figures(rec, fleet_gpus=4)
    assert (f["priorities"]["inference"]["jobs"], f["priorities"]["train"]["jobs"]) == (1, 3)
    assert (f["priorities"]["inference"]["wait_max"], f["priorities"]["train"]["wait_max"]) == (0, 20)
    flat = figs.flat(f)
    assert flat["priority-inference.wait_p95"] == 0 and flat["priority-train.wait_p95"] == 20
    assert figs.Expectation("priority-train.wait_p99 <= 20s").check({"d": flat})[0][0]
    assert figs.run_figures(_records([0], [5]), fleet_gpus=4)["priorities"] == {}  # one class: `all` says it


def test_a_window_of_a_trace_keeps_what_arrives_in_it_cut_at_its_end(tmp_path):
    from kailab.replay.trace import parse_window, window

    assert parse_window("148d:149d") == (148 * 86400, 149 * 86400)
    assert parse_window("90:2m") == (90, 120)
    for bad in ("2h:1h", "1h", "a:b", ""):
        with pytest.raises(ValueError, match="FROM:TO"):
            parse_window(bad)
    t = load_trace(_csv(tmp_path, "100,team-a,1,1,1000", "3700,team-a,1,1,60", "5000,team-a,2,1,9000",
                        "7300,team-a,1,1,5"))
    w = window(t, *parse_window("1h:2h"))  # trace time from the first arrival (100)
    assert [(j.arrival_s, j.duration_s) for j in w.trace.jobs] == [(0, 60), (1300, 2300)]
    assert (w.cut, w.running_before, w.running_before_gpus) == (1, 0, 0)
    w = window(t, *parse_window("500s:1h"))
    assert [j.arrival_s for j in w.trace.jobs] == [] and (w.running_before, w.running_before_gpus) == (1, 1)


def test_differences_need_repeats_and_non_overlapping_ranges():
    one = {"x": [figs.run_figures(_records([0, 10], [5]), 4)], "y": [figs.run_figures(_records([50, 60], [5]), 4)]}
    assert figs.differences(one)["judged"] is False
    two = {"x": [figs.run_figures(_records([0, 10], [5]), 4), figs.run_figures(_records([2, 12], [6]), 4)],
           "y": [figs.run_figures(_records([50, 60], [5]), 4), figs.run_figures(_records([55, 65], [6]), 4)]}
    d = figs.differences(two)
    assert d["judged"] and "team-a.wait_p50" in d["moved"]
    assert "team-b.wait_p50" not in d["moved"]  # ranges overlap: 5..6 both
    assert d["spread"]["x"]["team-a.wait_p50"] == 2


def test_expectations():
    medians = {"big": {"team-a.wait_p99": 30.0, "all.completed": 40}, "small": {"team-a.wait_p99": 300.0, "all.completed": 40}}
    e = figs.Expectation("team-a.wait_p99 <= 2m")
    assert [h for h, _ in e.check(medians)] == [True, False]
    assert figs.Expectation("big/team-a.wait_p99 < small/team-a.wait_p99").check(medians)[0][0]
    assert not figs.Expectation("small/team-a.wait_p99 < big/team-a.wait_p99").check(medians)[0][0]
    assert figs.Expectation("all.completed == 40").check(medians) == [(True, "big/all.completed = 40 == 40"),
                                                                        (True, "small/all.completed = 40 == 40")]
    with pytest.raises(ValueError, match="write \\[design/\\]queue.figure OP value"):
        figs.Expectation("team-a wait <= 3")
    with pytest.raises(ValueError, match="no value for.*figures: completed, wait_p99"):
        figs.Expectation("team-a.wait_p50 < 3").check(medians)
    with pytest.raises(ValueError, match="design 'nope'"):
        figs.Expectation("nope/team-a.wait_p99 < 3").check(medians)


@pytest.mark.parametrize("args, fragments", [
    (["--designs", "{d}"], ["row 2, field queue", "'team-c' is not a leaf queue"]),
    (["--designs", "{d}", "--compress", "0"], ["--compress 0"]),
    (["--designs", "{d}", "--expect", "team-a wait < 3"], ["write [design/]queue.figure OP value"]),
    (["--designs", "{d},{d}"], ["also the name of"]),
    (["--designs", "{d}", "--window", "2h:1h"], ["--window '2h:1h'", "TO after FROM"]),
    (["--designs", "{d}", "--window", "1h:2h"], ["--window 1h:2h: no job of"]),
])
def test_cli_replay_refuses_bad_input_before_any_lab(tmp_path, args, fragments):
    d = tmp_path / "d.yaml"
    d.write_text("design: d\nqueues: {team-a: {gpu: {quota: 4}}, team-b: {gpu: {quota: 4}}}\n")
    rows = ["0,team-a,1,1,5", "1,team-c,1,1,5"] if not {"--compress", "--expect", "--window", "{d},{d}"} & set(args) \
        else ["0,team-a,1,1,5"]
    t = _csv(tmp_path, *rows)
    env = {"KAILAB_STATE": str(tmp_path / "state"), "KAILAB_EVIDENCE": str(tmp_path / "evidence")}
    out = kailab_cli("replay", str(t), *[a.format(d=d) for a in args], env=env)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    assert not (tmp_path / "evidence").exists() and not (tmp_path / "state").exists()


def test_a_late_submitter_is_said_and_pairs_are_judged_one_by_one():
    ok = figs.run_figures(_records([0, 10], [5]), 4)
    late = figs.run_figures(_records([0, 10], [5]), 4)
    late["submit"] = {"lag_p99_wall_s": 3.0, "inter_arrival_median_wall_s": 1.0}
    ok["submit"] = {"lag_p99_wall_s": 0.1, "inter_arrival_median_wall_s": 1.0}
    assert figs.fell_behind([ok]) == ""
    assert "fell behind the trace in 1 of 2 run(s): lag p99 3 s against a median inter-arrival time of 1 s" \
        in figs.fell_behind([ok, late])
    same = [figs.run_figures(_records([0, 10], [5]), 4), figs.run_figures(_records([2, 12], [6]), 4)]
    other = [figs.run_figures(_records([50, 60], [5]), 4), figs.run_figures(_records([55, 65], [6]), 4)]
    d = figs.differences({"a": same, "a-again": list(same), "b": other})
    assert d["pairs"]["a vs a-again"] == []
    assert "team-a.wait_p50" in d["pairs"]["a vs b"] and "team-a.wait_p50" in d["pairs"]["a-again vs b"]


def test_the_replay_picture_is_a_standalone_svg_with_every_design():
    import xml.etree.ElementTree as ET

    from kailab.report.replay import picture_svg

    runs = {"big": [figs.run_figures(_records([0, 10], [50]), 4)], "small": [figs.run_figures(_records([40, 60], [5]), 4)]}
    c = {"plan": {"trace": "t.csv", "jobs": 3, "fleet": "tiny", "repeat": 1},
         "medians": {d: figs.medians(r) for d, r in runs.items()}, "queues": ["team-a", "team-b"],
         "utilisation": {d: r[0]["fleet"]["utilisation_series"] for d, r in runs.items()}}
    svg = picture_svg(c)
    root = ET.fromstring(svg)  # well-formed, with the SVG namespace a browser or README needs
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert svg.count("<polyline") == 2 and svg.count("<rect") >= 1 + 2 + 4  # background, legend, 4 bars
    assert ">big<" in svg and ">small<" in svg and "Replay of t.csv: 3 jobs" in svg


def test_variants_are_designs_or_kai_versions_never_both(tmp_path):
    from kailab.errors import KailabError
    from kailab.replay.session import variants_for

    for n in ("a", "b"):
        (tmp_path / f"{n}.yaml").write_text(f"design: {n}\nqueues: {{team-a: {{gpu: {{quota: 1}}}}}}\n")
    a, b = load_design(tmp_path / "a.yaml"), load_design(tmp_path / "b.yaml")
    assert [(v.label, v.design.name) for v in variants_for([a, b], [])] == [("a", "a"), ("b", "b")]
    by_version = variants_for([a], ["v0.16.8", "v0.17.0"])
    assert [(v.label, v.design.name, v.kai_version) for v in by_version] == [("v0.16.8", "a", "v0.16.8"),
                                                                            ("v0.17.0", "a", "v0.17.0")]
    with pytest.raises(KailabError, match="one of them at a time"):
        variants_for([a, b], ["v0.16.8", "v0.17.0"])
    by_stack = variants_for([a], [], ["kai", "kueue+kai"])
    assert [(v.label, v.stack) for v in by_stack] == [("kai", "kai"), ("kueue-kai", "kueue+kai")]
    with pytest.raises(KailabError, match="one of them at a time"):
        variants_for([a, b], [], ["kai", "kueue"])


SHIPPED = Path(__file__).resolve().parents[2] / "exercises" / "replays"


def test_a_trace_a_stack_cannot_run_is_one_line_before_any_lab_and_whole_gpus_runs_it(tmp_path):
    """The shipped trace has GPU fractions: on kueue that is refused up front, naming how many jobs,
    which and why, with the way out; --whole-gpus makes the same jobs whole-GPU on every variant."""
    from kailab.replay.session import Plan, check, variants_for
    from kailab.replay.trace import load_trace, whole_gpus

    trace = load_trace(SHIPPED / "quota-what-if.csv")
    fractional = [j.name for j in trace.jobs if j.fractional]
    design = load_design(SHIPPED / "designs" / "team-a-first.yaml")
    plan = Plan(trace=trace, variants=variants_for([design], [], ["kai", "kueue"]), fleet="small", compress=30)
    with pytest.raises(KailabError) as err:
        check(plan)
    text = str(err.value)
    assert "\n" not in text and f"{len(fractional)} of {len(trace.jobs)} jobs cannot run on the kueue stack" in text
    assert fractional[0] in text and "Kueue counts whole GPUs" in text and "--whole-gpus" in text
    whole = whole_gpus(trace)
    assert [j.gpus for j in whole.jobs if j.name in fractional] == [1.0] * len(fractional)
    assert [j for j in whole.jobs if j.name not in fractional] == [j for j in trace.jobs if j.name not in fractional]
    check(Plan(trace=whole, variants=plan.variants, fleet="small", compress=30, whole_gpus=True))


def test_a_replay_page_counts_the_replay_not_runs(tmp_path):
    """The header says what the page holds: a replay is no '0 run(s)'."""
    import json as _json

    from kailab.report import render_report

    runs = {"big": [figs.run_figures(_records([0, 10], [50]), 4)]}
    c = {"plan": {"trace": "t.csv", "jobs": 3, "fleet": "tiny", "repeat": 1},
         "medians": {d: figs.medians(r) for d, r in runs.items()}, "queues": ["team-a"],
         "differences": {"judged": False, "why": "one run per design"},
         "utilisation": {d: r[0]["fleet"]["utilisation_series"] for d, r in runs.items()}}
    d = tmp_path / "replay-x"
    d.mkdir()
    (d / "comparison.json").write_text(_json.dumps(c))
    page = render_report([d], base=tmp_path)
    header = page[page.index("<header>"):page.index("</header>")]
    assert "1 replay." in header and "run(s)" not in header and "exercise run" not in header


def test_the_shipped_stacks_replay_file_compares_kai_and_kueue_on_whole_gpus():
    """exercises/stacks/replay-kai-vs-kueue.yaml: one design, two stacks, fractions asked as whole GPUs
    (Kueue counts whole GPUs); it passes every check made before a lab starts."""
    from kailab.replay.spec import load_replay

    _, plan = load_replay(SHIPPED.parent / "stacks" / "replay-kai-vs-kueue.yaml")
    assert [(v.label, v.stack, v.design.name) for v in plan.variants] == [("kai", "kai", "team-a-first"),
                                                                          ("kueue", "kueue", "team-a-first")]
    assert plan.whole_gpus and not [j for j in plan.trace.jobs if j.fractional]


def test_a_windowed_replay_of_several_classes_says_its_window_and_a_row_per_class():
    from kailab.replay import session

    rec = _records([0, 10], [5])
    rec["jobs"][0]["priority"] = "inference"
    runs = [figs.run_figures(rec, 4)]
    c = {"plan": {"trace": "t.csv", "jobs": 3, "fleet": "f", "compress": 20, "repeat": 1,
                  "variants": [{"label": "d", "stack": "kai"}],
                  "window": {"from_s": 3560 * 3600, "to_s": 3563 * 3600, "cut": 1, "running_before": 2,
                             "running_before_gpus": 1.5}},
         "medians": {"d": figs.medians(runs)}, "ranges": {"d": figs.ranges(runs)},
         "differences": figs.differences({"d": runs}), "expectations": [], "errors": {}, "warnings": {},
         "queues": ["team-a", "team-b"], "priorities": sorted(runs[0]["priorities"])}
    md = session.markdown(c)
    assert "from 3560 h to 3563 h of it, each cut at its end (1 were); 2 jobs still running at its start (1.5 GPUs)" in md
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1].strip(" |") for line in md.splitlines() if line.startswith("| priority-")}
    assert (float(rows["priority-inference.wait_p50"]), float(rows["priority-train.wait_p50"])) == (0, 5)


def test_a_trace_jobs_job_retries_what_kai_evicts_and_ends_by_its_run_time():
    """An evicted pod now ends Failed (exit 143) and is counted: the Job must not die of one reclaim."""
    from kailab import workloads
    from kailab.replay.player import REPLAY_BACKOFF_LIMIT, job_objects
    from kailab.replay.trace import TraceJob

    (job,) = job_objects(TraceJob("j", 0, "team-a", 2, 1, 600), "ns", compress=10)
    assert job["kind"] == "Job" and job["spec"]["backoffLimit"] == REPLAY_BACKOFF_LIMIT > 100
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations[workloads.RUN_DURATION_ANNOTATION] == "60.000s"
    assert workloads.TERMINATION_EXIT_CODE_ANNOTATION not in annotations  # SIGTERM's 143 when evicted
