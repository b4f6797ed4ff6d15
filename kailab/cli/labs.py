"""`kailab up`, `down`, `status`, `env`: a lab's life."""

from __future__ import annotations

import json
import os
import sys

import click
from rich.table import Table

from .. import versions
from ..errors import KailabError
from .. import labs
from ..labs import AddsWorkers, ControlsProcesses, LabRecord, LabSpec, MakesLabs, resolve_runtime
from ..runtimes import RUNTIMES, metrics
from ..stacks import STACKS
from .base import cli, console, name_option, out


@cli.command()
@click.option("--runtime", default=lambda: os.environ.get("RUNTIME", "auto"), show_default="auto",
              type=click.Choice(["auto", *RUNTIMES]))
@click.option("--fleet", default=lambda: os.environ.get("FLEET") or "small", show_default="small",
              help="Fleet name (fleets/NAME.yaml) or path to a fleet file.")
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI)
@click.option("--api-port", type=int, default=None, help="kube-apiserver port (default: a free one).")
@click.option("--without-kai", is_flag=True,
              help="Bring up Kubernetes and the fleet only (infrastructure checks; exercises need KAI): "
                   "the same as --scheduler none.")
@click.option("--scheduler", "stack", default="kai", show_default=True,
              help=f"What schedules in the lab, a scheduler stack: {', '.join(STACKS)} "
                   "(kueue, kueue+kai and volcano: binary and kind runtimes).")
@click.option("--without-metrics", is_flag=True,
              help="No Prometheus or kube-state-metrics (binary and kind runtimes; on by default).")
@click.option("--kubeconfig", default=None, help="With --runtime existing: the cluster to adopt.")
@click.option("--dry-run", is_flag=True, help="kind runtime: print the plan (commands and manifests) without running it.")
@click.option("--images", default=lambda: os.environ.get("IMAGES", "auto"), show_default="auto",
              type=click.Choice(["auto", "local", "published"]),
              help="kind: images built here by `kailab tools images` (local), the published ones, or "
                   "auto: local when the whole set is built here.")
@click.option("--termination-grace", default="1s", show_default=True,
              help="The most a deleted pod's grace period lasts on the fleet's nodes before it ends Failed "
                   "(or Succeeded) and goes, as a kubelet ends it: a duration like 500ms, 1s, 30s "
                   "(binary and kind runtimes).")
@click.option("--workers", type=click.IntRange(0, 8), default=0, show_default=True,
              help="Real worker nodes beside the lab's own (kind runtime): where pods that need a kubelet run, "
                   "e.g. `--on` fan-out units with this lab as their host. The lab's own pods stay off them.")
@click.option("--operators", default="", metavar="NAME[@VERSION],...",
              help="Workload operators beside the scheduler, as the lab's components (binary runtime): "
                   "kubeflow (PyTorchJob, TFJob, MPIJob, JAXJob, XGBoostJob), jobset, lws (LeaderWorkerSet), "
                   "ray (RayCluster, RayJob); each at the version KAI pins unless NAME@VERSION.")
@click.option("--stages", default="", metavar="PATH",
              help="KWOK Stages of your own (a file or a folder of them): how your containers behave on the fleet's "
                   "nodes, beside kailab's (binary and kind runtimes).")
