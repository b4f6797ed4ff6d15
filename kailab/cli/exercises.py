"""`kailab run`, `report`, `validate`, `schema`: exercises and their evidence."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .. import versions
from ..lab import require_kai_lab
from .base import cli, console, name_option, out


@cli.command()
@click.argument("exercises", nargs=-1, required=True)
@click.option("--evidence", "evidence_root", type=click.Path(file_okay=False), default=None,
              help="Where run directories go (default: evidence/).")
@click.option("--labs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Labs side by side: the named lab and N-1 of its runtime and KAI version, brought down at the end.")
@click.option("--on", "on", type=click.Path(exists=True, dir_okay=False), default=None, metavar="KUBECONFIG",
              help="Run each exercise as a Job on this cluster instead, in a lab of its own inside its pod (the lab "
                   "image: `kailab tools lab-image`); the evidence comes back here.")
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI, help="With --on: the KAI version each pod's lab runs.")
@click.option("--unit-cpu", default="1", show_default=True, help="With --on: each pod's CPU request.")
@click.option("--unit-memory", default="2Gi", show_default=True, help="With --on: each pod's memory request.")
@click.option("--namespace-label", "namespace_labels", multiple=True, metavar="KEY=VALUE",
              help="With --on: a label for the run's namespace, e.g. the Pod Security level the cluster asks "
                   "for pods with two added capabilities; repeatable.")
@name_option
def run(exercises, evidence_root, labs, on, kai_version, unit_cpu, unit_memory, namespace_labels, name) -> None:
    """Run exercises (names from exercises/ or paths) against a running lab, or with --on as Jobs on a
    cluster, one lab per pod."""
    from ..exercise.runner import resolve_exercise, run_exercise
    from ..exercise.load import load_exercise

    if on:
        labels = _labels(namespace_labels)
        sys.exit(_run_on(on, exercises, evidence_root, versions.normalise(kai_version), unit_cpu, unit_memory, labels))
    rec = require_kai_lab(name, "exercises", any_stack=True)  # each exercise's fleet size is checked by its preflight
    paths = [resolve_exercise(e) for e in exercises]
    for p in paths:  # every file is validated before anything is applied
        load_exercise(p)
    if labs > 1:  # the same machinery as `make exercises`: pytest-xdist, a lab per worker
        import pytest

        args = [*map(str, paths), "-n", str(labs), "--dist", "worksteal", "--kailab-lab", name,
                "-p", "no:cacheprovider", "-o", "addopts=", "-q"]
        if evidence_root:
            args += ["--kailab-evidence", str(evidence_root)]
        sys.exit(int(pytest.main(args)))
    outcomes = []
    for p in paths:
        console.print(f"[bold]running[/] {p.stem} on lab {name!r} ...")
        outcome = run_exercise(p, rec, Path(evidence_root) if evidence_root else None)
        outcomes.append(outcome)
        out.print(outcome.report(), markup=False, highlight=False)
    from ..exercise.summary import print_summary

    print_summary(out, outcomes)
    sys.exit(0 if all(o.verdict == "passed" for o in outcomes) else 1)


def _labels(pairs) -> dict:
    """--namespace-label KEY=VALUE pairs; a malformed one is one line naming it."""
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: write it KEY=VALUE", param_hint="--namespace-label")
        labels[key] = value
    return labels


def _run_on(kubeconfig, exercises, evidence_root, kai_version, cpu, memory, labels) -> int:
    """`kailab run --on`: each exercise a Job on the cluster (kailab/fanout), the evidence back here."""
    from ..exercise.runner import resolve_exercise
    from ..fanout.run import FanOut, load_image_into_kind
    from ..fanout.unit import exercise_unit
    from ..images.lab import LabImage
    from ..paths import evidence_dir

    units = [exercise_unit(resolve_exercise(e), i, kai_version) for i, e in enumerate(exercises)]  # all checked first
    image = LabImage(kai_version).ref

    def say(text: str) -> None:
        console.print(f"[kailab fan-out] {text}", markup=False, highlight=False)

    if not load_image_into_kind(kubeconfig, image, say):
        say(f"{kubeconfig} is not a kailab kind lab: its nodes pull {image} (push it to a registry they reach)")
    results = FanOut(units, kubeconfig, image, Path(evidence_root) if evidence_root else evidence_dir(),
                     cpu=cpu, memory=memory, namespace_labels=labels, say=say).run()
    for r in results:
        out.print(f"{Path(r.exercise).stem}: {r.verdict or 'error'}  " + (f"evidence: {r.evidence}" if r.evidence else r.error),
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
    """Validate exercise files (default: every file in exercises/) without touching a cluster."""
    from ..exercise.load import load_exercise
    from ..paths import exercises_dir

    files = [Path(p) for p in paths] or sorted(exercises_dir().glob("*.yaml"))
    unchecked = None
    for f in files:
        ex = load_exercise(f)
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


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the exercise format."""
    from ..exercise.spec import json_schema

    click.echo(json.dumps(json_schema(), indent=2))
