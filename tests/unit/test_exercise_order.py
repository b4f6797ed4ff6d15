"""Exercises on labs side by side run longest first, dealt evenly (kailab.testing.order)."""

from __future__ import annotations

import json

from kailab.paths import PROJECT_ROOT
from kailab.testing.order import deal, recorded_seconds


def test_two_workers_get_equal_counts_and_near_equal_seconds_each_hand_longest_first():
    seconds = {"job-eviction": 138, "tbf": 88, "node-failure": 78, "dra": 50, "pitfall": 47, "gang": 45,
               "quota": 40, "borrow": 29, "fractional": 9, "placement": 10}
    order = deal(sorted(seconds), seconds, 2)
    first, second = order[:5], order[5:]  # worksteal's first hand to each worker: equal counts
    assert first == ["job-eviction", "dra", "pitfall", "borrow", "placement"]
    assert second == ["tbf", "node-failure", "gang", "quota", "fractional"]
    for hand in (first, second):
        assert [seconds[n] for n in hand] == sorted((seconds[n] for n in hand), reverse=True)
    loads = [sum(seconds[n] for n in hand) for hand in (first, second)]
    assert abs(loads[0] - loads[1]) <= max(seconds.values()) / 2, loads  # alphabetical: 341 vs 192


def test_unknown_items_keep_their_order_after_the_known_and_one_worker_runs_longest_first():
    assert deal(["b", "new", "a", "c"], {"a": 1, "b": 5, "c": 3}, 1) == ["b", "c", "a", "new"]
    assert deal(["z", "y"], {}, 2) == ["z", "y"]


def test_the_newest_side_by_side_record_gives_the_seconds(tmp_path):
    for stem, secs in [("2026-11-24-exercises-side-by-side", 1), ("2026-11-27-exercises-side-by-side", 2),
                       ("2026-11-27-exercises-side-by-side-2", 3), ("2026-11-27-twin-scale", 9)]:
        (tmp_path / f"{stem}.json").write_text(json.dumps({"runs": [{"items": [{"item": "quota", "seconds": secs}]}]}))
    assert recorded_seconds(tmp_path) == {"quota": 3.0}
    assert recorded_seconds(tmp_path / "none") == {}
    shipped = recorded_seconds(PROJECT_ROOT / "bench" / "results")
    assert {"quota", "job-eviction", "gang"} <= set(shipped)  # the project's own record reaches the plugin
