"""An exercise's vocabulary in Volcano's objects.

Queues: every queue of the tree becomes a Volcano Queue (cluster-scoped) with its parent as
`spec.parent` (a top queue's parent is Volcano's `root`): GPU quota -> `deserved` (what the queue is
lent back when it wants it: the capacity plugin's reclaim), limit -> `capability` (its ceiling),
overQuotaWeight -> `weight` (what the proportion plugin divides by), priority -> `priority`; cpu and
memory are left out, so only GPUs decide (a queue inherits its parent's cpu and memory capability,
unlimited at the root). Volcano's queue webhook holds a parent's deserved to at least its children's
sum: a parent with quota -1 (unlimited, as on KAI) gets UNLIMITED GPUs deserved, which also lets a
step shift quota between its children in any order; a parent whose quota is below its children's
sum is refused. A parent closed with `limit: 0` holds its leaves: each leaf below it gets capability
0 and no deserved while it is closed (Volcano's webhook wants a queue's deserved <= its capability),
and its deserved back when it opens - the parent itself never changes, since Volcano's webhook
checks a child against its parent as its informer last saw it, which lags a parent changed a
moment before.

Workloads: the lab's form (kailab/workloads.py) names Volcano's scheduler; the run's queue goes on
each pod as `scheduling.volcano.sh/queue-name`, from which Volcano's controller manager makes the
PodGroup (one per Job, ReplicaSet or bare pod); a gang is the Job's
`scheduling.volcano.sh/group-min-member` (the PodGroup's minMember); an elastic workload is a
Volcano PodGroup with its minMember, its pods naming it (`scheduling.k8s.io/group-name`); KAI's
preemptibility label becomes `volcano.sh/preemptable`.

What has no Volcano equivalent is refused by name, never dropped: GPU fractions and GPU memory,
topology constraints, an overQuotaWeight or priority Volcano's integers cannot hold, a leaf with
unlimited quota, a parent quota below its children's, a limit below the quota, a tree deeper than
Volcano's webhook takes.
"""

from __future__ import annotations

import copy

from ... import workloads
from ...errors import KailabError
from ..base import QueueDecl, Ref, count, gpus, held_by_a_closed_parent
from .install import API, pins

GPU = "nvidia.com/gpu"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
PREEMPTABLE = "volcano.sh/preemptable"
ROOT = "root"  # Volcano's own top queue (its scheduler makes it)
# a parent's quota -1 (unlimited): Volcano has no unlimited deserved, and its webhook holds a parent's
# deserved to at least its children's sum at every moment - so a number far above any fleet kailab
# makes (as KAI's unlimited cpu and memory are on its queues)
UNLIMITED = 1_000_000
MAX_DEPTH = 5  # vc-webhook-manager's --max-queue-depth default at v1.15.1, which the lab keeps
WATCHED = {"queue": (API, "Queue", False), "group": (API, "PodGroup", True)}
NO_EQUIVALENT = {
    "share": "Volcano shares a GPU only through its deviceshare plugin and a vGPU device plugin "
             "(volcano.sh/vgpu-* resources), which the lab's fleet does not have; a fraction or GPU memory of KAI's "
             "kind has no equivalent; run it on the kai stack",
    "topology": "KAI's topology constraints are not translated to Volcano's HyperNodes (network topology)",
    "weight": "a Volcano Queue's weight is a whole number from 1 to 65535; give overQuotaWeight as one",
    "leaf-quota": "a Volcano Queue has no unlimited deserved; give the queue a number of GPUs (0 borrows only)",
    "parent-quota": "Volcano's queue webhook refuses a parent whose deserved is below the sum of its children's; "
                    "use -1 (their sum) or at least that sum",
    "limit": "a Volcano Queue's deserved must be at most its capability: give a limit of at least the quota (or -1)",
    "depth": f"Volcano's queue webhook allows queues {MAX_DEPTH} levels below its root (its --max-queue-depth, "
             "the chart's default): flatten the tree",
    "priority": "a Volcano Queue's priority is a whole number from 0 up; give `priority` as one",
    "operator-kind": "kailab's Volcano labs do not translate a workload operator's kinds to Volcano's PodGroups "
                     "yet (the training-operator's --gang-scheduler-name=volcano, KubeRay's batch scheduler); "
                     "run it on the kai stack",
}


