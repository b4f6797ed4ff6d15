"""Runtimes: where a lab runs, chosen in one registry (the first axis; kailab/stacks is the second).

Code above holds a runtime through kailab/labs.py, which hands `up` what schedules (an Addon from
the lab's stack); a runtime used bare runs a lab with nothing scheduling. Callers never ask which
runtime they have. A new runtime is one module with a `Runtime` subclass and one line in RUNTIMES.
"""

from __future__ import annotations

import importlib

from ..errors import KailabError
from .base import LabRecord, LabSpec, Runtime, docker_answers

# name -> "module:class", imported on first use (kind's and vCluster's code is not loaded for a
# binary lab)
RUNTIMES = {
    "binary": "kailab.runtimes.binary:BinaryRuntime",
    "kind": "kailab.runtimes.kind.runtime:KindRuntime",
    "existing": "kailab.runtimes.existing:ExistingRuntime",
}


def resolve_runtime(requested: str) -> str:
    """`auto` -> kind where a Docker engine answers, else binary; any other name must be known."""
    if requested == "auto":
        return "kind" if docker_answers() else "binary"
    if requested not in RUNTIMES:
        raise KailabError(f"unknown runtime {requested!r}: choose auto, {', '.join(RUNTIMES)}")
    return requested


def get_runtime(name: str) -> Runtime:
    target = RUNTIMES.get(resolve_runtime(name))
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)()



__all__ = ["RUNTIMES", "LabRecord", "LabSpec", "Runtime", "get_runtime", "resolve_runtime"]
