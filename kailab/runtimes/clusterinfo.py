"""Read-only facts about a cluster reached through a kubeconfig, shared by the kind and existing
runtimes: its API server URL, Ready nodes and GPUs, and the readiness of KAI's Deployments."""

from __future__ import annotations

from pathlib import Path

import yaml

from ..kube import Kube

GPU = "nvidia.com/gpu"


def api_server(kubeconfig: str | Path) -> str:
    """The server URL of the kubeconfig's current context ('' when it cannot be read)."""
    try:
        cfg = yaml.safe_load(Path(kubeconfig).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return ""
    contexts = {c.get("name"): c.get("context", {}) for c in cfg.get("contexts") or []}
    cluster_name = contexts.get(cfg.get("current-context"), {}).get("cluster")
    clusters = cfg.get("clusters") or []
    for c in clusters:
        if c.get("name") == cluster_name:
            return c.get("cluster", {}).get("server", "")
    return clusters[0].get("cluster", {}).get("server", "") if clusters else ""


def ready_nodes_and_gpus(kube: Kube, label_selector: str | None = None) -> tuple[int, int]:
    """How many nodes are Ready, and the GPUs on those nodes: allocatable `nvidia.com/gpu`, plus the
    devices of GPU ResourceSlices (DRA) published for them, as KAI counts them."""
    ready = _ready_nodes(kube, label_selector)
    gpus = sum(_int((n.get("status") or {}).get("allocatable", {}).get(GPU, "0")) for n in ready)
    names = {n["metadata"]["name"] for n in ready}
    return len(ready), gpus + sum(k for name, k in dra_gpus_by_node(kube).items() if name in names)


def pods_holding(kube: Kube, nodes: set[str]) -> list[str]:
    """`namespace/name on node` of each pod bound to one of `nodes` that has not ended (terminating ones
    too: they hold their devices until gone), but a DaemonSet's (those run on every node, as the lab's)."""
    out = []
    for pod in kube.list("v1", "Pod"):
        node, meta = (pod.get("spec") or {}).get("nodeName"), pod.get("metadata") or {}
        if node not in nodes or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
            continue
        out.append(f"{meta.get('namespace')}/{meta.get('name')} on {node}")
    return sorted(out)


def ready_node_count(kube: Kube, label_selector: str | None = None) -> int:
    """How many nodes are Ready (what `up` polls for: no GPU count, no ResourceSlice list)."""
    return len(_ready_nodes(kube, label_selector))


def _ready_nodes(kube: Kube, label_selector: str | None) -> list[dict]:
    return [n for n in kube.list("v1", "Node", label_selector=label_selector)
            if any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (n.get("status") or {}).get("conditions") or [])]


def dra_gpus_by_node(kube: Kube) -> dict[str, int]:
    """Devices of ResourceSlices whose driver names a GPU, per node (KAI's own rule: the driver's
    name holds "gpu"); {} where the API server serves no DRA."""
    out: dict[str, int] = {}
    try:
        slices = kube.list("resource.k8s.io/v1", "ResourceSlice")
    except Exception:  # noqa: BLE001 - a cluster without resource.k8s.io/v1: no DRA GPUs
        return out
    for sl in slices:
        spec = sl.get("spec") or {}
        if "gpu" in str(spec.get("driver", "")).lower() and spec.get("nodeName"):
            out[spec["nodeName"]] = out.get(spec["nodeName"], 0) + len(spec.get("devices") or [])
    return out


def deployment_states(kube: Kube, namespace: str, names: list[str] | None = None) -> dict[str, dict]:
    """Status-table rows for Deployments: running when every wanted replica is ready.

    With `names`, each listed Deployment gets a row (missing ones say so); without, every
    Deployment in the namespace does. Rows carry the keys the CLI's status table reads.
    """
    found = {d["metadata"]["name"]: d for d in kube.list("apps/v1", "Deployment", namespace)}
    rows = {}
    for name in names if names is not None else sorted(found):
        dep = found.get(name)
        if dep is None:
            state = "missing"
        else:
            wanted = (dep.get("spec") or {}).get("replicas", 1)
            ready = (dep.get("status") or {}).get("readyReplicas") or 0
            state = "running" if wanted and ready >= wanted else f"not ready ({ready}/{wanted})"
        rows[name] = {"state": state, "pid": None, "ports": {},
                      "log": f"kubectl -n {namespace} logs deployment/{name}"}
    return rows


def _int(quantity: str) -> int:
    try:
        return int(quantity)
    except (TypeError, ValueError):
        return 0
