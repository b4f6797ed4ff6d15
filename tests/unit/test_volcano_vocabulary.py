"""What an exercise's vocabulary becomes on the volcano stack, as data (the live proof of what Volcano
then does is tests/live/test_volcano_exercises.py): the Queues, PodGroups and marks written, a closed parent
holding its leaves, Volcano's scheduler configuration as a design input, and every refusal naming its
field."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kailab import versions, workloads
from kailab.errors import KailabError
from kailab.exercise.spec import SchedulerSetting
from kailab.stacks import get_stack
from kailab.stacks.base import QueueDecl
from kailab.stacks.volcano import config, vocabulary

VOLCANO = get_stack("volcano")
GPU = "nvidia.com/gpu"


def tree(parent_gpu=None, leaf_gpu=None, other_gpu=None) -> list[QueueDecl]:
    return [QueueDecl("x-lab", None, parent_gpu or {"quota": -1, "limit": -1}, leaf=False, where="e.yaml: queues.lab"),
            QueueDecl("x-a", "x-lab", leaf_gpu or {"quota": 12.0, "limit": 20.0, "overQuotaWeight": 2.0}, leaf=True,
                      where="e.yaml: queues.a"),
            QueueDecl("x-b", "x-lab", other_gpu or {"quota": 4.0, "limit": -1}, leaf=True, where="e.yaml: queues.b")]


def specs(objs) -> dict[str, dict]:
    assert {o["kind"] for o in objs} == {"Queue"} and all(o["apiVersion"] == vocabulary.API for o in objs)
    return {o["metadata"]["name"]: o["spec"] for o in objs}


def test_a_tree_becomes_volcano_queues_under_its_root():
    q = specs(VOLCANO.queue_objects(tree(), "ns"))
    assert list(q) == ["x-lab", "x-a", "x-b"]  # parents first: Volcano's webhook checks a child against it
    assert q["x-lab"] == {"parent": "root", "weight": 1, "reclaimable": True,
                          "deserved": {GPU: str(vocabulary.UNLIMITED)}}  # quota -1: unlimited
    assert q["x-a"] == {"parent": "x-lab", "weight": 2, "reclaimable": True, "deserved": {GPU: "12"},
                        "capability": {GPU: "20"}}
    assert q["x-b"] == {"parent": "x-lab", "weight": 1, "reclaimable": True, "deserved": {GPU: "4"}}
    objs = {o["metadata"]["name"]: o for o in VOLCANO.queue_objects(tree(), "ns")}
    assert VOLCANO.queue_view(objs["x-a"]) == ("x-a", {"parent": "x-lab", "quota": 12, "limit": 20, "status": {}})
    assert VOLCANO.queue_view(objs["x-lab"]) == ("x-lab", {"parent": None, "quota": -1, "limit": -1, "status": {}})
    assert [r.name for r in VOLCANO.queue_leftovers(tree(), "ns")] == ["x-b", "x-a", "x-lab"]  # children first


def test_a_parent_with_a_quota_keeps_it_when_it_covers_its_children():
    """The shipped replay designs give their parent the sum of its leaves' quotas (org: 32 = 24 + 8)."""
    q = specs(VOLCANO.queue_objects(tree(parent_gpu={"quota": 16, "limit": -1}), "ns"))
    assert q["x-lab"]["deserved"] == {GPU: "16"}


def test_a_closed_parent_holds_its_leaves_and_opening_it_gives_them_their_deserved():
    closed = specs(VOLCANO.queue_objects(tree(parent_gpu={"quota": -1, "limit": 0}), "ns"))
    # the parent itself is unchanged (Volcano's webhook reads it from a cache that lags its changes)
    assert closed["x-lab"] == specs(VOLCANO.queue_objects(tree(), "ns"))["x-lab"]
    for leaf in ("x-a", "x-b"):
        assert closed[leaf]["capability"] == {GPU: "0"} and "deserved" not in closed[leaf]
    opened = specs(VOLCANO.queue_objects(tree(), "ns"))
    assert opened["x-a"]["deserved"] == {GPU: "12"} and "capability" not in opened["x-b"]