def refuse(where: str, what: str) -> KailabError:
    return KailabError(f"{where}: not on the volcano stack: {NO_EQUIVALENT[what]}")


def _deserved(q: QueueDecl, queues: list[QueueDecl]) -> float:
    """A queue's deserved GPUs: its quota, or (a parent with quota -1) UNLIMITED."""
    children = [c for c in queues if c.parent == q.name]
    quota = q.gpu.get("quota", 0 if q.leaf else -1)
    if not children:
        if quota < 0:
            raise refuse(f"{q.where}.gpu.quota", "leaf-quota")
        return quota
    below = sum(_deserved(c, queues) for c in children)
    limit = q.gpu.get("limit", -1)
    if quota < 0:  # unlimited, up to the parent's own ceiling (a deserved above it is refused)
        return max(below, UNLIMITED if limit <= 0 else limit)
    if quota < below:
        raise refuse(f"{q.where}.gpu.quota", "parent-quota")
    return quota


def queue_objects(queues: list[QueueDecl], namespace: str = "") -> list[dict]:
    """The tree as Queues, parents first (cluster-scoped: `namespace` is not theirs)."""
    by_name = {q.name: q for q in queues}
    out = []
    for q in queues:
        depth, up = 1, by_name.get(q.parent or "")
        while up is not None:
            depth, up = depth + 1, by_name.get(up.parent or "")
        if depth > MAX_DEPTH:
            raise refuse(f"{q.where}", "depth")
        weight = q.gpu.get("overQuotaWeight", 1)
        if not float(weight).is_integer() or not 1 <= weight <= 65535:
            raise refuse(f"{q.where}.gpu.overQuotaWeight", "weight")
        deserved, limit = _deserved(q, queues), q.gpu.get("limit", -1)
        spec: dict = {"parent": q.parent or ROOT, "weight": int(weight), "reclaimable": True}
        if not q.leaf:
            limit = -1 if limit == 0 else limit  # closed: its leaves are held instead (see above)
        elif held_by_a_closed_parent(q, by_name):
            deserved, limit = None, 0
        if limit >= 0 and deserved is not None and limit < deserved:
            raise refuse(f"{q.where}.gpu.limit", "limit")
        if deserved is not None:
            spec["deserved"] = {GPU: gpus(deserved)}
        if limit >= 0:
            spec["capability"] = {GPU: gpus(limit)}
        if "priority" in q.gpu:
            if not float(q.gpu["priority"]).is_integer() or q.gpu["priority"] < 0:
                raise refuse(f"{q.where}.gpu.priority", "priority")
            spec["priority"] = int(q.gpu["priority"])
        out.append({"apiVersion": API, "kind": "Queue",
                    "metadata": {"name": q.name, "labels": {"app.kubernetes.io/managed-by": "kailab", **q.labels}},
                    "spec": spec})
    return out


def queue_leftovers(queues: list[QueueDecl], namespace: str = "") -> list[Ref]:
    return [Ref(API, "Queue", q.name) for q in reversed(queues)]  # children before parents


def queue_view(obj: dict) -> tuple[str, dict] | None:
    """A Queue in GPUs: quota = deserved (-1: none, or UNLIMITED), limit = capability (-1: none)."""
    if obj.get("kind") not in (None, "Queue"):
        return None
    spec = obj.get("spec") or {}

    def gpu_of(field: str) -> float:
        value = (spec.get(field) or {}).get(GPU)
        return -1 if value is None or count(value) >= UNLIMITED else count(value)

    parent = spec.get("parent")
    view = {"parent": None if parent in (None, "", ROOT) else parent, "quota": gpu_of("deserved"),
            "limit": gpu_of("capability"), "status": obj.get("status") or {}}
    return obj["metadata"]["name"], view


