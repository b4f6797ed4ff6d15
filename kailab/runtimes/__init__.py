"""Runtimes: the ways a lab can run, chosen in one registry.

    with lab(LabSpec(name="x", fleet="tiny")) as rec:   # up on entry, down on exit
        ...

Callers get a runtime by name (`get_runtime`) or for a lab's record (`runtime_of`) and use the
`Runtime` interface (runtimes/base.py); none asks which runtime it is. A new runtime is one
module with a `Runtime` subclass and one line in RUNTIMES.
"""

from __future__ import annotations

import contextlib
import importlib

from ..errors import KailabError
from .base import LabRecord, LabSpec, Runtime, docker_answers

# name -> "module:class", imported on first use (kind's and vCluster's code is not loaded for a
# binary lab)
RUNTIMES = {
    "binary": "kailab.runtimes.binary:BinaryRuntime",
    "kind": "kailab.runtimes.kind:KindRuntime",
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


def runtime_of(record: LabRecord) -> Runtime:
    return get_runtime(record.runtime)


@contextlib.contextmanager
def lab(spec: LabSpec):
    """A lab for the length of a `with` block: up on entry, down on exit (also on errors and Ctrl-C)."""
    runtime = get_runtime(spec.runtime)
    try:
        yield runtime.up(spec)
    finally:
        runtime.down(spec.name)


def require_kai_lab(name: str, purpose: str, fleet: str | None = None) -> LabRecord:
    """The running lab `name`, if it can run `purpose` (exercises, lessons): up, with KAI, and
    (when `fleet` is given) with that fleet's GPU count. Otherwise one clear error."""
    up_cmd = f"kailab up --fleet {fleet}" if fleet else "kailab up"
    rec = LabRecord.load(name)
    if rec is None or rec.state != "up":
        raise KailabError(f"no lab named {name!r} is up: bring one up with `{up_cmd}`")
    if not rec.with_kai:
        raise KailabError(f"lab {name!r} runs without KAI (--without-kai): {purpose} need KAI "
                          f"(`kailab down --name {name}` then `kailab up --fleet {fleet or '...'}`)")
    if fleet is not None:
        from ..fleet import load_fleet

        need = load_fleet(fleet).gpus_total
        if rec.gpus != need:
            raise KailabError(f"this lesson is sized for fleet {fleet} ({need} GPUs) but lab {name!r} has "
                              f"{rec.gpus} GPUs (fleet {rec.fleet}): use a `{up_cmd}` lab")
    return rec


__all__ = ["RUNTIMES", "LabRecord", "LabSpec", "Runtime", "get_runtime", "lab", "require_kai_lab",
           "resolve_runtime", "runtime_of"]
