"""`kailab compare`: the same exercises on several scheduler stacks, one lab per stack, side by side.

A trial whose columns are stacks instead of KAI versions: every lab runs the same fleet and the same
Kubernetes, the exercises run on each (repeated: a difference must hold over every repeat, never a
flake), and the matrix is read back from each run's verdict.json. What the table says is only what
the runs showed; each cell links its evidence. An exercise a stack cannot express is that stack's
`error` verdict with the refusal naming the field - itself a result. A column may be a stack with its
scheduler's configuration as the design input (`volcano:proportion`, `volcano:spread`, `kai:spread`):
that lab runs every exercise under it, and its stack.json and each run's evidence record it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import evidence, toolchain, trial, versions
from .errors import KailabError
from .exercise.load import load_exercise
from . import labs
from .labs import LabSpec, with_addon
from .paths import evidence_dir
from .runtimes.addon import RunsAsProcesses, need
from .exercise.spec import SchedulerSetting
from .fanout.costs import requests_for
from .fanout.unit import Kind, Unit, UnitResult, cli_command, dns_label, summary_outcome
from .stacks import STACKS, get_stack
from .stacks.base import configurable, scheduler_config_on
from .variants.exercises import exercises_side_by_side, write_matrix_page

AXIS = "scheduler stack"
# what a comparison shows and judges: counts, and each queue's typical and long waits. Step timings
# and tail waits are in every run's verdict; with labs side by side on few cores they mostly measure
# the machine's load, not the scheduler
KEY_FIGURES = re.compile(r"^(binds|evictions|pending_peak|gangs_(in)?complete|never_bound\..+|evicted\..+|"
                         r"wait_(p50|p95)_s\..+)$")


def _known(name: str) -> str:
    if name not in STACKS or name == "none":
        raise KailabError(f"--stacks: {name!r} is not a scheduler stack: choose from "
                          f"{', '.join(s for s in STACKS if s != 'none')}")
    return name


def parse_stacks(text: str) -> list[str]:
    out: list[str] = []
    for name in [s.strip() for s in text.split(",") if s.strip()]:
        if _known(name) in out:
            raise KailabError(f"--stacks lists {name} twice")
        out.append(name)
    if len(out) < 2:
        raise KailabError("a comparison needs at least two stacks: --stacks kai,kueue")
    return out


def parse_columns(text: str, least: int = 2) -> list[str]:
    """`--stacks` of compare: stacks, each optionally with its scheduler's configuration as a design
    input, `STACK:WORD[:WORD]` - `binpack` or `spread` (placement), any other word a configuration
    the stack ships (volcano: capacity, proportion), e.g. volcano,volcano:proportion,volcano:spread."""
    out: list[str] = []
    for column in [c.strip() for c in text.split(",") if c.strip()]:
        _known(column.split(":")[0])
        if column in out:
            raise KailabError(f"--stacks lists {column} twice")
        setting_of(column, f"--stacks {column}")  # what the stack refuses, before any lab
        out.append(column)
    if len(out) < least:
        raise KailabError("a comparison needs at least two stacks: --stacks kai,kueue (or volcano,volcano:proportion)")
    return out


def setting_of(column: str, where: str):
    """A column's SchedulerSetting (None: the stack as its lab starts), as the exercise format says it."""
    words = column.split(":")[1:]
    if not words:
        return None
    placements = [w for w in words if w in ("binpack", "spread")]
    named = [w for w in words if w not in ("binpack", "spread")]
    if len(placements) > 1 or len(named) > 1 or not all(words):
        raise KailabError(f"{where}: give at most one placement (binpack or spread) and one configuration name")
    value = SchedulerSetting(placement=placements[0] if placements else "binpack", volcano=named[0] if named else None)

    stack = configurable(get_stack(column.split(":")[0]), where)  # one line when it has none
    if scheduler_config_on(stack, labs.runtime("binary")) is None:  # compare's labs are binary
        raise KailabError(f"{where}: the {stack.title} stack has no scheduler configuration to change")
    stack.scheduler_setting(_Record(), value, None, where)  # its one-line refusal
    return value


class _Record:
    """What a column's check needs of its lab (KAI renders with the lab's KAI version)."""

    kai_version = versions.DEFAULT_KAI


def lab_spec(column: str, stamp: str, fleet: str, kai_version: str, operators: tuple[str, ...] = ()) -> LabSpec:
    """A column's lab; with the workload operators the exercises name (every stack's lab has them, so a
    stack that cannot run a kind refuses it by name rather than for want of its operator)."""
    stack = column.split(":")[0]
    return LabSpec(name=f"compare-{stamp}-{column}".replace("+", "-").replace(":", "-"), runtime="binary",
                   fleet=fleet, kai_version=kai_version, stack=stack,
                   operators=operators)