def _pod_marks(meta: dict, queue: str | None, where: str) -> None:
    """A pod's (or pod template's) metadata in Volcano's words: its queue, its preemptability, no
    KAI marks; what Volcano cannot express is refused here."""
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if workloads.GPU_FRACTION in annotations or workloads.GPU_MEMORY in annotations:
        raise refuse(f"{where} share", "share")
    if any(k.startswith(workloads.TOPOLOGY) for k in annotations):
        raise refuse(f"{where} topology", "topology")
    labels.pop(workloads.QUEUE_LABEL, None)
    preemptibility = labels.pop(workloads.PREEMPTIBILITY_LABEL, None)
    if preemptibility is not None:
        annotations[PREEMPTABLE] = "true" if preemptibility == "preemptible" else "false"
    group = annotations.pop(workloads.PODGROUP_ANNOTATION, None)
    labels.pop(workloads.PODGROUP_ANNOTATION, None)
    if group:
        annotations[GROUP_ANNOTATION] = group
    if queue:
        annotations[QUEUE_ANNOTATION] = queue
    for key, value in (("labels", labels), ("annotations", annotations)):
        if value:
            meta[key] = value
        else:
            meta.pop(key, None)


def workload_objects(objs: list[dict], where: str) -> list[dict]:
    out = []
    for original in objs:
        obj = copy.deepcopy(original)
        kind, meta = obj.get("kind"), obj.setdefault("metadata", {})
        queue = (meta.get("labels") or {}).get(workloads.RUN_QUEUE_LABEL)
        if workloads.of_an_operator(obj):
            raise refuse(f"{where} {kind}", "operator-kind")
        if kind == "PodGroup":  # an elastic workload's group (workloads.elastic): Volcano's own kind
            spec = obj.get("spec") or {}
            group = {"minMember": spec["minMember"], "queue": spec.get("queue", queue)}
            if spec.get("priorityClassName"):
                group["priorityClassName"] = spec["priorityClassName"]
            labels = {k: v for k, v in (meta.get("labels") or {}).items()
                      if k not in (workloads.QUEUE_LABEL, workloads.PREEMPTIBILITY_LABEL)}
            out.append({"apiVersion": API, "kind": "PodGroup",
                        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels},
                        "spec": group})
            continue
        annotations = meta.get("annotations") or {}
        gang = annotations.pop(workloads.GANG_ANNOTATION, None)
        if gang is not None:  # Volcano's controller reads the group's size from the Job's own annotations
            annotations[MIN_MEMBER_ANNOTATION] = gang
        if kind == "Pod":
            _pod_marks(meta, queue, where)
        else:
            _pod_marks(meta, None, where)
            if annotations:
                meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
            template = (obj.get("spec") or {}).get("template")
            if isinstance(template, dict):
                _pod_marks(template.setdefault("metadata", {}), queue, where)
        template = (obj.get("spec") or {}).get("template")
        pod_spec = template.get("spec") if isinstance(template, dict) else obj.get("spec") if kind == "Pod" else None
        if isinstance(pod_spec, dict) and pod_spec.get("schedulerName") == workloads.SCHEDULER_NAME:
            pod_spec["schedulerName"] = pins()["scheduler_name"]
        out.append(obj)
    return out


def workload_leftovers(workload: str, kind: str, namespace: str) -> list[Ref]:
    # an elastic workload's PodGroup is ours; the controller's PodGroups go with their owners
    return [Ref(API, "PodGroup", workload, namespace)] if kind == "elastic" else []


_INVALID_QUEUE = {"apiVersion": API, "kind": "Queue", "metadata": {"name": "kailab-webhook-probe"},
                  "spec": {"deserved": {GPU: "1"}, "guarantee": {"resource": {GPU: "2"}}}}


def webhook_answers(kube) -> bool:
    """A dry-run Queue whose deserved is below its guarantee comes back denied by Volcano's queue
    validation (not by the API server's schema): its webhook is called and answers."""
    from kubernetes.client.exceptions import ApiException

    try:
        kube.resource(API, "Queue").create(body=_INVALID_QUEUE, dry_run="All")
    except ApiException as err:
        return "validatequeue.volcano.sh" in str(err.body)
    except Exception:  # noqa: BLE001 - the kind not served yet, a connection refused: not yet
        return False
    return False
