"""A queue design for a replay: the exercise format's queue tree (quota, limit, overQuotaWeight,
priority per queue) and, optionally, the exercise format's `scheduler:` setting (placement,
time-based fair share, any SchedulingShard fragment), which the lab's KAI operator code renders.

    design: more-for-team-a
    queues:
      org:
        gpu: {quota: -1}
        children:
          team-a: {gpu: {quota: 20}}
          team-b: {gpu: {quota: 12}}
    scheduler: {placement: binpack}     # optional
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from ..errors import InputError
from ..exercise.spec import NAME, QueueNode, SchedulerSetting, Strict, leaf_queues, queue_tree
from ..inputs import one_line, read_yaml, validate
from ..stacks.base import QueueDecl


class DesignSpec(Strict):
    design: str = Field(description="a short name, shown in the comparison")
    description: str = ""
    queues: dict[str, QueueNode] = Field(min_length=1)
    scheduler: SchedulerSetting | None = None


@dataclass(frozen=True)
class Design:
    path: Path
    spec: DesignSpec

    @property
    def name(self) -> str:
        return self.spec.design

    def tree(self) -> list[tuple[str, str | None, object]]:
        """(name, parent, GpuShare), parents first."""
        return queue_tree(self.spec.queues)

    def leaf_queues(self) -> set[str]:
        return leaf_queues(self.spec.queues)

    def queue_decls(self) -> list[QueueDecl]:
        """The design's queues, parents first, as a stack makes them (stacks/base.py); they keep the
        design's names."""
        leaves = self.leaf_queues()
        return [QueueDecl(n, p, gpu.as_queue_gpu(), leaf=n in leaves, labels={"kailab.io/replay-design": self.name},
                          where=f"{self.path}: queues.{n}")
                for n, p, gpu in self.tree()]


def load_design(path: str | Path) -> Design:
    path = Path(path)
    spec = validate(DesignSpec, read_yaml(path), path)
    if not NAME.match(spec.design) or len(spec.design) > 40:
        raise InputError(path, "design", f"{one_line(spec.design)!r} is not a valid name",
                         "lower-case letters, digits, '-'; at most 40")
    d = Design(path, spec)
    names = [n for n, _, _ in d.tree()]
    for n in names:
        if not NAME.match(n) or len(n) > 40:
            raise InputError(path, f"queues.{one_line(n)}", "not a valid queue name", "lower-case letters, digits, '-'")
        if names.count(n) > 1:
            raise InputError(path, f"queues.{n}", "appears twice in the tree", "rename one")
    return d


def load_designs(text: str) -> list[Design]:
    """`--designs A.yaml,B.yaml`: each loaded and checked; names must differ (they name the columns)."""
    paths = [p.strip() for p in text.split(",") if p.strip()]
    designs = [load_design(p) for p in paths]
    seen: dict[str, Path] = {}
    for d in designs:
        if d.name in seen:
            raise InputError(d.path, "design", f"{d.name!r} is also the name of {seen[d.name]}",
                             "give each design its own name")
        seen[d.name] = d.path
    return designs
