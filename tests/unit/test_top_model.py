"""kailab top's picture from objects shaped as the API server returns them (the live tests hold it
to a real API server with KAI running: tests/live/test_top_live.py): GPUs counted as KAI counts
them, the queue tree rolled up, KAI's latest reason, evictions one row per action and evictor."""

from __future__ import annotations

from kailab.top.model import pod_gpus, snapshot
from kailab.top.screen import render, spark

NOW = 1_800_000_000.0


def node(name, gpus, pool, mib=None, ready=True):
    labels = {"kailab.io/pool": pool, **({"nvidia.com/gpu.memory": str(mib)} if mib else {})}
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name, queue, gpus=0, node_name=None, annotations=None, phase="Running", created="2027-01-15T08:00:00Z"):
    res = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {"metadata": {"name": name, "namespace": "ns", "labels": {"kai.scheduler/queue": queue},
                         "annotations": {"pod-group-name": f"pg-{name}", **(annotations or {})},
                         "creationTimestamp": created},
            "spec": {"containers": [{"name": "c", "resources": res}], **({"nodeName": node_name} if node_name else {})},
            "status": {"phase": phase if node_name else "Pending"}}


def queue(name, parent=None, quota=0, limit=-1):
    return {"metadata": {"name": name},
            "spec": {"resources": {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": 1}},
                     **({"parentQueue": parent} if parent else {})}}


def test_gpus_as_kai_counts_them():
    assert pod_gpus(pod("a", "q", gpus=2)) == 2
    assert pod_gpus(pod("f", "q", annotations={"gpu-fraction": "0.5"})) == 0.5
    assert pod_gpus(pod("f2", "q", annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"})) == 1.0
    assert pod_gpus(pod("m", "q", annotations={"gpu-memory": "20480"}), node_gpu_mib=40960) == 0.5
    assert pod_gpus(pod("m", "q", annotations={"gpu-memory": "20480"})) == 0  # not yet on a node: unknown share
    assert pod_gpus(pod("cpu", "q")) == 0


def test_the_queue_tree_rolls_children_up_and_keeps_the_oldest_wait_with_kais_latest_reason():
    group = {"metadata": {"name": "pg-w1", "namespace": "ns"}, "spec": {"queue": "b"},
             "status": {"schedulingConditions": [
                 {"lastTransitionTime": "2027-01-15T08:00:10Z", "transitionID": "1", "reasons": [
                     {"reason": "NonPreemptibleOverQuota", "message": "old"}]},
                 {"lastTransitionTime": "2027-01-15T08:00:20Z", "transitionID": "2", "reasons": [
                     {"reason": "OverLimit", "message": "b quota has reached the allowable limit"}]}]}}
    objects = {
        "nodes": [node("n0", 8, "a100", mib=40960), node("n1", 4, "l40s", ready=False)],
        "queues": [queue("root", quota=-1), queue("a", "root", 4), queue("b", "root", 2, 3)],
        "podgroups": [group],
        "pods": [pod("r1", "a", 2, "n0"), pod("r2", "b", 0, "n0", {"gpu-memory": "20480"}),
                 pod("w1", "b", 1, created="2027-01-15T08:00:00Z"), pod("w2", "a", 1, created="2027-01-15T08:00:05Z"),
                 pod("done", "a", 4, "n1", phase="Succeeded")],
        "evictions": [],
    }
    objects["queues"][0]["status"] = {"allocated": {"nvidia.com/gpu": "1k"}}  # KAI writes quantities
    snap = snapshot(objects, NOW, fair_share={"a": 3.0})
    assert snap["queues"][0]["kai_allocated"] == 1000.0
    rows = {r["name"]: r for r in snap["queues"]}
    assert [r["name"] for r in snap["queues"]] == ["root", "a", "b"]
    assert (rows["a"]["gpus"], rows["b"]["gpus"], rows["root"]["gpus"]) == (2, 0.5, 2.5)
    assert (rows["root"]["running"], rows["root"]["pending"]) == (2, 2)
    assert rows["a"]["fair_share"] == 3.0 and rows["b"]["fair_share"] is None
    assert rows["b"]["oldest_pending"]["pod"] == "ns/w1" and rows["b"]["oldest_pending"]["reason"] == "OverLimit"
    assert rows["root"]["oldest_pending"]["pod"] == "ns/w1"  # the oldest of its children's
    assert rows["a"]["oldest_pending"]["reason"] == ""  # KAI said nothing yet
    assert snap["cluster"] == {"nodes": 2, "gpus": 12.0, "gpus_used": 2.5, "gpus_idle": 9.5,
                               "utilisation": round(2.5 / 12, 4), "pods_running": 2, "pods_pending": 2}
    assert [(p["pool"], p["ready"], p["gpus_used"]) for p in snap["pools"]] == [("a100", 1, 2.5), ("l40s", 0, 0.0)]


def test_evictions_are_one_row_per_action_and_second_newest_first():
    def evict(group, action, evictor, t, pods="1"):
        return {"metadata": {"name": f"e-{group}", "annotations": {
                    "evictor-action-type": action, "evictor-pod-group-name": evictor,
                    "evictor-pod-group-namespace": "ns", "num-evicted-pods": pods}},
                "involvedObject": {"namespace": "ns", "name": group}, "lastTimestamp": t, "message": "m"}
    events = [evict("p1", "reclaim", "pg-r", "2027-01-15T08:00:01Z"), evict("p2", "reclaim", "pg-r", "2027-01-15T08:00:01Z"),
              evict("p3", "preempt", "pg-h", "2027-01-15T08:00:09Z", pods="4")]
    snap = snapshot({"evictions": events}, NOW)
    assert [(e["action"], e["pods"], e["for"], e["podgroups"]) for e in snap["evictions"]] == [
        ("preempt", 4, ["ns/pg-h"], ["ns/p3"]), ("reclaim", 2, ["ns/pg-r"], ["ns/p1", "ns/p2"])]


def test_the_screen_names_every_queue_and_keeps_the_figures_on_a_narrow_terminal():
    from rich.console import Console

    objects = {"nodes": [node("n0", 8, "a100")], "queues": [queue("a-very-long-queue-name-indeed-yes", quota=4)],
               "pods": [pod("w", "a-very-long-queue-name-indeed-yes", 1)], "podgroups": [], "evictions": []}
    console = Console(width=100, record=True, color_system=None)
    console.print(render(snapshot(objects, NOW), "lab 't'", [0.0, 0.5, 1.0], width=100))
    text = console.export_text()
    row = next(line for line in text.splitlines() if line.startswith("a-very-long"))
    assert row.split()[1:9] == ["0", "-", "4", "∞", "1", "0", "1", "0s"], row
    assert spark([0.0, 0.5, 1.0]) == "▁▅█" and "▁▅█" in text


def test_bad_kubeconfigs_are_one_line_each(tmp_path):
    from helpers import kailab_cli

    empty = tmp_path / "empty"
    empty.write_text("")
    nowhere = tmp_path / "nowhere.yaml"
    nowhere.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                       "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n")
    for path, words, names in ((empty, "not a kubeconfig the client can use", str(empty)),
                               (nowhere, "does not answer", "https://127.0.0.1:1")):
        done = kailab_cli("top", "--once", "--kubeconfig", str(path))
        assert done.returncode == 2 and done.stderr.startswith("kailab: error: ") and words in done.stderr, done
        assert len(done.stderr.strip().splitlines()) == 1 and names in done.stderr, done.stderr
