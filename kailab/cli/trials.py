"""`kailab trial`, `replay`, `trace …`: versions and queue designs compared on labs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .. import versions
from ..errors import KailabError
from ..paths import evidence_dir
from ..runtimes import RUNTIMES
from .base import cli, console, option, out
from .fanout import fan_out, on_options


@cli.command()
@option("--kai-versions", "version_text", old="--versions", required=True,
        help="Comma-separated KAI versions, e.g. v0.16.8,v0.17.0")
@click.option("--exercises", default="quota,borrow,reclaim,gang", show_default=True,
              help="Comma-separated exercise names or paths.")
@click.option("--fleet", default="small", show_default=True)
@option("--labs", "parallel", old="--parallel", type=click.IntRange(min=1), default=None,
        help="Labs at once (default: cores/2, at least 1).")
@click.option("--runtime", type=click.Choice(list(RUNTIMES)), default="binary", show_default=True,
              help="binary: one local lab per version; kind: one vCluster per version on a kind host made for "
                   "the trial (Docker); existing: one vCluster per version on the cluster --kubeconfig names.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="With --runtime existing: the host cluster the vClusters go in (KWOK there; left as it was "
                   "found). Not --on, which runs each version in a pod of a cluster, a binary lab in each.")
@click.option("--blast/--no-blast", default=True, show_default=True,
              help="vCluster trials: break the first version's KAI, run the second's exercises once more.")
@click.option("--against-binary/--no-against-binary", default=True, show_default=True,
              help="vCluster trials: then run the same exercises on a binary lab per version, and say where a "
                   "verdict in the vCluster is not the version's own.")
@click.option("--dry-run", is_flag=True, help="With --runtime kind|existing: print every command and file, run nothing.")
@click.option("--repeat", type=click.IntRange(1, 20), default=2, show_default=True,
              help="Runs of each exercise per version: a difference must hold over repeats, not be a flake.")
@click.option("--part", is_flag=True, hidden=True,
              help="One version of a trial fanned out with --on: what each pod runs (one version is allowed).")
@on_options
def trial(version_text, exercises, fleet, parallel, runtime, kubeconfig, blast, against_binary, dry_run,
          repeat, part, on, unit_cpu, unit_memory, namespace_labels) -> None:
    """Run the same exercises against several KAI versions side by side; write a matrix. With --on,
    each version is a Job on that cluster (a binary lab in its pod), brought together here."""
    from .. import trial as trial_mod

    version_list = trial_mod.parse_versions(version_text, least=1 if part else 2)  # fails before any lab starts
    names = [e.strip() for e in exercises.split(",") if e.strip()]
    if on:
        if runtime != "binary" or kubeconfig or dry_run:
            raise KailabError("--on runs each version on a binary lab in a pod of that cluster: leave out "
                              "--runtime, --kubeconfig and --dry-run")
        trial_dir = _trial_on(version_list, names, fleet, repeat, on, unit_cpu, unit_memory, namespace_labels)
        matrix = json.loads((trial_dir / "matrix.json").read_text())
        out.print(trial_mod.matrix_markdown(matrix), markup=False, highlight=False)
        out.print(f"trial evidence: {trial_dir}")
        sys.exit(0 if trial_mod.all_passed(matrix) else 1)
    if kubeconfig and runtime != "existing":
        raise KailabError("--kubeconfig names the host of --runtime existing: add --runtime existing")
    if runtime == "existing" and not kubeconfig:
        raise KailabError("--runtime existing needs --kubeconfig PATH: the host cluster the vClusters go in")
    if dry_run:
        if runtime == "binary":
            raise KailabError("--dry-run needs --runtime kind or existing (the binary runtime has no plan to print)")
        out.print(trial_mod.dry_run_kind(version_list, names, fleet, runtime, kubeconfig, against_binary), markup=False,
                  highlight=False)
        return
    trial_dir = trial_mod.run_trial(version_list, names, fleet, parallel, console=console, repeat=repeat,
                                    runtime=runtime, kubeconfig=kubeconfig, blast=blast,
                                    against_binary=against_binary and runtime != "binary")
    from .. import evidence

    matrix = json.loads((trial_dir / evidence.MATRIX).read_text())
    out.print(trial_mod.matrix_markdown(matrix), markup=False, highlight=False)
    out.print(f"trial evidence: {trial_dir}")
    sys.exit(0 if trial_mod.all_passed(matrix) else 1)


@cli.command()
@click.option("--stacks", "stack_text", default="kai,kueue", show_default=True,
              help="Comma-separated scheduler stacks, one lab each, side by side; a stack may carry its "
                   "scheduler's configuration as STACK:WORD (binpack, spread, or a configuration it ships: "
                   "volcano:proportion).")
@click.option("--exercises", default="quota,borrow,reclaim,gang,starvation", show_default=True,
              help="Comma-separated exercise names or paths.")
@click.option("--fleet", default="small", show_default=True)
@click.option("--kai-version", default="", help="KAI's version (the kai stack) and the Kubernetes every lab runs.")
@click.option("--repeat", type=click.IntRange(1, 20), default=2, show_default=True,
              help="Runs of each exercise per stack: a difference must hold over repeats, not be a flake.")
@option("--labs", "parallel", old="--parallel", type=click.IntRange(min=1), default=None,
        help="Labs at once (default: cores/2, at least 1).")
@click.option("--part", is_flag=True, hidden=True,
              help="One column of a comparison fanned out with --on: what each pod runs (one column is allowed).")
@on_options
def compare(stack_text, exercises, fleet, kai_version, repeat, parallel, part, on, unit_cpu, unit_memory,
            namespace_labels) -> None:
    """Run the same exercises on several scheduler stacks side by side; write a matrix and report. With
    --on, each column is a Job on that cluster (a binary lab in its pod: KAI's columns only), brought
    together here."""
    from .. import compare as compare_mod
    from .. import evidence

    if on and parallel:  # before the columns are read: a flag's misuse needs no KAI source to be named
        raise KailabError("--on runs every column at once, each in a pod of its own: leave out --labs")
    stacks = compare_mod.parse_columns(stack_text, least=1 if part else 2)  # fails before any lab starts
    names = [e.strip() for e in exercises.split(",") if e.strip()]
    if on:
        units = compare_mod.compare_units(stacks, names, fleet, repeat, kai_version)  # checked before the cluster
        run, results = fan_out(units, on, evidence_dir(), unit_cpu, unit_memory, namespace_labels)
        _said(results)
        out_dir = compare_mod.merge_fanned_out(stacks, names, fleet, repeat, kai_version, units, results, run.record_dir)
    else:
        out_dir = compare_mod.run_compare(stacks, names, fleet, repeat, kai_version, console=console, parallel=parallel)
    matrix = json.loads((out_dir / evidence.MATRIX).read_text())
    out.print(compare_mod.markdown(matrix), markup=False, highlight=False)
    out.print(f"compare evidence: {out_dir}")
    ok = all(c["runs"] and c["passed"] == c["runs"] for row in matrix["exercises"].values() for c in row.values())
    sys.exit(0 if ok else 1)


@cli.command()
@click.argument("trace_file", metavar="TRACE")
@click.option("--designs", "design_text", required=True,
              help="Comma-separated queue design files (one lab each, side by side); one file with --kai-versions.")
@click.option("--kai-versions", "version_text", default="", help="Comma-separated KAI versions to compare one design on.")
@click.option("--fleet", default="small", show_default=True)
@click.option("--compress", type=float, default=12.0, show_default=True,
              help="Trace seconds per wall second (12: an hour of trace in 5 minutes).")
@click.option("--repeat", type=click.IntRange(1, 20), default=2, show_default=True,
              help="Runs per design: a figure moved only if its ranges over the runs do not overlap.")
@click.option("--expect", "expectations", multiple=True,
              help="e.g. 'team-a.wait_p99 <= 60s' or 'big/team-a.wait_p95 < small/team-a.wait_p95'; repeatable.")
@click.option("--timeout", type=float, default=None, help="Wall seconds a run may take (default: twice the compressed span + 2 min).")
@click.option("--runtime", type=click.Choice(["binary", "kind"]), default="binary", show_default=True)
@click.option("--labs", "labs_at_once", type=click.IntRange(1, 8), default=None,
              help="Labs at once (default: every design side by side); 1 plays the designs one after another, "
                   "each alone on the machine (large fleets on few cores).")
@click.option("--stacks", "stack_text", default="",
              help="Comma-separated scheduler stacks to compare one design on (e.g. kai,kueue), a lab each.")
@click.option("--whole-gpus", is_flag=True,
              help="Each job of GPU fractions asks one whole GPU instead, on every variant (for a stack that "
                   "counts whole GPUs).")
@click.option("--window", "window_text", default="",
              help="Play only the jobs arriving in FROM:TO of trace time (e.g. 148d:149d; units s m h d), each cut "
                   "at TO; what runs at FROM is left out and counted.")
@on_options
@click.option("--watch", is_flag=True,
              help="`kailab top`'s picture of each variant's lab while it runs, below the replay's lines (not with --on).")
def replay(trace_file, design_text, version_text, fleet, compress, repeat, expectations, timeout, runtime,
           labs_at_once, stack_text, whole_gpus, window_text, on, unit_cpu, unit_memory, namespace_labels, watch) -> None:
    """Replay a workload trace against queue designs (or KAI versions) side by side and compare
    waits, completions, GPU-hours, utilisation and evictions. Exit 1 when an expectation fails. With
    --on, each variant is a Job on that cluster, brought together here into one replay."""
    from ..replay import session
    from ..replay.design import load_designs
    from ..replay.trace import load_trace, parse_window, whole_gpus as as_whole_gpus, window as trace_window

    trace = load_trace(trace_file)
    window = None
    if window_text:
        try:
            cut = trace_window(trace, *parse_window(window_text))
        except ValueError as err:
            raise KailabError(str(err)) from None
        if not cut.trace.jobs:
            raise KailabError(f"--window {window_text}: no job of {trace_file} arrives in it (the trace spans "
                              f"{trace.span_s:g} s from its first arrival)")
        trace = cut.trace
        window = {"from_s": cut.start_s, "to_s": cut.end_s, "cut": cut.cut, "running_before": cut.running_before,
                  "running_before_gpus": cut.running_before_gpus}
    if whole_gpus:
        trace = as_whole_gpus(trace)
    designs = load_designs(design_text)
    kai_versions = [versions.kai_release(v).version for v in version_text.split(",") if v.strip()]
    stacks = None
    if stack_text:
        from ..compare import parse_stacks

        stacks = parse_stacks(stack_text)
    plan = session.Plan(trace=trace, variants=session.variants_for(designs, kai_versions, stacks), fleet=fleet,
                        compress=compress, repeat=repeat, runtime=runtime, timeout_s=timeout,
                        expectations=list(expectations), labs=labs_at_once, whole_gpus=whole_gpus, window=window)
    try:
        session.check(plan)
    except ValueError as err:
        raise KailabError(str(err)) from None
    if on:
        if watch:
            raise KailabError("--watch shows labs on this machine: with --on the labs are inside the cluster's pods")
        out_dir = _replay_on(plan, Path(trace_file), window_text, on, unit_cpu, unit_memory, namespace_labels)
    elif watch:
        from .top import LabsWatch

        labs = LabsWatch()
        with labs.shown():
            out_dir = session.run_replay(plan, echo=lambda text: console.print(text, markup=False, highlight=False),
                                         watch=labs.lab)
    else:
        out_dir = session.run_replay(plan, echo=lambda text: console.print(text, markup=False, highlight=False))
    comparison = json.loads((out_dir / session.COMPARISON).read_text())
    out.print(session.markdown(comparison), markup=False, highlight=False)
    out.print(f"replay evidence: {out_dir} (report: {out_dir / 'report.html'})")
    sys.exit(0 if comparison["ok"] else 1)


@cli.group()
def trace() -> None:
    """Workload traces for `kailab replay`: generate one, or check one."""


@trace.command("generate")
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--jobs", type=click.IntRange(1, 1_000_000), default=200, show_default=True)
@click.option("--hours", type=float, default=1.0, show_default=True, help="Arrival span of the trace.")
@click.option("--queues", "queue_text", default="team-a,team-b", show_default=True,
              help="Leaf queues with relative arrival rates, e.g. team-a=2,team-b=1.")
@click.option("--fleet", default="small", show_default=True, help="Sizes and load are chosen for this fleet.")
@click.option("--load", type=float, default=1.0, show_default=True,
              help="Offered GPU work as a fraction of the fleet (durations are scaled to it).")
@click.option("--burst", default="", help="QUEUE:AT_S:JOBS[:WITHIN_S], e.g. team-b:1200:40:60 (default: none).")
@click.option("--seed", type=int, default=1, show_default=True)
def trace_generate(output, jobs, hours, queue_text, fleet, load, burst, seed) -> None:
    """Write a seeded synthetic trace (CSV or YAML, by OUTPUT's suffix): Poisson arrivals per queue,
    a mix of sizes (gangs, GPU fractions) and lognormal durations."""
    from ..fleet import load_fleet
    from ..replay import generate as gen
    from ..replay.trace import load_trace, write_trace

    path = Path(output)
    if path.suffix.lower() not in (".csv", ".yaml", ".yml"):
        raise KailabError(f"{output}: name the trace .csv or .yaml")
    try:
        queues = gen.parse_queues(queue_text)
        b = None
        if burst:
            parts = burst.split(":")
            if len(parts) not in (3, 4):
                raise ValueError(f"--burst {burst!r}: write QUEUE:AT_S:JOBS[:WITHIN_S]")
            b = gen.Burst(parts[0], float(parts[1]), int(parts[2]), float(parts[3]) if len(parts) == 4 else 60.0)
            if b.queue not in queues:
                raise ValueError(f"--burst queue {b.queue!r} is not in --queues ({', '.join(queues)})")
        fleet_gpus = load_fleet(fleet).gpus_total
        jobs_out = gen.generate(gen.Profile(jobs=jobs, span_s=hours * 3600, queues=queues, fleet_gpus=fleet_gpus,
                                            load=load, seed=seed, burst=b))
    except ValueError as err:
        raise KailabError(str(err)) from None
    write_trace(path, jobs_out, name=path.stem,
                description=f"kailab trace generate --jobs {jobs} --hours {hours:g} --queues {queue_text} "
                            f"--fleet {fleet} --load {load:g}" + (f" --burst {burst}" if burst else "") + f" --seed {seed}")
    t = load_trace(path)  # what was written reads back
    out.print(f"{path}: {len(t.jobs)} jobs over {hours:g} h, queues {', '.join(t.queues())}, offered load "
              f"{gen.offered_load(t.jobs, fleet_gpus):.2f} of fleet {fleet} ({fleet_gpus} GPUs)", markup=False)


@cli.command("fill")
@click.argument("trace_file", metavar="TRACE")
@click.option("--designs", "design_text", required=True,
              help="Comma-separated designs of one leaf queue each (e.g. binpack and spread placement), one lab each.")
@click.option("--fleet", required=True, help="The fleet to fill (a name in fleets/ or a file, e.g. an imported one).")
@click.option("--seeds", default="1", show_default=True, help="Comma-separated seeds: one fill per seed per design.")
@click.option("--target", type=float, default=1.3, show_default=True, help="GPU workload to submit, x the fleet's GPUs.")
@click.option("--step", type=float, default=0.01, show_default=True, help="Most GPU workload per step, x the fleet's GPUs.")
@click.option("--settle", "settle_s", type=float, default=3.0, show_default=True,
              help="Seconds without a bind after which a step's pending pods count as unplaced.")
@click.option("--kai-version", default=None, help="KAI version (default: the lab default).")
@click.option("--labs", type=click.IntRange(1, 8), default=None,
              help="Labs at once (default: every design side by side); 1 for large fleets on few cores.")
@click.option("--with-metrics", is_flag=True, help="Run the labs' Prometheus and kube-state-metrics too (a fill reads neither).")
@click.option("--expect", "expectations", multiple=True,
              help="[design/]arrived-<P>.<figure> OP value|figure, e.g. 'binpack/arrived-100.allocated_pct >= 85' "
                   "(figures: allocated_pct, fragmented_pct, unplaced_gpu_pct at P = 80, 90, 100, 110, 130; the "
                   "median over the seeds); exit 1 when one fails.")
@on_options
def fill(trace_file, design_text, fleet, seeds, target, step, settle_s, kai_version, labs, with_metrics,
         expectations, on, unit_cpu, unit_memory, namespace_labels) -> None:
    """Fill a fleet with a trace's tasks, no departures, and measure how much GPU KAI allocates against
    what arrived, per placement design (the "Beware of Fragmentation" procedure, on real KAI). With
    --on, each design and seed is a Job on that cluster, merged here into one fill."""
    from ..replay.design import load_designs
    from ..replay.fill import FillPlan, run_fill
    from ..replay.trace import load_trace

    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise KailabError(f"--seeds {seeds!r}: write whole numbers separated by commas, e.g. 1,2,3") from None
    plan = FillPlan(trace=load_trace(trace_file), designs=load_designs(design_text), fleet=fleet, seeds=seed_list,
                    target=target, step=step, settle_s=settle_s, labs=labs, metrics=with_metrics,
                    kai_version=kai_version or versions.DEFAULT_KAI, expectations=list(expectations))
    if on:
        out_dir = _fill_on(plan, on, unit_cpu, unit_memory, namespace_labels)
    else:
        out_dir = run_fill(plan, echo=lambda text: out.print(text, markup=False))
    out.print((out_dir / "fill.md").read_text(), markup=False)
    summary = json.loads((out_dir / "fill.json").read_text())
    if not summary["ok"]:
        raise SystemExit(1)


def _trial_on(version_list, names, fleet, repeat, kubeconfig, cpu, memory, pairs) -> Path:
    """`kailab trial --on`: a Job per version (kailab/trial.py, its fanned-out part), brought together here."""
    from .. import trial as trial_mod

    units = trial_mod.trial_units(version_list, names, fleet, repeat)  # checked as a local trial is, before the cluster
    run, results = fan_out(units, kubeconfig, evidence_dir(), cpu, memory, pairs)
    _said(results)
    return trial_mod.merge_fanned_out(version_list, names, fleet, repeat, units, results, run.record_dir)


def _replay_on(plan, trace_file: Path, window_text, kubeconfig, cpu, memory, pairs) -> Path:
    """`kailab replay --on`: a Job per variant (kailab/replay/units.py), brought together here."""
    from ..replay.units import merge_units, replay_units

    units = replay_units(plan, trace_file, window_text)  # checked as a local replay is, before the cluster
    run, results = fan_out(units, kubeconfig, evidence_dir(), cpu, memory, pairs)
    _said(results)
    return merge_units(plan, units, results, run.record_dir)


def _said(results) -> None:
    for r in results:
        out.print(f"{r.title}: {r.verdict or 'error'}  " + (f"evidence: {r.evidence}" if r.evidence else r.error),
                  markup=False, highlight=False)


def _fill_on(plan, kubeconfig, cpu, memory, pairs) -> Path:
    """`kailab fill --on`: a Job per design and seed (kailab/replay/fill_units.py), merged here into one fill."""
    from ..replay.fill_units import fill_units, merge_units

    units = fill_units(plan)  # checked as a local fill is, before anything reaches the cluster
    run, results = fan_out(units, kubeconfig, evidence_dir(), cpu, memory, pairs)
    merged = merge_units(plan, units, results, run.record_dir)
    _said(results)
    if merged is None:
        raise KailabError(f"no unit brought a fill back (the run's record: {run.record_dir})")
    out.print(f"merged: {merged}", markup=False)
    return merged


@cli.command("fill-merge")
@click.argument("sources", nargs=-1, metavar="FILL[:DESIGN,...]...")
def fill_merge(sources) -> None:
    """Read fills of one plan run at different times (evidence/fill-<time>, a seed each, say) as one:
    a new evidence/fill-merged-<time> with every seed's curve, the table of the seeds' spread, the
    picture and the report. FILL:DESIGN takes only that design from FILL (a re-run of one that stopped).
    A FILL may also be a `bench fill` record (bench/results/<name>.json): it keeps every seed's steps."""
    from ..replay.fill_merge import merge

    out_dir = merge(list(sources))
    out.print(f"merged: {out_dir}", markup=False)
    out.print((out_dir / "fill.md").read_text(), markup=False)


@trace.command("import")
@click.argument("trace_format", metavar="FORMAT", type=click.Choice(["alibaba-gpu-2023"]))
@click.argument("source", metavar="PATH")
@click.option("--out", "out_dir", required=True, help="Folder for fleet.yaml, trace.csv, the designs and import.json.")
@click.option("--tasks", default="default", show_default=True,
              help="Which task list (openb_pod_list_<TASKS>.csv): default, gpushare100, gpuspec33, multigpu50, …")
@click.option("--sample", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Keep 1/N of each node pool and a seeded 1/N of the tasks (same model mix, minutes not hours).")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--queue", default="openb", show_default=True, help="The one leaf queue every task goes to.")
def trace_import(trace_format, source, out_dir, tasks, sample, seed, queue) -> None:
    """Turn a public trace into a kailab fleet, trace and designs (binpack, spread). PATH is your clone
    of alibaba/clusterdata (or its cluster-trace-gpu-v2023 folder, or a bare mirror), or the name
    alibaba-gpu-2023 once `kailab trace source` registered one: the data is read there and never
    copied into kailab."""
    from ..replay.alibaba import import_trace

    s = import_trace(Path(source), Path(out_dir), tasks=tasks, sample=sample, seed=seed, queue=queue)
    out.print(f"{out_dir}: fleet of {s['nodes']} nodes / {s['gpus']} GPUs, {s['counts']['pods']} pods asking "
              f"{s['gpus_requested']:g} GPUs in all ({tasks}" + (f", 1/{sample}, seed {seed}" if sample > 1 else "")
              + ")", markup=False)
    out.print(f"  with the trace's own times (departures too) at most {s['gpus_at_once_peak']:g} GPUs are asked at "
              f"once ({100 * s['gpus_at_once_peak'] / s['gpus']:.1f} % of the fleet's), "
              f"{s['gpus_at_once_peak_at_s'] / 86400:.1f} days in", markup=False)
    for what, n in s["counts"].items():
        if what != "pods":
            out.print(f"  {n:6d}  {what}", markup=False)
    out.print(f"replay: kailab replay {s['files']['trace']} --fleet {s['files']['fleet']} "
              f"--designs {s['files']['binpack']},{s['files']['spread']}", markup=False)


@trace.command("source")
@click.argument("trace_format", metavar="FORMAT", type=click.Choice(["alibaba-gpu-2023"]))
@click.argument("path", required=False)
def trace_source(trace_format, path) -> None:
    """Register your clone (or bare mirror) of a public trace's repository: it is copied into kailab's
    cache as a bare mirror (it outlives PATH), and FORMAT's name then stands for a PATH (`kailab trace
    import alibaba-gpu-2023 alibaba-gpu-2023`, the exercise item, `bench fill`). Without PATH: show
    the registered one (one line naming this command when there is none)."""
    from ..replay import alibaba

    record = alibaba.register(path) if path else alibaba.registered()
    if record is None:
        raise KailabError(alibaba.not_registered())
    out.print(f"{trace_format}: {record['origin']} @ {record['commit'][:12]} ({len(record['task_lists'])} task "
              f"lists), mirrored at {alibaba.mirror()}", markup=False, highlight=False)


@trace.command("check")
@click.argument("trace_file", metavar="TRACE")
@click.option("--designs", "design_text", default="", help="Also check its queues against these designs.")
@click.option("--fleet", default="small", show_default=True)
def trace_check(trace_file, design_text, fleet) -> None:
    """Check a trace (and, with --designs, that its queues are theirs); one line per problem found first."""
    from ..fleet import load_fleet
    from ..replay.design import load_designs
    from ..replay.generate import offered_load
    from ..replay.trace import check_against, load_trace

    t = load_trace(trace_file)
    the_fleet = load_fleet(fleet)
    gpus = the_fleet.gpus_total
    for d in (load_designs(design_text) if design_text else []):
        check_against(t, d.leaf_queues(), f"design {d.path}", gpus, products=the_fleet.products)
    out.print(f"{trace_file}: {len(t.jobs)} jobs, queues {', '.join(t.queues())}, span {t.span_s / 3600:.2f} h, "
              f"offered load {offered_load(t.jobs, gpus):.2f} of fleet {fleet}", markup=False)
