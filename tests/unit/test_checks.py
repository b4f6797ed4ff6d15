"""Pure checks over recorded objects: PodGroup conditions, events, invariants, state transitions."""

from __future__ import annotations

import time

from kailab.exercise.checks import (Names, Result, check_invariant, evaluate_condition, evaluate_count,
                                    evaluate_event)
from kailab.exercise.spec import ConditionExpect, EventExpect, Range
from kailab.exercise.state import ClusterState

NS = "kx-test-0000"
NAMES = Names("x0000", NS)


def pod(name, workload="w", queue="x0000-q", node=None, gpus=1, phase=None, deleting=False,
        priority=50, podgroup=None, preemptibility=None, uid=None):
    labels = {"kailab.io/workload": workload, "kai.scheduler/queue": queue}
    if preemptibility:
        labels["kai.scheduler/preemptibility"] = preemptibility
    meta = {"name": name, "namespace": NS, "uid": uid or f"uid-{name}", "labels": labels,
            "annotations": {"pod-group-name": podgroup} if podgroup else {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec = {"priority": priority,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase or ("Running" if node else "Pending")}}


def podgroup(name, reasons=(), priority_class=None):
    conds = [{"type": "UnschedulableOnNodePool", "reason": "Unschedulable",
              "reasons": [{"reason": r, "message": "..."} for r in reasons]}] if reasons else []
    spec = {"priorityClassName": priority_class} if priority_class else {}
    return {"metadata": {"name": name, "namespace": NS}, "spec": spec, "status": {"schedulingConditions": conds}}


def test_eviction_is_a_bound_pod_deleted_by_someone_else():
    s = ClusterState()
    s.update_pod(pod("a", node="n1"))
    s.update_pod(pod("b", node="n1"))
    s.update_pod(pod("c"))
    s.our_deletions.add("uid-b")
    s.update_pod(pod("a", node="n1", deleting=True))
    s.update_pod(pod("b", node="n1"), deleted=True)
    s.update_pod(pod("c"), deleted=True)
    whats = {(e.what, e.pod) for e in s.timeline}
    assert ("evicted", "a") in whats
    assert ("deleted", "b") in whats and ("evicted", "b") not in whats
    assert ("deleted", "c") in whats and ("evicted", "c") not in whats
    assert s.evicted_since(0, workload="w") == 1


def test_condition_expectation_reads_podgroup_reasons():
    s = ClusterState()
    s.update_pod(pod("serve-0", workload="serve", podgroup="pg-0", node="n1"))
    s.update_pod(pod("serve-1", workload="serve", podgroup="pg-1"))
    s.podgroups[(NS, "pg-0")] = podgroup("pg-0")
    s.podgroups[(NS, "pg-1")] = podgroup("pg-1", ["NonPreemptibleOverQuota"])
    ok = evaluate_condition(s, ConditionExpect(podgroupOf="serve", reason="NonPreemptibleOverQuota"), NAMES, "st")
    assert ok.passed and ok.offending == ["pg-1"]
    absent = evaluate_condition(s, ConditionExpect(podgroupOf="serve", reason="OverLimit"), NAMES, "st")
    assert not absent.passed
    assert "reasons seen: NonPreemptibleOverQuota" in absent.observed


def test_event_expectation_counts_events_on_pods_and_podgroups_since_the_step():
    s = ClusterState()
    s.update_pod(pod("t-0", workload="t", podgroup="pg-t0", node="n1"))
    now = time.time()
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    old = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 3600))
    events = [
        {"reason": "Evict", "involvedObject": {"name": "pg-t0"}, "lastTimestamp": iso, "count": 2},
        {"reason": "Evict", "involvedObject": {"name": "pg-t0"}, "lastTimestamp": old, "count": 1},
        {"reason": "Evict", "involvedObject": {"name": "someone-else"}, "lastTimestamp": iso},
        {"reason": "Scheduled", "involvedObject": {"name": "t-0"}, "lastTimestamp": iso},
    ]
    r = evaluate_event(events, s, EventExpect(eventReason="Evict", workload="t", count=2), NAMES, now - 5, "st")
    assert r.passed and r.observed == "2"
    r = evaluate_event(events, s, EventExpect(eventReason="Evict", workload="t", count=Range(min=3)), NAMES,
                       now - 5, "st")
    assert not r.passed


