"""Figures of a replay, computed from its records (pure functions: records in, numbers out).

Per queue, per priority class when the trace has several (`priority-<class>`), and for `all`:
jobs, started, completed, waits (started - submitted, trace seconds; nearest-rank p50/p95/p99 and max over the jobs that started), GPU-hours asked / delivered / lost
to evictions, evicted pods. For the fleet: GPU utilisation over time and its mean. Comparing
designs: a figure moved only when its ranges over repeated runs do not overlap — with one run
per design nothing is called a difference (noise would be).
"""

from __future__ import annotations

import operator
import re
import statistics

PRIORITY_SCOPE = "priority-"  # a priority class's figures: priority-inference.wait_p95
TIME_FIGURES = ("wait_p50", "wait_p95", "wait_p99", "wait_max", "wait_mean")
UTIL_POINTS = 120


def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-int(round(q * 1000)) * len(ordered) // 1000))  # ceil(q * n) without float slop
    return round(ordered[min(rank, len(ordered)) - 1], 2)


def _queue_figures(jobs: list[dict], intervals: list[dict]) -> dict:
    waits = [j["started"] - j["submitted"] for j in jobs if j["started"] is not None and j["submitted"] is not None]
    names = {j["name"] for j in jobs}
    durations = {j["name"]: j["duration_s"] for j in jobs}
    # a pod that ran its duration: it succeeded, or kailab ended its job after it (a RayJob: player.Ender)
    delivered = sum(i["gpus"] * durations[i["job"]] for i in intervals
                    if i["job"] in names and i["ended"] in ("succeeded", "ended_by_kailab"))
    lost = sum(i["gpus"] * (i["to"] - i["from"]) for i in intervals if i["job"] in names and i["ended"] == "evicted")
    return {
        "jobs": len(jobs),
        "submitted": sum(1 for j in jobs if j["submitted"] is not None),
        "started": len(waits),
        "completed": sum(1 for j in jobs if j["finished"] is not None),
        "not_started": sum(1 for j in jobs if j["started"] is None and j["submitted"] is not None),
        "refused": sum(1 for j in jobs if j["refused"]),
        "wait_p50": percentile(waits, 0.50), "wait_p95": percentile(waits, 0.95),
        "wait_p99": percentile(waits, 0.99), "wait_max": round(max(waits), 2) if waits else None,
        "wait_mean": round(statistics.fmean(waits), 2) if waits else None,
        "gpu_hours_requested": round(sum(j["pods"] * j["gpus"] * j["duration_s"] for j in jobs) / 3600, 2),
        "gpu_hours_delivered": round(delivered / 3600, 2),
        "gpu_hours_lost_to_evictions": round(lost / 3600, 2),
        "evicted_pods": sum(j["evicted_pods"] for j in jobs),
        "jobs_evicted": sum(1 for j in jobs if j["evicted_pods"]),
        "gang_jobs_not_started": sum(1 for j in jobs if j["min_members"] > 1 and j["started"] is None),
        "jobs_failed": sum(1 for j in jobs if (j.get("outcome") or "").startswith("Failed")),
    }


def utilisation(intervals: list[dict], fleet_gpus: int, span: float, points: int = UTIL_POINTS) -> list[list[float]]:
    """[[t, fraction of the fleet's GPUs allocated]] at `points` evenly spaced trace times."""
    if span <= 0 or fleet_gpus <= 0:
        return []
    out = []
    for k in range(points + 1):
        t = span * k / points
        used = sum(i["gpus"] for i in intervals if i["from"] <= t < i["to"])
        out.append([round(t, 1), round(used / fleet_gpus, 4)])
    return out


