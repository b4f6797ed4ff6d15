"""One picture of the scheduler at one moment, from the watched objects: KAI's queues as a tree,
GPUs per node pool and node, who waits and KAI's reason, the last evictions. A plain dict (the
`--json` output); nothing here talks to a cluster.

GPUs are counted as KAI counts them: whole GPUs requested (`nvidia.com/gpu`), a fraction
(`gpu-fraction`, times `gpu-fraction-num-devices`), or GPU memory (`gpu-memory` MiB over the
node's `nvidia.com/gpu.memory`) — a pod's share, not the devices it touches.
"""

from __future__ import annotations

import datetime as dt

GPU = "nvidia.com/gpu"
QUEUE_LABEL = "kai.scheduler/queue"
PODGROUP_ANNOTATION = "pod-group-name"
POOL_LABELS = ("kailab.io/pool", "run.ai/simulated-gpu-node-pool", "nvidia.com/gpu.product")
# KAI's eviction event (pkg/scheduler/cache/status_updater): its annotations name the action and the evictor
ACTION_ANNOTATION = "evictor-action-type"
EVICTOR_ANNOTATION = "evictor-pod-group-name"
EVICTOR_NS_ANNOTATION = "evictor-pod-group-namespace"
EVICTED_COUNT_ANNOTATION = "num-evicted-pods"
LAST_EVICTIONS = 8


def _time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def pod_gpus(pod: dict, node_gpu_mib: float | None = None) -> float:
    """A pod's GPUs, as KAI counts them (see the module's doc); 0 for a pod of none."""
    whole = 0.0
    for c in pod["spec"].get("containers") or []:
        res = c.get("resources") or {}
        whole += _float((res.get("requests") or {}).get(GPU) or (res.get("limits") or {}).get(GPU) or 0)
    if whole:
        return whole
    ann = pod["metadata"].get("annotations") or {}
    devices = float(ann.get("gpu-fraction-num-devices") or 1)
    if ann.get("gpu-fraction"):
        return float(ann["gpu-fraction"]) * devices
    if ann.get("gpu-memory") and node_gpu_mib:
        return min(1.0, float(ann["gpu-memory"]) / node_gpu_mib) * devices
    return 0.0


def _live(pod: dict) -> bool:
    return pod["status"].get("phase") not in ("Succeeded", "Failed")


def _pool(node: dict) -> str:
    labels = node["metadata"].get("labels") or {}
    return next((labels[k] for k in POOL_LABELS if labels.get(k)), "-")


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in node["status"].get("conditions") or [])


def _reason(group: dict | None) -> dict:
    """KAI's last word on why a pod group is not scheduled: {reason, message} ('' when it gave none)."""
    if not group:
        return {"reason": "", "message": ""}
    conds = (group.get("status") or {}).get("schedulingConditions") or []
    if not conds:
        return {"reason": "", "message": ""}
    last = max(conds, key=lambda c: (c.get("lastTransitionTime") or "", int(c.get("transitionID") or 0)))
    first = (last.get("reasons") or [{}])[0]
    return {"reason": first.get("reason") or last.get("reason") or "",
            "message": " ".join((first.get("message") or last.get("message") or "").split())}


def _resource(spec: dict, key: str):
    v = ((spec.get("resources") or {}).get("gpu") or {}).get(key)
    return None if v is None else float(v)


def snapshot(objects: dict[str, list[dict]], now: float, fair_share: dict[str, float] | None = None) -> dict:
    """The picture (see the module's doc). `fair_share`: KAI's fair share per queue, from its metrics
    (None: no Prometheus; a queue missing from it has none yet)."""
    nodes = {n["metadata"]["name"]: n for n in objects.get("nodes", [])}
    groups = {f"{g['metadata']['namespace']}/{g['metadata']['name']}": g for g in objects.get("podgroups", [])}

    def mib(node_name: str | None) -> float | None:
        labels = (nodes.get(node_name or "") or {}).get("metadata", {}).get("labels") or {}
        return float(labels["nvidia.com/gpu.memory"]) if labels.get("nvidia.com/gpu.memory") else None

    used_on: dict[str, float] = {}
    per_queue: dict[str, dict] = {}
    pending_pods = running_pods = 0
    for pod in objects.get("pods", []):
        if not _live(pod):
            continue
        meta, node = pod["metadata"], pod["spec"].get("nodeName")
        gpus = pod_gpus(pod, mib(node))
        if node:
            used_on[node] = used_on.get(node, 0.0) + gpus
        group = groups.get(f"{meta['namespace']}/{(meta.get('annotations') or {}).get(PODGROUP_ANNOTATION, '')}")
        queue = ((group or {}).get("spec") or {}).get("queue") or (meta.get("labels") or {}).get(QUEUE_LABEL)
        if not queue:
            continue
        q = per_queue.setdefault(queue, {"gpus": 0.0, "running": 0, "pending": 0, "oldest": None})
        if node:
            q["gpus"] += gpus
            q["running"] += 1
            running_pods += 1
        elif not meta.get("deletionTimestamp"):
            q["pending"] += 1
            pending_pods += 1
            created = _time(meta.get("creationTimestamp")) or now
            if q["oldest"] is None or created < q["oldest"][0]:
                q["oldest"] = (created, f"{meta['namespace']}/{meta['name']}", _reason(group))

    queues = _queue_tree(objects.get("queues", []), per_queue, fair_share, now)
    pools: dict[str, dict] = {}
    node_rows = []
    for name in sorted(nodes):
        node = nodes[name]
        alloc = _float((node["status"].get("allocatable") or {}).get(GPU) or 0)
        used = round(used_on.get(name, 0.0), 3)
        pool = _pool(node)
        row = {"name": name, "pool": pool, "ready": _ready(node), "gpus_used": used, "gpus": alloc}
        node_rows.append(row)
        p = pools.setdefault(pool, {"pool": pool, "nodes": 0, "ready": 0, "gpus_used": 0.0, "gpus": 0.0})
        p["nodes"] += 1
        p["ready"] += row["ready"]
        p["gpus_used"] = round(p["gpus_used"] + used, 3)
        p["gpus"] += alloc
    total = sum(r["gpus"] for r in node_rows)
    used = round(sum(r["gpus_used"] for r in node_rows), 3)
    return {
        "at": now,
        "cluster": {"nodes": len(node_rows), "gpus": total, "gpus_used": used, "gpus_idle": round(total - used, 3),
                    "utilisation": round(used / total, 4) if total else 0.0,
                    "pods_running": running_pods, "pods_pending": pending_pods},
        "queues": queues,
        "pools": list(pools.values()),
        "nodes": node_rows,
        "evictions": _evictions(objects.get("evictions", []), now),
        "fair_share_source": "KAI's metric kai_queue_fair_share_gpu" if fair_share is not None else None,
    }


