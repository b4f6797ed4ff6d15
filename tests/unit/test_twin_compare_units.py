"""Twins side by side, before any lab: a design is checked against the snapshot (one line naming the file
and field, nothing made), changes only what it says (queues by the snapshot's names, anonymised or not;
KAI's placement as its operator renders it; scheduler flags over the snapshot's), and the comparison
tells a pod decided differently (placed by one twin, pending or evicted in another) from one placed on
other nodes, with each queue's GPUs before and after. (Live: tests/live/test_twin_live.py.)"""

from __future__ import annotations

import os

import pytest

from kailab.errors import InputError, KailabError
from kailab.paths import lab_dir
from kailab.twin.compare import compare, markdown, variants_for
from kailab.twin.design import AS_IS, change_conf, check_against, load_twin_design
from kailab.twin.plan import make_plan, pod_gpus
from kailab.twin.snapshot import load_snapshot

from twin_sample import as_zip as _zip, snapshot

from helpers import kailab_cli

KAI_CONF = {"actions": "allocate, consolidation, reclaim, preempt, stalegangeviction",
            "tiers": [{"plugins": [{"name": "proportion"}, {"name": "gpupack"},
                                   {"name": "nodeplacement", "arguments": {"cpu": "binpack", "gpu": "binpack"}},
                                   {"name": "gpusharingorder"}]}]}


