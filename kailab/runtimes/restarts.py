"""Deaths in a cluster: a cluster restarts a crashed container itself, so a death shows as a restart.
A component (a Deployment, or a StatefulSet) whose containers restarted since a baseline died; how
it ended is the kubelet's account and its previous instance's last log lines. Shared by the kind
and existing runtimes."""

from __future__ import annotations

from ..kube import Kube


def _owner(pod: dict) -> str:
    """The workload a pod belongs to: its StatefulSet, or the Deployment behind its ReplicaSet."""
    for o in pod["metadata"].get("ownerReferences") or []:
        if o["kind"] == "ReplicaSet":
            return o["name"].rsplit("-", 1)[0]
        if o["kind"] == "StatefulSet":
            return o["name"]
    return ""


def restart_counts(kube: Kube, components: dict[str, list[str]]) -> dict[str, tuple[int, list]]:
    """Component -> (container restarts over its pods, [pod]), from the pods' owners; `components`
    names workloads by namespace."""
    out: dict[str, tuple[int, list]] = {}
    for ns, names in components.items():
        for pod in kube.list("v1", "Pod", ns):
            name = _owner(pod)
            if name not in names:
                continue
            restarts = sum(c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])
            count, pods = out.get(name, (0, []))
            out[name] = (count + restarts, pods + [pod])
    return out


def why_it_died(kube: Kube, pods: list, lines: int = 10) -> str:
    """How the restarted container ended (the kubelet's reason and exit code: OOMKilled, a probe,
    a crash) and its previous instance's last log lines."""
    for pod in pods:
        meta = pod["metadata"]
        for c in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = ((c.get("lastState") or {}).get("terminated")) or {}
            if not ended:
                continue
            how = (f"container {c['name']} of pod {meta['name']} ended {ended.get('reason') or 'without a reason'}"
                   f" (exit code {ended.get('exitCode')}) at {ended.get('finishedAt')}")
            try:
                tail = kube.core.read_namespaced_pod_log(meta["name"], meta["namespace"], container=c["name"],
                                                         previous=True, tail_lines=lines) or ""
            except Exception:  # noqa: BLE001 - the previous log is gone (kubelet GC): the reason still tells
                tail = ""
            tail = " | ".join(line[:300] for line in tail.strip().splitlines())
            return f"{how}; its last log lines: {tail or '(none)'}"
    return "no terminated container state recorded"
