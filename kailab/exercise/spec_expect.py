"""The exercise format's expectations: what a step checks (eventually true) and what a window watches (stays true)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from typing import ClassVar

from pydantic import (Discriminator, Field, Tag, model_validator)

from ..inputs import UNION_TAGS
from ..operators import owner_kinds

from .spec_base import NAME, Bounded, Count, Duration, NodeChoice, Range, Strict, _name, count_text, seconds  # noqa: F401
from .match import check_pattern

COUNT_METRICS = ("bound", "running", "pending", "evicted", "nodes", "devices", "domains")


class OnStacks(Strict):
    """What every expectation may say: the scheduler stacks it is about."""

    stacks: list[str] | None = Field(None, description="the scheduler stacks (by registered name) this is checked on "
                                     "(default: every one); where schedulers legitimately differ, write one "
                                     "expectation per stack - on any other stack it is not checked, and the "
                                     "run says so")

    def checked_on(self, stack: str) -> bool:
        return self.stacks is None or stack in self.stacks


class CountExpect(OnStacks):
    """Pod counts for a queue or a workload. bound = has a node; running = phase Running."""

    marker: ClassVar[str | None] = None  # the default kind: an item naming no other kind's marker

    queue: str | None = None
    workload: str | None = None
    bound: Count | None = None
    running: Count | None = None
    pending: Count | None = None
    evicted: Count | None = Field(None, description="pods of it deleted by KAI since the step began")
    nodes: Count | None = Field(None, description="distinct nodes its bound pods are on")
    devices: Count | None = Field(None, description="GPU devices its bound pods use (a shared device counts once)")
    domains: Count | None = Field(None, description="distinct values of node label `level` among its bound pods' nodes")
    level: str | None = Field(None, description="with domains: the node label, e.g. kailab.io/rack")
    on: "NodeChoice | None" = Field(None, description="count only its pods on these nodes (by name or labels)")
    why: str = Field("", description="one line: the KAI arithmetic behind the numbers, for a trainer")

    @model_validator(mode="after")
    def _shape(self) -> "CountExpect":
        if (self.queue is None) == (self.workload is None):
            raise ValueError("an expectation names exactly one of: queue, workload")
        if all(getattr(self, k) is None for k in COUNT_METRICS):
            raise ValueError("an expectation needs at least one of: " + ", ".join(COUNT_METRICS))
        if self.on is not None and self.pending is not None:
            raise ValueError("on counts pods placed on nodes; a pending pod is on none: drop pending or on")
        if (self.domains is None) != (self.level is None):
            raise ValueError("domains and level go together: domains counts the values of the node label `level`")
        return self


class ConditionExpect(OnStacks):
    """A PodGroup scheduling condition reason, e.g. NonPreemptibleOverQuota, OverLimit."""

    marker: ClassVar[str] = "podgroupOf"

    podgroup_of: str = Field(alias="podgroupOf", description="workload name")
    reason: str
    present: bool = True
    every: bool = Field(False, description="every pod of the workload has a PodGroup carrying the "
                        "reason (default: at least one PodGroup does) - proof that the scheduler has "
                        "seen all of them")
    why: str = Field("", description="one line: why KAI gives this reason here")


class EventExpect(OnStacks):
    """Kubernetes events about a workload's pods or podgroups, counted since the step began."""

    marker: ClassVar[str] = "eventReason"

    event_reason: str = Field(alias="eventReason")
    workload: str
    count: Count = Range(min=1)
    why: str = Field("", description="one line: why KAI records (or does not record) these events")


# what the run's watch keeps whole (see observer.py): an object assertion names one of these
# and the workload operators' own kinds (a PyTorchJob's status, a RayCluster's state): kailab/operators
OWNER_KINDS = tuple(owner_kinds())
OBJECT_KINDS = ("Pod", "PodGroup", "BindRequest", "ResourceClaim", "Node", "Queue", "Job", *OWNER_KINDS)


