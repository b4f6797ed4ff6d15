"""What the charts show, computed from a run's timeline and snapshots: pure functions, no drawing."""

from __future__ import annotations

import json
from typing import NamedTuple

from .read import Run, Snapshot, step_names

HOLD_START = {"bound"}
HOLD_END = {"evicted", "deleted", "succeeded", "failed"}
MARK_KIND = {"bound": "bind", "evicted": "evict"}  # any other end of a hold is a "release"


def decided(run: Run) -> list[dict]:
    """The verdict's expectations that carry a decision time."""
    return [r for r in (run.verdict or {}).get("expectations") or []
            if isinstance(r, dict) and isinstance(r.get("at"), (int, float))]


def run_end(run: Run) -> float:
    """The chart's time span: the last timeline entry or decision (1s when there is none)."""
    t_end = max([e["t"] for e in run.timeline] + [r["at"] for r in decided(run)] + [0.0])
    return t_end if t_end > 0 else 1.0


def pod_gpus(run: Run) -> dict[str, int]:
    out: dict[str, int] = {}
    for snap in run.snapshots:
        for pod in snap.pods or []:
            if isinstance(pod, dict) and pod.get("name") is not None and isinstance(pod.get("gpus"), int):
                out[str(pod["name"])] = pod["gpus"]
    return out


def run_queue_order(run: Run) -> tuple[list[str], set[str]]:
    """(logical queue names in order, the logical names that are parents of others)."""
    order: list[str] = list(run.queue_map.values())
    parents: set[str] = set()

    def walk(tree, parent):
        if not isinstance(tree, dict):
            return
        for name, body in tree.items():
            name = str(name)
            if name not in order:
                order.append(name)
            if parent:
                parents.add(parent)
            walk((body or {}).get("children") if isinstance(body, dict) else None, name)

    walk((run.exercise or {}).get("queues"), None)
    for snap in run.snapshots:
        for q in snap.queues or []:
            if not isinstance(q, dict):
                continue
            parent = ((q.get("spec") or {}).get("parentQueue"))
            if parent:
                parents.add(run.logical(parent))
    return order, parents


def queue_gpu(q: dict) -> tuple[object, object]:
    gpu = (((q.get("spec") or {}).get("resources") or {}).get("gpu") or {}) if isinstance(q, dict) else {}
    return gpu.get("quota"), gpu.get("limit")


def held_series(run: Run) -> dict[str, list[tuple[float, int]]]:
    """logical queue -> [(t, GPUs held from t on)], from the timeline's bind/release entries."""
    gpus = pod_gpus(run)
    holding: dict[str, tuple[str, int]] = {}  # pod -> (queue, gpus)
    level: dict[str, int] = {}
    series: dict[str, list[tuple[float, int]]] = {}
    for e in sorted(run.timeline, key=lambda e: e["t"]):
        what, pod = e.get("what"), str(e.get("pod") or "")
        if not pod:
            continue
        if what in HOLD_START and pod not in holding:
            q = run.logical(e.get("queue"))
            n = gpus.get(pod, 1)
            holding[pod] = (q, n)
        elif what in HOLD_END and pod in holding:
            q, n = holding.pop(pod)
            n = -n
        else:
            continue
        level[q] = level.get(q, 0) + n
        pts = series.setdefault(q, [])
        if pts and pts[-1][0] == e["t"]:
            pts[-1] = (e["t"], level[q])
        else:
            pts.append((e["t"], level[q]))
    return series


def peak(points: list[tuple[float, int]]) -> int:
    return max([v for _, v in points] + [0])


def charted_queues(run: Run, series: dict[str, list]) -> list[str]:
    """The queues the timeline charts: leaves, and any queue the timeline or the series name."""
    order, parents = run_queue_order(run)
    seen = {run.logical(e.get("queue")) for e in run.timeline if e.get("queue")}
    queues = [q for q in order if q in seen or q in series or q not in parents]
    queues += sorted(q for q in set(series) | seen if q not in queues and q)
    return queues


def step_starts(run: Run) -> dict[int, float | None]:
    """Step index -> its approximate start (the last decision time of the step before it)."""
    names = step_names(run.exercise)
    last_at: dict[str, float] = {}
    for r in decided(run):
        s = str(r.get("step"))
        last_at[s] = max(last_at.get(s, r["at"]), r["at"])
    starts: dict[int, float | None] = {1: 0.0}
    for i in range(2, len(names) + 1):
        starts[i] = last_at.get(names[i - 2])
    return starts


def _quota_values(run: Run) -> dict[str, dict[str, list[tuple[int, object]]]]:
    """logical queue -> {"quota"|"limit": [(snapshot index, value)]}, steps first, then final."""
    steps = [s for s in run.snapshots if s.index > 0 and s.queues is not None]
    final = next((s for s in run.snapshots if s.index == 0 and s.queues), None)
    values: dict[str, dict[str, list[tuple[int, object]]]] = {}
    for snap in steps + ([final] if final else []):
        for q in snap.queues or []:
            if not isinstance(q, dict):
                continue
            name = run.logical((q.get("metadata") or {}).get("name"))
            quota, limit = queue_gpu(q)
            for kind, v in (("quota", quota), ("limit", limit)):
                values.setdefault(name, {}).setdefault(kind, []).append((snap.index, v))
    return values


