"""Issue #70's rough edges of a twin: a zip's other members listed, gpu-memory pods counted as KAI counts
them (over their node's GPU memory), a pod of another node pool listed as not reproduced with why."""

from __future__ import annotations

import zipfile

from kailab.twin.plan import make_plan, pod_gpus
from kailab.twin.run import markdown, queue_gpus
from kailab.twin.snapshot import load_snapshot
from twin_sample import as_zip, node, pod, snapshot


def test_a_zips_other_members_are_listed_as_ignored(tmp_path):
    path = as_zip(tmp_path, snapshot())
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("scheduler.log", "x")
        zf.writestr("extra/", "")  # a folder entry: nothing to list
        zf.writestr("extra/config.yaml", "y")
    snap = load_snapshot(path)
    assert snap.ignored == ["scheduler.log", "extra/config.yaml"]
    plan = make_plan(snap, "t")
    assert plan.not_reproduced["zip/scheduler.log"] == ["ignored in the zip: a twin reads only snap.zip's snapshot.json"]
    assert "zip/extra/config.yaml" in plan.not_reproduced
    record = {"lab": "t", "snapshot": str(path), "counts": plan.counts(), "not_reproduced": plan.not_reproduced,
              "unknown_fields": []}
    assert "- zip/scheduler.log: ignored in the zip" in markdown(record)
    # a zip of snapshot.json alone, or the JSON itself: nothing ignored
    assert load_snapshot(as_zip(tmp_path, snapshot())).ignored == []
    assert not [k for k in make_plan(load_snapshot(as_zip(tmp_path, snapshot())), "t").not_reproduced if k.startswith("zip/")]


def _memory_pod(name: str, where: str | None, mib: str) -> dict:
    p = pod(name, where)
    p["spec"]["containers"][0]["resources"] = {}
    p["metadata"]["annotations"]["gpu-memory"] = mib
    return p


def test_gpu_memory_pods_count_a_fraction_of_their_nodes_gpu_memory(tmp_path):
    data = snapshot()
    small, big = node("gpu-a", 8), node("gpu-b", 8)
    small["metadata"]["labels"]["nvidia.com/gpu.memory"] = "40960"
    big["metadata"]["labels"]["nvidia.com/gpu.memory"] = "81920"
    data["rawObjects"]["nodes"] = [small, big]
    data["rawObjects"]["pods"] = [pod("run-0", "gpu-a"), _memory_pod("mem-a", "gpu-a", "20480"),
                                  _memory_pod("mem-b", "gpu-b", "20480"), _memory_pod("wait-0", None, "40960")]
    data["rawObjects"]["podGroups"] += [{"metadata": {"name": f"pg-{n}", "namespace": "ml"},
                                         "spec": {"minMember": 1, "queue": "team-a"}} for n in ("mem-a", "mem-b")]
    plan = make_plan(load_snapshot(as_zip(tmp_path, data)), "t")
    shares = plan.pod_shares()
    assert shares["ml/mem-a"] == ("team-a", 0.5) and shares["ml/mem-b"] == ("team-a", 0.25)
    assert shares["ml/wait-0"] == ("team-a", 0.0)  # on no node, nodes of two GPU memories: not known yet
    assert plan.pod_shares({"ml/wait-0": "gpu-b"})["ml/wait-0"] == ("team-a", 0.5)
    decided = {"placed": {"ml/wait-0": "gpu-b"}, "evicted": ["ml/mem-a"]}
    assert queue_gpus(plan, decided) == {"team-a": {"before": 1.75, "after": 1.75}}
    # one GPU memory across the fleet: a pod on no node counts over it
    big["metadata"]["labels"]["nvidia.com/gpu.memory"] = "40960"
    assert make_plan(load_snapshot(as_zip(tmp_path, data)), "t").pod_shares()["ml/wait-0"] == ("team-a", 1.0)
    # the same count as kailab top's (whole GPUs first, fractions times devices, capped at one device)
    assert pod_gpus(_memory_pod("m", None, "99999"), 40960) == 1.0
    assert pod_gpus({"metadata": {"annotations": {"gpu-fraction": "x"}}, "spec": {}}) == 0.0