def _design(tmp_path, text: str, name: str = "d.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, field", [
    ("design: Bad_Name\nqueues: {team-a: {gpu: {quota: 4}}}\n", "design"),
    (f"design: {AS_IS}\nqueues: {{team-a: {{gpu: {{quota: 4}}}}}}\n", "design"),
    ("design: nothing\n", "queues"),
    ("design: x\nqueues: {team-a: {gpu: {quota: -2}}}\n", "queues.team-a.gpu.quota"),
    ("design: x\nqueues: {team-a: {gpu: {quota: 4, weight: 2}}}\n", "queues.team-a.gpu.weight"),
    ("design: x\nscheduler: {args: {--schedule-period: 2s}}\n", "scheduler.args.--schedule-period"),
    ("design: x\nscheduler: {placement: pack}\n", "scheduler.placement"),
])
def test_a_bad_design_is_refused_naming_its_file_and_field(tmp_path, text, field):
    path = _design(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_twin_design(path)
    line = str(err.value)
    assert "\n" not in line and str(path) in line and field in line, line


def test_a_design_naming_a_queue_the_snapshot_lacks_is_refused_with_the_ones_it_has(tmp_path):
    plan = make_plan(load_snapshot(_zip(tmp_path, snapshot())), "t")
    design = load_twin_design(_design(tmp_path, "design: x\nqueues: {team-z: {gpu: {quota: 4}}}\n"))
    with pytest.raises(InputError) as err:
        check_against(design, plan.queue_names())
    assert "queues.team-z" in str(err.value) and "org, team-a" in str(err.value)


@pytest.mark.parametrize("anonymise", [False, True])
def test_a_design_changes_only_what_it_says(tmp_path, anonymise):
    plan = make_plan(load_snapshot(_zip(tmp_path, snapshot(config=KAI_CONF))), "t", anonymise=anonymise)
    design = load_twin_design(_design(tmp_path, "design: more\nqueues: {team-a: {gpu: {limit: 12}, priority: 7}}\n"
                                                "scheduler: {args: {schedule-period: 2s, new-flag: 'on'}}\n"))
    check_against(design, plan.queue_names())
    changed = plan.with_design(design)
    before = {o["metadata"]["name"]: o for o in plan.objects if o["kind"] == "Queue"}
    after = {o["metadata"]["name"]: o for o in changed.objects if o["kind"] == "Queue"}
    team = plan.names.of("team-a")
    assert after[team]["spec"]["resources"]["gpu"] == {"limit": 12} and after[team]["spec"]["priority"] == 7
    assert "resources" not in before[team]["spec"]  # the plan it came from is untouched
    assert after[plan.names.of("org")] == before[plan.names.of("org")]
    assert changed.args == ["--update-pod-eviction-condition=true", "--schedule-period=2s", "--new-flag=on"]
    assert changed.conf == plan.conf and changed.design == "more" and plan.design == AS_IS
    assert changed.bound == plan.bound and changed.pending == plan.pending


def test_spread_is_rendered_as_kais_operator_renders_a_shards_placement():
    spread = change_conf(KAI_CONF, "spread")
    plugins = [p["name"] for p in spread["tiers"][0]["plugins"]]
    assert plugins == ["proportion", "gpuspread", "nodeplacement"]
    assert spread["tiers"][0]["plugins"][2]["arguments"] == {"cpu": "spread", "gpu": "spread"}
    assert spread["actions"] == "allocate, reclaim, preempt, stalegangeviction"
    back = change_conf(spread, "binpack")
    assert [p["name"] for p in back["tiers"][0]["plugins"]] == ["proportion", "gpupack", "nodeplacement", "gpusharingorder"]
    assert back["actions"] == KAI_CONF["actions"] and change_conf(KAI_CONF, None) == KAI_CONF


def test_a_pods_gpus_and_queue_come_from_its_requests_and_its_podgroup(tmp_path):
    plan = make_plan(load_snapshot(_zip(tmp_path, snapshot())), "t")
    assert plan.pod_shares() == {"ml/run-0": ("team-a", 1.0), "ml/wait-0": ("team-a", 1.0)}
    assert pod_gpus({"metadata": {"annotations": {"gpu-fraction": "0.5"}}, "spec": {"containers": [{}]}}) == 0.5


def _rec(version, placed, pending, evicted=(), why=None, queues=None):
    return {"kai_version": version, "design": AS_IS, "seconds": {"total": 60.0},
            "decided": {"settled": True, "placed": placed, "still_pending": list(pending), "evicted": list(evicted),
                        "moved": {}, "why_pending": why or {}, "evicted_for": {p: "preempted by ml/pg-x" for p in evicted}},
            "queues_gpus": queues or {"team-a": {"before": 8, "after": 8 + len(placed) - len(evicted)}}}


def test_the_comparison_tells_a_different_decision_from_a_different_node():
    c = compare({"v0.16.8": _rec("v0.16.8", {"ml/a": "n1", "ml/b": "n1"}, ["ml/c"], why={"ml/c": "OverLimit: no"}),
                 "v0.17.0": _rec("v0.17.0", {"ml/a": "n1", "ml/b": "n2", "ml/c": "n3"}, [], evicted=["ml/r"])})
    rows = {r["pod"]: r for r in c["differences"]}
    assert set(rows) == {"ml/b", "ml/c", "ml/r"}  # a: the same node in both
    assert rows["ml/b"]["kind"] == "node" and rows["ml/c"]["kind"] == "decision" and rows["ml/r"]["kind"] == "decision"
    assert rows["ml/c"]["outcomes"] == {"v0.16.8": "pending: OverLimit: no", "v0.17.0": "on n3"}
    assert rows["ml/r"]["outcomes"] == {"v0.16.8": "running", "v0.17.0": "evicted (preempted by ml/pg-x)"}
    assert (c["decided_differently"], c["placed_differently"], c["pending_in_snapshot"]) == (2, 1, 3)
    assert c["queues_gpus"] == {"team-a": {"before": 8, "v0.16.8": 10, "v0.17.0": 10}} and c["ok"]
    text = markdown(c)
    assert "| ml/c | pending: OverLimit: no | on n3 |" in text and "Decided differently: 2" in text


def test_a_twin_that_could_not_finish_is_said_and_fails_the_comparison():
    c = compare({"as-is": _rec("v0.17.0", {}, ["ml/c"]), "more": {"error": "lab more: scheduler died"}})
    assert not c["ok"] and c["variants"]["more"]["error"] == "lab more: scheduler died" and c["differences"] == []
    assert "error: lab more: scheduler died" in markdown(c)


def test_one_axis_at_a_time(tmp_path):
    design = load_twin_design(_design(tmp_path, "design: more\nqueues: {team-a: {gpu: {limit: 12}}}\n"))
    assert [v.label for v in variants_for(["v0.17.0"], [design])] == [AS_IS, "more"]
    assert [v.label for v in variants_for(["v0.16.8", "v0.17.0"], [])] == ["v0.16.8", "v0.17.0"]
    with pytest.raises(KailabError, match="one at a time"):
        variants_for(["v0.16.8", "v0.17.0"], [design])
    with pytest.raises(KailabError, match="two KAI versions"):
        variants_for(["v0.17.0"], [])
    with pytest.raises(KailabError, match="named 'more'"):
        variants_for(["v0.17.0"], [design, design])


def test_the_cli_refuses_a_design_for_a_queue_the_snapshot_lacks_in_one_line_making_nothing(tmp_path):
    snap = _zip(tmp_path, snapshot())
    bad = _design(tmp_path, "design: more\nqueues: {team-z: {gpu: {limit: 12}}}\n")
    name = f"badtwins-{os.getpid()}"
    out = kailab_cli("twin", str(snap), "--name", name, "--designs", str(bad), env={"KAILAB_EVIDENCE": str(tmp_path / "ev")})
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "queues.team-z" in lines[0], out.stderr
    assert not (tmp_path / "ev").exists()
    assert not any(lab_dir(f"{name}-{v}").exists() for v in (AS_IS, "more"))


# KAI's scheduler log as its zap console logger writes it (colour codes and all): the twin's and the tool's
_LOG = """2026-11-27T13:38:12.002Z\t\x1b[34mINFO\x1b[0m\tframework/session.go:508\t[\x1b[37m16rq5S\x1b[0m] Session 16rq5S with <0> Jobs
2026-11-27T13:38:12.506Z\t\x1b[34mINFO\x1b[0m\tcache/cache.go:327\t[\x1b[31mOPUcIq\x1b[0m] [\x1b[32mallocate\x1b[0m] Creating bind request for task <ml/wait-0> to node <gpu-a> gpuGroup: <[]>, requires: <[1]> GPUs
2026-11-27T13:38:12.507Z\t\x1b[34mINFO\x1b[0m\tframework/statement.go:583\t[\x1b[31mOPUcIq\x1b[0m] [\x1b[32mreclaim\x1b[0m] Evicting task: ml/run-0
2026-11-27T13:38:13.016Z\t\x1b[34mINFO\x1b[0m\tcache/cache.go:327\t[\x1b[36muGOK2m\x1b[0m] [\x1b[32mallocate\x1b[0m] Creating bind request for task <ml/late> to node <gpu-b> gpuGroup: <[]>, requires: <[1]> GPUs
2026-11-27T13:38:13.017Z\t\x1b[34mINFO\x1b[0m\tframework/statement.go:590\t[\x1b[36muGOK2m\x1b[0m] [\x1b[32mallocate\x1b[0m] Pipelining task: ml/pipe
"""


def test_kais_log_gives_each_sessions_decisions_in_order():
    from kailab.twin.snapshot_tool import decisions

    assert decisions(_LOG) == [
        ("OPUcIq", {"placed": {"ml/wait-0": "gpu-a"}, "evicted": ["ml/run-0"], "pipelined": []}),
        ("uGOK2m", {"placed": {"ml/late": "gpu-b"}, "evicted": [], "pipelined": ["ml/pipe"]})]


def test_the_agreement_explains_every_difference():
    from kailab.twin.snapshot_tool import agreement, decisions, markdown as tool_markdown

    tool = {"placed": {"ml/wait-0": "gpu-c", "ml/late": "gpu-b", "ml/never": "gpu-a"}, "evicted": ["ml/run-0"],
            "pipelined": [], "seconds": 0.4}
    twin = decisions(_LOG)
    a = agreement(tool, twin, {"placed": {"ml/wait-0": "gpu-a", "ml/late": "gpu-b"}, "evicted": ["ml/run-0"]},
                  same_nodes=lambda x, y: {x, y} == {"gpu-a", "gpu-c"})
    causes = {d["pod"]: d["cause"] for d in a["differences"]}
    assert a["alike"] == 1 and a["pods_decided"] == 4 and a["agreement"] == 0.25  # ml/run-0 evicted by both
    assert causes["ml/wait-0"].startswith("a tie between identical nodes")
    assert causes["ml/late"].startswith("the twin decided it in a later session (uGOK2m)")
    assert causes["ml/never"].startswith("the twin never decided it")
    assert a["twin_first_session"]["id"] == "OPUcIq" and "1 of 4 pods decided alike (agreement 25%)" in tool_markdown(a)
    none = agreement({"placed": {}, "evicted": [], "pipelined": []}, [], {}, lambda x, y: False)
    assert none["agreement"] == 1.0 and none["pods_decided"] == 0


def test_when_neither_side_placed_a_pod_the_line_says_what_both_did(tmp_path):
    """Not "0 of 0 pods decided alike (agreement 100%)": every pending pod left pending, with KAI's reason."""
    import json as _json

    from kailab.report.twins import twins_html
    from kailab.twin.snapshot_tool import agreement, markdown as tool_markdown

    over = "Non-preemptible workload is over quota. Workload requested 1 GPUs, queue quota 0"
    settled = {"placed": {}, "evicted": [], "still_pending": ["ml/a", "ml/b", "ml/c"],
               "why_pending": {"ml/a": over, "ml/b": over}}
    a = agreement({"placed": {}, "evicted": [], "pipelined": []}, [], settled, lambda x, y: False)
    assert a["neither"] == {"pending": 3, "reasons": {over: 2, "no reason recorded": 1}}
    line = tool_markdown(a)
    assert "0 of 0" not in line and "100%" not in line
    assert "neither side placed, evicted or pipelined a pod: 3 pending in both" in line
    assert f"{over} — 2 pods" in line and "no reason recorded — 1 pod)" in line
    folder = tmp_path / "twins-x"
    (folder / "as-is").mkdir(parents=True)
    (folder / "as-is" / "twin.json").write_text(_json.dumps({"against_snapshot_tool": a}))
    (folder / "comparison.json").write_text(_json.dumps({
        "variants": {"as-is": {"kai_version": "v0.17.0", "design": None, "placed": 0, "still_pending": 3, "evicted": 0,
                               "settled": True, "seconds": 1}},
        "pending_in_snapshot": 3, "decided_differently": 0, "placed_differently": 0}))
    page = twins_html(folder, tmp_path, lambda path, base: str(path))
    assert "neither placed a pod: 3 pending in both" in page and "0 of 0" not in page


def test_the_tool_reads_the_twins_kept_state_with_what_an_api_server_adds(tmp_path):
    import json as _json

    from kailab.twin.snapshot_tool import tool_snapshot
    from twin_sample import TOKEN

    plan = make_plan(load_snapshot(_zip(tmp_path, snapshot())), "t")
    snap = tool_snapshot(plan, plan.params)
    raw = snap["rawObjects"]
    assert TOKEN not in _json.dumps(snap) and snap["config"] == plan.conf
    assert {p["metadata"]["name"]: p["status"]["phase"] for p in raw["pods"]} == {"run-0": "Running", "wait-0": "Pending"}
    assert all(p["spec"]["priority"] == 50 for p in raw["pods"])
    uids = [o["metadata"]["uid"] for k in raw for o in raw[k]]
    assert len(uids) == len(set(uids)) == sum(len(v) for v in raw.values())
    assert all(n["status"]["conditions"] == [{"type": "Ready", "status": "True"}] for n in raw["nodes"])
    assert plan.same_nodes("gpu-a", "gpu-b") and not plan.same_nodes("gpu-a", "nowhere")


def test_an_equivalent_victim_is_paired_not_counted_as_never_decided():
    from kailab.twin.snapshot_tool import agreement

    tool = {"placed": {}, "evicted": ["ml/a", "ml/b"], "pipelined": [], "seconds": 0.1}
    twin = [("s1", {"placed": {}, "evicted": ["ml/a", "ml/c"], "pipelined": []})]
    a = agreement(tool, twin, {"placed": {}, "evicted": ["ml/a", "ml/c"]}, lambda x, y: True,
                  equivalent=lambda x, y: {x, y} == {"ml/b", "ml/c"})
    causes = {d["pod"]: d["cause"] for d in a["differences"]}
    assert a["alike"] == 1 and set(causes) == {"ml/b", "ml/c"}
    assert causes["ml/b"] == causes["ml/c"] and causes["ml/b"].startswith("an equivalent choice: the tool evicted ml/b, the twin ml/c")


def test_pods_are_equivalent_when_nothing_but_their_names_differs(tmp_path):
    data = snapshot()
    from twin_sample import pod, node
    data["rawObjects"]["nodes"].append(node("gpu-c", 4))
    data["rawObjects"]["pods"] += [pod("run-1", "gpu-b"), pod("run-2", "gpu-c")]
    data["rawObjects"]["podGroups"] += [{"metadata": {"name": f"pg-run-{i}", "namespace": "ml"},
                                         "spec": {"minMember": 1, "queue": "team-a"}} for i in (1, 2)]
    plan = make_plan(load_snapshot(_zip(tmp_path, data)), "t")
    assert plan.equivalent_pods("ml/run-0", "ml/run-1")  # gpu-a and gpu-b: alike
    assert not plan.equivalent_pods("ml/run-0", "ml/run-2")  # gpu-c has 4 GPUs, not 8
    assert not plan.equivalent_pods("ml/run-0", "ml/wait-0") and not plan.equivalent_pods("ml/run-0", "ml/nope")


def test_the_tool_gets_the_uids_and_times_the_lab_gave_its_pods_and_podgroups(tmp_path):
    from kailab.twin.snapshot_tool import tool_snapshot

    plan = make_plan(load_snapshot(_zip(tmp_path, snapshot())), "t")
    held = {"Pod/ml/run-0": {"creationTimestamp": "2026-11-27T10:00:00Z", "startTime": "2026-11-27T10:00:01Z",
                             "uid": "lab-uid-run"},
            "Pod/ml/wait-0": {"creationTimestamp": "2026-11-27T10:00:02Z", "startTime": None, "uid": "lab-uid-wait"},
            "PodGroup/ml/pg-wait-0": {"creationTimestamp": "2026-11-27T10:00:02Z", "uid": "lab-uid-pg"}}
    raw = tool_snapshot(plan, plan.params, held)["rawObjects"]
    pods = {p["metadata"]["name"]: p for p in raw["pods"]}
    assert pods["run-0"]["metadata"]["creationTimestamp"] == "2026-11-27T10:00:00Z"
    assert (pods["run-0"]["metadata"]["uid"], pods["wait-0"]["metadata"]["uid"]) == ("lab-uid-run", "lab-uid-wait")
    assert pods["run-0"]["status"] == {"phase": "Running", "startTime": "2026-11-27T10:00:01Z"}
    assert pods["wait-0"]["status"] == {"phase": "Pending"}
    groups = {g["metadata"]["name"]: g["metadata"] for g in raw["podGroups"]}
    assert groups["pg-wait-0"]["uid"] == "lab-uid-pg" and groups["pg-wait-0"]["creationTimestamp"] == "2026-11-27T10:00:02Z"
    assert groups["pg-run-0"]["uid"] and groups["pg-run-0"]["uid"] != "lab-uid-pg"  # one the lab did not say: made up


def _ordered_snapshot():
    """Four pods of one PodGroup created in the order d, b, a, c (c and a in one second: then by UID)."""
    from twin_sample import pod
    data = snapshot()
    stamps = {"a": ("2026-11-27T10:00:05Z", "u-2"), "b": ("2026-11-27T10:00:03Z", "u-9"),
              "c": ("2026-11-27T10:00:05Z", "u-3"), "d": ("2026-11-27T10:00:01Z", "u-5")}
    data["rawObjects"]["pods"] = []
    for name, (ts, uid) in stamps.items():
        p = pod(f"w-{name}", None)
        p["metadata"].update(creationTimestamp=ts, uid=uid)
        p["metadata"]["annotations"]["pod-group-name"] = "pg-w"
        data["rawObjects"]["pods"].append(p)
    data["rawObjects"]["podGroups"] = [
        {"metadata": {"name": "pg-w", "namespace": "ml", "creationTimestamp": "2026-11-27T10:00:00Z", "uid": "g1"},
         "spec": {"minMember": 1, "queue": "team-a"}}]
    return data


def test_a_twin_makes_its_pods_in_the_snapshots_creation_order(tmp_path):
    plan = make_plan(load_snapshot(_zip(tmp_path, _ordered_snapshot())), "t")
    assert [p["metadata"]["name"] for p in plan.pending] == ["w-d", "w-b", "w-a", "w-c"]
    assert plan.order["Pod/ml/w-a"] == ("2026-11-27T10:00:05Z", "u-2")
    assert plan.order["PodGroup/ml/pg-w"] == ("2026-11-27T10:00:00Z", "g1")


def test_an_order_the_lab_could_not_keep_is_listed_with_a_pair_and_why():
    from kailab.twin.order import not_kept

    pods = [{"kind": "Pod", "metadata": {"name": n, "namespace": "ml", "annotations": {"pod-group-name": "pg-w"}}}
            for n in ("w-d", "w-b", "w-a", "w-c")]
    groups = [{"kind": "PodGroup", "metadata": {"name": "pg-w", "namespace": "ml"}, "spec": {"queue": "team-a"}}]
    planned = {"Pod/ml/w-d": ("t1", "u5"), "Pod/ml/w-b": ("t3", "u9"), "Pod/ml/w-a": ("t5", "u2"),
               "Pod/ml/w-c": ("t5", "u3"), "PodGroup/ml/pg-w": ("t0", "g")}
    kept = {"Pod/ml/w-d": ("L1", "x"), "Pod/ml/w-b": ("L2", "x"), "Pod/ml/w-a": ("L3", "a"), "Pod/ml/w-c": ("L3", "b"),
            "PodGroup/ml/pg-w": ("L0", "g")}
    assert not_kept(planned, kept, groups, pods) == {}
    # made in one second, the lab's UIDs put c before a
    swapped = {**kept, "Pod/ml/w-a": ("L3", "z")}
    notes = not_kept(planned, swapped, groups, pods)
    assert list(notes) == ["order/pods of PodGroup ml/pg-w"]
    assert notes["order/pods of PodGroup ml/pg-w"][0].startswith("2 of 4 in another order than the snapshot's: "
                                                                   "ml/w-a came before ml/w-c there, after it here")
    assert "same second" in notes["order/pods of PodGroup ml/pg-w"][0]


def test_a_twin_comparison_has_its_section_in_the_report_and_is_no_replay(tmp_path):
    import json as _json

    from kailab.report.page import render_report
    from kailab.report.replay import is_replay
    from kailab.report.twins import is_twins

    c = compare({"as-is": _rec("v0.17.0", {}, ["ml/c"], why={"ml/c": "OverLimit: prod <at limit>"}),
                 "more": _rec("v0.17.0", {"ml/c": "n3"}, [])})
    folder = tmp_path / "twins-x"
    (folder / "more").mkdir(parents=True)
    (folder / "comparison.json").write_text(_json.dumps(c))
    (folder / "more" / "twin.json").write_text(_json.dumps({"against_snapshot_tool": {"alike": 1, "pods_decided": 1,
                                                                                      "agreement": 1.0}}))
    assert is_twins(folder) and not is_replay(folder)
    page = render_report([folder], base=tmp_path)
    assert "Twins twins-x: as-is, more" in page and "1 twin comparison" in page
    assert "pending: OverLimit: prod &lt;at limit&gt;" in page and "on n3" in page  # escaped, KAI's words kept
    assert "1 of 1 pods alike (100%)" in page
