"""What the cluster looks like to an exercise, rebuilt from the API's watch stream.

Pure data + pure functions: the observer feeds it, expectations and invariants read it, and
tests can feed it recorded objects.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field

from ..workloads import (GPU_FRACTION, GPU_GROUP_LABEL, GPU_MEMORY, OWNER_LABEL, PODGROUP_ANNOTATION,
                         PREEMPTIBILITY_LABEL, QUEUE_LABEL, RUN_QUEUE_LABEL)

GPU = "nvidia.com/gpu"
# KAI: priority >= 100 is non-preemptible unless the preemptibility label says otherwise
NON_PREEMPTIBLE_FROM = 100

# KAI decides a gang in one scheduling cycle, then commits it one BindRequest per pod (10 pods in
# ~0.2 s on an idle lab; 1-2 s apart when the API server it writes to is loaded): any
# instant of that commit shows a partial gang. A gang may pass through partial states while being
# committed or evicted; resting partial this long with no member allocated meanwhile means it was
# left below its minimum. The clock restarts at each
# new member: a slow commit is progress, not rest. CI under load (15-30 runnable tasks on 2 cores) saw
# the binder pause 5.2 s between a gang's members, twice (8 of 10, and 1 of 10, each then completed):
# 15 s (15 of the lab's 1 s periods) still calls a gang left below its minimum partial, and a starved binder's pause not.
GANG_COMMIT_GRACE = 15.0


def _gpus(pod: dict) -> int:
    total = 0
    for c in pod.get("spec", {}).get("containers", []):
        res = c.get("resources") or {}
        val = (res.get("limits") or {}).get(GPU) or (res.get("requests") or {}).get(GPU)
        total += int(val or 0)
    return total


def _share(annotations: dict) -> str | None:
    if GPU_FRACTION in annotations:
        return f"fraction:{annotations[GPU_FRACTION]}"
    if GPU_MEMORY in annotations:
        return f"memory:{annotations[GPU_MEMORY]}"
    return None


@dataclass
class PodView:
    namespace: str
    name: str
    uid: str
    workload: str
    queue: str
    gpus: int
    node: str | None
    phase: str
    deleting: bool
    priority: int
    preemptibility_label: str | None
    podgroup: str | None
    gpu_group: str | None = None  # the shared device of a fractional pod (KAI's binder labels it)
    gpu_share: str | None = None  # "fraction:0.5" or "memory:20000" (MiB): a part of one GPU
    scheduler: str = ""  # the schedulerName it asks for
    gated: bool = False  # held by scheduling gates (no scheduler sees it yet)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def bound(self) -> bool:
        """Holds a node: bound, not finished, not being deleted."""
        return bool(self.node) and not self.deleting and not self.finished

    @property
    def pending(self) -> bool:
        return not self.node and not self.deleting and not self.finished

    @property
    def running(self) -> bool:
        return self.bound and self.phase == "Running"

    @classmethod
    def from_pod(cls, pod: dict) -> "PodView":
        meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
        labels = meta.get("labels") or {}
        priority = spec.get("priority") or 0
        return cls(namespace=meta["namespace"], name=meta["name"], uid=meta.get("uid", ""),
                   workload=labels.get(OWNER_LABEL, ""), queue=labels.get(RUN_QUEUE_LABEL) or labels.get(QUEUE_LABEL, ""),
                   gpus=_gpus(pod), node=spec.get("nodeName"), phase=status.get("phase", "Pending"),
                   deleting=bool(meta.get("deletionTimestamp")), priority=priority,
                   preemptibility_label=labels.get(PREEMPTIBILITY_LABEL),
                   podgroup=(meta.get("annotations") or {}).get(PODGROUP_ANNOTATION),
                   gpu_group=labels.get(GPU_GROUP_LABEL), gpu_share=_share(meta.get("annotations") or {}),
                   scheduler=spec.get("schedulerName", ""), gated=bool(spec.get("schedulingGates")))


@dataclass
class TimelineEntry:
    t: float  # seconds since the exercise started
    what: str  # created | bound | running | evicted | deleted | succeeded | failed | violation | fault | node
    pod: str
    workload: str = ""
    queue: str = ""
    node: str | None = None
    detail: str = ""


@dataclass
class ClusterState:
    """Shared between the watch threads (writers) and the runner (reader): guard with `cond`."""

    started: float = field(default_factory=time.time)
    pods: dict[tuple[str, str], PodView] = field(default_factory=dict)
    node_gpus: dict[str, int] = field(default_factory=dict)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    queues: dict[str, dict] = field(default_factory=dict)  # real name -> {parent, quota, limit}
    bind_requests: set[tuple[str, str]] = field(default_factory=set)  # (namespace, pod name)
    # whole objects as the watch last saw them, by kind and (namespace, name) ('' for cluster-wide
    # kinds): what object assertions match (spec.OBJECT_KINDS)
    objects: dict[str, dict[tuple[str, str], dict]] = field(default_factory=dict)
    # each pod as the watch saw it when it turned Succeeded or Failed, kept after it is gone (what
    # `object: Pod, ended: true` matches: its phase, exit code and conditions at its end)
    ended: dict[tuple[str, str], dict] = field(default_factory=dict)
    podgroups: dict[tuple[str, str], dict] = field(default_factory=dict)
    gangs: dict[str, int] = field(default_factory=dict)  # workload -> min member
    priority_values: dict[str, int] = field(default_factory=dict)  # PriorityClass name -> value
    workload_podgroups: dict[str, set[str]] = field(default_factory=dict)  # kept after pods are gone
    timeline: list[TimelineEntry] = field(default_factory=list)
    our_deletions: set[str] = field(default_factory=set)  # pod uids kailab itself deleted
    # workload -> since when its gang has rested partial (some but fewer than min allocated, and no
    # member allocated since), and how many it had then
    gang_partial_since: dict[str, float] = field(default_factory=dict)
    gang_partial_count: dict[str, int] = field(default_factory=dict)
    gangs_made: set[str] = field(default_factory=set)  # gangs whose minimum of members has existed at once
    gang_grace: float = GANG_COMMIT_GRACE
    version: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def now(self) -> float:
        return round(time.time() - self.started, 3)

    # ------------------------------------------------------------------ updates (under cond)
    def keep(self, kind: str, obj: dict, deleted: bool = False) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if deleted:
            self.objects.get(kind, {}).pop(key, None)
        else:
            self.objects.setdefault(kind, {})[key] = obj
        if kind == "Pod" and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            first = self.ended.get(key)
            if first is None or first["metadata"].get("uid") != meta.get("uid"):
                self.ended[key] = obj

    def update_pod(self, pod: dict, deleted: bool = False) -> list[TimelineEntry]:
        view = PodView.from_pod(pod)
        old = self.pods.get(view.key)
        if old and old.uid != view.uid:
            old = None  # a new pod with a recycled name
        entries = []
        t = self.now()

        def add(what: str, detail: str = "") -> None:
            entries.append(TimelineEntry(t, what, view.name, view.workload, view.queue, view.node, detail))

        if old is None and not deleted:
            add("created")
        if view.node and not (old and old.node):
            add("bound")
        if view.phase == "Running" and not (old and old.phase == "Running"):
            add("running")
        if view.phase in ("Succeeded", "Failed") and not (old and old.phase == view.phase):
            add(view.phase.lower())
        if (view.deleting or deleted) and old is not None and not old.deleting:
            was_bound = old.node and not old.finished
            if view.uid in self.our_deletions:
                add("deleted", "by the exercise")
            elif was_bound:
                add("evicted", "deleted while bound: KAI eviction/preemption or a controller")
            else:
                add("deleted")
        if view.podgroup and view.workload:
            self.workload_podgroups.setdefault(view.workload, set()).add(view.podgroup)
        if deleted:
            self.pods.pop(view.key, None)
        else:
            self.pods[view.key] = view
        self.timeline.extend(entries)
        return entries

    def track_gangs(self, namespace: str) -> None:
        """Note since when each gang rests partial (and forget gangs that are whole or empty again).
        A gang is judged once its minimum of members has existed at once: before that its pods are
        still being made (a Job controller creates them in slow-start batches, seconds apart on a
        loaded API server), and a scheduler that placed what exists has left nothing partial."""
        for workload, (allocated, min_member) in self.gang_allocation(namespace).items():
            if workload not in self.gangs_made:
                made = sum(1 for p in self.workload_pods(workload) if p.namespace == namespace and not p.finished)
                if made < min_member:
                    self.gang_partial_since.pop(workload, None)
                    self.gang_partial_count.pop(workload, None)
                    continue
                self.gangs_made.add(workload)
            if 0 < allocated < min_member:
                if allocated > self.gang_partial_count.get(workload, 0):
                    self.gang_partial_since[workload] = self.now()  # became partial, or a commit went on
                self.gang_partial_count[workload] = allocated
            else:
                self.gang_partial_since.pop(workload, None)
                self.gang_partial_count.pop(workload, None)

    # ------------------------------------------------------------------ queries (pure)
    def gang_allocation(self, namespace: str) -> dict[str, tuple[int, int]]:
        """workload -> (pods allocated, min member). A pod counts as allocated once KAI created
        its BindRequest (the decision) or it is bound, until it is deleted or finished."""
        out = {}
        for workload, min_member in self.gangs.items():
            pods = [p for p in self.workload_pods(workload) if p.namespace == namespace]
            allocated = [p for p in pods if p.bound or (p.key in self.bind_requests
                                                        and not p.deleting and not p.finished)]
            out[workload] = (len(allocated), min_member)
        return out

    def preemptible(self, pod: PodView) -> bool:
        """KAI's view: the pod's label, else its PodGroup's priority class (the podgrouper gives
        Deployments 'inference' even when the pod names none), else the pod's own priority."""
        if pod.preemptibility_label:
            return pod.preemptibility_label == "preemptible"
        pg = self.podgroups.get((pod.namespace, pod.podgroup or ""))
        if pg:
            spec = pg.get("spec") or {}
            if spec.get("preemptibility") in ("preemptible", "non-preemptible"):
                return spec["preemptibility"] == "preemptible"
            value = self.priority_values.get(spec.get("priorityClassName") or "")
            if value is not None:
                return value < NON_PREEMPTIBLE_FROM
        return pod.priority < NON_PREEMPTIBLE_FROM

    def workload_pods(self, workload: str) -> list[PodView]:
        return [p for p in self.pods.values() if p.workload == workload]

    def subtree(self, queue: str) -> set[str]:
        out = {queue}
        changed = True
        while changed:
            changed = False
            for name, q in self.queues.items():
                if q.get("parent") in out and name not in out:
                    out.add(name)
                    changed = True
        return out

    def queue_pods(self, queue: str) -> list[PodView]:
        names = self.subtree(queue)
        return [p for p in self.pods.values() if p.queue in names]

    def evicted_since(self, since: float, workload: str | None = None, queues: set[str] | None = None) -> int:
        return sum(1 for e in self.timeline if e.what == "evicted" and e.t >= since
                   and (workload is None or e.workload == workload)
                   and (queues is None or e.queue in queues))

    def gpus_on_nodes(self) -> dict[str, int]:
        used: dict[str, int] = {}
        for p in self.pods.values():
            # a pod being deleted holds its GPUs until it has ended (its node stopped it), not until it is gone
            if p.bound or (p.node and p.deleting and not p.finished):
                used[p.node] = used.get(p.node, 0) + p.gpus  # type: ignore[index]
        return used

    def share_of_a_gpu(self, pod: PodView) -> float:
        """How much of one GPU a fractional pod asks for (gpu-memory as a part of its node's GPU memory)."""
        kind, _, value = (pod.gpu_share or ":").partition(":")
        if kind == "fraction":
            return float(value)
        if kind == "memory":
            per_gpu = float(self.node_labels.get(pod.node or "", {}).get("nvidia.com/gpu.memory", 0) or 0)
            return min(1.0, float(value) / per_gpu) if per_gpu else 0.0
        return 0.0

    def node_use(self, reservation_namespace: str) -> dict[str, dict]:
        """Per node: GPUs in use (a shared device counts by what its pods ask of it, so a half-used
        GPU is half used), the shared devices' use, and the pods on it (not KAI's reservation pods)."""
        out: dict[str, dict] = {}
        for n, alloc in sorted(self.node_gpus.items()):
            on = [p for p in self.pods.values() if p.node == n and p.bound]
            shared: dict[str, float] = {}
            for p in on:
                if p.gpu_group and p.gpu_share:
                    shared[p.gpu_group] = round(shared.get(p.gpu_group, 0.0) + self.share_of_a_gpu(p), 3)
            whole = sum(p.gpus for p in on if p.namespace != reservation_namespace and not p.gpu_share)
            out[n] = {"allocatable": alloc, "used": round(whole + sum(shared.values()), 3),
                      **({"shared": shared} if shared else {}),
                      "pods": sorted(p.name for p in on if p.namespace != reservation_namespace)}
        return out

    def pods_table(self) -> list[dict]:
        return [asdict(p) for p in sorted(self.pods.values(), key=lambda p: p.key)]