def test_nonpreemptible_quota_uses_the_podgroup_priority_class():
    """A Deployment pod names no priority class; KAI's podgrouper gives its PodGroup 'inference'."""
    s = ClusterState(priority_values={"inference": 125, "train": 50})
    s.queues["x0000-serving"] = {"parent": None, "quota": 1, "limit": -1}
    for i in range(2):
        s.update_pod(pod(f"web-{i}", workload="web", queue="x0000-serving", node="n1", priority=0,
                         podgroup=f"pg-{i}"))
        s.podgroups[(NS, f"pg-{i}")] = podgroup(f"pg-{i}", priority_class="inference")
    assert check_invariant("nonpreemptible-within-quota", s, NAMES) == [
        "queue serving holds 2 non-preemptible GPUs, above 1"]
    s.podgroups[(NS, "pg-1")] = podgroup("pg-1", priority_class="train")
    assert check_invariant("nonpreemptible-within-quota", s, NAMES) == []


def test_preemptibility_label_overrides_priority():
    s = ClusterState()
    s.queues["x0000-q"] = {"parent": None, "quota": 0, "limit": -1}
    s.update_pod(pod("hi", priority=125, node="n1", preemptibility="preemptible"))
    assert check_invariant("nonpreemptible-within-quota", s, NAMES) == []
    s.update_pod(pod("lo", priority=10, node="n1", preemptibility="non-preemptible"))
    assert check_invariant("nonpreemptible-within-quota", s, NAMES) == [
        "queue q holds 1 non-preemptible GPUs, above 0"]


def test_queue_limit_counts_the_whole_subtree():
    s = ClusterState()
    s.queues["x0000-root"] = {"parent": None, "quota": -1, "limit": 2}
    s.queues["x0000-leaf"] = {"parent": "x0000-root", "quota": 0, "limit": -1}
    for i in range(3):
        s.update_pod(pod(f"p{i}", queue="x0000-leaf", node="n1"))
    assert check_invariant("queue-within-limit", s, NAMES) == ["queue root holds 3 GPUs, above 2"]


def _gang_state(size: int, grace: float = 5.0) -> ClusterState:
    s = ClusterState(gangs={"g": size}, gang_grace=grace)
    for i in range(size):
        s.update_pod(pod(f"g-{i}", workload="g"))
    return s


def test_gang_commit_spread_is_not_a_violation():
    """KAI commits a decided gang one BindRequest per pod: every partial instant is normal."""
    s = _gang_state(3)
    for i in range(3):
        s.bind_requests.add((NS, f"g-{i}"))
        s.track_gangs(NS)
        assert check_invariant("gang-never-partial", s, NAMES) == []
    assert s.gang_allocation(NS)["g"] == (3, 3) and s.gang_partial_since == {}


def test_gang_resting_partial_beyond_the_grace_is_a_violation(monkeypatch):
    s = _gang_state(3, grace=5.0)
    s.update_pod(pod("g-0", workload="g", node="n1"))  # one member bound, the rest never decided
    s.track_gangs(NS)
    assert check_invariant("gang-never-partial", s, NAMES) == []  # could still be a commit
    monkeypatch.setattr(s, "now", lambda: s.gang_partial_since["g"] + 5.5)
    (violation,) = check_invariant("gang-never-partial", s, NAMES)
    assert violation.startswith("gang g: 1 of 3 pods allocated for 5.5 s")


