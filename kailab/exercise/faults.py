"""What a step's `faults:` can do, as a registry: one class per fault, as actions.py is for step keys.

A new fault is one class here and its line in FAULTS: its `key` (the YAML key of a `faults:` item)
and `value` (the type of what it names), `check` against the fleet, `preflight` (what the lab must
be able to do), `apply`, `undo` (for a fault that `lasts`: what the run's end puts back; `ends`: the
fault that puts it back mid-run), its words for the course (`said`) and the timeline (`noted`),
and `doc`, its row of docs/exercise-format.md's Faults table (tests/unit/test_faults.py holds the
two together). The format's `FaultItem`, the loader, the runner and the course words ask FAULTS;
none of them names a fault. `r` is the run, as run_state.RunState has it (not imported: the format
imports this module, and the run's state the format).
"""

from __future__ import annotations

import re
import time
from typing import Any, ClassVar, Literal

from pydantic import Field, create_model, model_validator

from ..fleet import Fleet, load_fleet
from .spec_base import Duration, Strict, seconds

# the lab processes a process fault may name
PROCESSES = ("scheduler", "binder", "podgrouper", "queuecontroller", "podgroupcontroller",
             "kube-controller-manager", "kwok")


class Fault:
    key: ClassVar[str]                   # its YAML key in a `faults:` item
    value: ClassVar[Any]                 # the type of its value, as the exercise's schema shows it
    doc: ClassVar[tuple[str, str, str]]  # its Faults row in the format doc: the item, what happens, restored at the end
    lasts: ClassVar[bool] = False        # what it takes away stays away until `ends` or the run's end (`undo`)
    ends: ClassVar[str | None] = None    # the lasting fault it ends, for the same value (restart ends a kill)
    stops_processes: ClassVar[bool] = False  # its values are lab processes stopped on purpose: not deaths
    names_node: ClassVar[bool] = False   # its value is a fleet node by name
    said: ClassVar[str]                  # what it does, in the course's words ({} its value)
    noted: ClassVar[str | None] = None   # its timeline entry, after `fault: ` ({} its value; None: none)

    def check(self, value, fleet: Fleet) -> tuple[str, str] | None:
        """What is wrong with it on the exercise's fleet, and how to put it right (None: nothing)."""
        return None

    def preflight(self, r, value) -> None:
        """Refuse, in one line and before anything is made, what the run's lab cannot do."""

    def apply(self, r, value) -> None:
        raise NotImplementedError

    def undo(self, r, value) -> None:
        """Put back what `apply` took away (a fault that lasts, at the run's end)."""

    def words(self, value) -> str:
        """What it does, as the course tells a learner."""
        return self.said.format(value)

    def timeline(self, value) -> str | None:
        """Its entry on the run's timeline, after `fault: ` (None: none)."""
        return None if self.noted is None else self.noted.format(value)


class Ending(Fault):
    """A fault that ends a lasting one (`ends`) mid-run: what the run's end would do, now."""

    def apply(self, r, value) -> None:
        FAULTS[self.ends].undo(r, value)


class ProcessFault(Fault):
    value = Literal[PROCESSES]  # type: ignore[valid-type]

    def preflight(self, r, value) -> None:
        r.lab.processes(f"run the fault `{self.key}: {value}`")  # its one-line refusal


class Kill(ProcessFault):
    key = "kill"
    doc = ("`kill: C`", f"SIGKILL to lab process C ({', '.join(f'`{p}`' for p in PROCESSES)}); binary runtime only",
           "C is restarted")
    said, noted = "kills KAI's {}", "killed {}"
    lasts, stops_processes = True, True

    def apply(self, r, value) -> None:
        r.lab.kill(value)

    def undo(self, r, value) -> None:
        r.lab.restart(value)


class Restart(Ending, ProcessFault):
    key = "restart"
    doc = ("`restart: C`", "C is started again from its recorded command line and waited on until healthy", "—")
    ends, said, noted = "kill", "restarts KAI's {}", "restarted {}"


