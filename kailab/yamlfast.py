"""YAML through libyaml when PyYAML was built with it (its C loader and dumper), else pure Python.
For the big documents: a run's snapshots (every pod, node, event at each step) and rendered charts.
Pure-Python PyYAML took 41 of the 43 s the report of 19 runs cost (2026-11-27)."""

from __future__ import annotations

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load(text: str):
    return yaml.load(text, Loader=LOADER)


def load_all(text: str) -> list:
    return list(yaml.load_all(text, Loader=LOADER))


def dump(data, **kwargs) -> str:
    return yaml.dump(data, Dumper=DUMPER, **kwargs)


def dump_all(docs, **kwargs) -> str:
    return yaml.dump_all(docs, Dumper=DUMPER, **kwargs)
