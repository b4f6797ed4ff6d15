"""`kailab compare`: the same exercises on several scheduler stacks, one lab per stack, side by side.

A trial whose columns are stacks instead of KAI versions: every lab runs the same fleet and the same
Kubernetes, the exercises run on each (repeated: a difference must hold over every repeat, never a
flake), and the matrix is read back from each run's verdict.json. What the table says is only what
the runs showed; each cell links its evidence. An exercise a stack cannot express is that stack's
`error` verdict with the refusal naming the field - itself a result.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import evidence, toolchain, trial, versions
from .errors import KailabError
from .exercise.load import load_exercise
from .exercise.runner import ExerciseRun
from .lab import LabSpec, lab, with_addon
from .paths import evidence_dir

AXIS = "scheduler stack"
# what a comparison shows and judges: counts, and each queue's typical and long waits. Step timings
# and tail waits are in every run's verdict; with labs side by side on few cores they mostly measure
# the machine's load, not the scheduler
KEY_FIGURES = re.compile(r"^(binds|evictions|pending_peak|gangs_(in)?complete|never_bound\..+|evicted\..+|"
                         r"wait_(p50|p95)_s\..+)$")


def parse_stacks(text: str) -> list[str]:
    from .stacks import STACKS

    out: list[str] = []
    for name in [s.strip() for s in text.split(",") if s.strip()]:
        if name not in STACKS or name == "none":
            raise KailabError(f"--stacks: {name!r} is not a scheduler stack: choose from "
                              f"{', '.join(s for s in STACKS if s != 'none')}")
        if name in out:
            raise KailabError(f"--stacks lists {name} twice")
        out.append(name)
    if len(out) < 2:
        raise KailabError("a comparison needs at least two stacks: --stacks kai,kueue")
    return out


def lab_spec(stack: str, stamp: str, fleet: str, kai_version: str) -> LabSpec:
    from .stacks import get_stack

    return LabSpec(name=f"compare-{stamp}-{stack}".replace("+", "-"), runtime="binary", fleet=fleet,
                   kai_version=kai_version, with_kai=get_stack(stack).kai_inside, stack=stack)


def run_compare(stacks: list[str], exercises: list[str], fleet: str = "small", repeat: int = 2,
                kai_version: str = "", root: Path | None = None, console=None, parallel: int | None = None) -> Path:
    kai_version = versions.kai_release(kai_version or versions.DEFAULT_KAI).version
    the_plan = {**trial.checked_plan(stacks, exercises, fleet), "repeat": repeat, "runtime": "binary",
                "axis": AXIS, "kai_version": kai_version}
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    specs = {s: with_addon(lab_spec(s, stamp, fleet, kai_version)) for s in stacks}
    # builds before any lab, one after the other (each already uses every core)
    toolchain.build_all(toolchain.cluster_recipes(kai_version), console)
    for spec in specs.values():
        toolchain.build_all(spec.addon.recipes(), console)
    out = (root or evidence_dir()) / f"compare-{stamp}"
    out.mkdir(parents=True)
    (out / "plan.json").write_text(json.dumps(the_plan, indent=2))

    def one(stack: str) -> None:
        sdir = out / stack
        sdir.mkdir()
        try:
            with lab(specs[stack]) as rec:
                (sdir / "stack.json").write_text(json.dumps(rec.stack or {"name": stack}, indent=2))
                for i in range(1, repeat + 1):
                    for p in the_plan["exercises"]:
                        ExerciseRun(load_exercise(p), Path(p), rec, sdir / f"run-{i}").run()
        except KailabError as err:
            (sdir / "lab-error.txt").write_text(str(err) + "\n")

    with ThreadPoolExecutor(max_workers=parallel or max(1, min(len(stacks), (os.cpu_count() or 2) // 2))) as pool:
        list(pool.map(one, stacks))
    matrix = build(out)
    (out / evidence.MATRIX).write_text(json.dumps(matrix, indent=2))
    (out / "matrix.md").write_text(markdown(matrix))
    from .report import write_report

    write_report([out])
    return out


def build(compare_dir: Path) -> dict:
    """The trial matrix with stacks as its columns, and per exercise what its file expects of one
    stack only (the legitimate differences, with the file's own why)."""
    matrix = trial.build_matrix(compare_dir)
    for row in matrix["exercises"].values():
        for cell in row.values():
            cell["figures"] = {k: v for k, v in cell["figures"].items() if KEY_FIGURES.match(k)}
            cell["ranges"] = {k: v for k, v in cell["ranges"].items() if KEY_FIGURES.match(k)}
    why = {n: d for n, row in matrix["exercises"].items() if (d := trial.differences(row))}
    matrix["differing"], matrix["why_differing"] = list(why), why
    plan = json.loads((compare_dir / "plan.json").read_text())
    matrix["axis"] = AXIS
    matrix["kai_version"] = plan.get("kai_version")
    per_stack: dict[str, list[dict]] = {}
    for p in plan["exercises"]:
        ex = load_exercise(p)
        for step in ex.steps:
            for e in list(step.expect) + (list(step.stays.that) if step.stays else []):
                if e.stacks:
                    per_stack.setdefault(ex.exercise, []).append(
                        {"step": step.name, "stacks": e.stacks, "why": getattr(e, "why", ""),
                         "expects": e.model_dump(exclude_defaults=True, by_alias=True, exclude={"stacks", "why"})})
        for stack, invs in ex.invariants_on.items():
            per_stack.setdefault(ex.exercise, []).append(
                {"step": "whole run", "stacks": [stack], "why": "", "expects": {"invariants": list(invs)}})
    matrix["per_stack"] = per_stack
    return matrix


def markdown(matrix: dict) -> str:
    text = trial.matrix_markdown(matrix).replace("across these versions", "across these stacks")
    lines = [f"Columns: {AXIS}s on one fleet ({matrix['fleet']}), Kubernetes of KAI {matrix.get('kai_version')}.", "",
             text.rstrip(), ""]
    for name, items in (matrix.get("per_stack") or {}).items():
        lines.append(f"{name}: written per stack")
        for it in items:
            why = f" — {it['why']}" if it["why"] else ""
            lines.append(f"- {', '.join(it['stacks'])} ({it['step']}): {it['expects']}{why}")
        lines.append("")
    return "\n".join(lines)
