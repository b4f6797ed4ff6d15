"""An exercise's vocabulary in KAI's objects: its queue tree as KAI Queues (GPU quota, limit,
overQuotaWeight; cpu and memory unlimited), workloads as the lab's form already writes them (KAI's
queue label, gang annotation, scheduler name), an elastic workload's PodGroup, a Topology; and what a
run observes and snapshots of KAI: Queues, PodGroups (its scheduling conditions) and BindRequests
(its decisions)."""

from __future__ import annotations

from ... import workloads
from ..base import QueueDecl, Ref, read_or_empty

QUEUE_API = "scheduling.run.ai/v2"
PODGROUP_API = "scheduling.run.ai/v2alpha2"
BINDREQUEST_API = "scheduling.run.ai/v1alpha2"
TOPOLOGY_API = "kai.scheduler/v1alpha1"

WATCHED = {"queue": (QUEUE_API, "Queue", False), "group": (PODGROUP_API, "PodGroup", True),
           "decision": (BINDREQUEST_API, "BindRequest", True)}


def queue_objects(queues: list[QueueDecl]) -> list[dict]:
    return [workloads.queue(q.name, q.gpu, parent=q.parent, labels=q.labels) for q in queues]


def queue_leftovers(queues: list[QueueDecl]) -> list[Ref]:
    return [Ref(QUEUE_API, "Queue", q.name) for q in reversed(queues)]  # children before parents


def queue_view(q: dict) -> tuple[str, dict] | None:
    if q.get("kind") not in (None, "Queue"):
        return None
    spec = q.get("spec") or {}
    gpu = ((spec.get("resources") or {}).get("gpu")) or {}
    return q["metadata"]["name"], {"parent": spec.get("parentQueue"), "quota": gpu.get("quota", -1),
                                   "limit": gpu.get("limit", -1), "status": q.get("status") or {}}


def not_grouped(pods: list) -> list[str]:
    """KAI's scheduler sees a pod only in its PodGroup, and a gang only once min-member pods are in
    it: the pods for KAI that its podgrouper has not yet annotated. Under load the podgrouper's
    updates of a gang's one PodGroup conflict and back off (1, 2, 4, 8 s...): a pod can wait 15 s."""
    return sorted(p.name for p in pods
                  if p.scheduler == workloads.SCHEDULER_NAME and not p.gated and not p.podgroup)


def workload_leftovers(workload: str, kind: str, namespace: str) -> list[Ref]:
    # an elastic workload's PodGroup is ours (workloads.elastic), not the podgrouper's
    return [Ref(PODGROUP_API, "PodGroup", workload, namespace)] if kind == "elastic" else []


def topology_leftovers(name: str) -> list[Ref]:
    return [Ref(TOPOLOGY_API, "Topology", name)]


def snapshot_objects(kube, namespace: str, queues: list[str]) -> dict[str, list]:
    """queues (spec+status), podgroups (metadata whole: KAI writes annotations there, e.g. when a gang
    went stale; spec, conditions), BindRequests (its decisions: node, GPU portion and group)."""
    qs = read_or_empty(lambda: [kube.get(QUEUE_API, "Queue", q) for q in queues])
    pgs = read_or_empty(lambda: kube.list(PODGROUP_API, "PodGroup", namespace))
    brs = read_or_empty(lambda: kube.list(BINDREQUEST_API, "BindRequest", namespace))
    return {"queues.yaml": [q for q in qs if q],
            "podgroups.yaml": [{"name": p["metadata"]["name"], "labels": p["metadata"].get("labels"),
                                "annotations": p["metadata"].get("annotations"), "metadata": p["metadata"],
                                "spec": p.get("spec"), "status": p.get("status")} for p in pgs],
            "bindrequests.yaml": [{"name": b["metadata"]["name"], "spec": b.get("spec"),
                                   "status": b.get("status")} for b in brs]}