def run_figures(records: dict, fleet_gpus: int) -> dict:
    """One run's figures: {"queues": {q: {...}}, "all": {...}, "fleet": {...}, "submit": {...}}."""
    jobs, intervals = records["jobs"], records["pod_intervals"]
    queues = sorted({j["queue"] for j in jobs})
    per = {q: _queue_figures([j for j in jobs if j["queue"] == q], intervals) for q in queues}
    unbound = records.get("deleted_before_bound") or []
    of_queue = {j["name"]: j["queue"] for j in jobs}
    for q in queues:
        per[q]["pods_deleted_before_bound"] = sum(1 for u in unbound if of_queue.get(u["job"]) == q)
    last_arrival = max((j["arrival_s"] for j in jobs), default=0) - min((j["arrival_s"] for j in jobs), default=0)
    series = utilisation(intervals, fleet_gpus, records["span"] or 0)
    busy = [u for t, u in series if t <= last_arrival] or [u for _, u in series]
    lags = records["submit_lag_wall_s"]
    arrivals = sorted(j["arrival_s"] for j in jobs)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:]) if b > a]
    everything = {**_queue_figures(jobs, intervals), "pods_deleted_before_bound": len(unbound)}
    classes = sorted({j.get("priority") or "train" for j in jobs})
    # a trace of several priority classes (Alibaba's QoS) is read per class too
    by_class = {c: _queue_figures([j for j in jobs if (j.get("priority") or "train") == c], intervals)
                for c in classes} if len(classes) > 1 else {}
    return {
        "queues": per, "all": everything, "priorities": by_class,
        "fleet": {"gpus": fleet_gpus, "utilisation_mean": round(statistics.fmean(busy), 4) if busy else None,
                  "utilisation_series": series, "span_s": records["span"], "timed_out": records["timed_out"]},
        "submit": {"lag_p50_wall_s": percentile(lags, 0.5), "lag_p99_wall_s": percentile(lags, 0.99),
                   "lag_max_wall_s": round(max(lags), 4) if lags else None,
                   "inter_arrival_median_wall_s": round(statistics.median(gaps) / records["compress"], 4) if gaps else None},
    }


def flat(fig: dict) -> dict[str, float]:
    """{'team-a.wait_p95': 12.0, 'all.completed': 40, 'fleet.utilisation_mean': 0.8, ...}"""
    out: dict[str, float] = {}
    scopes = [*fig["queues"].items(), ("all", fig["all"]),
              *((f"{PRIORITY_SCOPE}{c}", v) for c, v in (fig.get("priorities") or {}).items())]
    for scope, values in scopes:
        for k, v in values.items():
            if isinstance(v, (int, float)) and v is not None:
                out[f"{scope}.{k}"] = v
    for k in ("utilisation_mean",):
        if fig["fleet"].get(k) is not None:
            out[f"fleet.{k}"] = fig["fleet"][k]
    for k in ("lag_p99_wall_s",):
        if fig["submit"].get(k) is not None:
            out[f"submit.{k}"] = fig["submit"][k]
    return out


def ranges(runs: list[dict]) -> dict[str, list[float]]:
    """figure -> [min, max] over repeated runs of one design."""
    out: dict[str, list[float]] = {}
    for fig in runs:
        for k, v in flat(fig).items():
            lo, hi = out.get(k, [v, v])
            out[k] = [min(lo, v), max(hi, v)]
    return out


