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
    """How many nodes are Ready, and the allocatable GPUs on those nodes."""
    nodes = gpus = 0
    for node in kube.list("v1", "Node", label_selector=label_selector):
        status = node.get("status") or {}
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
            nodes += 1
            gpus += _int((status.get("allocatable") or {}).get(GPU, "0"))
    return nodes, gpus


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
