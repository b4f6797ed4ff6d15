"""A fill file: the fill experiment as data, so `pytest exercises/` and CI run one like an exercise.

    fill: alibaba-1of8
    title: How full KAI fills Alibaba's GPU cluster, binpack against spread
    trace: alibaba-gpu-2023        # a registered public trace (`kailab trace source alibaba-gpu-2023 PATH`)
    tasks: default                 # its task list
    sample: 8                      # 1/8 of each node pool and a seeded 1/8 of the tasks
    sampleSeed: 1
    seeds: [1]                     # one fill per seed per design
    step: 0.02                     # most GPU workload per step, x the fleet's GPUs
    designs: [binpack, spread]     # the import's designs, a lab each, side by side
    expect:                        # figures: the median over the seeds
      - binpack/arrived-100.allocated_pct >= 85
      - binpack/arrived-100.allocated_pct > spread/arrived-100.allocated_pct

The trace's data is never in the project: the file names the registered trace, and every run
imports it into a folder of its own. Not registered: one line naming the command that registers it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from .. import versions
from ..errors import InputError, KailabError
from ..exercise.spec_base import Strict
from ..inputs import read_yaml, validate
from . import alibaba
from .design import load_designs
from .figures import Expectation
from .fill import FillPlan
from .trace import load_trace

PLACEMENTS = alibaba.PLACEMENTS


class FillFile(Strict):
    fill: str
    title: str = ""
    concept: str = ""
    trace: str = Field(description="a registered public trace: alibaba-gpu-2023")
    tasks: str = "default"
    sample: int = Field(1, ge=1, le=1000)
    sample_seed: int = Field(1, alias="sampleSeed")
    seeds: list[int] = Field(min_length=1)
    step: float = Field(0.01, gt=0, le=0.5)
    target: float = Field(1.3, gt=0, le=5)
    designs: list[str] = Field(list(PLACEMENTS), min_length=1)
    expect: list[str] = []


def load_fill(path: str | Path) -> FillFile:
    """The file, checked before any lab: fields, designs, the expectations' syntax."""
    path = Path(path)
    spec = validate(FillFile, read_yaml(path), path)
    if spec.trace != alibaba.FORMAT:
        raise InputError(path, "trace", f"{spec.trace!r} is not a registered public trace's name",
                         f"write {alibaba.FORMAT}")
    for i, d in enumerate(spec.designs):
        if d not in PLACEMENTS:
            raise InputError(path, f"designs[{i}]", f"{d!r} is not a design the import writes",
                             f"one of {', '.join(PLACEMENTS)}")
    for i, text in enumerate(spec.expect):
        try:
            Expectation(text)
        except ValueError as err:
            raise InputError(path, f"expect[{i}]", str(err).removeprefix(f"--expect {text!r}: ")) from None
    return spec


def fill_plan(spec: FillFile, workdir: Path) -> FillPlan:
    """The registered trace imported into `workdir` (a KailabError naming `kailab trace source` when
    none is registered) and the plan that fills its fleet."""
    if alibaba.registered() is None:
        raise KailabError(alibaba.not_registered())
    files = alibaba.import_trace(alibaba.mirror(), workdir, tasks=spec.tasks, sample=spec.sample,
                                 seed=spec.sample_seed)["files"]
    return FillPlan(trace=load_trace(files["trace"]), designs=load_designs(",".join(files[d] for d in spec.designs)),
                    fleet=files["fleet"], seeds=spec.seeds, target=spec.target, step=spec.step,
                    kai_version=versions.DEFAULT_KAI, expectations=list(spec.expect))