def test_a_gang_still_being_made_is_judged_once_its_members_exist(monkeypatch):
    """A Job controller makes a gang's pods in slow-start batches (1, 2, 4, ...), seconds apart on a loaded
    API server: a member placed while the others do not exist yet is no gang left partial. Once all
    exist, the clock runs as for any gang."""
    s = ClusterState(gangs={"g": 4}, gang_grace=5.0)
    clock = [100.0]
    monkeypatch.setattr(s, "now", lambda: clock[0])
    s.update_pod(pod("g-0", workload="g", node="n1"))  # the first batch, placed
    s.track_gangs(NS)
    clock[0] += 30.0
    s.track_gangs(NS)
    assert check_invariant("gang-never-partial", s, NAMES) == [] and s.gang_partial_since == {}
    for i in range(1, 4):  # the other batches arrive; none is placed
        s.update_pod(pod(f"g-{i}", workload="g"))
    s.track_gangs(NS)
    assert check_invariant("gang-never-partial", s, NAMES) == []  # could still be a commit
    clock[0] += 5.5
    s.track_gangs(NS)
    (violation,) = check_invariant("gang-never-partial", s, NAMES)
    assert violation.startswith("gang g: 1 of 4 pods allocated for 5.5 s"), violation
    for i in range(1, 4):  # members that go after the gang was whole do not stop the judging
        s.update_pod(pod(f"g-{i}", workload="g"), deleted=True)
    s.track_gangs(NS)
    assert "g" in s.gang_partial_since


def test_a_slow_commit_restarts_the_clock_and_a_stall_does_not(monkeypatch):
    """Under load KAI's BindRequests for one gang come seconds apart: each new member is progress.
    Once no member comes for the grace, the gang rests partial."""
    s = _gang_state(4, grace=5.0)
    clock = [100.0]
    monkeypatch.setattr(s, "now", lambda: clock[0])
    for i in range(3):  # 3 of 4, each 4 s after the one before: 12 s partial, never 5 s without progress
        s.bind_requests.add((NS, f"g-{i}"))
        s.track_gangs(NS)
        assert check_invariant("gang-never-partial", s, NAMES) == []
        clock[0] += 4.0
    s.track_gangs(NS)  # a change elsewhere: nothing new for this gang
    assert check_invariant("gang-never-partial", s, NAMES) == []
    clock[0] += 1.5  # 5.5 s since its third member
    (violation,) = check_invariant("gang-never-partial", s, NAMES)
    assert violation.startswith("gang g: 3 of 4 pods allocated for 5.5 s"), violation
    s.bind_requests.add((NS, "g-3"))
    s.track_gangs(NS)
    assert check_invariant("gang-never-partial", s, NAMES) == [] and s.gang_partial_since == {}


def test_a_whole_gang_that_loses_a_member_becomes_partial_and_recovering_clears_it():
    s = _gang_state(2)
    for i in range(2):
        s.update_pod(pod(f"g-{i}", workload="g", node="n1"))
    s.track_gangs(NS)
    assert s.gang_partial_since == {}
    s.update_pod(pod("g-1", workload="g", node="n1", deleting=True))  # evicted, or its node died
    s.track_gangs(NS)
    assert "g" in s.gang_partial_since
    s.update_pod(pod("g-1", workload="g", node="n1"), deleted=True)
    s.update_pod(pod("g-1b", workload="g", node="n2"))  # the Job's replacement, placed again
    s.track_gangs(NS)
    assert s.gang_partial_since == {}


def test_pods_left_on_a_vanished_node_are_not_an_overcommit():
    s = ClusterState(node_gpus={"n1": 2, "n2": 2})
    s.update_pod(pod("a", node="n2"))
    s.update_pod(pod("b", node="n2"))
    del s.node_gpus["n2"]  # the node is deleted; its pods wait for the pod GC
    assert check_invariant("no-gpu-overcommit", s, NAMES) == []
    s.node_gpus["n2"] = 1  # it comes back smaller than what is bound to it: that is overcommit
    assert check_invariant("no-gpu-overcommit", s, NAMES) == ["node n2 holds 2 GPUs of 1"]


