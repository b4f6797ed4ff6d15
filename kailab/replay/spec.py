"""A replay file: a replay as data, so `pytest exercises/` and CI run one like an exercise.

    replay: quota-what-if
    title: More quota, shorter waits
    fleet: small
    trace: quota-what-if.csv                 # paths relative to this file
    designs: [designs/team-a-first.yaml, designs/team-b-first.yaml]
    compress: 30
    repeat: 1
    stacks: [kai, kueue]                     # or designs side by side, or kaiVersions: one axis at a time
    wholeGpus: true                          # fractions asked as whole GPUs, for a stack that counts whole GPUs
    expect:
      - team-a-first/team-a.wait_mean < team-b-first/team-a.wait_mean
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from .. import versions
from ..errors import InputError
from ..exercise.spec import Strict
from ..inputs import read_yaml, validate
from . import figures as figs
from .design import load_design
from .session import Plan, check, variants_for
from .trace import load_trace, whole_gpus
from ..stacks import STACKS


class ReplayFile(Strict):
    replay: str
    title: str = ""
    concept: str = ""
    fleet: str = "small"
    trace: str
    designs: list[str] = Field(min_length=1)
    kai_versions: list[str] = Field([], alias="kaiVersions")
    stacks: list[str] = Field([], description="scheduler stacks to compare one design on (kai, kueue, kueue+kai, volcano)")
    whole_gpus: bool = Field(False, alias="wholeGpus",
                             description="each job of GPU fractions asks one whole GPU, on every variant")
    compress: float = Field(12.0, gt=0)
    repeat: int = Field(1, ge=1, le=20)
    timeout_s: float | None = Field(None, gt=0, alias="timeoutSeconds")
    expect: list[str] = []


def load_replay(path: str | Path) -> tuple[ReplayFile, Plan]:
    path = Path(path)
    spec = validate(ReplayFile, read_yaml(path), path)
    here = path.parent
    trace = load_trace(here / spec.trace)
    if spec.whole_gpus:
        trace = whole_gpus(trace)
    designs = []
    for i, d in enumerate(spec.designs):
        if not (here / d).is_file():
            raise InputError(path, f"designs[{i}]", f"{d}: no such file", "paths are relative to the replay file")
        designs.append(load_design(here / d))
    for i, text in enumerate(spec.expect):
        try:
            figs.Expectation(text)
        except ValueError as err:
            raise InputError(path, f"expect[{i}]", str(err).removeprefix(f"--expect {text!r}: ")) from None
    kai_versions = [versions.kai_release(v).version for v in spec.kai_versions]

    for i, name in enumerate(spec.stacks):
        if name not in STACKS or name == "none":
            raise InputError(path, f"stacks[{i}]", f"{name!r} is not a scheduler stack",
                             f"choose from {', '.join(s for s in STACKS if s != 'none')}")
    try:
        variants = variants_for(designs, kai_versions, spec.stacks or None)
    except Exception as err:  # noqa: BLE001 - one line naming the file
        raise InputError(path, "designs", str(err)) from None
    plan = Plan(trace=trace, variants=variants, fleet=spec.fleet, compress=spec.compress, repeat=spec.repeat,
                timeout_s=spec.timeout_s, expectations=list(spec.expect), whole_gpus=spec.whole_gpus)
    check(plan, whole_gpus_hint=f"set wholeGpus: true in {path}")
    return spec, plan
