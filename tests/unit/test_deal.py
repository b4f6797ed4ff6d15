"""Dealing exercise items to labs side by side (kailab.testing.deal): blocks of the sizes pytest-xdist's
work stealing cuts, balanced by last run's seconds, a fleet's items in one block, longest first."""

from __future__ import annotations

import json

from kailab.testing.deal import LAB_UP_S, deal, last_durations

# the measured item times of `make exercises` (bench/results/2026-11-27-exercises-side-by-side-2.json), s
TIMES = {"borrow": 29, "consolidation": 22, "dra-claims": 50, "elastic": 37, "fractional": 9, "gang": 45,
         "job-eviction": 138, "node-failure": 78, "node-labels": 16, "pitfall": 47, "placement": 10, "preemption": 29,
         "quota": 41, "rack-placement": 41, "reclaim": 33, "starvation": 34, "tbf": 88, "topology": 35, "wkw": 13}
FLEETS = {"dra-claims": "dra", "rack-placement": "racks", "topology": "racks", "tbf": "tiny"}


def _blocks(order: list[str], workers: int) -> list[list[str]]:
    """The blocks work stealing hands out first: len//N to the first worker, and so on."""
    out, left = [], list(order)
    for k in range(workers, 0, -1):
        n = len(left) // k
        out.append(left[:n])
        left = left[n:]
    return out


def _cost(block: list[str]) -> float:
    return sum(TIMES[i] for i in block) + LAB_UP_S * len({FLEETS[i] for i in block if i in FLEETS})


def test_two_workers_get_even_blocks_a_fleet_in_one_longest_first():
    order = deal(sorted(TIMES), 2, cost=TIMES.get, group=FLEETS.get)
    assert sorted(order) == sorted(TIMES)
    blocks = _blocks(order, 2)
    alphabetical = _blocks(sorted(TIMES), 2)
    # alphabetical blocks: a racks item in each (two racks labs), the longer block 444 s
    assert max(map(_cost, blocks)) < max(map(_cost, alphabetical)), [_cost(b) for b in blocks]
    assert abs(_cost(blocks[0]) - _cost(blocks[1])) <= 40, [_cost(b) for b in blocks]
    assert sum("rack-placement" in b or "topology" in b for b in blocks) == 1
    assert {"rack-placement", "topology"} <= set(next(b for b in blocks if "topology" in b))
    racks = next(b for b in blocks if "topology" in b)
    assert abs(racks.index("topology") - racks.index("rack-placement")) == 1  # one after the other
    for b in blocks:  # longest first, a group counted as its sum
        units = [TIMES[i] for i in b if i not in FLEETS or FLEETS[i] != "racks"]
        assert units == sorted(units, reverse=True)


def test_unknown_times_count_as_the_mean_and_one_worker_keeps_the_order():
    items = ["a", "b", "c", "d"]
    assert deal(items, 1, cost=lambda i: None, group=lambda i: None) == items
    order = deal(items, 2, cost={"a": 10.0}.get, group=lambda i: None)
    assert sorted(order) == items and len(_blocks(order, 2)[0]) == 2


def test_last_durations_reads_each_exercises_latest_passed_run(tmp_path):
    def run(stamp: str, exercise: str, verdict: str, wall: dict) -> None:
        d = tmp_path / f"{stamp}-{exercise}"
        d.mkdir()
        (d / "verdict.json").write_text(json.dumps({"exercise": exercise, "verdict": verdict, "wall_seconds": wall}))

    run("20261127T100000.000Z", "gang", "passed", {"expect": 30.0, "clean-up": 5.0})
    run("20261127T110000.000Z", "gang", "passed", {"expect": 20.0, "clean-up": 2.5})
    run("20261127T120000.000Z", "gang", "failed", {"expect": 300.0})
    run("20261127T100000.000Z", "quota", "passed", {"expect": 12.0})
    (tmp_path / "20261127T130000.000Z-broken").mkdir()
    (tmp_path / "20261127T130000.000Z-broken" / "verdict.json").write_text("{")
    assert last_durations(tmp_path) == {"gang": 22.5, "quota": 12.0}
    assert last_durations(tmp_path / "absent") == {}
