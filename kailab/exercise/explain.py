"""Why a failed run failed, where the lab can say more than the expectation that missed: a Job the
`job:` shorthand made (backoffLimit 0) that KAI's eviction failed. KAI as installed deletes the pods it
evicts without a DisruptionTarget condition (`--update-pod-eviction-condition` is off), so the Job's
podFailurePolicy cannot ignore the loss and one eviction ends the Job: a surprise to anyone who wrote a
plain Job, whose backoffLimit Kubernetes defaults to 6."""

from __future__ import annotations

from .state import ClusterState


def _failed_at_backoff(job: dict) -> bool:
    return any(c.get("type") == "Failed" and c.get("status") == "True" and c.get("reason") == "BackoffLimitExceeded"
               for c in (job.get("status") or {}).get("conditions") or [])


def jobs_failed_by_eviction(state: ClusterState) -> list[str]:
    """One line per Job that failed at a backoffLimit of 0 after one of its pods was evicted: the pod,
    its node and when (seconds into the run), and the fix."""
    first_eviction = {}
    for e in state.timeline:
        if e.what == "evicted":
            first_eviction.setdefault(e.workload, e)
    lines = []
    for (_, name), job in sorted(state.objects.get("Job", {}).items()):
        evicted = first_eviction.get(name)
        if evicted is None or (job.get("spec") or {}).get("backoffLimit") != 0 or not _failed_at_backoff(job):
            continue
        lines.append(f"Job {name} failed on an eviction: its pod {evicted.pod} was deleted while bound"
                     f"{f' on {evicted.node}' if evicted.node else ''} at {evicted.t:.1f} s, and its backoffLimit is 0"
                     f" (the `job:` default); KAI as installed marks no DisruptionTarget, so the Job counts"
                     f" the eviction as a failure: give the job `backoffLimit: N` to let it run again")
    return lines
