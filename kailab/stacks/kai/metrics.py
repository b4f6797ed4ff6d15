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


def evictions_by_action(prometheus: str, start: float, end: float) -> dict:
    """{promql, by_action: {action: pods}} evicted in [start, end], by KAI's own counter (no dashboard
    charts it: the query is kailab's). A counter first seen during the run counts from zero."""
    now = f"sum by (action) ({EVICTED} @ {end:.3f})"
    before = f"sum by (action) ({EVICTED} @ {start:.3f})"
    promql = f"{now} - ({before} or {now} * 0)"
    out: dict = {"title": "Pods evicted, by action", "source": "kailab (KAI's docs/metrics/METRICS.md)",
                 "promql": promql}
    try:
        args = urllib.parse.urlencode({"query": promql, "time": f"{end:.3f}"})
        with urllib.request.urlopen(f"{prometheus}/api/v1/query?{args}", timeout=10) as resp:  # noqa: S310
            result = json.load(resp)["data"]["result"]
        out["by_action"] = {r["metric"].get("action", "?"): round(float(r["value"][1])) for r in result}
        if not result:
            out["missing"] = f"Prometheus has no {EVICTED} series (nothing evicted on this lab yet, or not exported)"
    except (OSError, ValueError, KeyError) as err:
        out["missing"] = f"query failed: {err}"
    return out
