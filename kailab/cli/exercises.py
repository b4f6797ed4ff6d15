"""`kailab run`, `report`, `validate`, `schema`: exercises and their evidence."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .. import versions
from ..errors import KailabError
from ..labs import require_kai_lab
from .base import cli, console, name_option, out
from .fanout import fan_out, on_options
from .top import watch_lab, watch_option


@cli.command()
@click.argument("exercises", nargs=-1, required=True)
@click.option("--evidence", "evidence_root", type=click.Path(file_okay=False), default=None,
              help="Where run directories go (default: evidence/).")
@click.option("--labs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Labs side by side: the named lab and N-1 of its runtime and KAI version, brought down at the end.")
@on_options
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI, help="With --on: the KAI version each pod's lab runs.")
@watch_option
@name_option
def run(exercises, evidence_root, labs, on, kai_version, unit_cpu, unit_memory, namespace_labels, watch, name) -> None:
    """Run exercises (names from exercises/ or paths) against a running lab, or with --on as Jobs on a
    cluster, one lab per pod."""
    from ..exercise.runner import run_exercise
    from ..exercise.load import load_exercise, resolve_exercise

    if watch and (labs > 1 or on):
        raise KailabError("--watch shows one lab: drop --labs and --on, or watch a lab with `kailab top --name LAB`")
    if on:
        sys.exit(_run_on(on, exercises, evidence_root, versions.normalise(kai_version), unit_cpu, unit_memory,
                         namespace_labels))
    paths = [resolve_exercise(e) for e in exercises]
    # every file is validated before anything is applied, or a lab is looked for
    fleets = {load_exercise(p).fleet for p in paths}
    # each exercise's fleet size is checked by its preflight; with no lab, `up` is told the fleet they share
    rec = require_kai_lab(name, "exercises", any_stack=True, up_fleet=next(iter(fleets)) if len(fleets) == 1 else None)
    if labs > 1:  # the same machinery as `make exercises`: pytest-xdist, a lab per worker
        import pytest

        args = [*map(str, paths), "-n", str(labs), "--dist", "worksteal", "--kailab-lab", name,
                "-p", "no:cacheprovider", "-o", "addopts=", "-q"]
        if evidence_root:
            args += ["--kailab-evidence", str(evidence_root)]
        sys.exit(int(pytest.main(args)))
    outcomes = []
    with watch_lab(rec, watch):
        for p in paths:
            console.print(f"[bold]running[/] {p.stem} on lab {name!r} ...")
            outcome = run_exercise(p, rec, Path(evidence_root) if evidence_root else None, raise_refusal=True)
            outcomes.append(outcome)
            report = outcome.report(evidence=False)
            if "\n" in report:  # what went wrong, warnings; the summary below says each verdict and evidence once
                out.print(report, markup=False, highlight=False)
    from ..exercise.summary import print_summary

    print_summary(out, outcomes)
    sys.exit(0 if all(o.verdict == "passed" for o in outcomes) else 1)


def _run_on(kubeconfig, exercises, evidence_root, kai_version, cpu, memory, pairs) -> int:
    """`kailab run --on`: each exercise a Job on the cluster (kailab/fanout), the evidence back here."""
    from ..exercise.load import resolve_exercise
    from ..fanout.unit import exercise_unit
    from ..paths import evidence_dir

    units = [exercise_unit(resolve_exercise(e), i, kai_version) for i, e in enumerate(exercises)]  # all checked first
    _, results = fan_out(units, kubeconfig, Path(evidence_root) if evidence_root else evidence_dir(), cpu, memory, pairs)
    for r in results:
        out.print(f"{Path(r.title).stem}: {r.verdict or 'error'}  " + (f"evidence: {r.evidence}" if r.evidence else r.error),
                  markup=False, highlight=False)
    return 0 if all(r.verdict == "passed" for r in results) else 1


@cli.command()
@click.argument("evidence_dirs", nargs=-1, type=click.Path(exists=True, file_okay=False), metavar="[EVIDENCE_DIR]...")
def report(evidence_dirs) -> None:
    """Write report.html (one self-contained page) for run or trial directories (default: the newest run)."""
    from ..paths import evidence_dir
    from ..report import newest_run, write_report

    dirs = [Path(d) for d in evidence_dirs] or [newest_run(evidence_dir())]
    click.echo(str(write_report(dirs)))


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
def validate(paths) -> None:
    """Validate exercise files (default: every file in exercises/; a fleet file is checked as a fleet)
    without touching a cluster: every problem of every file, one line each naming the file, the field
    and the fix."""
    from ..errors import InputError, raise_all
    from ..exercise.load import load_exercise
    from ..fleet import load_fleet
    from ..paths import exercises_dir

    files = [Path(p) for p in paths] or sorted(exercises_dir().glob("*.yaml"))
    unchecked = None
    problems: list[InputError] = []
    for f in files:
        try:
            if _is_fleet(f):  # a fleet file given by mistake, or on purpose: checked as the fleet it is
                fleet = load_fleet(str(f))
                out.print(f"{f}: ok (a fleet: {fleet.nodes_total} nodes, {fleet.gpus_total} GPUs)")
                continue
            ex = load_exercise(f)
        except InputError as err:  # every problem of every file, a line each, at the end
            problems.append(err)
            continue
        shards = [(i, s.scheduler) for i, s in enumerate(ex.steps) if s.scheduler is not None and s.scheduler.shard]
        if shards:  # a SchedulingShard fragment is KAI's to accept: its operator code renders it
            from .. import toolchain
            from ..stacks.kai import rendered_setting

            unchecked = toolchain.kai_unavailable_reason()
            for i, value in shards if not unchecked else []:
                rendered_setting(f"{f}: step {i + 1}", value, versions.DEFAULT_KAI, "http://prometheus.invalid:9090")
        out.print(f"{f}: ok ({len(ex.steps)} steps, fleet {ex.fleet})")
    if unchecked:
        out.print(f"scheduler.shard fragments not checked against KAI (its source is not here: {unchecked})")
    raise_all(problems)


def _is_fleet(path: Path) -> bool:
    """A file with a fleet's `pools:` and no exercise's `steps:` (unreadable ones are the loader's to name)."""
    from ..inputs import read_yaml

    try:
        data = read_yaml(path)
    except Exception:  # noqa: BLE001 - the exercise loader says what is wrong with it, in one line
        return False
    return isinstance(data, dict) and "pools" in data and "steps" not in data


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the exercise format."""
    from ..exercise.spec import json_schema

    click.echo(json.dumps(json_schema(), indent=2))