def _segments(seq: list[tuple[int, object]], starts: dict[int, float | None],
              t_end: float) -> list[tuple[float, float, object]]:
    """A value per snapshot -> [(t0, t1, value)]: a segment runs on until the value changes."""
    step_seq = [(i, v) for i, v in seq if i > 0] or seq
    segs: list[tuple[float, float, object]] = []
    for i, v in step_seq:
        prev = segs[-1][0] if segs else 0.0
        t0 = starts.get(i) if i > 0 else None
        t0 = prev if t0 is None else min(max(float(t0), prev), t_end)
        if segs and json.dumps(segs[-1][2]) == json.dumps(v):
            continue  # unchanged: the running segment goes on
        if segs:
            segs[-1] = (segs[-1][0], t0, segs[-1][2])
        segs.append((0.0 if not segs else t0, t_end, v))
    # only drawable ones: not empty, and a real, non-negative number (-1 means unlimited)
    return [s for s in segs if s[1] > s[0]
            and isinstance(s[2], (int, float)) and not isinstance(s[2], bool) and s[2] >= 0]


def quota_lines(run: Run, t_end: float) -> dict[str, dict[str, list[tuple[float, float, object]]]]:
    """logical queue -> {"quota"|"limit": [(t0, t1, value)]} from the snapshots' queues.yaml."""
    starts = step_starts(run)
    out: dict[str, dict[str, list[tuple[float, float, object]]]] = {}
    for name, kinds in _quota_values(run).items():
        for kind, seq in kinds.items():
            out.setdefault(name, {})[kind] = _segments(seq, starts, t_end)
    return out


def lane_marks(run: Run) -> dict[str, list[tuple[float, str, list[str]]]]:
    """logical queue -> [(t, bind|evict|release, pods)] in time order: one mark per queue, time and kind."""
    marks: dict[tuple[str, float, str], list[str]] = {}
    for e in run.timeline:
        what = e.get("what")
        if what in HOLD_START | HOLD_END and e.get("pod"):
            kind = MARK_KIND.get(what, "release")
            marks.setdefault((run.logical(e.get("queue")), e["t"], kind), []).append(str(e["pod"]))
    out: dict[str, list[tuple[float, str, list[str]]]] = {}
    for (q, t, kind), pods in sorted(marks.items(), key=lambda kv: kv[0][1]):
        out.setdefault(q, []).append((t, kind, pods))
    return out


class NodeUse(NamedTuple):
    name: str
    alloc: object  # as nodes.yaml has them
    used: object
    alloc_n: float  # the same as numbers (0 when not one)
    used_n: float
    by_queue: dict[str, float]  # logical queue ("" unknown) -> GPUs its pods hold on the node (fractions too)


def _gpus_held(pod: dict | None) -> float:
    """A pod's GPUs as pods.yaml has them: whole ones, or its fraction of a shared one."""
    if not pod:
        return 1
    share = str(pod.get("gpu_share") or "")
    if share.startswith("fraction:"):
        try:
            return float(share.split(":", 1)[1])
        except ValueError:
            return 0
    return pod.get("gpus", 1) if isinstance(pod.get("gpus"), int) else 1


def node_use(run: Run, snap: Snapshot) -> list[NodeUse]:
    """Each node of a snapshot: its GPUs, and whose pods (by the snapshot's pods.yaml) use them."""
    pods = {str(p.get("name")): p for p in snap.pods or [] if isinstance(p, dict)}
    rows = []
    for name, info in (snap.nodes or {}).items():
        info = info if isinstance(info, dict) else {}
        alloc, used = info.get("allocatable"), info.get("used")
        alloc_n = alloc if isinstance(alloc, (int, float)) else 0
        used_n = used if isinstance(used, (int, float)) else 0
        segs: dict[str, float] = {}
        for pod in info.get("pods") or []:
            p = pods.get(str(pod))
            q = run.logical(p.get("queue")) if p else ""
            segs[q] = segs.get(q, 0) + _gpus_held(p)
        rows.append(NodeUse(str(name), alloc, used, alloc_n, used_n, segs))
    return rows


def demand_series(run: Run) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """(GPUs requested, GPUs allocated) by the run's pods over time, from the timeline: a pod asks
    for its GPUs from created, holds them from bound, until evicted/deleted/succeeded/failed."""
    gpus = pod_gpus(run)
    asking: set[str] = set()
    holding: set[str] = set()
    req: list[tuple[float, int]] = [(0.0, 0)]
    alloc: list[tuple[float, int]] = [(0.0, 0)]
    for e in sorted(run.timeline, key=lambda e: e["t"]):
        pod = str(e.get("pod") or "")
        what = e.get("what")
        if not pod:
            continue
        if what == "created":
            asking.add(pod)
        elif what in HOLD_START:
            holding.add(pod)
        elif what in HOLD_END:
            asking.discard(pod)
            holding.discard(pod)
        else:
            continue
        for pts, pods in ((req, asking), (alloc, holding)):
            level = sum(gpus.get(p, 1) for p in pods)
            if pts[-1][1] != level:
                pts += [(e["t"], pts[-1][1]), (e["t"], level)]  # a step, drawn as one
    return req, alloc


def fleet_gpus(run: Run) -> float:
    """The fleet's GPUs as the run's snapshots saw them (0 when none recorded)."""
    for snap in run.snapshots:
        total = sum(n.get("allocatable") or 0 for n in (snap.nodes or {}).values()
                    if isinstance(n, dict) and isinstance(n.get("allocatable"), (int, float)))
        if total:
            return total
    return 0
