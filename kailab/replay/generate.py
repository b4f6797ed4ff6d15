"""Synthetic traces, seeded: the same arguments give the same trace, byte for byte.

Arrivals are a Poisson process per queue (given the count: sorted uniform times over the span,
which is what a Poisson process conditioned on its count is), sizes and durations come from mixes,
and an optional burst drops many jobs of one queue into a short window. `load` scales durations so
the offered work (GPU-seconds asked per second) is that fraction of the fleet's GPUs: 1.0 keeps
the fleet just busy on average, above it queues build up.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .trace import TraceJob

# (pods, gpus per pod, min_members, weight): mostly small jobs, some gangs, some GPU fractions
SIZE_MIX = [(1, 1, 1, 40), (1, 2, 1, 15), (1, 4, 1, 10), (1, 0.5, 1, 10), (1, 8, 1, 10),
            (2, 8, 2, 10), (4, 8, 4, 5)]
DURATION_MEDIAN_S = 600.0  # before scaling to the load
DURATION_SIGMA = 1.0  # lognormal: most jobs near the median, a long tail
DURATION_BOUNDS_S = (30.0, 6 * 3600.0)


@dataclass
class Burst:
    queue: str
    at_s: float
    jobs: int
    within_s: float = 60.0


@dataclass
class Profile:
    jobs: int
    span_s: float
    queues: dict[str, float]  # queue -> relative arrival rate
    fleet_gpus: int
    load: float = 1.0
    seed: int = 1
    burst: Burst | None = None
    sizes: list = field(default_factory=lambda: list(SIZE_MIX))


def parse_queues(text: str) -> dict[str, float]:
    """'team-a=2,team-b' -> {'team-a': 2.0, 'team-b': 1.0}"""
    out: dict[str, float] = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        name, _, weight = part.partition("=")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"queue {name!r}: weight {weight!r} is not a number") from None
        if w <= 0:
            raise ValueError(f"queue {name!r}: weight {w:g} must be > 0")
        out[name.strip()] = w
    if not out:
        raise ValueError("name at least one queue")
    return out


def generate(p: Profile) -> list[TraceJob]:
    if p.jobs < 1 or p.span_s <= 0 or p.fleet_gpus < 1 or p.load <= 0:
        raise ValueError("jobs >= 1, span > 0, fleet GPUs >= 1 and load > 0")
    rng = random.Random(p.seed)
    # sizes that fit the fleet at least twice over: a job the fleet can never run says nothing
    sizes = [s for s in p.sizes if s[0] * s[1] <= max(1, p.fleet_gpus // 2)] or [(1, 1, 1, 1)]
    burst_jobs = min(p.burst.jobs, p.jobs - 1) if p.burst else 0
    steady = p.jobs - burst_jobs
    total_w = sum(p.queues.values())
    counts = {q: int(steady * w / total_w) for q, w in p.queues.items()}
    for q in list(p.queues)[: steady - sum(counts.values())]:  # the remainder, one each
        counts[q] += 1
    arrivals: list[tuple[float, str]] = []
    for q, n in counts.items():
        arrivals += [(rng.uniform(0, p.span_s), q) for _ in range(n)]
    if p.burst:
        arrivals += [(p.burst.at_s + rng.uniform(0, p.burst.within_s), p.burst.queue) for _ in range(burst_jobs)]
    arrivals.sort()
    weights = [s[3] for s in sizes]
    raw = []
    for t, q in arrivals:
        pods, gpus, mm, _ = rng.choices(sizes, weights)[0]
        d = math.exp(rng.gauss(math.log(DURATION_MEDIAN_S), DURATION_SIGMA))
        raw.append((t, q, pods, gpus, mm, d))
    # scale durations to the offered load, then bound them
    asked = sum(pods * gpus * d for _, _, pods, gpus, _, d in raw)
    scale = p.load * p.fleet_gpus * p.span_s / asked if asked else 1.0
    lo, hi = DURATION_BOUNDS_S
    return [TraceJob(name=f"j{i:05d}", arrival_s=round(t, 3), queue=q, pods=pods, gpus=gpus,
                     duration_s=round(min(hi, max(lo, d * scale)), 1), min_members=mm, row=i + 1)
            for i, (t, q, pods, gpus, mm, d) in enumerate(raw)]


def offered_load(jobs: list[TraceJob], fleet_gpus: int) -> float:
    """GPU-seconds asked per second of the trace's arrival span, as a fraction of the fleet."""
    if not jobs:
        return 0.0
    span = max(j.arrival_s for j in jobs) - min(j.arrival_s for j in jobs) or 1.0
    return sum(j.gpus_requested * j.duration_s for j in jobs) / span / fleet_gpus
