"""Replay: a workload trace played through the real KAI on several labs side by side (one per queue
design or KAI version), and the figures that compare them.

trace.py     the trace format (CSV or YAML, one job per row) and its checks
generate.py  seeded synthetic traces
design.py    queue designs (the exercise format's queue tree, optionally a scheduler shard)
player.py    one design on one lab: submit on schedule, watch, record every job's times
figures.py   per-queue and fleet figures from the records; differences beyond measured spread
session.py   the whole replay: labs side by side, repeats, the comparison on disk
"""
