"""`kailab bench`: how long the lab takes on this machine, as medians of repeated runs.

Figures go to bench/results/<date>.json and .md. Nothing here asserts a threshold: timings are
recorded, not tested. Measurements that need KAI say so when KAI is not available.
"""

from __future__ import annotations

from .churn import churn
from .common import _MachineSampler, _junit_items, _record, machine
from .endings import endings
from .fill import fill_bench
from .labs import bench_lab, markdown, run, soak
from .peer import peer_comparison, peer_markdown, record_peer
from .repeat import compare_labs, compare_markdown, repeatability, repeatability_markdown
from .scale import REPLAY_SCALE, replay_scale, replay_scale_markdown, scale
from .side_by_side import exercises_side_by_side, exercises_side_by_side_markdown

__all__ = ["REPLAY_SCALE", "_MachineSampler", "_junit_items", "_record", "bench_lab", "churn", "compare_labs",
           "compare_markdown", "endings", "exercises_side_by_side", "fill_bench", "exercises_side_by_side_markdown", "machine", "markdown",
           "peer_comparison", "peer_markdown", "record_peer", "repeatability", "repeatability_markdown",
           "replay_scale", "replay_scale_markdown", "run", "scale", "soak"]
