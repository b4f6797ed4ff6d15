"""A twin at scale (`kailab bench twin-scale N`, #57): a snapshot in KAI's format of Alibaba's whole GPU
fleet (1,213 nodes, 6,212 GPUs, read from the registered trace; nothing of it is kept) filled to 100 %
by one queue borrowing the other's quota, with N pods of the other queue pending — a reclaim waiting.
The twin comes up from it, KAI decides, and the record says how long each part took and what the
machine spent.

The snapshot is made here, not taken from a cluster (no cluster this size exists on this machine): each
GPU node holds two pods of half its GPUs (one of one GPU on a 1-GPU node) of the `train` queue; the
pending ones ask for 4 GPUs each in the `serve` queue, within serve's quota, so KAI must reclaim."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
import time
import zipfile
from pathlib import Path

from ..errors import KailabError
from .. import labs
from ..labs import LabRecord
from ..paths import cache_dir
from ..replay import alibaba
from ..twin.run import make_twin
from .common import _MachineSampler, _record, machine
from .figures import RENDERERS

# KAI v0.17.0's default scheduler configuration, as its `/get-snapshot` returns it (any run's evidence)
ACTIONS = "allocate, consolidation, reclaim, preempt, stalegangeviction"
PLUGINS = ["predicates", "proportion", "priority", "nodeavailability", "resourcetype", "podaffinity", "elastic",
           "kubeflow", "ray", "subgrouporder", "taskorder", "nominatednode", "dynamicresources", "minruntime",
           "topology", "snapshot", "sg-nodelocalgreedy", "sg-multinodegang", "gpupack", "nodeplacement",
           "gpusharingorder"]
# and its parameters (durations in nanoseconds), as a lab's snapshot has them
PARAMS = {"schedulerName": "kai-scheduler", "partitionParams": {"NodePoolLabelKey": "kai.scheduler/node-pool",
                                                                "NodePoolLabelValue": ""},
          "maxNumberConsolidationPreemptees": 16, "useSchedulingSignatures": True, "fullHierarchyFairness": True,
          "allowConsolidatingReclaim": True, "numOfStatusRecordingWorkers": 5,
          "globalDefaultStalenessGracePeriod": 60_000_000_000, "schedulePeriod": 1_000_000_000,
          "stuckInReleasingThreshold": 120_000_000_000, "queueLabelKey": "kai.scheduler/queue"}
PRIORITY = {"train": 50, "inference": 125}
PENDING_GPUS = 4


def _node(name: str, pool: dict) -> dict:
    res = {"cpu": str(pool["cpu"]), "memory": f"{pool['memoryGiB']}Gi", "pods": "110",
           "nvidia.com/gpu": str(pool["gpus"])}
    labels = {"kubernetes.io/hostname": name, "alibaba.com/pool": pool["name"]}
    if pool["gpus"]:
        labels |= {"nvidia.com/gpu.product": pool["product"], "nvidia.com/gpu.count": str(pool["gpus"]),
                   "nvidia.com/gpu.memory": str(pool["gpuMemoryMiB"])}
    return {"metadata": {"name": name, "labels": labels}, "spec": {},
            "status": {"capacity": res, "allocatable": res, "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, queue: str, gpus: int, node: str | None, priority: str) -> tuple[dict, dict]:
    pod = {"metadata": {"name": name, "namespace": queue, "labels": {"kai.scheduler/queue": queue},
                        "annotations": {"pod-group-name": f"pg-{name}"}},
           "spec": {"schedulerName": "kai-scheduler", "priorityClassName": priority,
                    "containers": [{"name": "main", "image": "x",
                                    "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "100m"},
                                                  "limits": {"nvidia.com/gpu": str(gpus)}}}],
                    **({"nodeName": node} if node else {})},
           "status": {"phase": "Running" if node else "Pending"}}
    group = {"metadata": {"name": f"pg-{name}", "namespace": queue},
             "spec": {"minMember": 1, "queue": queue, "priorityClassName": priority}}
    return pod, group


def alibaba_snapshot(pending: int, sample: int = 1) -> dict:
    """The snapshot (KAI's format) described above; with `sample` N, 1/N of each node pool."""
    if alibaba.registered() is None:
        raise KailabError(alibaba.not_registered())
    text = alibaba.Source(alibaba.mirror()).read(alibaba.NODE_FILE)
    fleet = alibaba.fleet_from_nodes(text, Path(alibaba.NODE_FILE), "alibaba", sample=sample)
    nodes, pods, groups = [], [], []
    for pool in fleet["pools"]:
        for i in range(pool["count"]):
            name = f"{pool['name']}-{i}"
            nodes.append(_node(name, pool))
            sizes = [pool["gpus"] // 2, pool["gpus"] - pool["gpus"] // 2] if pool["gpus"] > 1 else [pool["gpus"]]
            for j, size in enumerate(s for s in sizes if s):
                pod, group = _pod(f"train-{name}-{j}", "train", size, name, "train")
                pods.append(pod)
                groups.append(group)
    gpus = sum(p["count"] * p["gpus"] for p in fleet["pools"])
    if pending * PENDING_GPUS > gpus // 2:
        raise KailabError(f"bench twin-scale {pending}: {pending} pods of {PENDING_GPUS} GPUs is over serve's quota "
                          f"({gpus // 2} GPUs); at most {gpus // 2 // PENDING_GPUS}")
    for i in range(pending):
        pod, group = _pod(f"serve-{i}", "serve", PENDING_GPUS, None, "inference")
        pods.append(pod)
        groups.append(group)
    free = {"quota": -1, "limit": -1, "overQuotaWeight": 1}  # CPU and memory: a queue without them may use none
    queues = [{"metadata": {"name": "org"}, "spec": {"resources": {"gpu": free, "cpu": free, "memory": free}}}] + [
        {"metadata": {"name": q}, "spec": {"parentQueue": "org", "resources": {
            "gpu": {"quota": gpus // 2, "limit": -1, "overQuotaWeight": 1}, "cpu": free, "memory": free}}}
        for q in ("train", "serve")]
    return {"config": {"actions": ACTIONS, "tiers": [{"plugins": [
                {"name": p, **({"arguments": {"cpu": "binpack", "gpu": "binpack"}} if p == "nodeplacement" else {})}
                for p in PLUGINS]}]},
            "schedulerParams": PARAMS,
            "rawObjects": {"nodes": nodes, "pods": pods, "queues": queues, "podGroups": groups,
                           "priorityClasses": [{"metadata": {"name": k}, "value": v} for k, v in PRIORITY.items()]}}


def snapshot_path(pending: int, sample: int = 1) -> Path:
    """Where the made snapshot is kept for `kailab twin` (kailab's cache: it holds the trace's node list)."""
    return cache_dir() / "twins" / f"alibaba-1of{sample}-{pending}-pending.zip"


def twin_scale(pending: int, settle_s: float = 30.0, echo=print, out_dir: Path | None = None, sample: int = 1,
               against_tool: bool = True) -> dict:
    snap = alibaba_snapshot(pending, sample)
    counts = {"nodes": len(snap["rawObjects"]["nodes"]),
              "gpus": sum(int(n["status"]["capacity"]["nvidia.com/gpu"]) for n in snap["rawObjects"]["nodes"]),
              "pods_bound": sum(1 for p in snap["rawObjects"]["pods"] if p["spec"].get("nodeName")),
              "pods_pending": pending}
    echo(f"twin at scale: {counts['nodes']} nodes, {counts['gpus']} GPUs, {counts['pods_bound']} pods bound "
         f"(100 %), {pending} pending")
    name = f"twin-scale-{int(time.time())}"
    path = snapshot_path(pending, sample)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("snapshot.json", json.dumps(snap))
    echo(f"the snapshot, for `kailab twin`: {path}")
    with tempfile.TemporaryDirectory(prefix="kailab-twin-scale-") as tmp:
        sampler = _MachineSampler()
        sampler.thread.start()
        started = time.monotonic()
        try:
            where = make_twin(path, name, settle_s=settle_s, timeout_s=1800, echo=echo, keep_up=False,
                              out=Path(tmp) / "twin", against_tool=against_tool)
            record = json.loads((where / "twin.json").read_text())
        finally:
            sampler.stop.set()
            sampler.thread.join()
            if LabRecord.load(name) is not None:
                labs.down(name)
        wall = time.monotonic() - started
    sec, decided = record["seconds"], record["decided"]
    settled_at = sec["lab_up"] + sec["state_in"] + sec["scheduler_on"] + decided["last_change_s"]
    results = {"mode": "twin-scale", "date": dt.date.today().isoformat(), "machine": machine(), "kai_version": record["kai_version"], "snapshot": counts,
               "seconds": {**sec, "kai_deciding": decided["last_change_s"], "to_settled": round(settled_at, 1),
                           "settle_window": settle_s, "wall": round(wall, 1)},
               "cpu_s_machine": round(sum(sampler.busy_cores), 1),
               "busy_cores_mean": round(sum(sampler.busy_cores) / max(len(sampler.busy_cores), 1), 2),
               "memory_peak_mib": max(sampler.mem_mib, default=0),
               "round_trip_differences": len(record["round_trip"]["differences"]),
               "decided": {"settled": decided["settled"], "placed": len(decided["placed"]),
                           "still_pending": len(decided["still_pending"]), "evicted": len(decided["evicted"])},
               "queues_gpus": record.get("queues_gpus", {}), "sample": sample, "snapshot_path": str(path)}
    tool = record.get("against_snapshot_tool")
    if tool:
        results["against_snapshot_tool"] = {k: tool.get(k) for k in ("pods_decided", "alike", "agreement", "tool_seconds",
                                                                     "tool_runs", "tool_varied_between_runs")} | {
            "differences": tool["differences"][:50], "differences_total": len(tool["differences"]),
            "causes": {c: sum(d["cause"].startswith(c) for d in tool["differences"])
                       for c in sorted({d["cause"].split(":")[0].split(" (")[0] for d in tool["differences"]})}}
    return _record(results, "-twin-scale", twin_scale_markdown(results), out_dir)


def twin_scale_markdown(r: dict) -> str:
    s, c, d = r["seconds"], r["snapshot"], r["decided"]
    return "\n".join([
        f"# A twin at scale: Alibaba's GPU fleet" + (f" (1/{r['sample']} of each pool)" if r.get("sample", 1) > 1 else "")
        + f", {c['nodes']} nodes, {c['gpus']} GPUs", "",
        f"`kailab bench twin-scale {c['pods_pending']}`, KAI {r['kai_version']}, binary runtime; {r['machine']['cores']} "
        f"cores, {r['machine']['memory_gib']} GiB. A snapshot in KAI's format (made from the registered trace's node "
        f"list): {c['pods_bound']} pods bound filling every GPU (queue train, over its quota), {c['pods_pending']} "
        f"pending of {PENDING_GPUS} GPUs (queue serve, within its quota: a reclaim waiting). Recorded, not asserted.", "",
        "| part | seconds |", "|---|---|",
        f"| lab up ({c['nodes']} KWOK nodes, KAI) | {s['lab_up']} |",
        f"| the state in ({c['pods_bound'] + c['pods_pending']} pods, PodGroups, queues) and checked | {s['state_in']} |",
        *[f"| … {part} | {v} |" for part, v in (s.get("state_in_parts") or {}).items() if v >= 0.1],
        *([f"| … the lab's state read back until it matched | "
           f"{round(s['state_in'] - sum((s.get('state_in_parts') or {}).values()), 1)} |"] if s.get("state_in_parts") else []),
        f"| KAI's scheduler on the snapshot's configuration | {s['scheduler_on']} |",
        f"| KAI deciding, to its last change | {s['kai_deciding']} |",
        f"| **to a settled twin** | **{s['to_settled']}** |",
        f"| then the settle window (nothing changing) | {s['settle_window']} |",
        f"| whole command, with `down` | {s['wall']} |", "",
        f"Round trip: {r['round_trip_differences']} differences. KAI placed {d['placed']} of {c['pods_pending']} pending "
        f"pods, left {d['still_pending']}, evicted {d['evicted']}" + ("" if d["settled"] else " (not settled)") + ".", "",
        f"The machine spent {r['cpu_s_machine']} CPU-s meanwhile ({r['busy_cores_mean']} busy cores on average); "
        f"memory in use peaked at {r['memory_peak_mib']} MiB.", ""]
        + ([f"KAI's own `cmd/snapshot-tool` ({r['against_snapshot_tool']['tool_seconds']} s, one session on fake clients) "
            f"against the twin's first deciding session: {r['against_snapshot_tool']['alike']} of "
            f"{r['against_snapshot_tool']['pods_decided']} pods decided alike (agreement "
            f"{r['against_snapshot_tool']['agreement']:.1%}); differences by cause: "
            + (", ".join(f"{n} {c}" for c, n in r["against_snapshot_tool"]["causes"].items()) or "none") + ".", ""]
           if r.get("against_snapshot_tool") else []))


def record_twins(folder: Path, label: str) -> dict:
    """A finished `kailab twin --kai-versions/--designs` comparison as a record (for a figure in the docs):
    counts per twin, each queue's GPUs, how many pods were decided differently; no pod or node name."""
    try:
        c = json.loads((folder / "comparison.json").read_text())
    except (OSError, ValueError) as err:
        raise KailabError(f"{folder}: no comparison.json ({err}): name a finished `kailab twin --kai-versions/--designs` "
                          "folder, evidence/twins-<time>") from None
    if not c.get("ok"):
        raise KailabError(f"{folder}: a twin of this comparison did not finish ({folder / 'comparison.md'})")
    first = next(iter(c["variants"]))
    twin = json.loads((folder / first / "twin.json").read_text())
    results = {"mode": "twins", "date": dt.date.today().isoformat(), "machine": machine(), "evidence": folder.name, "snapshot": twin["counts"],
               "variants": c["variants"], "pending_in_snapshot": c["pending_in_snapshot"],
               "decided_differently": c["decided_differently"], "placed_differently": c["placed_differently"],
               "queues_gpus": c["queues_gpus"]}

    text = (f"# Twins side by side: {', '.join(c['variants'])}\n\nFrom {folder} (`kailab twin --kai-versions/--designs`); "
            f"{twin['counts']['nodes']} nodes, {twin['counts']['pods_bound']} pods bound, "
            f"{twin['counts']['pods_pending']} pending.\n\n" + RENDERERS["twins"](results, f"{folder.name}") + "\n")
    return _record(results, f"-twins-{label}", text, None)