@name_option
def up(runtime, fleet, kai_version, api_port, without_kai, stack, without_metrics, kubeconfig, dry_run, images,
       termination_grace, workers, operators, stages, name) -> None:
    """Bring a lab up (a fast no-op when it is already up and healthy)."""
    from ..fleet import load_fleet

    from ..stacks import get_stack

    from ..exercise.spec_base import seconds

    try:
        grace = seconds(termination_grace)
    except ValueError as err:
        raise KailabError(f"--termination-grace: {err}") from None
    chosen = resolve_runtime(runtime)
    if workers and not labs.can(chosen, AddsWorkers):
        raise KailabError(f"--workers {workers}: the {chosen} runtime adds no worker nodes (its pods run on "
                          f"{'the machine itself' if labs.can(chosen, ControlsProcesses) else 'the cluster it has'}); "
                          f"drop --workers, or use {', '.join(n for n in RUNTIMES if labs.can(n, AddsWorkers))}")
    from .. import operators as ops

    wanted = ops.parse(operators)  # an unknown name or a bad version: one line, before anything starts
    if stages:
        from .. import kwok_stages

        kwok_stages.load(stages)  # a bad stage: one line naming its file and field, before anything starts
        if not labs.can(chosen, MakesLabs):
            raise KailabError(f"--stages: the {chosen} runtime plays no stages of kailab's (the cluster's own KWOK "
                              "or kubelets end its pods): use --runtime binary or kind")
    labs.refuse_operators(chosen, wanted)
    stack = "none" if without_kai else stack
    without_kai = not get_stack(stack).kai_inside  # an unknown name: one line naming the choices
    if chosen != "existing":
        load_fleet(fleet)  # bad input fails here, before anything is printed or started
        if not without_kai:
            versions.kai_release(kai_version)
    spec = LabSpec(name=name, runtime=chosen, fleet=fleet, kai_version=kai_version,
                   stack=stack, metrics=not without_metrics, api_port=api_port,
                   kubeconfig=kubeconfig, dry_run=dry_run, images=images, termination_grace=grace, workers=workers,
                   operators=wanted, stages=stages)
    if dry_run:
        out.print(labs.plan(spec), markup=False, highlight=False)
        return
    console.print(f"[bold]kailab up[/]: lab {name!r}, runtime {chosen}, fleet {fleet}, "
                  + (f"KAI {kai_version}" if stack == "kai" else f"scheduler: {stack}"))
    lab = labs.up(spec)
    rec = lab.record
    if lab.runtime.repaired:
        console.print(f"[yellow]lab {rec.name!r} was broken: restarted {', '.join(lab.runtime.repaired)}[/]")
    what = scheduler_words(rec.stack or {"name": stack}, rec.kai_version)
    running = (rec.stack or {}).get("operators") or {}
    what += "".join(f", {n} {v}" for n, v in running.items())
    console.print(f"[green]lab {rec.name!r} is up[/]: {rec.nodes} nodes, {rec.gpus} GPUs, "
                  f"{what}. Use it with: export KUBECONFIG={rec.kubeconfig}")


def scheduler_words(stack: dict, kai_version: str = "") -> str:
    """What schedules in a lab, for people: 'KAI v0.17.0', 'kueue v0.19.2', 'no scheduler'
    (a record from before stacks names none: KAI's version, or nothing)."""
    name = stack.get("name") or ("kai" if kai_version else "none")
    version = stack.get("version") or kai_version or ""
    if name == "none":
        return "no scheduler"
    if name == "kai":
        return f"KAI {version}"
    return f"{name}: {version}" if " " in version else f"{name} {version}".strip()


@cli.command()
@name_option
def down(name) -> None:
    """Stop every process of the lab, free its ports and remove its state."""
    known = LabRecord.load(name) is not None
    stopped = labs.down(name)
    if not known and not stopped:  # nothing of that name: say so (a mistyped name leaves the real lab up)
        others = [r.name for r in _lab_records()]
        console.print(f"no lab named {name!r}: nothing to take down"
                      + (f" (labs here: {', '.join(others)})" if others else ""))
        return
    console.print(f"lab {name!r} is down" + (f" (stopped: {', '.join(stopped)})" if stopped else ""))


def _lab_records() -> list[LabRecord]:
    from ..paths import state_dir

    return [r for p in sorted(state_dir().glob("*")) if p.is_dir() and (r := LabRecord.load(p.name))]


