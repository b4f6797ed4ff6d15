"""A twin's plan, made from a snapshot before any lab starts: the fleet (the snapshot's nodes), the
objects in the order they go in (priority classes, the queue hierarchy parents first, topologies,
PodGroups, then the pods that were bound, each on its node, then the pending ones), the scheduler's
configuration, and everything the twin cannot reproduce, by name."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import InputError
from ..fleet import MAX_NODES, Fleet
from ..top.model import pod_gpus as kai_pod_gpus
from . import keep
from . import order as _order
from .design import AS_IS, TwinDesign, change_args, change_conf, change_queue
from .snapshot import Snapshot

SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
# the snapshot's schedulerParams that are flags of KAI's scheduler (cmd/scheduler/app/options), by name
PARAM_FLAGS = {
    "maxNumberConsolidationPreemptees": "max-consolidation-preemptees",
    "useSchedulingSignatures": "use-scheduling-signatures",
    "fullHierarchyFairness": "full-hierarchy-fairness",
    "allowConsolidatingReclaim": "allow-consolidating-reclaim",
    "updatePodEvictionCondition": "update-pod-eviction-condition",
    "schedulePeriod": "schedule-period",  # durations: nanoseconds in the snapshot
    "globalDefaultStalenessGracePeriod": "default-staleness-grace-period",
    "stuckInReleasingThreshold": "stuck-in-releasing-threshold",
}
DURATIONS = ("schedulePeriod", "globalDefaultStalenessGracePeriod", "stuckInReleasingThreshold")
# the lab's own (its scheduler's name, queue label and node pool, kailab's status workers): not applied
PARAMS_NOT_APPLIED = ("partitionParams", "numOfStatusRecordingWorkers", "schedulerName", "queueLabelKey")
NODE_POOL_LABEL = "kai.scheduler/node-pool"  # KAI's default NodePoolLabelKey (partitionParams)
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # a node's GPU memory (MiB): a gpu-memory pod's share is over it


@dataclass
class TwinPlan:
    fleet: Fleet
    namespaces: list[str]
    objects: list[dict]        # priority classes, queues (parents first), topologies, PodGroups
    bound: list[dict]          # pods with spec.nodeName, each on the node it had
    pending: list[dict]        # pods for KAI to decide
    conf: dict                 # the scheduler's configuration (actions, tiers) as the snapshot had it
    args: list[str]            # scheduler flags from the snapshot's parameters
    not_reproduced: dict[str, list[str]] = field(default_factory=dict)  # object -> what is not reproduced
    unknown: list[str] = field(default_factory=list)
    names: keep.Names = field(default_factory=keep.Names)  # the snapshot's names -> the twin's
    design: str = AS_IS  # the design the plan carries (twin/design.py)
    params: dict = field(default_factory=dict)  # the snapshot's schedulerParams, as they were
    # Kind/namespace/name (the twin's names) -> the snapshot's (creation time, UID): KAI's tie order (order.py)
    order: dict[str, tuple[str, str]] = field(default_factory=dict)

    def equivalent_pods(self, a: str, b: str) -> bool:
        """Two pods (namespace/name) a scheduler cannot tell apart: same queue, GPUs, priority class and
        requests, and (bound ones) on nodes alike."""
        if not hasattr(self, "_by_key"):  # asked for many pairs: index once
            self._by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in self.bound + self.pending}
            self._shares = self.pod_shares()
        pods = self._by_key
        if a not in pods or b not in pods:
            return False
        pa, pb = pods[a], pods[b]
        shape = lambda p: (p["spec"].get("priorityClassName"), [c.get("resources") for c in p["spec"]["containers"]])  # noqa: E731
        na, nb = pa["spec"].get("nodeName"), pb["spec"].get("nodeName")
        nodes_alike = (na is None and nb is None) or (na is not None and nb is not None and self.same_nodes(na, nb))
        return self._shares[a] == self._shares[b] and shape(pa) == shape(pb) and nodes_alike

    def similar_pods(self, a: str, b: str) -> bool:
        """Two pods of one queue and one priority class (a scheduler may take either as a victim)."""
        self.equivalent_pods(a, a)  # the index
        pods = self._by_key
        return a in pods and b in pods and self._shares[a][0] == self._shares[b][0] and \
            pods[a]["spec"].get("priorityClassName") == pods[b]["spec"].get("priorityClassName")

    def same_nodes(self, a: str, b: str) -> bool:
        """Two of the twin's nodes alike for a scheduler: labels but their names, taints, capacity."""
        def shape(n: dict) -> str:
            labels = {k: v for k, v in (n["metadata"].get("labels") or {}).items() if v != n["metadata"]["name"]}
            return repr((sorted(labels.items()), n["spec"].get("taints"), n["spec"].get("unschedulable"),
                         sorted((n["status"].get("allocatable") or {}).items())))
        nodes = {n["metadata"]["name"]: n for n in self.fleet.node_manifests()}
        return a in nodes and b in nodes and shape(nodes[a]) == shape(nodes[b])

    def with_design(self, design: TwinDesign | None) -> "TwinPlan":
        """The same twin with a design's changes to its queues and scheduler (checked by check_against)."""
        if design is None:
            return self
        changes = {self.names.of(q): c for q, c in design.spec.queues.items()}
        objects = [change_queue(o, changes[o["metadata"]["name"]])
                   if o["kind"] == "Queue" and o["metadata"]["name"] in changes else o for o in self.objects]
        sched = design.spec.scheduler
        return replace(self, objects=objects, design=design.name,
                       conf=change_conf(self.conf, sched.placement if sched else None),
                       args=change_args(self.args, sched.args if sched else {}))

    def queue_names(self) -> set[str]:
        """The snapshot's queue names (as a design names them), whatever the twin calls them."""
        twin = {o["metadata"]["name"] for o in self.objects if o["kind"] == "Queue"}
        return {q for q in self.names.queues if self.names.of(q) in twin}

    def pod_shares(self, placed: dict[str, str] | None = None) -> dict[str, tuple[str, float]]:
        """Each pod (namespace/name) -> its queue and its GPUs as KAI counts them (whole devices, a
        fraction, or gpu-memory over the GPU memory of its node: the node it is bound to, or `placed` on;
        a pod on no node, the fleet's GPU memory if all its nodes have one, else 0)."""
        placed = placed or {}
        mib = {n["metadata"]["name"]: float(n["metadata"]["labels"][GPU_MEMORY_LABEL])
               for n in self.fleet.node_manifests() if (n["metadata"].get("labels") or {}).get(GPU_MEMORY_LABEL)}
        alike = next(iter(mib.values())) if len(set(mib.values())) == 1 else None
        group_queue = {(o["metadata"]["namespace"], o["metadata"]["name"]): (o.get("spec") or {}).get("queue", "")
                       for o in self.objects if o["kind"] == "PodGroup"}
        out = {}
        for p in self.bound + self.pending:
            meta = p["metadata"]
            ann, labels = meta.get("annotations") or {}, meta.get("labels") or {}
            queue = group_queue.get((meta["namespace"], ann.get("pod-group-name"))) or labels.get(
                "kai.scheduler/queue") or labels.get("runai/queue") or ""
            key = f"{meta['namespace']}/{meta['name']}"
            node = p["spec"].get("nodeName") or placed.get(key)
            out[key] = (queue, pod_gpus(p, mib.get(node, alike) if node else alike))
        return out

    def counts(self) -> dict:
        kinds: dict[str, int] = {}
        for o in self.objects:
            kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
        return {"nodes": self.fleet.nodes_total, "gpus": self.fleet.gpus_total, "namespaces": len(self.namespaces),
                **{k.lower() + ("es" if k.endswith("s") else "s"): n for k, n in sorted(kinds.items())}, "pods_bound": len(self.bound),
                "pods_pending": len(self.pending)}


