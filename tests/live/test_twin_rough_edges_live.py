"""Issue #70's rough edges of a twin, on a lab (~20 s): a snapshot of a scheduler of node pool pool-b,
zipped with a log beside snapshot.json. The log is listed as ignored; a gpu-memory pod counts the share
KAI itself reports (20480 of a 40960 MiB GPU: 0.5); the pool's pending pods are decided by the twin's
scheduler (of no pool); a pod of pool-c stays pending with no reason from KAI and is listed as not
reproduced, with why. (Data in, plan out: tests/unit/test_twin_rough_edges_units.py.)"""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from kailab import labs
from kailab.paths import lab_dir
from kailab.testing.labs import LAB_PREFIX
from kailab.twin.run import make_twin
from twin_sample import node, pod, snapshot

pytestmark = [pytest.mark.lab, pytest.mark.kai]
POOL = "kai.scheduler/node-pool"


def _snapshot() -> dict:
    def memory(name: str, where: str | None, mib: str) -> dict:
        p = pod(name, where)
        p["spec"]["containers"][0]["resources"] = {}
        p["metadata"]["annotations"]["gpu-memory"] = mib
        return p

    data = snapshot()
    nodes = [node("gpu-a", 8), node("gpu-b", 8)]
    for n in nodes:  # untainted: the lab's own probe pod must land
        n["metadata"]["labels"].update({"nvidia.com/gpu.memory": "40960", POOL: "pool-b"})
        n["spec"] = {}
    pods = [pod("run-0", "gpu-a"), memory("mem-a", "gpu-a", "20480"), pod("wait-0", None),
            memory("wait-mem", None, "10240"), pod("other-0", None)]
    res = {r: {"quota": 16 if r == "gpu" else -1, "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")}
    for q in data["rawObjects"]["queues"]:
        q["spec"]["resources"] = res
    data["rawObjects"].update(
        nodes=nodes, pods=pods, persistentVolumeClaims=[],
        podGroups=[{"metadata": {"name": f"pg-{p['metadata']['name']}", "namespace": "ml",
                                 "labels": {POOL: "pool-c" if p["metadata"]["name"] == "other-0" else "pool-b"}},
                    "spec": {"minMember": 1, "queue": "team-a"}} for p in pods])
    data["schedulerParams"]["partitionParams"] = {"NodePoolLabelKey": POOL, "NodePoolLabelValue": "pool-b"}
    return data


def test_a_pool_schedulers_snapshot_with_gpu_memory_pods_and_a_zipped_log(tmp_path, monkeypatch):
    snap = tmp_path / "snapshot.zip"
    with zipfile.ZipFile(snap, "w") as zf:
        zf.writestr("snapshot.json", json.dumps(_snapshot()))
        zf.writestr("scheduler-logs.txt", "a log the twin does not read")
    monkeypatch.setenv("KAILAB_EVIDENCE", str(tmp_path / "twins"))
    name = f"{LAB_PREFIX}{os.getpid()}-twin70"
    try:
        out = make_twin(snap, name, settle_s=10, timeout_s=240, echo=print, keep_up=False)
    finally:
        labs.down(name)
    assert not lab_dir(name).exists()
    record = json.loads((out / "twin.json").read_text())
    assert record["round_trip"]["differences"] == [], record["round_trip"]
    nr = record["not_reproduced"]
    assert nr["zip/scheduler-logs.txt"] == ["ignored in the zip: a twin reads only snapshot.zip's snapshot.json"]
    assert "- zip/scheduler-logs.txt: ignored in the zip" in (out / "twin.md").read_text()
    decided = record["decided"]
    # the pool's pending pods decided by the twin's scheduler; pool-c's left pending, KAI giving no reason
    assert sorted(decided["placed"]) == ["ml/wait-0", "ml/wait-mem"] and decided["still_pending"] == ["ml/other-0"], decided
    assert decided["why_pending"] == {}, decided
    assert nr["pod/ml/other-0"][-1].startswith("of node pool 'pool-c' (kai.scheduler/node-pool), not the snapshot's")
    assert not any("node pool" in w for k, ws in nr.items() for w in ws if k != "pod/ml/other-0"), nr
    # gpu-memory pods as KAI counts them: 1 + 20480/40960 before, + 1 + 10240/40960 after
    assert record["queues_gpus"] == {"team-a": {"before": 1.5, "after": 2.75}}, record["queues_gpus"]


def test_a_twin_makes_pods_in_the_snapshots_creation_order_and_lists_what_it_could_not_keep(tmp_path, monkeypatch):
    """Four pods of one PodGroup created d, b, a, c in the snapshot (a and c in one second, then by UID):
    the twin's API server stamps them in that order (to the second), and whatever order it could not keep
    — pods made in one second are ordered by UIDs nobody chose — is listed, naming a pair."""
    from kailab.kube import Kube
    from kailab.twin import order

    data = snapshot()
    for n in data["rawObjects"]["nodes"]:
        n["spec"] = {}
    stamps = {"w-a": ("2026-11-27T10:00:05Z", "u-2"), "w-b": ("2026-11-27T10:00:03Z", "u-9"),
              "w-c": ("2026-11-27T10:00:05Z", "u-3"), "w-d": ("2026-11-27T10:00:01Z", "u-5")}
    pods = []
    for name, (ts, uid) in stamps.items():
        p = pod(name, None)
        p["metadata"].update(creationTimestamp=ts, uid=uid)
        p["metadata"]["annotations"]["pod-group-name"] = "pg-w"
        pods.append(p)
    data["rawObjects"].update(pods=pods, persistentVolumeClaims=[], podGroups=[
        {"metadata": {"name": "pg-w", "namespace": "ml", "creationTimestamp": "2026-11-27T10:00:00Z", "uid": "g"},
         "spec": {"minMember": 1, "queue": "team-a"}}])
    snap = tmp_path / "snapshot.zip"
    with zipfile.ZipFile(snap, "w") as zf:
        zf.writestr("snapshot.json", json.dumps(data))
    monkeypatch.setenv("KAILAB_EVIDENCE", str(tmp_path / "twins"))
    name = f"{LAB_PREFIX}{os.getpid()}-twinorder"
    try:
        out = make_twin(snap, name, settle_s=5, timeout_s=240, echo=print, keep_up=True)
        kube = Kube(lab_dir(name) / "kubeconfig")
        try:
            held = {p["metadata"]["name"]: order.key_of(p["metadata"]) for p in kube.list("v1", "Pod", namespace="ml")}
        finally:
            kube.close()
    finally:
        labs.down(name)
    record = json.loads((out / "twin.json").read_text())
    assert record["round_trip"]["differences"] == [], record["round_trip"]
    seconds = [held[n][0] for n in ("w-d", "w-b", "w-a", "w-c")]  # the snapshot's order
    note = record["not_reproduced"].get("order/pods of PodGroup ml/pg-w")
    kept = sorted(held, key=lambda n: held[n]) == ["w-d", "w-b", "w-a", "w-c"]
    assert (note is None) == kept, (held, note)
    if seconds != sorted(seconds):  # made in another second than its order: only a pair listed can say so
        assert note, (held, record["not_reproduced"])
    if note:
        assert "in another order than the snapshot's" in note[0] and "came before" in note[0], note
