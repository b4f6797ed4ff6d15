"""An exercise's vocabulary in Kueue's objects.

Queues: a queue with children becomes a Cohort (its parent the Cohort's parentName); a leaf becomes
a ClusterQueue in its parent's Cohort plus a LocalQueue of the same name in the run's namespace.
GPU quota -> nominalQuota of nvidia.com/gpu, limit -> borrowingLimit (limit - quota), overQuotaWeight
-> fairSharing.weight; cpu and memory get a quota no exercise reaches, so only GPUs decide (as on
KAI). Preemption as KAI does it: a queue under its quota reclaims from borrowers in its cohort, and
a higher priority preempts a lower one in the same queue. A parent closed with `limit: 0` holds its
leaves (stopPolicy Hold) until it opens.

Workloads: the lab's form (kailab/workloads.py) loses KAI's marks (scheduler name, queue label) and
names its LocalQueue with `kueue.x-k8s.io/queue-name`; a Job starts suspended (Kueue admits the whole
Job or none of it); bare pods and Deployments go through Kueue's pod integration (each pod its own
workload, held by a scheduling gate until admitted).

What has no Kueue equivalent is refused by name, never dropped: GPU fractions, elastic pod groups,
a gang smaller than its Job, KAI's preemptibility label, topology, queue priority, a parent's quota
other than -1 or its children's sum (what a Cohort pools anyway), a parent's non-zero limit, a leaf
with no quota (-1).
"""

from __future__ import annotations

import copy

from ...errors import KailabError
from ... import workloads
from ..base import QueueDecl, Ref, count as _count, gpus as _n, held_by_a_closed_parent as _closed
from .install import API

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
FLAVOR = "kailab-default"
GPU = "nvidia.com/gpu"
# cpu and memory "unlimited" (as KAI's queues get -1): far above any fleet kailab makes
ROOMY = {"cpu": "100000", "memory": "1000Ti"}
# what Kueue does instead of KAI's queue semantics, said once per refusal
NO_EQUIVALENT = {
    "share": "Kueue counts whole GPUs (nvidia.com/gpu as a number): a GPU fraction or GPU memory share has no "
             "equivalent; run it on the kai stack",
    "share-admitted": "Kueue admits by nvidia.com/gpu requests and a GPU fraction requests none, so Kueue's "
                      "quota would not count it; run it on the kai stack",
    "elastic": "Kueue has no pod group that runs with fewer pods than it has (KAI's minMember); use a Job",
    "gang": "Kueue admits a Job whole: a gang smaller than the Job's parallelism has no equivalent; "
            "set gang equal to parallelism or drop it",
    "preemptible": "Kueue decides what may be preempted by priority alone: KAI's preemptibility label has no "
                   "equivalent; drop `preemptible`",
    "topology": "KAI's topology constraints are not translated to Kueue's Topology Aware Scheduling",
    "priority": "Kueue has no queue priority (KAI orders queues by it); drop `priority`",
    "parent-quota": "a parent queue becomes a Kueue Cohort, whose quota adds to its members' instead of bounding "
                    "them; use quota -1 on a parent, or the sum of its children's quotas (what a Cohort pools)",
    "parent-limit": "a Kueue Cohort cannot cap its members' own use; only -1 (none) or 0 (closed: its leaves are "
                    "held) translate",
    "leaf-quota": "a Kueue ClusterQueue has no unlimited quota; give the queue a number of GPUs (0 borrows only)",
    "operator-kind": "kailab's Kueue labs enable no integration of a workload operator's kinds yet (Kueue's "
                     "integrations.frameworks: batch/job, pod, deployment, statefulset); run it on the kai stack",
}


def refuse(where: str, what: str, stack: str = "kueue") -> KailabError:
    return KailabError(f"{where}: not on the {stack} stack: {NO_EQUIVALENT[what]}")


def _children_quota(parent: QueueDecl, queues: list[QueueDecl]) -> float | None:
    """What a Cohort pools anyway: the sum of its members' quotas (None when one is unlimited, -1).
    A parent whose quota is exactly that is what a Cohort is, so it translates."""
    quotas = [q.gpu.get("quota", -1) for q in queues if q.parent == parent.name]
    return None if not quotas or any(x < 0 for x in quotas) else sum(quotas)


def queue_objects(queues: list[QueueDecl], namespace: str) -> list[dict]:
    by_name = {q.name: q for q in queues}
    out: list[dict] = [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}]
    for q in queues:
        if "priority" in q.gpu:
            raise refuse(f"{q.where}.gpu.priority", "priority")
        meta = {"name": q.name, "labels": {"app.kubernetes.io/managed-by": "kailab", **q.labels}}
        weight = {"weight": _n(q.gpu.get("overQuotaWeight", 1))}
        if not q.leaf:
            if q.gpu.get("quota", -1) not in (-1, _children_quota(q, queues)):
                raise refuse(f"{q.where}.gpu.quota", "parent-quota")
            if q.gpu.get("limit", -1) not in (-1, 0):
                raise refuse(f"{q.where}.gpu.limit", "parent-limit")
            out.append({"apiVersion": API, "kind": "Cohort", "metadata": meta,
                        "spec": {**({"parentName": q.parent} if q.parent else {}), "fairSharing": weight}})
            continue
        quota, limit = q.gpu.get("quota", 0), q.gpu.get("limit", -1)
        if quota < 0:
            raise refuse(f"{q.where}.gpu.quota", "leaf-quota")
        gpu = {"name": GPU, "nominalQuota": _n(quota)}
        if limit >= 0:
            gpu["borrowingLimit"] = _n(max(limit - quota, 0))
        resources = [{"name": "cpu", "nominalQuota": ROOMY["cpu"]}, {"name": "memory", "nominalQuota": ROOMY["memory"]},
                     gpu]
        spec: dict = {"namespaceSelector": {},
                      "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU],
                                          "flavors": [{"name": FLAVOR, "resources": resources}]}],
                      "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                      "fairSharing": weight,
                      "stopPolicy": "Hold" if _closed(q, by_name) else "None"}
        if q.parent:
            spec["cohortName"] = q.parent
        out.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": meta, "spec": spec})
        out.append({"apiVersion": API, "kind": "LocalQueue",
                    "metadata": {"name": q.name, "namespace": namespace, "labels": meta["labels"]},
                    "spec": {"clusterQueue": q.name}})
    return out


