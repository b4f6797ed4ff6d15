"""What each test cost in CPU: the suite's budget is CPU-seconds (2 cores), not wall time.

A test's CPU is what this pytest process and every process below it spent while the test ran, its
fixtures' set-up and tear-down included: the labs it (or a session fixture) brought up are children
of this process, so an idle lab of this worker counts against the tests that ran beside it, which is
the cost they really carry. Not counted: a process that outlived its parent (a lab brought up by a
`kailab up` subprocess, once that command exited) and kind's containers (children of the Docker
engine). The figures ride on each test's teardown report, so pytest-xdist's controller sees them
all; `make test` prints the costliest and writes every one to a JSON file when asked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
KEY = "cpu_s"


def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, CPU ticks of the process and of its reaped children)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), sum(int(f) for f in fields[11:15])


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU-seconds of `root` (default: this process) and all its live descendants, each with its
    reaped children: a child's time moves into its parent's when it is reaped, so the sum is steady."""
    root = root or os.getpid()
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p))}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
            todo.extend(children.get(pid, ()))
    return total / TICK


def summary_lines(costs: dict[str, float], top: int = 30) -> list[str]:
    """The costliest tests first, with the total these figures account for."""
    ranked = sorted(costs.items(), key=lambda kv: -kv[1])
    lines = [f"{cpu:8.1f} CPU-s  {nodeid}" for nodeid, cpu in ranked[:top]]
    lines.append(f"{sum(costs.values()):8.1f} CPU-s  in all, {len(costs)} tests "
                 "(this process tree's: not kind's containers)")
    return lines


def write(costs: dict[str, float], path: str) -> None:
    Path(path).write_text(json.dumps(dict(sorted(costs.items(), key=lambda kv: -kv[1])), indent=1))