def test_a_pod_of_another_node_pool_is_listed_as_not_reproduced(tmp_path):
    data = snapshot()
    data["schedulerParams"]["partitionParams"] = {"NodePoolLabelKey": "kai.scheduler/node-pool", "NodePoolLabelValue": ""}
    other, grouped = pod("other-0", None), pod("other-1", "gpu-a")
    other["metadata"]["labels"]["kai.scheduler/node-pool"] = "pool-b"
    data["rawObjects"]["pods"] += [other, grouped]
    data["rawObjects"]["podGroups"] += [{"metadata": {"name": "pg-other-1", "namespace": "ml",
                                                      "labels": {"kai.scheduler/node-pool": "pool-c"}},
                                         "spec": {"minMember": 1, "queue": "team-a"}}]
    plan = make_plan(load_snapshot(as_zip(tmp_path, data)), "t")
    why = plan.not_reproduced["pod/ml/other-0"][-1]
    assert "node pool 'pool-b'" in why and "no pool" in why and why.endswith("left pending, with no reason from KAI")
    assert plan.not_reproduced["pod/ml/other-1"][-1].endswith("bound as it was")  # its PodGroup's pool
    assert not any("node pool" in w for w in plan.not_reproduced["pod/ml/wait-0"])
    # still in the twin, as they were: the round trip holds them
    assert plan.counts()["pods_pending"] == 2 and plan.counts()["pods_bound"] == 2
    # a scheduler of a pool: pods of that pool are its own, others not
    data["schedulerParams"]["partitionParams"]["NodePoolLabelValue"] = "pool-b"
    plan = make_plan(load_snapshot(as_zip(tmp_path, data)), "t")
    assert not any("node pool" in w for w in plan.not_reproduced.get("pod/ml/other-0", []))
    assert "'pool-c'" in plan.not_reproduced["pod/ml/other-1"][-1]
    assert "not of the snapshot's node pool 'pool-b'" in plan.not_reproduced["node/gpu-a"][-1]  # a node of no pool


def test_a_pool_schedulers_snapshot_twins_its_pool_for_a_scheduler_of_none(tmp_path):
    """Measured on a lab: the twin's scheduler (of no pool) left a PodGroup labelled with the snapshot's
    pool pending with no reason, and decided a pod labelled with another pool whose PodGroup was not."""
    data = snapshot()
    key = "kai.scheduler/node-pool"
    data["schedulerParams"]["partitionParams"] = {"NodePoolLabelKey": key, "NodePoolLabelValue": "pool-b"}
    for n in data["rawObjects"]["nodes"]:
        n["metadata"]["labels"][key] = "pool-b"
    for g in data["rawObjects"]["podGroups"]:
        g["metadata"]["labels"] = {key: "pool-b"}
    data["rawObjects"]["pods"][1]["metadata"]["labels"][key] = "pool-b"
    loose = pod("loose-0", None)  # its pod says pool-c, its PodGroup no pool: KAI's selector reads the PodGroup
    loose["metadata"]["labels"][key] = "pool-c"
    data["rawObjects"]["pods"].append(loose)
    data["rawObjects"]["podGroups"].append({"metadata": {"name": "pg-loose-0", "namespace": "ml"},
                                            "spec": {"minMember": 1, "queue": "team-a"}})
    plan = make_plan(load_snapshot(as_zip(tmp_path, data)), "t")
    groups = [o for o in plan.objects if o["kind"] == "PodGroup"]
    assert len(groups) == 3 and not any(key in (g["metadata"].get("labels") or {}) for g in groups)
    assert not any(key in (p["metadata"].get("labels") or {}) for p in plan.pending if p["metadata"]["name"] == "wait-0")
    assert all(key not in n["metadata"]["labels"] for n in plan.fleet.node_manifests())
    assert plan.not_reproduced["pod/ml/loose-0"][-1].endswith("that scheduler did not decide it, the twin's (of no pool) does")
    assert not any("node pool" in w for k, ws in plan.not_reproduced.items() for w in ws if k != "pod/ml/loose-0")