@pytest.mark.parametrize("parent, leaf, field, words", [
    ({"quota": 8, "limit": -1}, None, "queues.lab.gpu.quota", "below the sum of its children's"),
    (None, {"quota": -1, "limit": -1}, "queues.a.gpu.quota", "no unlimited deserved"),
    (None, {"quota": 12, "limit": 8}, "queues.a.gpu.limit", "deserved must be at most its capability"),
    (None, {"quota": 4, "limit": -1, "overQuotaWeight": 1.5}, "queues.a.gpu.overQuotaWeight", "whole number"),
    (None, {"quota": 4, "limit": -1, "overQuotaWeight": 0}, "queues.a.gpu.overQuotaWeight", "from 1 to 65535"),
    (None, {"quota": 4, "limit": -1, "priority": -1}, "queues.a.gpu.priority", "from 0 up"),
])
def test_what_volcano_cannot_express_in_a_queue_is_refused_by_field(parent, leaf, field, words):
    with pytest.raises(KailabError) as err:
        VOLCANO.queue_objects(tree(parent, leaf), "ns")
    msg = str(err.value)
    assert msg.startswith(f"e.yaml: {field}: not on the volcano stack: ") and words in msg and "\n" not in msg


def test_a_queue_priority_is_volcanos_queue_priority():
    assert specs(VOLCANO.queue_objects(tree(leaf_gpu={"quota": 4, "priority": 3}), "ns"))["x-a"]["priority"] == 3


def test_a_tree_deeper_than_volcanos_webhook_takes_is_refused_by_queue():
    chain = [QueueDecl(f"q{i}", f"q{i - 1}" if i else None, {"quota": -1}, leaf=False, where=f"e.yaml: queues.q{i}")
             for i in range(vocabulary.MAX_DEPTH)]
    leaf = QueueDecl("deep", chain[-1].name, {"quota": 1}, leaf=True, where="e.yaml: queues.deep")
    VOLCANO.queue_objects(chain[:-1] + [QueueDecl("ok", chain[-2].name, {"quota": 1}, leaf=True, where="w")], "ns")
    with pytest.raises(KailabError, match=r"^e\.yaml: queues\.deep: not on the volcano stack: .*5 levels"):
        VOLCANO.queue_objects(chain + [leaf], "ns")


def test_pods_name_volcanos_scheduler_and_their_queue_and_lose_kais_marks():
    (pod,) = VOLCANO.workload_objects(workloads.pods("p", "ns", "x-a", 1, preemptible=False), "w")
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["annotations"] == {vocabulary.QUEUE_ANNOTATION: "x-a", vocabulary.PREEMPTABLE: "false"}
    labels = pod["metadata"]["labels"]
    assert workloads.QUEUE_LABEL not in labels and workloads.PREEMPTIBILITY_LABEL not in labels
    assert labels[workloads.RUN_QUEUE_LABEL] == "x-a"  # the lab's own mark stays: the run reads queues by it


def test_a_gang_is_the_jobs_min_member_and_its_pods_name_the_queue():
    job = workloads.job("j", "ns", "x-a", parallelism=10, gang=10, preemptible=True)
    (out,) = VOLCANO.workload_objects([job], "w")
    # the Job's volcano.sh/ annotations are what Volcano's controller manager gives the PodGroup it makes
    assert out["metadata"]["annotations"] == {vocabulary.MIN_MEMBER_ANNOTATION: "10", vocabulary.PREEMPTABLE: "true"}
    template = out["spec"]["template"]
    assert template["metadata"]["annotations"] == {vocabulary.QUEUE_ANNOTATION: "x-a", vocabulary.PREEMPTABLE: "true"}
    assert template["spec"]["schedulerName"] == "volcano"
    assert job["spec"]["template"]["spec"]["schedulerName"] == workloads.SCHEDULER_NAME  # the input is left as it was
    (loose,) = VOLCANO.workload_objects([workloads.job("l", "ns", "x-a", parallelism=10)], "w")
    assert "annotations" not in loose["metadata"]  # no gang: Volcano's PodGroup of minMember 1