def medians(runs: list[dict]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for fig in runs:
        for k, v in flat(fig).items():
            values.setdefault(k, []).append(v)
    return {k: round(statistics.median(v), 4) for k, v in values.items()}


def differences(by_design: dict[str, list[dict]]) -> dict:
    """Which figures moved between designs beyond their spread: {figure: {design: [lo, hi]}} for
    figures whose ranges of two designs do not overlap. Needs 2+ runs per design; with fewer the
    answer says nothing was judged."""
    judged = {d: runs for d, runs in by_design.items() if len(runs) >= 2}
    if len(judged) < 2:
        return {"judged": False, "why": "a difference needs 2+ runs of each design (--repeat 2)", "moved": {}}
    spans = {d: ranges(runs) for d, runs in judged.items()}
    keys = sorted(set.intersection(*(set(s) for s in spans.values())))
    names = list(spans)
    moved, pairs = {}, {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            apart = [k for k in keys if spans[a][k][1] < spans[b][k][0] or spans[b][k][1] < spans[a][k][0]]
            pairs[f"{a} vs {b}"] = apart
            for k in apart:
                moved[k] = {d: spans[d][k] for d in spans}
    return {"judged": True, "moved": moved, "pairs": pairs, "figures_compared": len(keys),
            "spread": {d: {k: round(hi - lo, 4) for k, (lo, hi) in s.items()} for d, s in spans.items()}}


def fell_behind(runs: list[dict]) -> str:
    """'' when the submitter kept to the trace in every run; else one line saying by how much it did
    not (lag p99 beyond the median compressed inter-arrival time: jobs went in later than the trace says)."""
    late = [(r["submit"]["lag_p99_wall_s"], r["submit"]["inter_arrival_median_wall_s"]) for r in runs
            if (r.get("submit") or {}).get("lag_p99_wall_s") is not None
            and (r["submit"].get("inter_arrival_median_wall_s") is not None)
            and r["submit"]["lag_p99_wall_s"] > r["submit"]["inter_arrival_median_wall_s"]]
    if not late:
        return ""
    return (f"the submitter fell behind the trace in {len(late)} of {len(runs)} run(s): lag p99 "
            f"{', '.join(f'{lag:g}' for lag, _ in late)} s against a median inter-arrival time of {late[0][1]:g} s "
            "(wall); compress less, or run fewer labs at once")


# ----------------------------------------------------------------------------- expectations
_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq}
_REF = r"(?:(?P<{p}d>[a-z0-9][-a-z0-9]*)/)?(?P<{p}f>[a-z0-9][-a-z0-9]*\.[a-z0-9_]+)"
_EXPECT = re.compile(r"^\s*" + _REF.format(p="l") + r"\s*(?P<op><=|>=|==|<|>)\s*(?:(?P<num>-?[0-9.]+)\s*(?P<unit>s|m|h|%)?|"
                     + _REF.format(p="r") + r")\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "%": 0.01, None: 1}


class Expectation:
    """`[design/]scope.figure OP value|[design/]scope.figure`, e.g. `team-a.wait_p99 <= 2m` or
    `big-a/team-a.wait_p95 < small-a/team-a.wait_p95`. Without a design it holds for each design.
    A figure's value is its median over the design's runs; times are trace seconds."""

    def __init__(self, text: str):
        m = _EXPECT.match(text)
        if not m:
            raise ValueError(f"--expect {text!r}: write [design/]queue.figure OP value, e.g. "
                             "'team-a.wait_p99 <= 60s' (OP one of <= >= < > ==; units s m h %)")
        self.text = text.strip()
        self.left = (m["ld"], m["lf"])
        self.op = m["op"]
        self.number = float(m["num"]) * _UNITS[m["unit"]] if m["num"] is not None else None
        self.right = (m["rd"], m["rf"]) if m["num"] is None else None

    def check(self, by_design: dict[str, dict[str, float]]) -> list[tuple[bool, str]]:
        """[(held, one line with the figures)] per design it applies to; a name that is not a
        design or a figure raises ValueError."""
        designs = [self.left[0]] if self.left[0] else list(by_design)
        out = []
        for d in designs:
            lv = self._value(by_design, d, self.left[1])
            if self.right is not None:
                rd = self.right[0] or d
                rv = self._value(by_design, rd, self.right[1])
                what = f"{d}/{self.left[1]} = {lv} {self.op} {rd}/{self.right[1]} = {rv}"
            else:
                rv = self.number
                what = f"{d}/{self.left[1]} = {lv} {self.op} {rv:g}"
            held = lv is not None and rv is not None and _OPS[self.op](lv, rv)
            out.append((held, what))
        return out

    @staticmethod
    def _value(by_design: dict[str, dict[str, float]], design: str, figure: str):
        if design not in by_design:
            raise ValueError(f"--expect names design {design!r}: the designs are {', '.join(by_design)}")
        values = by_design[design]
        if figure not in values:
            scopes = sorted({k.split('.')[0] for k in values})
            names = sorted({k.split('.', 1)[1] for k in values})
            raise ValueError(f"--expect names {figure!r}, which design {design} has no value for "
                             f"(scopes: {', '.join(scopes)}; figures: {', '.join(names)})")
        return values[figure]