class NodeFault(Fault):
    value = str
    names_node = True

    def check(self, value, fleet: Fleet) -> tuple[str, str] | None:
        nodes = sorted(n["metadata"]["name"] for n in fleet.node_manifests())
        if value not in nodes:
            return f"node {value!r} is not in fleet {fleet.name!r}", f"nodes: {', '.join(nodes[:6])}..."
        return None


class NodeDown(NodeFault):
    key = "nodeDown"
    doc = ("`nodeDown: N`", "fleet node N's Node object is deleted, as when a machine dies for good; the pod "
           "garbage collector fails and deletes its pods after about 40 s", "N is recreated")
    said, noted = "node {} dies (its Node object is deleted)", "node {} gone"
    lasts = True

    def apply(self, r, value) -> None:
        r.kube.delete("v1", "Node", value)

    def undo(self, r, value) -> None:  # the node again as the fleet declares it: labels, GPUs, Ready
        node = next(n for n in load_fleet(r.ex.fleet).node_manifests() if n["metadata"]["name"] == value)
        r.kube.apply({k: v for k, v in node.items() if k != "status"})
        r.kube.apply_status(node)


class NodeUp(Ending, NodeFault):
    key = "nodeUp"
    doc = ("`nodeUp: N`", "node N is created again with its fleet labels and GPUs", "—")
    ends, said, noted = "nodeDown", "node {} comes back", "node {} back"


class Pause(Fault):
    key = "pause"
    value = Duration
    doc = ("`pause: 5s`", "wait, with the watch running", "—")
    said = "waits {}"

    def apply(self, r, value) -> None:
        time.sleep(seconds(value))


FAULTS: dict[str, Fault] = {f.key: f for f in (Kill(), Restart(), NodeDown(), NodeUp(), Pause())}


# ----------------------------------------------------------------------------- the format's item
def _field(key: str) -> str:
    """A fault's field name on FaultItem: its key in snake case (nodeDown: node_down)."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


class _OneFault(Strict):
    @model_validator(mode="after")
    def _one(self):
        if sum(getattr(self, _field(k)) is not None for k in FAULTS) != 1:
            raise ValueError(f"each fault is exactly one of: {', '.join(FAULTS)}")
        return self

    @property
    def fault(self) -> Fault:
        return next(f for k, f in FAULTS.items() if getattr(self, _field(k)) is not None)

    @property
    def value(self):
        return getattr(self, _field(self.fault.key))

    def words(self) -> str:
        return self.fault.words(self.value)

    def check(self, fleet: Fleet) -> tuple[str, str] | None:
        return self.fault.check(self.value, fleet)


FaultItem = create_model(  # one optional field a fault, under its key
    "FaultItem", __base__=_OneFault, __module__=__name__,
    __doc__="""In order, after the step's apply: kill or restart a lab process (binary runtime), take a
    fleet node away (its Node object is deleted, as when a machine dies) or bring it back, pause.""",
    **{_field(k): (f.value | None, Field(None, alias=k) if _field(k) != k else None) for k, f in FAULTS.items()})


# ----------------------------------------------------------------------------- what a run does with them
def preflight(r, items: list) -> None:
    """Every fault of the exercise against the run's lab, before anything is made."""
    for item in items:
        item.fault.preflight(r, item.value)


def inject(r, item) -> None:
    """One fault, as a step writes it; what lasts is remembered (r.faulted) until its end."""
    fault, value = item.fault, item.value
    fault.apply(r, value)
    if fault.ends:
        r.faulted.get(fault.ends, set()).discard(value)
    if fault.lasts:
        r.faulted.setdefault(fault.key, set()).add(value)
    if (note := fault.timeline(value)) is not None:
        r.observer.note(f"fault: {note}")


def undo_all(r) -> None:
    """The lab outlives the exercise: put back what its faults took away and no fault ended."""
    for key, fault in FAULTS.items():
        left = r.faulted.get(key, set())
        for value in sorted(left):
            fault.undo(r, value)
            left.discard(value)


def stopped_processes(faulted: dict[str, set[str]]) -> set[str]:
    """The lab processes the run's faults stopped on purpose (their deaths are not the run's error)."""
    return {v for k, values in faulted.items() if FAULTS[k].stops_processes for v in values}