def pod_gpus(pod: dict, node_gpu_mib: float | None = None) -> float:
    """A pod's GPUs as KAI counts them (kailab.top's count: whole nvidia.com/gpu, gpu-fraction, or
    gpu-memory over `node_gpu_mib`); 0 for a value that is no number."""
    try:
        return kai_pod_gpus({"metadata": pod.get("metadata") or {}, "spec": pod.get("spec") or {}}, node_gpu_mib)
    except (TypeError, ValueError):
        return 0.0


def _node_pool(pod: dict, groups: dict, key: str) -> str:
    """The node pool a pod is of, '' for none: its PodGroup's label, the one KAI's scheduler selects by
    (a pod's own label alone does not keep it from a scheduler of no pool: measured), else, a pod of no
    PodGroup in the snapshot, its own."""
    meta = pod["metadata"]
    group = groups.get((meta.get("namespace", "default"), (meta.get("annotations") or {}).get("pod-group-name")))
    if group is not None:
        return (group["metadata"].get("labels") or {}).get(key) or ""
    return (meta.get("labels") or {}).get(key) or ""


def _without_label(obj: dict, key: str) -> dict:
    labels = obj["metadata"].get("labels") or {}
    if key in labels:
        obj["metadata"]["labels"] = {k: v for k, v in labels.items() if k != key}
    return obj


