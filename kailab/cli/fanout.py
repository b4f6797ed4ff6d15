"""What every verb that fans out with `--on KUBECONFIG` shares: its options, and running its units
as Jobs there (kailab/fanout) with the lab image loaded where the cluster is a kailab kind lab."""

from __future__ import annotations

from pathlib import Path

import click

from .base import console


def on_options(f):
    """--on, --unit-cpu, --unit-memory, --namespace-label (KAI's version is the verb's own --kai-version)."""
    for opt in reversed([
        click.option("--on", "on", type=click.Path(exists=True, dir_okay=False), default=None, metavar="KUBECONFIG",
                     help="Run each unit as a Job on this cluster instead, in a lab of its own inside its pod (the lab "
                          "image: `kailab tools lab-image`); the evidence comes back here."),
        click.option("--unit-cpu", default=None, help="With --on: each pod's CPU request (default: the unit's, from "
                     "what units of its kind cost where they ran, kailab/data/unit-costs.yaml)."),
        click.option("--unit-memory", default=None, help="With --on: each pod's memory request (default: the unit's, "
                     "as --unit-cpu)."),
        click.option("--namespace-label", "namespace_labels", multiple=True, metavar="KEY=VALUE",
                     help="With --on: a label for the run's namespace, e.g. the Pod Security level the cluster asks "
                          "for pods with two added capabilities; repeatable."),
    ]):
        f = opt(f)
    return f


def labels(pairs) -> dict:
    """--namespace-label KEY=VALUE pairs; a malformed one is one line naming it."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: write it KEY=VALUE", param_hint="--namespace-label")
        out[key] = value
    return out


def fan_out(units, kubeconfig: str, evidence_root: Path, cpu: str, memory: str, pairs):
    """Run the units on the cluster (kailab/variants: side by side there); the FanOut (its record
    folder) and its results."""
    from ..variants import on_cluster

    def say(text: str) -> None:
        console.print(f"[kailab fan-out] {text}", markup=False, highlight=False)

    return on_cluster(units, kubeconfig, evidence_root, cpu, memory, labels(pairs), say)