def _queue_tree(queue_objs: list[dict], per_queue: dict, fair_share: dict | None, now: float) -> list[dict]:
    """Queues depth-first from the roots, each with its own pods' figures rolled up into its parents'."""
    specs = {q["metadata"]["name"]: q.get("spec") or {} for q in queue_objs}
    status = {q["metadata"]["name"]: q.get("status") or {} for q in queue_objs}
    children: dict[str | None, list[str]] = {}
    for name, spec in specs.items():
        parent = spec.get("parentQueue") if spec.get("parentQueue") in specs else None
        children.setdefault(parent, []).append(name)
    rows: list[dict] = []

    def visit(name: str, depth: int) -> dict:
        own = per_queue.get(name) or {"gpus": 0.0, "running": 0, "pending": 0, "oldest": None}
        row = {"name": name, "parent": specs[name].get("parentQueue") or None, "depth": depth,
               "gpus": own["gpus"], "running": own["running"], "pending": own["pending"],
               "fair_share": None if fair_share is None else fair_share.get(name),
               "quota": _resource(specs[name], "quota"), "limit": _resource(specs[name], "limit"),
               "over_quota_weight": _resource(specs[name], "overQuotaWeight"),
               "kai_allocated": _float((status[name].get("allocated") or {}).get(GPU)),
               "oldest": own["oldest"]}
        rows.append(row)
        for child in sorted(children.get(name, [])):
            c = visit(child, depth + 1)
            row["gpus"] += c["gpus"]
            row["running"] += c["running"]
            row["pending"] += c["pending"]
            if c["oldest"] and (row["oldest"] is None or c["oldest"][0] < row["oldest"][0]):
                row["oldest"] = c["oldest"]
        return row

    for root in sorted(children.get(None, [])):
        visit(root, 0)
    for row in rows:
        oldest = row.pop("oldest")
        row["gpus"] = round(row["gpus"], 3)
        row["oldest_pending"] = None if oldest is None else {
            "pod": oldest[1], "waiting_s": round(max(0.0, now - oldest[0]), 1), **oldest[2]}
    return rows


def _float(v) -> float | None:
    """A Kubernetes quantity ("3", "500m", "1k") as a number; None for none."""
    if v is None:
        return None
    from kubernetes.utils.quantity import parse_quantity

    return float(parse_quantity(v))


def _evictions(events: list[dict], now: float) -> list[dict]:
    """KAI's last evictions, newest first: when, KAI's action, the pod groups evicted and those they
    made room for. A reclaim evicting 16 single-pod groups for 16 others writes 16 events in one
    second: one row here."""
    rows: dict[tuple, dict] = {}
    for e in events:
        ann = e["metadata"].get("annotations") or {}
        obj = e.get("involvedObject") or {}
        when = _time(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
                     or e["metadata"].get("creationTimestamp")) or now
        evictor = ann.get(EVICTOR_ANNOTATION)
        action = ann.get(ACTION_ANNOTATION) or ""
        row = rows.setdefault((action, int(when)), {"at": when, "action": action, "for": [], "podgroups": [],
                                                    "pods": 0, "message": " ".join((e.get("message") or "").split())})
        row["at"] = max(row["at"], when)
        row["podgroups"].append(f"{obj.get('namespace', '')}/{obj.get('name', '')}")
        if evictor:
            row["for"].append(f"{ann.get(EVICTOR_NS_ANNOTATION, '')}/{evictor}")
        row["pods"] += int(ann.get(EVICTED_COUNT_ANNOTATION) or 0) or 1
    out = sorted(rows.values(), key=lambda r: -r["at"])[:LAST_EVICTIONS]
    for r in out:
        r["ago_s"] = round(max(0.0, now - r["at"]), 1)
        r["podgroups"] = sorted(set(r["podgroups"]))  # a group evicted in two cycles of one second: once
        r["for"] = sorted(set(r["for"]))
    return out
