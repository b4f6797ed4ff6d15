"""A failed run says when a Job the `job:` shorthand made (backoffLimit 0) was failed by KAI's eviction:
the state as the observer's watches fill it (pods and Jobs as the API server gives them), read at the end."""

from __future__ import annotations

from kailab import workloads
from kailab.exercise import explain
from kailab.exercise.state import ClusterState


def _pod(node: str | None, deleting: bool = False) -> dict:
    meta = {"namespace": "ns", "name": "train-abc", "uid": "u1", "labels": {workloads.OWNER_LABEL: "train"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T08:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": "Running" if node else "Pending"}}


def _job(backoff_limit: int, failed: bool) -> dict:
    job = workloads.job("train", "ns", "team-a", 1, backoff_limit=backoff_limit)
    if failed:
        job["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
    return job


def _state(job: dict, evicted: bool = True) -> ClusterState:
    state = ClusterState()
    state.update_pod(_pod(None))
    state.update_pod(_pod("gpu-0"))
    if evicted:
        state.update_pod(_pod("gpu-0", deleting=True))  # deleted while bound, not by the exercise
    state.keep("Job", job)
    return state


def test_a_backoff_limit_0_job_failed_after_its_pod_was_evicted_is_named_with_the_pod_and_the_fix():
    [line] = explain.jobs_failed_by_eviction(_state(_job(0, failed=True)))
    assert line.startswith("Job train failed on an eviction: its pod train-abc was deleted while bound on gpu-0 at ")
    assert "backoffLimit is 0" in line and "DisruptionTarget" in line and "`backoffLimit: N`" in line


def test_nothing_is_said_of_a_job_that_retries_did_not_fail_or_lost_no_pod():
    assert explain.jobs_failed_by_eviction(_state(_job(3, failed=True))) == []
    assert explain.jobs_failed_by_eviction(_state(_job(0, failed=False))) == []
    assert explain.jobs_failed_by_eviction(_state(_job(0, failed=True), evicted=False)) == []