def run_compare(stacks: list[str], exercises: list[str], fleet: str = "small", repeat: int = 2,
                kai_version: str = "", root: Path | None = None, console=None, parallel: int | None = None) -> Path:
    kai_version = versions.kai_release(kai_version or versions.DEFAULT_KAI).version
    the_plan = {**trial.checked_plan(stacks, exercises, fleet), "repeat": repeat, "runtime": "binary",
                "axis": AXIS, "kai_version": kai_version}
    wanted = tuple(dict.fromkeys(o for p in the_plan["exercises"] for o in load_exercise(p).operators))
    out = evidence.new_folder(root or evidence_dir(), "compare")  # two in one second: compare-<time>-2
    stamp = evidence.stamp_of(out, "compare")  # its labs' names: unique with the folder
    try:
        specs = {s: with_addon(lab_spec(s, stamp, fleet, kai_version, wanted)) for s in stacks}
        # builds before any lab, one after the other (each already uses every core)
        toolchain.build_all(toolchain.cluster_recipes(kai_version), console)
        for spec in specs.values():
            toolchain.build_all(need(spec.addon, RunsAsProcesses, "binary").recipes(), console)
    except BaseException:
        out.rmdir()  # nothing ran: no empty folder left behind
        raise
    (out / "plan.json").write_text(json.dumps(the_plan, indent=2))

    def prepare(stack: str, lab, sdir: Path):
        value = setting_of(stack, f"--stacks {stack}")
        setting = value and lab.scheduler_setting(value, None, f"--stacks {stack}")
        (sdir / "stack.json").write_text(json.dumps({**(lab.record.stack or {"name": stack}), "column": stack,
                                                     "configuration": setting and setting.conf}, indent=2))
        # before every run: a run's own `scheduler:` step ends on the lab's default
        return (lambda: lab.configure_scheduler(setting)) if setting is not None else None

    exercises_side_by_side(out, specs, the_plan["exercises"], repeat, parallel, prepare)
    write_outputs(out)
    return out


def write_outputs(out: Path) -> dict:
    """matrix.json, matrix.md and the page from what the folder holds (its columns ran here or as units)."""
    matrix = build(out)
    return write_matrix_page(out, matrix, markdown(matrix))


# ---- `kailab compare --on`: a unit per column, each a `kailab compare --part` of that column in its pod
# a column's lab runs exercises one after another, as a trial's version does: its measured cost
FANOUT_KIND = Kind("compare", summary_outcome(evidence.MATRIX, ok=trial.all_passed), own_folder=True)


def compare_units(columns: list[str], exercises: list[str], fleet: str, repeat: int, kai_version: str = "") -> list[Unit]:
    """One unit per column, checked first as `kailab compare` checks them; a column of another stack than
    KAI is refused in one line (the lab image holds KAI's binaries only)."""
    others = sorted({c.split(":")[0] for c in columns} - {"kai"})
    if others:
        raise KailabError(f"--stacks {','.join(others)} with --on: the lab image runs KAI only; compare those "
                          "stacks without --on (on this machine's labs), or KAI's configurations (kai,kai:spread) with it")
    kai_version = versions.kai_release(kai_version or versions.DEFAULT_KAI).version
    files, shipped = trial.exercise_files(trial.checked_plan(columns, exercises, fleet))
    return [Unit(name=f"u{i:02d}-{dns_label(c)}", title=f"compare {c}", kind=FANOUT_KIND, files=files,
                 command=cli_command("compare", "--part", "--stacks", c, "--exercises", shipped, "--fleet", fleet,
                                     "--repeat", repeat, "--kai-version", kai_version),
                 kai_version=kai_version, env=(("KAILAB_FLEETS", "/unit/fleets"),), part=(c,),
                 requests=requests_for("trial")) for i, c in enumerate(columns)]


def merge_fanned_out(columns: list[str], exercises: list[str], fleet: str, repeat: int, kai_version: str,
                     units: list[Unit], results: list[UnitResult], record_dir: Path, root: Path | None = None) -> Path:
    """evidence/compare-<time>/ as a local compare writes it: the plan (the fan-out's record named), each
    column's folder from its unit, a unit that brought nothing back its column's lab error; the matrix and
    the page read from the runs' verdicts."""
    kai_version = versions.kai_release(kai_version or versions.DEFAULT_KAI).version
    plan = {**trial.checked_plan(columns, exercises, fleet), "repeat": repeat, "runtime": "binary", "axis": AXIS,
            "kai_version": kai_version, "fanout": str(record_dir)}
    return trial.bring_together("compare", plan, units, results, root, write_outputs)


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
    # a column that is a stack with its scheduler's configuration: what that lab ran (its stack.json)
    matrix["configurations"] = {c: conf for c in plan["versions"] if ":" in c
                                and (conf := _stack_json(compare_dir / c).get("configuration"))}
    return matrix


def _stack_json(column_dir: Path) -> dict:
    try:
        return json.loads((column_dir / "stack.json").read_text())
    except (OSError, ValueError):
        return {}


def markdown(matrix: dict) -> str:
    text = trial.matrix_markdown(matrix).replace("across these versions", "across these stacks")
    lines = [f"Columns: {AXIS}s on one fleet ({matrix['fleet']}), Kubernetes of KAI {matrix.get('kai_version')}.", "",
             text.rstrip(), ""]
    for column, conf in (matrix.get("configurations") or {}).items():
        plugins = [p["name"] for t in conf.get("tiers") or [] for p in t.get("plugins") or []]
        actions = conf.get("actions") or []
        actions = actions if isinstance(actions, str) else ", ".join(actions)  # KAI's: one string, as Volcano's file
        lines.append(f"{column} ran its scheduler with actions {actions}; "
                     f"plugins {', '.join(plugins)}")
    if matrix.get("configurations"):
        lines.append("")
    for name, items in (matrix.get("per_stack") or {}).items():
        lines.append(f"{name}: written per stack")
        for it in items:
            why = f" — {it['why']}" if it["why"] else ""
            lines.append(f"- {', '.join(it['stacks'])} ({it['step']}): {it['expects']}{why}")
        lines.append("")
    return "\n".join(lines)