def _flag(key: str, value) -> str:
    if key in DURATIONS:
        return f"{int(value) / 1e9:g}s"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _parents_first(queues: list[dict]) -> list[dict]:
    by_name = {q["metadata"]["name"]: q for q in queues}

    def depth(q: dict, seen: frozenset = frozenset()) -> int:
        parent = (q.get("spec") or {}).get("parentQueue")
        if not parent or parent not in by_name or parent in seen:
            return 0
        return 1 + depth(by_name[parent], seen | {q["metadata"]["name"]})

    return sorted(queues, key=lambda q: (depth(q), q["metadata"]["name"]))


def make_plan(snap: Snapshot, name: str, anonymise: bool = False) -> TwinPlan:
    nodes_raw = snap.of("nodes")
    if len(nodes_raw) > MAX_NODES:
        raise InputError(snap.path, "rawObjects.nodes", f"{len(nodes_raw)} nodes is more than the {MAX_NODES} a lab holds",
                         "twin a smaller cluster, or a node pool of it")
    node_names = {n["metadata"]["name"] for n in nodes_raw}
    names = keep.Names(anonymise, queues={q["metadata"]["name"] for q in snap.of("queues")}, nodes=node_names)
    notes: dict[str, list[str]] = {}
    partition = snap.params.get("partitionParams") or {}
    pool_key, own_pool = partition.get("NodePoolLabelKey") or NODE_POOL_LABEL, partition.get("NodePoolLabelValue") or ""
    fleet_nodes = []
    for n in nodes_raw:
        entry, why = keep.node(n, names)
        fleet_nodes.append(entry)
        node_pool = (n["metadata"].get("labels") or {}).get(pool_key)
        if own_pool and node_pool == own_pool:
            entry.labels.pop(pool_key, None)  # as the PodGroups': the twin's scheduler, of no pool, sees it
        elif own_pool and not node_pool:
            why = list(why or []) + [f"not of the snapshot's node pool {own_pool!r} ({pool_key}): its scheduler did not "
                                     "place on it, the twin's (of no pool) may"]
        if why:
            notes[f"node/{entry.name}"] = why
    fleet = Fleet(name=name, description=f"the nodes of {snap.path.name}", nodes=fleet_nodes)

    for member in snap.ignored:
        notes[f"zip/{member}"] = [f"ignored in the zip: a twin reads only {snap.path.name}'s snapshot.json"]
    raw_groups = {(g["metadata"].get("namespace", "default"), g["metadata"]["name"]): g for g in snap.of("podGroups")}
    bound, pending, namespaces = [], [], set()
    order: dict[str, tuple[str, str]] = {}
    for i, p in enumerate(snap.of("pods")):
        spec, status = p.get("spec") or {}, p.get("status") or {}
        where = f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}"
        if status.get("phase") in ("Succeeded", "Failed") or p["metadata"].get("deletionTimestamp"):
            notes.setdefault(f"pod/{where}", []).append(f"{status.get('phase') or 'deleting'}: holds nothing, left out")
            continue
        node = spec.get("nodeName")
        if node and node not in node_names:
            raise InputError(snap.path, f"rawObjects.pods[{i}] ({where}) spec.nodeName",
                             f"names node {node!r}, which the snapshot's nodes lack",
                             "take the snapshot again: it lists every node its pods run on")
        twin = keep.pod(p, names, bound=bool(node))
        order[_order.ref(twin)] = _order.key_of(p["metadata"])
        if own_pool and (twin["metadata"].get("labels") or {}).get(pool_key) == own_pool:
            _without_label(twin, pool_key)  # the twin's scheduler runs with no node pool: the snapshot's is its whole
        namespaces.add(twin["metadata"]["namespace"])
        (bound if node else pending).append(twin)
        why = keep.pod_notes(p)
        pool = _node_pool(p, raw_groups, pool_key)
        if pool != own_pool:
            why = list(why or []) + [
                f"of node pool {pool!r} ({pool_key}), not the snapshot's scheduler's ({own_pool or 'no pool'}): "
                "the twin reproduces that scheduler alone, no scheduler of the twin decides this pod"
                + (": bound as it was" if node else ": left pending, with no reason from KAI") if pool else
                f"of no node pool ({pool_key}), the snapshot's scheduler of pool {own_pool!r}: that scheduler did "
                "not decide it, the twin's (of no pool) does"]
        if why:
            notes.setdefault(f"pod/{where}", []).extend(why)

    used = {(p["metadata"]["namespace"], (p["metadata"].get("annotations") or {}).get("pod-group-name"))
            for p in bound + pending}
    groups = []
    for g in snap.of("podGroups"):
        twin = keep.podgroup(g, names)
        order[_order.ref(twin)] = _order.key_of(g["metadata"])
        if own_pool and (g["metadata"].get("labels") or {}).get(pool_key) == own_pool:
            _without_label(twin, pool_key)
        if (twin["metadata"]["namespace"], twin["metadata"]["name"]) in used:
            groups.append(twin)
        else:  # its pods are gone (a finished Job's): KAI has nothing of it to decide
            notes.setdefault(f"podGroup/{g['metadata'].get('namespace', '')}/{g['metadata']['name']}", []).append(
                "no live pod in the snapshot: left out")
    namespaces |= {g["metadata"]["namespace"] for g in groups}
    objects = [keep.priority_class(c) for c in snap.of("priorityClasses")
               if c["metadata"]["name"] not in SYSTEM_PRIORITY_CLASSES]
    objects += [keep.queue(q, names) for q in _parents_first(snap.of("queues"))]
    objects += [keep.topology(t) for t in snap.of("topologies")]
    objects += _order.in_creation_order(groups, order)  # made in the snapshot's order: KAI's tie order
    for kind in ("persistentVolumeClaims", "csiStorageCapacities", "nodeResourceTopologies", "resourceClaims",
                 "resourceSlices", "deviceClasses"):
        for o in snap.of(kind):
            notes.setdefault(f"{kind}/{o['metadata']['name']}", []).append("not reproduced in a twin")

    args = [f"--{PARAM_FLAGS[k]}={_flag(k, v)}" for k, v in snap.params.items() if k in PARAM_FLAGS]
    unknown = list(snap.unknown) + [f"schedulerParams.{k}" for k in snap.params
                                    if k not in PARAM_FLAGS and k not in PARAMS_NOT_APPLIED]
    return TwinPlan(fleet, sorted(namespaces), objects, _order.in_creation_order(bound, order),
                    _order.in_creation_order(pending, order), dict(snap.config), args, notes, unknown, names,
                    params=dict(snap.params), order=order)
