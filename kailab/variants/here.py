"""Variants side by side on this machine: a thread each, a lab each."""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Callable, Sequence, TypeVar

V = TypeVar("V")


def at_once_for(count: int, asked: int | None = None) -> int:
    """How many variants run at once: `asked`, or one per two cores (each lab's control plane and
    scheduler keep a core busy under load), never more than there are variants nor fewer than one."""
    return max(1, min(count, asked or (os.cpu_count() or 2) // 2))


def side_by_side(variants: Sequence[V], run_one: Callable[[V], None], at_once: int | None = None,
                 stop: threading.Event | None = None) -> None:
    """`run_one(v)` for every variant, `at_once` at a time (default: all together). The first error a
    variant raises, or Ctrl-C here, sets `stop` (a variant that watches it ends early and takes its lab
    down); the error is raised once every variant has ended, so no lab outlives the call."""
    if not variants:
        return
    stop = stop if stop is not None else threading.Event()
    with ThreadPoolExecutor(max_workers=max(1, min(at_once or len(variants), len(variants)))) as pool:
        futures = [pool.submit(run_one, v) for v in variants]
        try:
            pending = set(futures)
            while pending:  # in short waits: Ctrl-C reaches this thread between them
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
                if any(f.exception() is not None for f in done):
                    stop.set()
                    break
        except BaseException:
            stop.set()  # the pool's exit waits for each variant to stop and take its lab down
            raise
    for f in futures:  # the first error, in the variants' order, once all have ended
        if f.exception() is not None:
            raise f.exception()