def test_no_gpu_overcommit_counts_deleting_pods_until_they_have_ended():
    s = ClusterState(node_gpus={"n1": 2})
    s.update_pod(pod("a", node="n1"))
    s.update_pod(pod("b", node="n1", deleting=True))
    s.update_pod(pod("c", node="n1"))
    assert check_invariant("no-gpu-overcommit", s, NAMES) == ["node n1 holds 3 GPUs of 2"]
    # its node has stopped it (Failed): a Job's pod waiting only for its finalizer holds nothing
    s.update_pod(pod("b", node="n1", deleting=True, phase="Failed"))
    assert check_invariant("no-gpu-overcommit", s, NAMES) == []


def test_nodes_counts_the_distinct_nodes_of_bound_pods():
    from kailab.exercise.spec import CountExpect

    s = ClusterState(node_gpus={"n1": 8, "n2": 8})
    s.update_pod(pod("w-0", node="n1"))
    s.update_pod(pod("w-1", node="n1"))
    s.update_pod(pod("w-2", node="n2"))
    s.update_pod(pod("w-3"))  # pending: on no node
    (r,) = evaluate_count(s, CountExpect.model_validate({"workload": "w", "nodes": 2}), NAMES, 0, "s")
    assert (r.what, r.observed, r.passed, r.offending) == ("workload w nodes", "2", True, ["n1", "n2"])


def test_a_half_used_gpu_counts_as_half_in_node_use():
    s = ClusterState(node_gpus={"n1": 4})
    for i, group in enumerate(["g1", "g1", "g2"]):  # three half-GPU pods on two shared devices
        p = pod(f"h-{i}", node="n1", gpus=0)
        p["metadata"]["labels"]["runai-gpu-group"] = group
        p["metadata"]["annotations"]["gpu-fraction"] = "0.5"
        s.update_pod(p)
    s.update_pod(pod("whole", node="n1"))
    for group in ("g1", "g2"):  # KAI's reservation pods hold each shared device whole
        r = pod(f"reserve-{group}", node="n1")
        r["metadata"]["namespace"] = "kai-resource-reservation"
        s.update_pod(r)
    use = s.node_use("kai-resource-reservation")["n1"]
    assert use["used"] == 2.5 and use["shared"] == {"g1": 1.0, "g2": 0.5}
    assert use["pods"] == ["h-0", "h-1", "h-2", "whole"]
    assert s.gpus_on_nodes()["n1"] == 3  # the overcommit check still sees the reserved devices whole


def test_settle_times_are_measured_from_each_steps_start_to_its_last_expectation():
    from kailab.exercise.runner import settle_times

    results = [Result("a", "expect", "x", "1", "1", True, at=12.5), Result("a", "expect", "y", "1", "1", True, at=13.0),
               Result("a", "stays", "z", "1", "1", True, at=None), Result("b", "expect", "x", "1", "0", False, at=40.0)]
    assert settle_times(results, {"a": 10.0, "b": 20.0}) == {"expected_after_s.01": 3.0}


