"""The order exercises run in on labs side by side: the longest first, shared out evenly.

pytest-xdist's `worksteal` (what `make exercises` uses) hands each worker an equal *count* of
consecutive items, then lets an idle worker take half of another's queue from its end. Alphabetical
order put job-eviction (~140 s) and time-based-fairness (~90 s) wherever their names fell, and one lab
ran its last long item while the other sat idle. So: the items are dealt longest first, snake-wise
(0, 1, …, n-1, n-1, …, 0) into one hand per worker, each hand longest first, the hands one after
another. Equal counts, near-equal seconds, and what a worker may have stolen from it is its shortest.

The seconds come from the last run here (pytest's cache), else from the newest record of
`make exercises` under bench/results/; an item neither knows keeps its alphabetical place after them.
"""

from __future__ import annotations

import json
from pathlib import Path

CACHE_KEY = "kailab/exercise-seconds"


def deal(names: list[str], seconds: dict[str, float], workers: int) -> list[str]:
    """`names` in the order to run them on `workers` labs side by side (the unknown ones last)."""
    known = sorted((n for n in names if n in seconds), key=lambda n: (-seconds[n], n))
    unknown = [n for n in names if n not in seconds]
    if workers < 2:
        return known + unknown
    hands: list[list[str]] = [[] for _ in range(workers)]
    for i, name in enumerate(known):
        lap, pos = divmod(i, workers)
        hands[pos if lap % 2 == 0 else workers - 1 - pos].append(name)
    return [n for hand in hands for n in hand] + unknown


def recorded_seconds(results_dir: Path) -> dict[str, float]:
    """Each item's seconds in the newest `make exercises` record (bench --exercises-side-by-side)."""
    def newest(path: Path) -> tuple[str, int]:  # 2026-11-27-exercises-side-by-side-2 after …-side-by-side
        date, _, n = path.stem.partition("-exercises-side-by-side")
        return date, int(n.lstrip("-") or 1)

    for path in sorted(results_dir.glob("*-exercises-side-by-side*.json"), key=newest, reverse=True):
        try:
            runs = json.loads(path.read_text()).get("runs") or []
        except (OSError, ValueError):
            continue
        items = [i for run in runs for i in run.get("items") or []]
        if items:
            return {i["item"]: float(i["seconds"]) for i in items if "seconds" in i}
    return {}