class ObjectExpect(OnStacks):
    """A partial object that must match (as in chainsaw's and kuttl's asserts): objects of a kind,
    chosen by name, labels or workload, of which `count` match `match` (default: at least one;
    `count: 0` = no such object). Values in `match` may be expressions: {regex}, {min, max}, {exists}."""

    marker: ClassVar[str] = "object"

    object: Literal[OBJECT_KINDS] = Field(description="the kind: " + ", ".join(OBJECT_KINDS))  # type: ignore[valid-type]
    name: str | None = Field(None, description="its name (a queue's as in the exercise; ${...} names allowed)")
    of: str | None = Field(None, description="a workload: its pods, their PodGroups, BindRequests and ResourceClaims, the nodes they are on")
    label_selector: dict[str, str] | None = Field(None, alias="labelSelector", description="labels it carries")
    match: dict = Field({}, description="a partial object: metadata / spec / status keys that must match")
    count: Count = Field(Range(min=1), description="how many chosen objects match (0: none does)")
    ended: bool = Field(False, description="Pod only: the pods as each was when it ended (a terminal phase), "
                                           "kept after it is gone")
    why: str = Field("", description="one line: what KAI writes here and why")

    @model_validator(mode="after")
    def _shape(self) -> "ObjectExpect":
        if self.ended and self.object != "Pod":
            raise ValueError("ended: true chooses pods as they ended: use it with object: Pod")
        if self.of is not None and self.object == "Queue":
            raise ValueError("a queue belongs to no workload: choose it by name")
        if self.name is None and self.of is None and self.label_selector is None and self.object != "Queue":
            raise ValueError("choose the objects by name, of (a workload) or labelSelector")
        check_pattern(self.match)
        return self

    def subject(self) -> str:
        kind = f"{self.object}" + (" (as it ended)" if self.ended else "")
        chosen = [kind] + ([self.name] if self.name else []) + ([f"of {self.of}"] if self.of else []) \
            + ([",".join(f"{k}={v}" for k, v in self.label_selector.items())] if self.label_selector else [])
        return " ".join(chosen)


class Seconds(Bounded):
    """A bound on a duration in seconds (an upper bound is the usual ask of a wait)."""

    _needs: ClassVar[str] = "a bound needs min, max or both (seconds)"
    min: float | None = Field(None, ge=0)
    max: float | None = Field(None, ge=0)

    def __str__(self) -> str:
        return " and ".join(t for t in (f">= {self.min} s" if self.min is not None else "",
                                        f"<= {self.max} s" if self.max is not None else "") if t)


class WaitExpect(OnStacks):
    """How long a queue's pods waited from created to bound (the run's timeline so far): nearest-rank
    quantiles over every pod of the queue bound since the run began."""

    marker: ClassVar[str] = "waitOf"

    wait_of: str = Field(alias="waitOf", description="queue name")
    p50: Seconds | None = None
    p95: Seconds | None = None
    p99: Seconds | None = None
    max: Seconds | None = None
    why: str = Field("", description="one line: why KAI makes this queue wait so long, or so little")

    @model_validator(mode="after")
    def _some(self) -> "WaitExpect":
        if all(getattr(self, k) is None for k in ("p50", "p95", "p99", "max")):
            raise ValueError("a wait expectation needs at least one of: p50, p95, p99, max")
        return self


EXPECT_MODELS = (CountExpect, ConditionExpect, EventExpect, ObjectExpect, WaitExpect)
UNION_TAGS.update(m.__name__ for m in EXPECT_MODELS)


def _expect_kind(v: object) -> str:
    """The kind an item names by its marker key (Step refuses items naming two)."""
    if not isinstance(v, dict):
        return type(v).__name__
    named = [m for m in EXPECT_MODELS if m.marker is not None and m.marker in v]
    return named[0].__name__ if named else CountExpect.__name__


# tags are class names, never field names: error locations drop them (see inputs.validate)
ExpectItem = Annotated[Union[Annotated[CountExpect, Tag("CountExpect")],
                             Annotated[ConditionExpect, Tag("ConditionExpect")],
                             Annotated[EventExpect, Tag("EventExpect")],
                             Annotated[ObjectExpect, Tag("ObjectExpect")],
                             Annotated[WaitExpect, Tag("WaitExpect")]], Discriminator(_expect_kind)]


def _stays_kind(v: object) -> str:
    return ObjectExpect.__name__ if isinstance(v, dict) and ObjectExpect.marker in v else CountExpect.__name__


# what a window can watch: counts and objects (the watch sees every change of both)
StaysItem = Annotated[Union[Annotated[CountExpect, Tag("CountExpect")],
                            Annotated[ObjectExpect, Tag("ObjectExpect")]], Discriminator(_stays_kind)]