# ----------------------------------------------------------------------------- partial objects
def test_partial_match_of_objects():
    from kailab.exercise.match import fill, mismatch, placeholders

    br = {"spec": {"receivedResourceType": "Fraction", "receivedGPU": {"count": 1, "portion": "0.50"},
                   "selectedGPUGroups": ["abc"]}, "metadata": {"labels": {"a": "b"}}}
    assert mismatch({"spec": {"receivedResourceType": "Fraction"}}, br) is None
    assert mismatch({"spec": {"receivedGPU": {"portion": {"min": 0.5, "max": 0.5}, "count": 1}}}, br) is None
    assert "below 0.6" in mismatch({"spec": {"receivedGPU": {"portion": {"min": 0.6}}}}, br)
    assert mismatch({"spec": {"selectedGPUGroups": [{"regex": "^ab"}]}}, br) is None
    assert "no element matches" in mismatch({"spec": {"selectedGPUGroups": [{"regex": "^x"}]}}, br)
    assert mismatch({"metadata": {"annotations": {"exists": False}}}, br) is None
    assert ".metadata.annotations: missing" == mismatch({"metadata": {"annotations": {"x": "y"}}}, br)
    assert "'Fraction', not 'Regular'" in mismatch({"spec": {"receivedResourceType": "Regular"}}, br)
    assert placeholders({"a": ["${queue:x}", "${namespace}-y"]}) == ["queue:x", "namespace"]
    assert fill({"q": "${queue:x}"}, {"queue:x": "x01-x"}) == {"q": "x01-x"}


def test_a_workloads_resource_claims_are_those_made_for_or_reserved_for_its_pods():
    from kailab.exercise.checks import evaluate_object
    from kailab.exercise.spec import ObjectExpect
    from kailab.exercise.state import ClusterState

    s = ClusterState()
    s.update_pod(pod("a-0", workload="a", node="n1"))
    s.update_pod(pod("b-0", workload="b", node="n1"))

    def claim(name, owner=None, users=(), allocated=True):
        meta = {"name": name, "namespace": NS,
                "ownerReferences": [{"kind": "Pod", "name": owner}] if owner else []}
        status = {"reservedFor": [{"resource": "pods", "name": u} for u in users]} if users else {}
        if allocated:
            status["allocation"] = {"devices": {"results": [{"driver": "gpu.nvidia.com", "device": "gpu-0"}]}}
        return {"metadata": meta, "status": status}

    s.keep("ResourceClaim", claim("a-0-gpus-x", owner="a-0", users=["a-0"]))
    s.keep("ResourceClaim", claim("shared", users=["a-0", "b-0"]))
    s.keep("ResourceClaim", claim("left", allocated=True))  # no pod uses it, still allocated
    s.keep("ResourceClaim", {"metadata": {"name": "elsewhere", "namespace": "other"}, "status": {}})

    def check(**kw):
        return evaluate_object(s, ObjectExpect.model_validate({"object": "ResourceClaim", **kw}), NAMES, "s")

    r = check(of="a", count=2)
    assert r.passed and r.observed == "2", r
    assert check(of="b", count=1).passed  # the shared claim, reserved for b-0 too
    r = check(name="left", match={"status": {"reservedFor": {"exists": False}, "allocation": {"exists": True}}})
    assert r.passed, r
    assert check(name="elsewhere", count=0).passed  # another namespace is not the run's


def test_a_step_waits_for_the_pods_its_objects_make_and_kai_takes_in_only_grouped_ones():
    from kailab import workloads
    from kailab.exercise.state import PodView
    from kailab.stacks import get_stack

    job = workloads.job("g", NS, "q", parallelism=12, gang=12)
    assert workloads.pods_made(job) == 12
    assert workloads.pods_made({**job, "spec": {**job["spec"], "suspend": True}}) == 0  # Kueue admits it later
    assert workloads.pods_made(workloads.deployment("d", NS, "q", replicas=3)) == 3
    assert workloads.pods_made({**job, "spec": {**job["spec"], "completions": 2}}) == 2  # never more than it completes
    assert [workloads.pods_made(p) for p in workloads.pods("p", NS, "q", count=2)] == [1, 1]
    assert workloads.pods_made({"kind": "ConfigMap", "metadata": {"name": "c"}}) == 0

    def view(name, podgroup=None, scheduler="kai-scheduler", gates=None):
        p = pod(name, podgroup=podgroup)
        p["spec"]["schedulerName"] = scheduler
        if gates:
            p["spec"]["schedulingGates"] = gates
        return PodView.from_pod(p)

    pods = [view("a", podgroup="pg"), view("b"), view("c", scheduler="default-scheduler"),
            view("d", gates=[{"name": "kueue.x-k8s.io/admission"}])]
    # b: KAI's scheduler cannot see it yet; c is not KAI's; d is held before any scheduler
    assert get_stack("kai").not_taken_in(pods) == ["b"]
    assert get_stack("none").not_taken_in(pods) == []


