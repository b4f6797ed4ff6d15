"""The order exercise items are collected in, so labs side by side (`pytest -n N --dist worksteal`)
finish together.

pytest-xdist's work stealing first hands each worker a contiguous block of the collection (the
first len//N items to the first worker, and so on); a worker that runs dry later takes half of the
longest queue left, from its end. So the blocks are made here: the items are shared out over N blocks
of those sizes, longest first, each to the block with the least time so far — the items of one fleet
other than the run's lab's kept in one block, since each block that has one brings up a lab of that
fleet (alphabetical order put the racks items in both, and dealing longest first without the groups
measured slower, 2026-11-27) — and each block runs longest first (a group's items together, by their
sum), so what is stolen from its end is short. How long an item takes is its last run's, read from
the evidence folder (the sum of its verdict's wall seconds); an item never run counts as the mean of
the others'.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from .. import evidence as evidence_files

T = TypeVar("T")

LAB_UP_S = 20.0  # what a binary lab of another fleet costs the block that brings it up (measured ~15-25 s)


def last_durations(evidence: Path) -> dict[str, float]:
    """Exercise -> the seconds its latest run took (its verdict's wall seconds), from run folders named
    <stamp>-<exercise> directly under `evidence` (what `make exercises` writes)."""
    out: dict[str, tuple[str, float]] = {}
    if not evidence.is_dir():
        return {}
    for verdict in evidence.glob(f"*/{evidence_files.VERDICT}"):
        stamp, _, _ = verdict.parent.name.partition("-")
        try:
            data = evidence_files.read_verdict(verdict.parent)
            name, seconds = data["exercise"], float(sum((data.get("wall_seconds") or {}).values()))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a run still being written, or an old format: no estimate from it
        if data.get("verdict") != "passed" or seconds <= 0:
            continue  # a failed run's time says little about the next one
        if name not in out or stamp > out[name][0]:
            out[name] = (stamp, seconds)
    return {name: seconds for name, (_, seconds) in out.items()}


def deal(items: Sequence[T], workers: int, cost: Callable[[T], float | None],
         group: Callable[[T], str | None]) -> list[T]:
    """`items` in the order that deals them into `workers` blocks as work stealing cuts them.
    `cost`: an item's seconds (None: unknown); `group`: the items that must share a block (None: any)."""
    items = list(items)
    if workers < 2 or len(items) < 2:
        return items
    known = [c for c in (cost(i) for i in items) if c is not None]
    mean = sum(known) / len(known) if known else 1.0
    units: dict[object, list[T]] = {}
    for index, item in enumerate(items):
        key = group(item)
        units.setdefault(key if key is not None else ("item", index), []).append(item)

    def seconds(item: T) -> float:
        c = cost(item)
        return mean if c is None else c

    def unit_seconds(key, members) -> float:
        return sum(seconds(i) for i in members) + (LAB_UP_S if not isinstance(key, tuple) else 0.0)

    # the sizes work stealing cuts: the first worker len//N, the next len(rest)//(N-1), ...
    sizes, left = [], len(items)
    for k in range(workers, 0, -1):
        sizes.append(left // k)
        left -= sizes[-1]
    blocks: list[list[list[T]]] = [[] for _ in range(workers)]  # each block's units, in the order dealt
    totals, counts = [0.0] * workers, [0] * workers
    for key, members in sorted(units.items(), key=lambda kv: -unit_seconds(*kv)):
        fits = [b for b in range(workers) if counts[b] + len(members) <= sizes[b]]
        if not fits:  # a group larger than any block's room: the emptiest takes it (sizes are a hint)
            fits = [min(range(workers), key=lambda b: counts[b])]
        b = min(fits, key=lambda b: totals[b])
        blocks[b].append(sorted(members, key=lambda i: -seconds(i)))
        totals[b] += unit_seconds(key, members)
        counts[b] += len(members)
    # a group's items one after the other: its lab can go as soon as they are done (release_after)
    return [item for block in blocks for unit in block for item in unit]