def _all_status(as_json: bool) -> None:
    """Every lab on this machine, one line each (a version trial's vClusters are labs of their own)."""
    infos = [labs.open(r).status() for r in _lab_records()]
    if as_json:
        click.echo(json.dumps(infos, indent=2))
        return
    if not infos:
        out.print("no labs on this machine: bring one up with `kailab up`")
        return
    table = Table(title=f"{len(infos)} lab(s)")
    for col in ("lab", "runtime", "state", "scheduler", "fleet", "components not running"):
        table.add_column(col)
    for info in infos:
        bad = [f"{n} {c['state']}" for n, c in info["components"].items() if c["state"] != "running"]
        table.add_row(info["name"], info["runtime"], info["state"],
                      scheduler_words(info.get("stack") or {}, info["kai_version"]), info["fleet"], "; ".join(bad) or "-")
    out.print(table)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--all", "every", is_flag=True, help="Every lab on this machine, one line each.")
@name_option
def status(as_json, every, name) -> None:
    """Show the lab's components, nodes and GPUs."""
    if every:
        return _all_status(as_json)
    rec = LabRecord.load(name)
    if rec is None:
        if as_json:  # scripts read the state from stdout; people the error line, as on every refusal
            out.print_json(json.dumps({"name": name, "state": "absent"}))
        raise labs.absent(name)
    info = labs.open(rec).status()
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        table = Table(title=f"lab {name!r} ({info['runtime']}): {info['state']}")
        table.add_column("component")
        table.add_column("state")
        table.add_column("pid")
        table.add_column("ports")
        for comp, c in info["components"].items():
            failing = c.get("scrape_failures")  # Prometheus running but failing to scrape
            state = "cannot scrape: " + "; ".join(failing) if failing else c["state"]
            colour = "green" if state == "running" else "red"
            table.add_row(comp, f"[{colour}]{state}[/]", str(c.get("pid") or ""),
                          ", ".join(f"{k}={v}" for k, v in (c.get("ports") or {}).items()))
        out.print(table)
        running = "".join(f", {n} {v}" for n, v in ((info.get("stack") or {}).get("operators") or {}).items())
        out.print(f"{scheduler_words(info.get('stack') or {}, info['kai_version'])}{running}, fleet {info['fleet']}: {info['nodes']}/{info['expected_nodes']} "
                  f"nodes Ready, {info['gpus']}/{info['expected_gpus']} GPUs; kubeconfig {info['kubeconfig']}")
        if info.get("termination_grace_s") is not None:
            out.print(f"a deleted pod ends within {info['termination_grace_s']:g} s (its grace period, at most the lab's termination grace)")
        if info.get("prometheus"):
            out.print(f"Prometheus {info['prometheus']}")
    if info["state"] != "up":  # exit 1, and one line saying why (the JSON or the table says it in full)
        why = why_not_up(info)
        click.echo(f"kailab: lab {name!r} is {info['state']}{': ' + why if why else ''}", err=True)
    sys.exit(0 if info["state"] == "up" else 1)


def why_not_up(info: dict) -> str:
    """What `status` found wrong: components not running, targets Prometheus cannot scrape; a lab broken
    with neither has an API server that does not answer. "" for a lab still starting or failed at `up`."""
    why = [f"{n} {c['state']}" for n, c in info["components"].items() if c["state"] != "running"]
    why += [f"Prometheus cannot scrape {'; '.join(c['scrape_failures'])}"
            for c in info["components"].values() if c.get("scrape_failures")]
    if not why and info["state"] == "broken":
        why = ["its API server does not answer"]
    return "; ".join(why)


@cli.command()
@name_option
def env(name) -> None:
    """Print `export KUBECONFIG=...` for the lab (use: eval "$(kailab env)")."""
    rec = LabRecord.load(name)
    if rec is None:
        raise labs.absent(name)
    click.echo(f"export KUBECONFIG={rec.kubeconfig}")
    if rec.metrics:  # the lab's Prometheus (HTTP API), for curl/promtool or a Grafana data source
        click.echo(f"export KAILAB_PROMETHEUS_URL={metrics.url(rec.ports)}")
