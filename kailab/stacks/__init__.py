"""Scheduler stacks: what schedules in a lab, chosen in one registry (the second axis beside
kailab/runtimes, which says where a lab runs).

A new stack is a package with a `Stack` subclass (stacks/base.py) and one line in STACKS; code
above (kailab/labs.py and what uses it) never asks which stack it has.
"""

from __future__ import annotations

import importlib

from ..errors import KailabError
from ..runtimes.base import LabRecord, LabSpec
from .base import Stack

# name -> "module:class", imported on first use
STACKS = {
    "kai": "kailab.stacks.kai:KaiStack",
    "none": "kailab.stacks.none:NoStack",
    "kueue": "kailab.stacks.kueue:KueueStack",
    "kueue+kai": "kailab.stacks.kueue_kai:KueueKaiStack",
    "volcano": "kailab.stacks.volcano:VolcanoStack",
}


def get_stack(name: str) -> Stack:
    target = STACKS.get(name)
    if target is None:
        raise KailabError(f"unknown scheduler stack {name!r}: choose one of {', '.join(STACKS)}")
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)()


def stack_name(spec: LabSpec) -> str:
    """The stack a spec asks for (`--without-kai` is the "none" stack)."""
    return spec.stack or "kai"


def stack_of(record: LabRecord) -> Stack:
    """The stack a lab runs, as its record says."""
    return get_stack((record.stack or {}).get("name") or "none")


__all__ = ["STACKS", "Stack", "get_stack", "stack_name", "stack_of"]
