"""The host as a version trial must leave it: a snapshot of what the trial could touch, and the
difference between two, one readable line per object.

Taken before the first vCluster and after the last one's deletion: namespaces (with labels), CRDs,
webhook configurations, ClusterRoles and ClusterRoleBindings, PriorityClasses, nodes (labels and
taints), every pod outside the trial's own namespaces (identity and node), PVCs and PVs. A pod's
restarts are not the host's state but the interference check's (watch.py).
"""

from __future__ import annotations

from ..kube import Kube

# label keys the host's own components change on their own (a node's heartbeat-like labels)
VOLATILE_NODE_LABELS: tuple[str, ...] = ()


def _names(kube: Kube, api: str, kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in kube.list(api, kind))


def take(kube: Kube, skip_namespaces: set[str]) -> dict:
    """What the host holds now, as plain data (JSON-able)."""
    nodes = {}
    for n in kube.list("v1", "Node"):
        labels = {k: v for k, v in (n["metadata"].get("labels") or {}).items() if k not in VOLATILE_NODE_LABELS}
        taints = sorted(f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}"
                        for t in (n.get("spec") or {}).get("taints") or [])
        nodes[n["metadata"]["name"]] = {"labels": labels, "taints": taints}
    pods = {}
    for p in kube.list("v1", "Pod"):
        meta = p["metadata"]
        if meta["namespace"] in skip_namespaces:
            continue
        pods[f"{meta['namespace']}/{meta['name']}"] = {"uid": meta["uid"], "node": (p.get("spec") or {}).get("nodeName")}
    return {
        "namespaces": {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in kube.list("v1", "Namespace")},
        "crds": _names(kube, "apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        "validating_webhooks": _names(kube, "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
        "mutating_webhooks": _names(kube, "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
        "clusterroles": _names(kube, "rbac.authorization.k8s.io/v1", "ClusterRole"),
        "clusterrolebindings": _names(kube, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        "priorityclasses": {o["metadata"]["name"]: o.get("value") for o in kube.list("scheduling.k8s.io/v1", "PriorityClass")},
        "nodes": nodes,
        "pods": pods,
        "pvcs": sorted(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in kube.list("v1", "PersistentVolumeClaim")),
        "pvs": _names(kube, "v1", "PersistentVolume"),
    }


def diff(before: dict, after: dict) -> list[str]:
    """Every difference, one line each: `+ kind name` (appeared), `- kind name` (gone), `~ …` (changed)."""
    out: list[str] = []
    for kind in sorted(set(before) | set(after)):
        a, b = before.get(kind), after.get(kind)
        if isinstance(a, list) or isinstance(b, list):
            a, b = set(a or []), set(b or [])
            out += [f"+ {kind} {x}" for x in sorted(b - a)] + [f"- {kind} {x}" for x in sorted(a - b)]
            continue
        a, b = a or {}, b or {}
        out += [f"+ {kind} {x}{_where(b[x])}" for x in sorted(set(b) - set(a))]
        out += [f"- {kind} {x}{_where(a[x])}" for x in sorted(set(a) - set(b))]
        for key in sorted(set(a) & set(b)):
            if a[key] != b[key]:
                out.append(f"~ {kind} {key}: {_changed(a[key], b[key])}")
    return out


def _where(value) -> str:
    """Where an object that came or went ran (a pod's node): a DaemonSet's pod on a trial's node is the
    trial's, though its name says nothing of it."""
    return f" (on node {value['node']})" if isinstance(value, dict) and value.get("node") else ""


def _changed(a, b) -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        parts = []
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                parts.append(f"{k} {_changed(a.get(k), b.get(k))}" if isinstance(a.get(k), dict) else
                             f"{k}: {a.get(k, '(none)')} -> {b.get(k, '(none)')}")
        return "; ".join(parts)
    return f"{a} -> {b}"


def mentions(line: str, words: list[str]) -> bool:
    """A diff line that names any of `words` (a version's slug, namespace, vCluster name)."""
    return any(w in line for w in words)