def test_ended_pods_are_matched_as_they_ended_and_kept_after_they_are_gone():
    """`object: Pod, ended: true`: each pod as it first showed a terminal phase, even once deleted;
    a later state (finalizer removed) does not replace it; a pod with a recycled name is a new end."""
    from kailab.exercise.checks import evaluate_object
    from kailab.exercise.spec import ObjectExpect

    s = ClusterState()

    def failed(name, code, uid=None, conditions=()):
        p = pod(name, workload="t", node="n1", phase="Failed", deleting=True, uid=uid)
        p["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": {"exitCode": code}}}]
        p["status"]["conditions"] = list(conditions)
        return p

    running = pod("t-0", workload="t", node="n1", phase="Running")
    for obj in (running, failed("t-0", 143, conditions=[{"type": "DisruptionTarget", "status": "True"}])):
        s.update_pod(obj)
        s.keep("Pod", obj)
    later = failed("t-0", 143)  # the same end, its condition list rewritten: the first terminal state stays
    s.keep("Pod", later)
    s.keep("Pod", later, deleted=True)
    s.update_pod(later, deleted=True)

    def check(**kw):
        return evaluate_object(s, ObjectExpect.model_validate({"object": "Pod", "of": "t", "ended": True, **kw}), NAMES, "s")

    r = check(match={"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 143}}}],
                                "conditions": [{"type": "DisruptionTarget"}]}}, count=1)
    assert r.passed, r
    assert check(match={"status": {"phase": "Succeeded"}}, count=0).passed
    assert evaluate_object(s, ObjectExpect.model_validate({"object": "Pod", "of": "t"}), NAMES, "s").observed == "0"
    s.keep("Pod", failed("t-0", 3, uid="another"))  # the name again, a new pod that ended with 3
    assert check(match={"status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}}, count=1).passed


def test_a_workloads_job_is_the_one_labelled_with_its_name():
    from kailab.exercise.checks import evaluate_object
    from kailab.exercise.spec import ObjectExpect

    s = ClusterState()

    def job(name, workload, **status):
        return {"metadata": {"name": name, "namespace": NS, "labels": {"kailab.io/workload": workload}},
                "status": status}

    s.keep("Job", job("train", "train", failed=1, conditions=[{"type": "Failed", "status": "True",
                                                               "reason": "BackoffLimitExceeded"}]))
    s.keep("Job", job("other", "other", succeeded=2))
    s.keep("Job", {**job("train", "train"), "metadata": {"name": "train", "namespace": "elsewhere",
                                                        "labels": {"kailab.io/workload": "train"}}})

    def check(**kw):
        return evaluate_object(s, ObjectExpect.model_validate({"object": "Job", **kw}), NAMES, "s")

    r = check(of="train", match={"status": {"failed": 1, "conditions": [{"type": "Failed", "reason": "BackoffLimitExceeded"}]}},
              count=1)
    assert r.passed and r.observed == "1", r  # not the other namespace's, not the other workload's
    assert not check(of="train", match={"status": {"conditions": [{"type": "Complete"}]}}).passed
    assert check(of="other", match={"status": {"succeeded": 2}}).passed


def test_ended_is_only_for_pods():
    import pytest
    from pydantic import ValidationError

    from kailab.exercise.spec import ObjectExpect

    with pytest.raises(ValidationError, match="use it with object: Pod"):
        ObjectExpect.model_validate({"object": "Job", "of": "t", "ended": True})
