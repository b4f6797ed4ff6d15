"""The exercise format's building blocks: names, durations, counts, GPU shares, the strict model base."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Union


from pydantic import (BaseModel, ConfigDict, Field, model_validator)



NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")
INVARIANTS = ("no-gpu-overcommit", "gang-never-partial", "nonpreemptible-within-quota", "queue-within-limit")


def seconds(text: str) -> float:
    m = DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration like 500ms, 15s or 2m")
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "ms" else value * 60 if unit == "m" else value


Duration = Annotated[str, Field(pattern=DURATION.pattern, description="e.g. 500ms, 15s, 2m")]


def _name(v: str) -> str:
    if not NAME.match(v) or len(v) > 40:
        raise ValueError(f"{v!r} is not a valid name (lower-case letters, digits, '-'; max 40)")
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


class GpuShare(Strict):
    quota: float = Field(0, ge=-1, description="guaranteed GPUs; -1 = unlimited")
    limit: float = Field(-1, ge=-1, description="max GPUs; -1 = no limit")
    over_quota_weight: float = Field(1, ge=0, alias="overQuotaWeight")
    priority: int | None = None

    def as_queue_gpu(self) -> dict:
        out = {"quota": self.quota, "limit": self.limit, "overQuotaWeight": self.over_quota_weight}
        if self.priority is not None:
            out["priority"] = self.priority
        return out


class QueueNode(Strict):
    gpu: GpuShare = GpuShare()
    children: dict[str, "QueueNode"] = {}


class Bounded(Strict):
    """min, max or both, min <= max: what a Range of counts and Seconds share. Subclasses give
    the fields' type and `_needs`, the refusal when neither is given."""

    _needs: ClassVar[str] = "a range needs min, max or both"

    @model_validator(mode="after")
    def _bounds(self):
        if self.min is None and self.max is None:
            raise ValueError(self._needs)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    def holds(self, v: float) -> bool:
        return (self.min is None or v >= self.min) and (self.max is None or v <= self.max)


class Range(Bounded):
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)
    why: str = Field("", description="why KAI's fairness allows a range here")

    def __str__(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{self.min}..{self.max}"
        return f">= {self.min}" if self.min is not None else f"<= {self.max}"


Count = Union[Annotated[int, Field(ge=0)], Range]


def count_holds(expected: Count, observed: int) -> bool:
    return observed == expected if isinstance(expected, int) else expected.holds(observed)


def count_text(expected: Count) -> str:
    return str(expected)


class NodeChoice(Strict):
    """Nodes by name or by labels (a selector is read when used: a step may have relabelled nodes)."""

    node: str | None = None
    node_selector: dict[str, str] | None = Field(None, alias="nodeSelector", min_length=1)

    @model_validator(mode="after")
    def _one(self) -> "NodeChoice":
        if (self.node is None) == (self.node_selector is None):
            raise ValueError("name nodes by exactly one of: node, nodeSelector")
        return self

    def holds(self, name: str | None, labels: dict[str, str]) -> bool:
        if not name:
            return False
        if self.node is not None:
            return name == self.node
        return all(labels.get(k) == v for k, v in (self.node_selector or {}).items())

    def __str__(self) -> str:
        return self.node if self.node is not None else ",".join(f"{k}={v}" for k, v in (self.node_selector or {}).items())
