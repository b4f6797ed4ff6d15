"""Operational figures per queue, from the watch timeline alone (so they exist without Prometheus):
how long pods waited from created to bound (p50/p95/p99/max), how many were evicted, how many
were still waiting when the run ended. Pure functions over timeline entries."""

from __future__ import annotations

import math
from typing import Callable, Iterable

# figure name prefixes, each followed by ".<queue>"; the report groups them into a per-queue table
WAIT_QUANTILES = (50, 95, 99)
QUEUE_FIGURES = tuple(f"wait_p{q}_s" for q in WAIT_QUANTILES) + ("wait_max_s", "evicted", "never_bound")


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile (a value that really occurred, as a reader can check in the timeline)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def waits(entries: Iterable, logical: Callable[[str], str]) -> tuple[dict[str, list[float]], dict[str, int]]:
    """(queue -> seconds each pod waited from created to its first bind, queue -> pods never bound).

    A pod evicted and recreated is a new pod (a new uid, a new `created`), so it waits again."""
    created: dict[str, tuple[float, str]] = {}
    bound: set[str] = set()
    out: dict[str, list[float]] = {}
    for e in sorted(entries, key=lambda e: e.t):
        if e.what == "created":
            created[e.pod] = (e.t, logical(e.queue))
            bound.discard(e.pod)
        elif e.what == "bound" and e.pod in created and e.pod not in bound:
            t0, queue = created[e.pod]
            out.setdefault(queue, []).append(round(e.t - t0, 3))
            bound.add(e.pod)
    never: dict[str, int] = {}
    for pod, (_, queue) in created.items():
        if pod not in bound:
            never[queue] = never.get(queue, 0) + 1
    return out, never


def queue_figures(entries: list, logical: Callable[[str], str]) -> dict:
    """Flat figures for the verdict: `wait_p99_s.<queue>`, `evicted.<queue>`, ..."""
    entries = [e for e in entries if e.queue]
    per_queue, never = waits(entries, logical)
    out: dict = {}
    for queue, values in sorted(per_queue.items()):
        for q in WAIT_QUANTILES:
            out[f"wait_p{q}_s.{queue}"] = quantile(values, q)
        out[f"wait_max_s.{queue}"] = max(values)
    for e in entries:
        if e.what == "evicted":
            key = f"evicted.{logical(e.queue)}"
            out[key] = out.get(key, 0) + 1
    for queue, n in sorted(never.items()):
        out[f"never_bound.{queue}"] = n
    return out


def peak_bound(entries: Iterable, workload: str) -> int:
    """The most pods of `workload` bound at once over the timeline (a gang's success: >= its minimum)."""
    held: set[str] = set()
    peak = 0
    for e in sorted(entries, key=lambda e: e.t):
        if e.workload != workload:
            continue
        if e.what == "bound":
            held.add(e.pod)
        elif e.what in ("evicted", "deleted", "succeeded", "failed"):
            held.discard(e.pod)
        peak = max(peak, len(held))
    return peak
