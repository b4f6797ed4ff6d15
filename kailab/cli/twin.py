"""`kailab twin`: a lab made from KAI's own scheduler snapshot of a cluster (kailab.twin)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .. import versions
from ..errors import KailabError
from .base import cli, console, option, out
from .fanout import fan_out, on_options


@cli.command()
@click.argument("snapshot", type=click.Path(dir_okay=False))
@click.option("--name", default="twin", show_default=True, help="The twin's lab name.")
@click.option("--kai-version", default=versions.DEFAULT_KAI, show_default=True,
              help="The KAI version that decides the twin's pending work.")
@click.option("--anonymise", is_flag=True,
              help="Rename namespaces, pods, nodes, queues and PodGroups consistently (a short hash of each).")
@click.option("--settle", type=click.FloatRange(1, 3600), default=30.0, show_default=True,
              help="Seconds with nothing changing before KAI counts as settled.")
@click.option("--timeout", type=click.FloatRange(10, 86400), default=600.0, show_default=True,
              help="Seconds at most for the state to go in, and for KAI to settle.")
@option("--kai-versions", "kai_versions", old="--versions", default="", metavar="vA,vB",
              help="Twins side by side, one per KAI version, and what they decided differently.")
@click.option("--designs", default="", metavar="A.yaml,B.yaml",
              help="Twins side by side: the snapshot as it was (as-is) and one per design (a change to queues "
                   "or the scheduler, docs/twin.md), on --kai-version.")
@click.option("--keep", is_flag=True, help="Side by side: leave the twins up (they are taken down by default).")
@click.option("--against-snapshot-tool", "against_tool", is_flag=True,
              help="Also run KAI's own cmd/snapshot-tool (same version, built from the registered KAI source) on "
                   "the twin's state, and compare its one session with the twin's first.")
@click.option("--part", default=None, hidden=True, metavar="LABEL",
              help="One twin of a side-by-side fanned out with --on: what each pod runs (the twin named LABEL).")
@on_options
def twin(snapshot, name, kai_version, anonymise, settle, timeout, kai_versions, designs, keep, against_tool, part,
         on, unit_cpu, unit_memory, namespace_labels) -> None:
    """Bring up a twin of the cluster a KAI scheduler snapshot (`/get-snapshot`'s zip, or its
    snapshot.json) was taken from: its nodes as the fleet, its queues, PodGroups and pods as they were
    (bound pods on their nodes), KAI on the snapshot's configuration deciding the pending work. Only what
    scheduling needs enters the lab. The twin stays up (`kailab down --name NAME`). With --kai-versions or
    --designs, twins side by side and the pods they decided differently."""
    from ..labs import LabRecord
    from ..twin.run import make_twin

    if on or part:
        if not (kai_versions or designs):
            raise KailabError("--on runs twins side by side, each a Job there: give --kai-versions vA,vB or --designs "
                              "A.yaml,… (a single twin stays up here: leave out --on)")
        if keep or against_tool:
            raise KailabError("--on: each twin's lab lives and ends in its pod, and the lab image holds no snapshot "
                              "tool: leave out --keep and --against-snapshot-tool")
    if kai_versions or designs:
        _side_by_side(snapshot, name, kai_version, anonymise, settle, timeout, kai_versions, designs, keep, against_tool,
                      part, (on, unit_cpu, unit_memory, namespace_labels))
        return

    existed = LabRecord.load(name) is not None
    try:
        where = make_twin(snapshot, name, versions.normalise(kai_version), anonymise, settle, timeout,
                          echo=lambda text: console.print(text, markup=False, highlight=False), against_tool=against_tool)
    except BaseException:
        if not existed and LabRecord.load(name) is not None:
            console.print(f"the twin's lab {name!r} is left up for a look: `kailab down --name {name}`")
        raise
    out.print((where / "twin.md").read_text(), markup=False, highlight=False)
    out.print(f"evidence: {where}; the twin is up: `eval \"$(kailab env --name {name})\"`, then kubectl; "
              f"`kailab down --name {name}` when done", markup=False, highlight=False)
    record = json.loads((Path(where) / "twin.json").read_text())
    if record["round_trip"]["differences"]:
        raise KailabError(f"the twin's state differs from the snapshot's (before KAI acted): {where}/twin.md")


def _side_by_side(snapshot, name, kai_version, anonymise, settle, timeout, kai_versions, designs, keep,
                  against_tool, part, on_args) -> None:
    from ..twin.compare import run_side_by_side, variants_for
    from ..twin.design import load_twin_design

    chosen = [versions.normalise(v.strip()) for v in kai_versions.split(",") if v.strip()] or \
        [versions.normalise(kai_version)]
    variants = variants_for(chosen, [load_twin_design(p.strip()) for p in designs.split(",") if p.strip()])
    echo = lambda text: console.print(text, markup=False, highlight=False)  # noqa: E731
    if part is not None:  # one twin of the side-by-side, in a pod (the others are pods of their own)
        variants = [v for v in variants if v.label == part]
        if not variants:
            raise KailabError(f"--part {part}: no such twin in this side-by-side")
    if on_args[0]:
        where = _twins_on(snapshot, variants, name, anonymise, settle, timeout, *on_args, echo=echo)
    else:
        where = run_side_by_side(snapshot, variants, name, anonymise, settle, timeout, keep_up=keep, echo=echo,
                                 against_tool=against_tool)
    out.print((where / "comparison.md").read_text(), markup=False, highlight=False)
    out.print(f"evidence: {where}" + (" (the twins are up: `kailab down --name NAME` each)" if keep else ""),
              markup=False, highlight=False)
    comparison = json.loads((where / "comparison.json").read_text())
    if not comparison["ok"]:
        raise KailabError(f"a twin could not finish: {where}/comparison.md")


def _twins_on(snapshot, variants, name, anonymise, settle, timeout, kubeconfig, cpu, memory, pairs, echo) -> Path:
    """`kailab twin --on`: a Job per twin (kailab/twin/units.py), brought together here into one comparison."""
    from ..paths import evidence_dir
    from ..twin.units import merge_units, twin_units

    units = twin_units(snapshot, variants, name, anonymise, settle, timeout)  # checked as here, before the cluster
    run, results = fan_out(units, kubeconfig, evidence_dir(), cpu, memory, pairs)
    for r in results:
        out.print(f"{r.title}: {r.verdict or 'error'}  " + (f"evidence: {r.evidence}" if r.evidence else r.error),
                  markup=False, highlight=False)
    return merge_units(snapshot, units, results, run.record_dir, echo)