def queue_leftovers(queues: list[QueueDecl], namespace: str) -> list[Ref]:
    out = []
    for q in reversed(queues):  # children before parents
        if q.leaf:
            out += [Ref(API, "LocalQueue", q.name, namespace), Ref(API, "ClusterQueue", q.name)]
        else:
            out.append(Ref(API, "Cohort", q.name))
    return out


def queue_view(obj: dict) -> tuple[str, dict] | None:
    """A ClusterQueue in GPUs: quota = nominalQuota, limit = nominal + borrowingLimit (-1: none)."""
    if obj.get("kind") not in (None, "ClusterQueue"):
        return None
    spec = obj.get("spec") or {}
    quota, limit = -1, -1
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for r in flavor.get("resources") or []:
                if r.get("name") == GPU:
                    quota = _count(r.get("nominalQuota", "0"))
                    if r.get("borrowingLimit") is not None:
                        limit = quota + _count(r["borrowingLimit"])
    return obj["metadata"]["name"], {"parent": spec.get("cohortName"), "quota": quota, "limit": limit,
                                     "status": obj.get("status") or {}}


def _translate_meta(meta: dict, where: str, queue: str | None) -> None:
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if workloads.PREEMPTIBILITY_LABEL in labels:
        raise refuse(f"{where} preemptible", "preemptible")
    if workloads.GPU_FRACTION in annotations or workloads.GPU_MEMORY in annotations:
        raise refuse(f"{where} share", "share")
    if any(k.startswith(workloads.TOPOLOGY) for k in annotations):
        raise refuse(f"{where} topology", "topology")
    labels.pop(workloads.QUEUE_LABEL, None)
    if queue:
        labels[QUEUE_NAME_LABEL] = queue
    if labels:
        meta["labels"] = labels


def workload_objects(objs: list[dict], where: str, kai_places: bool = False) -> list[dict]:
    """`kai_places` (the kueue+kai stack): KAI's marks stay (its scheduler name, queue, gang and
    preemptibility), Kueue's are added; only what Kueue's quota would not count is refused."""
    if kai_places:
        return [_for_kueue_and_kai(o, where) for o in objs]
    out = []
    for original in objs:
        obj = copy.deepcopy(original)
        kind, meta = obj.get("kind"), obj.setdefault("metadata", {})
        queue = (meta.get("labels") or {}).get(workloads.RUN_QUEUE_LABEL)
        if workloads.of_an_operator(obj):
            raise refuse(f"{where} {kind}", "operator-kind")
        if kind == "PodGroup":
            raise refuse(f"{where} elastic", "elastic")
        annotations = meta.get("annotations") or {}
        if workloads.GANG_ANNOTATION in annotations:
            if kind != "Job" or int(annotations[workloads.GANG_ANNOTATION]) != obj["spec"].get("parallelism"):
                raise refuse(f"{where} gang", "gang")
            annotations.pop(workloads.GANG_ANNOTATION)  # a Job is admitted whole: the gang is Kueue's default
            if not annotations:
                meta.pop("annotations")
        if workloads.PODGROUP_ANNOTATION in annotations:
            raise refuse(f"{where} elastic", "elastic")
        _translate_meta(meta, where, queue)
        template = (obj.get("spec") or {}).get("template")
        pod_spec = template.get("spec") if isinstance(template, dict) else obj.get("spec") if kind == "Pod" else None
        if isinstance(template, dict):
            _translate_meta(template.setdefault("metadata", {}), where, None)
        if isinstance(pod_spec, dict) and pod_spec.get("schedulerName") == workloads.SCHEDULER_NAME:
            pod_spec.pop("schedulerName")  # kube-scheduler places what Kueue admits
        if kind == "Job" and queue:
            obj["spec"]["suspend"] = True
        out.append(obj)
    return out


def _for_kueue_and_kai(original: dict, where: str) -> dict:
    obj = copy.deepcopy(original)
    kind, meta = obj.get("kind"), obj.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    if workloads.of_an_operator(obj):
        raise refuse(f"{where} {kind}", "operator-kind", "kueue+kai")
    if kind == "PodGroup" or workloads.PODGROUP_ANNOTATION in annotations:
        raise refuse(f"{where} elastic", "elastic", "kueue+kai")
    if workloads.GPU_FRACTION in annotations or workloads.GPU_MEMORY in annotations:
        raise refuse(f"{where} share", "share-admitted", "kueue+kai")
    queue = (meta.get("labels") or {}).get(workloads.RUN_QUEUE_LABEL)
    if queue:
        meta.setdefault("labels", {})[QUEUE_NAME_LABEL] = queue
        if kind == "Job":
            obj["spec"]["suspend"] = True
    return obj
