"""A unit's requests from what units of its kind cost where they ran (kailab/data/unit-costs.yaml): CPU
at the rate it spent CPU, memory at half again its peak. Requests, not limits: a unit given more cores
uses them (a fill's lab is several busy processes)."""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources

import yaml

FALLBACK = ("1", "2Gi")  # a kind never measured
MIN_CPU_M, MIN_MEMORY_MI = 250, 512


@lru_cache(maxsize=1)
def costs() -> dict[str, list[dict]]:
    return yaml.safe_load(resources.files("kailab").joinpath("data/unit-costs.yaml").read_text())


def row_for(kind: str, nodes: int = 0) -> dict | None:
    """The measured row for a unit of `kind` (a fill's: the first whose fleet is at least `nodes` big)."""
    rows = costs().get(kind) or []
    if not rows:
        return None
    sized = [r for r in rows if r.get("nodes", 0) >= nodes]
    return sized[0] if sized else rows[-1]


def requests_for(kind: str, nodes: int = 0) -> tuple[str, str]:
    """(cpu, memory) requests for one unit, e.g. ("700m", "1536Mi")."""
    row = row_for(kind, nodes)
    if row is None or not row.get("cpu_seconds") or not row.get("seconds"):
        return FALLBACK
    cpu = max(MIN_CPU_M, math.ceil(row["cpu_seconds"] / row["seconds"] * 1000 / 50) * 50)
    peak = row.get("memory_peak_mib")
    memory = f"{max(MIN_MEMORY_MI, math.ceil(peak * 1.5 / 256) * 256)}Mi" if peak else FALLBACK[1]
    return f"{cpu}m", memory
