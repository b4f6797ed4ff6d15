"""What an exercise's vocabulary becomes on the kueue stack, as data (the live proof of what Kueue
then does is tests/live/test_kueue_exercises.py): the objects written, and every refusal naming its field."""

from __future__ import annotations

import pytest

from kailab import workloads
from kailab.errors import KailabError
from kailab.stacks import get_stack
from kailab.stacks.base import QueueDecl

KUEUE = get_stack("kueue")


def tree(parent_gpu=None, leaf_gpu=None) -> list[QueueDecl]:
    return [QueueDecl("x-lab", None, parent_gpu or {"quota": -1, "limit": -1}, leaf=False, where="e.yaml: queues.lab"),
            QueueDecl("x-a", "x-lab", leaf_gpu or {"quota": 12.0, "limit": 20.0, "overQuotaWeight": 2.0}, leaf=True,
                      where="e.yaml: queues.a")]


def by_kind(objs):
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def test_a_tree_becomes_a_cohort_a_clusterqueue_and_a_localqueue():
    objs = by_kind(KUEUE.queue_objects(tree(), "ns"))
    assert ("ResourceFlavor", "kailab-default") in objs and ("Cohort", "x-lab") in objs
    cq = objs[("ClusterQueue", "x-a")]["spec"]
    gpu = cq["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "12", "borrowingLimit": "8"}
    assert cq["cohortName"] == "x-lab" and cq["fairSharing"] == {"weight": "2"} and cq["stopPolicy"] == "None"
    assert cq["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert objs[("LocalQueue", "x-a")]["metadata"]["namespace"] == "ns"
    assert KUEUE.queue_view(objs[("ClusterQueue", "x-a")]) == ("x-a", {"parent": "x-lab", "quota": 12, "limit": 20, "status": {}})


def test_a_closed_parent_holds_its_leaves_and_opening_it_releases_them():
    closed = by_kind(KUEUE.queue_objects(tree(parent_gpu={"quota": -1, "limit": 0}), "ns"))
    assert closed[("ClusterQueue", "x-a")]["spec"]["stopPolicy"] == "Hold"
    assert by_kind(KUEUE.queue_objects(tree(), "ns"))[("ClusterQueue", "x-a")]["spec"]["stopPolicy"] == "None"


@pytest.mark.parametrize("parent, leaf, field", [
    ({"quota": 8, "limit": -1}, None, "queues.lab.gpu.quota"),
    ({"quota": -1, "limit": 16}, None, "queues.lab.gpu.limit"),
    (None, {"quota": -1, "limit": -1}, "queues.a.gpu.quota"),
    (None, {"quota": 4, "limit": -1, "priority": 3}, "queues.a.gpu.priority"),
])
def test_what_kueue_cannot_express_in_a_queue_is_refused_by_field(parent, leaf, field):
    with pytest.raises(KailabError) as err:
        KUEUE.queue_objects(tree(parent, leaf), "ns")
    assert str(err.value).startswith(f"e.yaml: {field}: not on the kueue stack: ") and "\n" not in str(err.value)


def test_a_parent_quota_that_is_its_childrens_sum_is_what_a_cohort_pools():
    """The shipped replay designs give their parent the sum of the leaves' quotas: a Cohort has that
    anyway, so it translates; any other parent quota is refused (above)."""
    objs = by_kind(KUEUE.queue_objects(tree(parent_gpu={"quota": 12, "limit": -1}), "ns"))
    assert "resourceGroups" not in objs[("Cohort", "x-lab")]["spec"]
    with pytest.raises(KailabError, match="queues.lab.gpu.quota"):
        KUEUE.queue_objects(tree(parent_gpu={"quota": 12, "limit": -1}, leaf_gpu={"quota": -1}), "ns")


def test_workloads_lose_kais_marks_and_name_their_localqueue():
    job = workloads.job("j", "ns", "x-a", parallelism=4, gang=4)
    (out,) = KUEUE.workload_objects([job], "e.yaml: step 's' apply j")
    assert out["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "x-a"
    assert workloads.QUEUE_LABEL not in out["metadata"]["labels"] and "annotations" not in out["metadata"]
    assert out["spec"]["suspend"] is True and "schedulerName" not in out["spec"]["template"]["spec"]
    assert job["spec"]["template"]["spec"]["schedulerName"] == workloads.SCHEDULER_NAME  # the input is left as it was
    (pod,) = KUEUE.workload_objects(workloads.pods("p", "ns", "x-a", 1), "w")
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "x-a" and "schedulerName" not in pod["spec"]


@pytest.mark.parametrize("objs, what", [
    (lambda: workloads.pods("p", "ns", "x-a", 1, share={workloads.GPU_FRACTION: "0.5"}), "share"),
    (lambda: workloads.pods("p", "ns", "x-a", 1, preemptible=True), "preemptible"),
    (lambda: [workloads.job("j", "ns", "x-a", parallelism=4, gang=2)], "gang"),
    (lambda: workloads.elastic("e", "ns", "x-a", 4, 2), "elastic"),
])
def test_what_kueue_cannot_run_is_refused_by_name(objs, what):
    with pytest.raises(KailabError) as err:
        KUEUE.workload_objects(objs(), "e.yaml: step 's' apply w")
    assert str(err.value).startswith(f"e.yaml: step 's' apply w {what}: not on the kueue stack: ")
