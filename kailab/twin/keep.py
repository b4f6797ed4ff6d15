"""Only what scheduling needs enters a twin: a snapshot from a user's cluster carries images, commands,
env values, volumes, service accounts and annotations; the twin keeps resource requests and limits and
the fields a scheduler reads (selectors, affinities, tolerations, priority class, scheduler name,
topology spread, KAI's labels and annotations) and drops the rest, so no secret reaches the lab or its
evidence. What it cannot reproduce is named, never dropped silently."""

from __future__ import annotations

import hashlib

from ..fleet import Node, Taint

PLACEHOLDER_IMAGE = "kailab.io/twin-placeholder"  # KWOK runs no container: any image does
# annotations KAI reads (podgrouper, binder, GPU sharing, topology); every other annotation is dropped
KEPT_ANNOTATION_PREFIXES = ("kai.scheduler/", "scheduling.run.ai/", "runai/", "run.ai/", "gpu-fraction",
                            "gpu-memory", "pod-group-name", "received-resource-type", "kailab.io/")
POD_SPEC_KEPT = ("schedulerName", "nodeSelector", "affinity", "tolerations", "priorityClassName",
                 "topologySpreadConstraints", "runtimeClassName", "resourceClaims", "restartPolicy",
                 "terminationGracePeriodSeconds", "schedulingGates")
# Node labels kailab sets itself on a fake node (fleet.Node.manifest): not copied, made
NODE_LABELS_MADE = ("kubernetes.io/hostname", "type", "kailab.io/fleet")


def _annotations(meta: dict) -> dict:
    return {k: v for k, v in (meta.get("annotations") or {}).items()
            if k.startswith(KEPT_ANNOTATION_PREFIXES) and not k.startswith("kubectl.kubernetes.io/")}


def _meta(meta: dict, names: "Names", namespaced: bool = True) -> dict:
    out = {"name": names.of(meta["name"])}
    if namespaced:
        out["namespace"] = names.namespace(meta.get("namespace") or "default")
    labels = {k: names.label(k, v) for k, v in (meta.get("labels") or {}).items()}
    if labels:
        out["labels"] = labels
    ann = _annotations(meta)
    if ann:
        out["annotations"] = {k: names.label(k, v) for k, v in ann.items()}
    return out


def _container(c: dict) -> dict:
    kept = {"name": c.get("name") or "main", "image": PLACEHOLDER_IMAGE}
    if c.get("resources"):
        kept["resources"] = {k: v for k, v in c["resources"].items() if k in ("requests", "limits", "claims")}
    return kept


class Names:
    """Consistent renaming with `--anonymise` (namespaces, pods, nodes, queues, PodGroups: a short hash
    of each name, the same name always the same), or names as they are."""

    def __init__(self, anonymise: bool = False, queues: set[str] | None = None, nodes: set[str] | None = None):
        self.anonymise, self.queues, self.nodes = anonymise, queues or set(), nodes or set()
        self.renamed: dict[str, str] = {}

    def _hash(self, kind: str, name: str) -> str:
        return f"{kind}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"

    def of(self, name: str) -> str:
        if not self.anonymise:
            return name
        kind = "node" if name in self.nodes else "queue" if name in self.queues else "obj"
        return self.renamed.setdefault(name, self._hash(kind, name))

    def namespace(self, name: str) -> str:
        return self.renamed.setdefault("ns/" + name, self._hash("ns", name)) if self.anonymise else name

    def label(self, key: str, value: str) -> str:
        """A label or annotation value: queue and node names in it follow the renaming."""
        if not self.anonymise or not isinstance(value, str):
            return value
        if value in self.queues or value in self.nodes:
            return self.of(value)
        if key == "pod-group-name":
            return self.of(value)
        return value


def pod(obj: dict, names: Names, bound: bool) -> dict:
    spec = obj.get("spec") or {}
    kept = {k: spec[k] for k in POD_SPEC_KEPT if k in spec}
    kept["containers"] = [_container(c) for c in spec.get("containers") or []] or [_container({})]
    if spec.get("initContainers"):
        kept["initContainers"] = [_container(c) for c in spec["initContainers"]]
    if kept.get("nodeSelector"):
        kept["nodeSelector"] = {k: names.label(k, v) for k, v in kept["nodeSelector"].items()}
    if bound:
        kept["nodeName"] = names.of(spec["nodeName"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(obj["metadata"], names), "spec": kept}


def pod_notes(obj: dict) -> list[str]:
    """What of a pod a twin cannot reproduce (said, never dropped silently)."""
    spec, meta, notes = obj.get("spec") or {}, obj["metadata"], []
    claims = [v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes") or [] if v.get("persistentVolumeClaim")]
    if claims:
        notes.append(f"volume claims not reproduced: {', '.join(claims)}")
    owners = [f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or []]
    if owners:
        notes.append(f"owner not reproduced (a bare pod in the twin): {', '.join(owners)}")
    return notes


def podgroup(obj: dict, names: Names) -> dict:
    spec = dict(obj.get("spec") or {})
    if spec.get("queue"):
        spec["queue"] = names.of(spec["queue"])
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": _meta(obj["metadata"], names), "spec": spec}


def queue(obj: dict, names: Names) -> dict:
    spec = dict(obj.get("spec") or {})
    if spec.get("parentQueue"):
        spec["parentQueue"] = names.of(spec["parentQueue"])
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": _meta(obj["metadata"], names, namespaced=False), "spec": spec}


def priority_class(obj: dict) -> dict:
    keep = {k: obj[k] for k in ("value", "preemptionPolicy", "globalDefault") if k in obj}
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": obj["metadata"]["name"], **({"labels": obj["metadata"]["labels"]}
                                                           if obj["metadata"].get("labels") else {})}, **keep}


def topology(obj: dict) -> dict:
    return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology",
            "metadata": {"name": obj["metadata"]["name"]}, "spec": obj.get("spec") or {}}


def node(obj: dict, names: Names) -> tuple[Node, list[str]]:
    """The node as a fleet entry, and what of it the twin does not reproduce."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    labels = {k: names.label(k, v) for k, v in (meta.get("labels") or {}).items() if k not in NODE_LABELS_MADE}
    taints = [Taint(key=t["key"], value=t.get("value", ""), effect=t["effect"]) for t in spec.get("taints") or []
              if not t["key"].startswith("node.kubernetes.io/")]  # the node lifecycle's own: made by the lab
    notes = []
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), "True")
    if ready != "True":
        notes.append(f"was not Ready (Ready={ready}): Ready in the twin")
    capacity = {k: str(v) for k, v in (status.get("capacity") or {}).items()}
    allocatable = {k: str(v) for k, v in (status.get("allocatable") or capacity).items()}
    return Node(name=names.of(meta["name"]), labels=labels, taints=taints,
                unschedulable=bool(spec.get("unschedulable")), capacity=capacity or allocatable,
                allocatable=allocatable), notes
