"""KAI's own view of a run, from the lab's Prometheus, with the PromQL it came from.

The queries are KAI's: read at run time from the Grafana dashboards in the KAI source tree the lab
runs (docs/metrics/grafana/*.json), panels chosen by title, Grafana's variables filled in for one
lab (no namespace/pod labels on loopback targets; the rate window a few scrape intervals). A panel
whose series Prometheus does not have is recorded as missing, never as zero.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from pathlib import Path

# (dashboard file, panel title): fair share and usage per queue first — the picture users want
PANELS = [
    ("kai-queues-allocation.json", "Allocated GPUs"),
    ("kai-queues-allocation.json", "GPU Deserved vs Scheduler Fair Share"),
    ("kai-queues-allocation.json", "Scheduler UsageDB Usage"),
    ("kai-scheduler-internals.json", "End-to-End Scheduling Latency"),
    ("kai-scheduler-internals.json", "Task Scheduling Latency Quantiles"),
    ("kai-scheduler-internals.json", "PodGroups Acted On vs Scheduled"),
]
DASHBOARDS = Path("docs/metrics/grafana")
RATE_WINDOW = "10s"  # Grafana's $__rate_interval for a 2 s scrape
STEP = "2s"
_VARIABLE_MATCHER = re.compile(r'\s*\w+=~"\$\w+"\s*,?')


def fill_variables(expr: str) -> str:
    """A dashboard's PromQL for one lab: `label=~"$var"` matchers dropped, the rate window set."""
    expr = _VARIABLE_MATCHER.sub("", expr).replace("$__rate_interval", RATE_WINDOW)
    expr = re.sub(r",\s*}", "}", expr)
    return expr.replace("{}", "")


def queries(tree: Path) -> list[dict]:
    """[{title, source, promql}] for PANELS, from the KAI tree; a dashboard or panel the tree lacks
    is listed with `missing` saying so."""
    out = []
    for file, title in PANELS:
        source = str(DASHBOARDS / file)
        try:
            board = json.loads((tree / source).read_text())
        except (OSError, ValueError) as err:
            out.append({"title": title, "source": source, "missing": f"dashboard not readable: {err}"})
            continue
        panel = next((p for p in _panels(board) if p.get("title") == title), None)
        if panel is None:
            out.append({"title": title, "source": source, "missing": "no such panel in this KAI version"})
            continue
        for target in panel.get("targets") or []:
            if target.get("expr"):
                out.append({"title": title, "source": source, "promql": fill_variables(target["expr"])})
    return out


def _panels(board: dict):
    for p in board.get("panels") or []:
        yield p
        yield from _panels(p)


def collect(prometheus: str, tree: Path, start: float, end: float) -> list[dict]:
    """Each query's series over [start, end] (unix seconds), or why there are none."""
    out = []
    for q in queries(tree):
        if "promql" in q:
            try:
                result = _query_range(prometheus, q["promql"], start, end)
                q["series"] = [{"labels": s["metric"], "points": [[round(float(t) - start, 3), float(v)]
                                                                  for t, v in s["values"]]} for s in result]
                if not q["series"]:
                    q["missing"] = "Prometheus has no such series for this run (KAI does not export it here)"
            except (OSError, ValueError, KeyError) as err:
                q["missing"] = f"query failed: {err}"
        out.append(q)
    return out


def _query_range(prometheus: str, promql: str, start: float, end: float) -> list[dict]:
    args = urllib.parse.urlencode({"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": STEP})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{args}", timeout=10) as resp:  # noqa: S310
        body = json.load(resp)
    if body.get("status") != "success":
        raise ValueError(body.get("error") or "not a success")
    return body["data"]["result"]


EVICTED = "kai_pod_group_evicted_pods_total"  # KAI's docs/metrics/METRICS.md: per pod group, by action
LOOKBACK_S = 60  # samples before the run's start, for each counter's value when it began


def evictions_by_action(prometheus: str, start: float, end: float, namespace: str | None = None) -> dict:
    """{promql, by_action: {action: pods}} evicted in [start, end] (of `namespace`'s pod groups when
    given), by KAI's own counter (no dashboard charts it: the query is kailab's). Counted from the raw
    samples, as `increase` counts but without extrapolating: a counter first seen during the run counts
    from zero, and one that drops (the scheduler restarted: a reconfiguration, a process fault) counts
    on from zero — a difference of two instants went negative there ("reclaim -22")."""
    match = f'namespace="{namespace}"' if namespace else ""
    window = int(end - start) + LOOKBACK_S
    promql = f"{EVICTED}{{{match}}}[{window}s] @ {end:.3f}"
    out: dict = {"title": "Pods evicted, by action", "source": "kailab (KAI's docs/metrics/METRICS.md)",
                 "promql": promql}
    try:
        args = urllib.parse.urlencode({"query": promql, "time": f"{end:.3f}"})
        with urllib.request.urlopen(f"{prometheus}/api/v1/query?{args}", timeout=10) as resp:  # noqa: S310
            result = json.load(resp)["data"]["result"]
        by_action: dict[str, int] = {}
        for series in result:
            action = series["metric"].get("action", "?")
            samples = [(float(t), float(v)) for t, v in series.get("values") or []]
            by_action[action] = by_action.get(action, 0) + counted(samples, start)
        out["by_action"] = by_action
        if not result:
            out["missing"] = f"Prometheus has no {EVICTED} series (nothing evicted on this lab yet, or not exported)"
    except (OSError, ValueError, KeyError) as err:
        out["missing"] = f"query failed: {err}"
    return out


def counted(samples: list[tuple[float, float]], start: float) -> int:
    """What a counter's raw samples (time, value) add after `start`: from its last value at or before
    `start` (0 when it was first seen later), every rise, and after a drop (a reset) the new value."""
    before = [v for t, v in samples if t <= start]
    last = before[-1] if before else 0.0
    total = 0.0
    for t, v in samples:
        if t <= start:
            continue
        total += v - last if v >= last else v
        last = v
    return round(total)
