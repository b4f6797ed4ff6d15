"""A change to a twin, for deciding its pending work side by side with the snapshot as it was: queues
(by the snapshot's names, only the fields given change) and the scheduler (KAI's placement strategy as
its operator renders it, and any scheduler flag).

    design: prod-limit-32
    description: what prod's pending pods would get with a higher limit
    queues:
      prod: {gpu: {limit: 32}}
      research: {gpu: {quota: 8, overQuotaWeight: 2}, priority: 50}
    scheduler:
      placement: spread                              # or binpack
      args: {allow-consolidating-reclaim: "false"}   # KAI scheduler flags, over the snapshot's
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from ..errors import InputError
from ..exercise.spec import NAME, Strict
from ..inputs import one_line, read_yaml, validate

AS_IS = "as-is"  # the column of the snapshot unchanged


class GpuChange(Strict):
    quota: float | None = Field(None, ge=-1, description="guaranteed GPUs; -1 = unlimited")
    limit: float | None = Field(None, ge=-1, description="max GPUs; -1 = no limit")
    over_quota_weight: float | None = Field(None, ge=0, alias="overQuotaWeight")


class QueueChange(Strict):
    gpu: GpuChange = GpuChange()
    priority: int | None = None


class SchedulerChange(Strict):
    placement: Literal["binpack", "spread"] | None = Field(None, description="KAI's GPU and CPU placement strategy")
    args: dict[str, str] = Field({}, description="scheduler flags (without --), over the snapshot's")


class TwinDesignSpec(Strict):
    design: str = Field(description="a short name: the comparison's column")
    description: str = ""
    queues: dict[str, QueueChange] = {}
    scheduler: SchedulerChange | None = None


@dataclass(frozen=True)
class TwinDesign:
    path: Path
    spec: TwinDesignSpec

    @property
    def name(self) -> str:
        return self.spec.design


def load_twin_design(path: str | Path) -> TwinDesign:
    path = Path(path)
    spec = validate(TwinDesignSpec, read_yaml(path), path)
    if not NAME.match(spec.design) or len(spec.design) > 30 or spec.design == AS_IS:
        raise InputError(path, "design", f"{one_line(spec.design)!r} is not a valid name",
                         f"lower-case letters, digits, '-'; at most 30; not {AS_IS!r}")
    if not spec.queues and spec.scheduler is None:
        raise InputError(path, "queues", "the design changes nothing", "give queues: or scheduler:")
    for flag in (spec.scheduler.args if spec.scheduler else {}):
        if flag.startswith("-") or "=" in flag or not flag:
            raise InputError(path, f"scheduler.args.{one_line(flag)}", "not a flag name",
                             "the flag's name without '--', e.g. allow-consolidating-reclaim")
    return TwinDesign(path, spec)


def check_against(design: TwinDesign, queue_names: set[str]) -> None:
    """Every queue the design changes is one the snapshot has (refused before any lab, by name)."""
    for q in design.spec.queues:
        if q not in queue_names:
            raise InputError(design.path, f"queues.{one_line(q)}", "the snapshot has no such queue",
                             f"one of: {', '.join(sorted(queue_names)) or '(none)'}")


def change_queue(obj: dict, change: QueueChange) -> dict:
    """A twin's Queue object with the design's fields (KAI's Queue v2: spec.resources.gpu, spec.priority)."""
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    gpu = spec.setdefault("resources", {}).setdefault("gpu", {})
    for field, key in (("quota", "quota"), ("limit", "limit"), ("over_quota_weight", "overQuotaWeight")):
        value = getattr(change.gpu, field)
        if value is not None:
            gpu[key] = value
    if change.priority is not None:
        spec["priority"] = change.priority
    return out


def change_conf(conf: dict, placement: str | None) -> dict:
    """The scheduler configuration with KAI's placement strategy as its operator renders a SchedulingShard's
    placementStrategy (pkg/apis/kai/v1/schedulingshard_types.go, v0.17.0): spread turns gpupack and
    gpusharingorder off and gpuspread on, sets nodeplacement's gpu and cpu, and turns consolidation off."""
    out = copy.deepcopy(conf)
    if placement is None:
        return out
    spread = placement == "spread"
    for tier in out.get("tiers") or []:
        plugins = []
        for p in tier.get("plugins") or []:
            name = p.get("name")
            if name in ("gpupack", "gpuspread"):
                p = {**p, "name": "gpuspread" if spread else "gpupack"}
            elif name == "gpusharingorder" and spread:
                continue
            elif name == "nodeplacement":
                p = {**p, "arguments": {**(p.get("arguments") or {}), "gpu": placement, "cpu": placement}}
            plugins.append(p)
        if not spread and any(p.get("name") == "gpupack" for p in plugins) \
                and not any(p.get("name") == "gpusharingorder" for p in plugins):
            plugins.append({"name": "gpusharingorder"})
        tier["plugins"] = plugins
    actions = [a.strip() for a in str(out.get("actions", "")).split(",") if a.strip()]
    if spread:
        actions = [a for a in actions if a != "consolidation"]
    elif "consolidation" not in actions and "allocate" in actions:
        actions.insert(actions.index("allocate") + 1, "consolidation")
    out["actions"] = ", ".join(actions)
    return out


def change_args(args: list[str], flags: dict[str, str]) -> list[str]:
    """The scheduler's flags with the design's over them (a flag given twice: the design's wins)."""
    kept = [a for a in args if a.split("=", 1)[0].lstrip("-") not in flags]
    return kept + [f"--{k}={v}" for k, v in flags.items()]
