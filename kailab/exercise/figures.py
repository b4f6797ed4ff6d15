"""A run's figures, from its timeline and results: binds, evictions, pods waiting at once, gang bind
spread, and how long each step took to reach its expected state (what trials compare)."""

from __future__ import annotations

from ..report import operations
from .checks import Result
from .spec import Exercise


def figures(state, ex: Exercise) -> dict:
    """Key numbers for reports and trials: binds, evictions, gang bind spread."""
    out: dict = {"binds": sum(1 for e in state.timeline if e.what == "bound"),
                 "evictions": sum(1 for e in state.timeline if e.what == "evicted")}
    out["pending_peak"] = pending_peak(state.timeline)
    if state.gangs:  # gang success: at some moment every member the gang needs was bound at once
        complete = sum(1 for w, need in state.gangs.items() if operations.peak_bound(state.timeline, w) >= need)
        out["gangs_complete"], out["gangs_incomplete"] = complete, len(state.gangs) - complete
    for workload in state.gangs:
        times = [e.t for e in state.timeline if e.what == "bound" and e.workload == workload]
        if times:
            out[f"gang_bind_spread_s.{workload}"] = round(max(times) - min(times), 3)
        decided = [e.t for e in state.timeline if e.what == "decided" and e.workload == workload]
        if decided and times:  # KAI's decision (first BindRequest) to the last pod bound
            out[f"gang_decision_to_bound_s.{workload}"] = round(max(times) - min(decided), 3)
    return out


def pending_peak(timeline) -> int:
    """The most pods that existed unbound at one moment: what a cluster autoscaler would see
    waiting (a scheduler that holds work back without making its pods shows fewer)."""
    waiting: set[str] = set()
    peak = 0
    for e in timeline:
        if e.what == "created":
            waiting.add(e.pod)
            peak = max(peak, len(waiting))
        elif e.what in ("bound", "evicted", "deleted", "succeeded", "failed"):
            waiting.discard(e.pod)
    return peak


def settle_times(results: list[Result], started: dict[str, float]) -> dict:
    """Per step whose expectations all held: seconds from the step's start to the last of them
    holding - how long KAI took to reach the expected state (a trial compares it across versions)."""
    out: dict = {}
    for i, (step, t0) in enumerate(started.items(), 1):
        mine = [r for r in results if r.step == step and r.kind == "expect"]
        if mine and all(r.passed and r.at is not None for r in mine):
            out[f"expected_after_s.{i:02d}"] = round(max(r.at for r in mine) - t0, 3)
    return out