def test_an_elastic_workload_is_a_volcano_podgroup_its_pods_name():
    group, *pods = VOLCANO.workload_objects(workloads.elastic("e", "ns", "x-a", 4, 2), "w")
    assert group["apiVersion"] == vocabulary.API and group["kind"] == "PodGroup"
    assert group["spec"] == {"minMember": 2, "queue": "x-a", "priorityClassName": "train"}
    assert len(pods) == 4 and all(p["metadata"]["annotations"][vocabulary.GROUP_ANNOTATION] == "e" for p in pods)
    assert all(workloads.PODGROUP_ANNOTATION not in p["metadata"]["annotations"] for p in pods)
    assert [(r.kind, r.name) for r in VOLCANO.workload_leftovers("e", "elastic", "ns")] == [("PodGroup", "e")]


@pytest.mark.parametrize("objs, what", [
    (lambda: workloads.pods("p", "ns", "x-a", 1, share={workloads.GPU_FRACTION: "0.5"}), "share"),
    (lambda: workloads.pods("p", "ns", "x-a", 1, share={workloads.GPU_MEMORY: "20000"}), "share"),
    (lambda: [{**workloads.job("j", "ns", "x-a", 2), "metadata": {"name": "j", "namespace": "ns",
                                                                   "annotations": {workloads.TOPOLOGY: "t"}}}], "topology"),
])
def test_what_volcano_cannot_run_is_refused_by_name(objs, what):
    with pytest.raises(KailabError) as err:
        VOLCANO.workload_objects(objs(), "e.yaml: step 's' apply w")
    assert str(err.value).startswith(f"e.yaml: step 's' apply w {what}: not on the volcano stack: ")
    assert "\n" not in str(err.value)


# ------------------------------------------------------------ the scheduler's configuration
def names(setting) -> tuple[list[str], list[str]]:
    return setting.conf["actions"], [p["name"] for t in setting.conf["tiers"] for p in t["plugins"]]


def test_the_queue_plugin_and_binpack_are_design_inputs():
    actions, plugins = names(config.setting(SchedulerSetting(), "e.yaml: step 1"))
    assert "capacity" in plugins and "binpack" in plugins and "reclaim" in actions  # the lab's default
    _, plugins = names(config.setting(SchedulerSetting(placement="spread", volcano="proportion"), "w"))
    assert "proportion" in plugins and "capacity" not in plugins and "binpack" not in plugins
    given = {"actions": "enqueue, allocate, backfill", "tiers": [{"plugins": [{"name": "gang"}, {"name": "proportion"}]}]}
    actions, plugins = names(config.setting(SchedulerSetting(volcano=given), "w"))
    assert actions == ["enqueue", "allocate", "backfill"] and plugins == ["gang", "proportion", "binpack"]


@pytest.mark.parametrize("value, field", [
    (SchedulerSetting(volcano="fairest"), "scheduler.volcano"),
    (SchedulerSetting(volcano={"actions": ["allocate", "steal"], "tiers": [{"plugins": [{"name": "gang"}]}]}),
     "scheduler.volcano.actions"),
    (SchedulerSetting(volcano={"actions": ["allocate"], "tiers": [{"plugins": [{"name": "kai"}]}]}),
     "scheduler.volcano.tiers[0]"),
    (SchedulerSetting(volcano={"actions": ["allocate"], "tiers": [{"plugins": [{"name": "capacity"},
                                                                               {"name": "proportion"}]}]}),
     "scheduler.volcano.tiers"),
    (SchedulerSetting(shard={"kValue": 2}), "scheduler.shard"),
])
def test_a_configuration_volcano_would_ignore_is_refused_before_it_runs(value, field):
    with pytest.raises(KailabError) as err:
        config.setting(value, "e.yaml: step 1")
    assert str(err.value).startswith(f"e.yaml: step 1 {field}: ") and "\n" not in str(err.value)


def test_the_kai_stack_refuses_a_volcano_configuration_by_name():
    with pytest.raises(KailabError, match=r"^e\.yaml: step 1 scheduler\.volcano: not on the kai stack"):
        get_stack("kai").scheduler_setting(SimpleNamespace(kai_version=versions.DEFAULT_KAI),
                                           SchedulerSetting(volcano="capacity"), None, "e.yaml: step 1")
