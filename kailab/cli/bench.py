"""`kailab bench`: figures, recorded under bench/results/, never asserted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import KailabError
from .base import cli, console, option, out


@cli.command()
@click.option("--quick", is_flag=True, help="tiny fleet, one run (for CI).")
@click.option("--render-docs", "render_docs", is_flag=True,
              help="Instead: rewrite the figure blocks of README and docs/ from their records (no lab).")
@option("--repeat", "repeats", old="--repeats", type=click.IntRange(min=1), default=None,
        help="runs per measurement (default 3, quick 1).")
@click.option("--repeat-exercises", "repeat_exercises", type=click.IntRange(1, 100), default=None,
              help="Instead: run every exercise N times in a row on one lab; passes per exercise.")
@click.option("--exercises", "exercise_names", default=None, help="With --repeat-exercises: comma-separated names.")
@option("--name", "lab_name", old="--lab", default=None,
        help="With --repeat-exercises: a running lab to use (default: one brought up and down for it).")
@click.option("--soak", type=click.IntRange(1, 1000), default=None,
              help="Instead: N up/down cycles of a KAI lab; checks nothing is left after each down.")
@click.option("--churn", type=click.IntRange(2, 10000), default=None,
              help="Instead: N KAI lab starts (fleet small, with metrics), --churn-at-once at a time, each brought "
                   "down again: deaths at start by cause (whole logs kept under evidence/failed-starts) and retries.")
@click.option("--churn-at-once", type=click.IntRange(1, 8), default=2, show_default=True,
              help="With --churn: labs starting at once.")
@click.option("--churn-load", default=None, metavar="COMMAND",
              help="With --churn: a command run again and again beside the starts, e.g. 'make exercises'.")
@click.option("--scale", "scale_shapes", default=None,
              help="Instead: KAI's throughput at scale, shapes 'jobs', 'pods' or 'jobs,pods' (each on a "
                   "fresh lab of --scale-fleet).")
@click.option("--scale-count", type=click.IntRange(1, 100000), default=None,
              help="With --scale: objects per shape (default: the fleet's GPUs / 2 Jobs, its GPUs in pods).")
@click.option("--scale-fleet", default="large", show_default=True, help="With --scale: the fleet.")
@click.option("--peer", "peer_only", is_flag=True,
              help="Instead: only the side-by-side with kwokctl (5 alternating runs).")
@click.option("--replay-scale", "replay_scale", is_flag=True,
              help="Instead: a 2-hour, 2,000-job generated trace on the large fleet, two designs side by side, "
                   "compressed 15x, the scheduler's client at qps 500: wall time per design, submission lag, CPU per party.")
@click.option("--exercises-side-by-side", "side_by_side", default=None,
              help="Instead: `make exercises` (pytest exercises/ -n N) for each N of a list, e.g. 0,2,3 (0 = one "
                   "lab): wall, verdicts, item times, the machine's CPU and memory; --repeat runs of each.")
@click.option("--compare-labs", "compare_labs", default=None,
              help="Instead: LAB,LAB — the same exercises on two running labs of one fleet and KAI version "
                   "(e.g. binary and kind): verdicts side by side.")
@click.option("--vcluster", "vcluster_versions", default=None, metavar="VERSIONS",
              help="Instead: a KAI version trial in vClusters (e.g. v0.16.8,v0.17.0; --exercises, default "
                   "quota,borrow,reclaim,gang,fractional) with its binary labs, and a plain kind lab per version: "
                   "speed and verdicts side by side.")
@click.option("--vcluster-trial", "vcluster_trial", default=None, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="With --vcluster: read this finished `kailab trial --runtime kind` (evidence/trial-*) instead of "
                   "running one; only the plain kind labs run.")
@click.option("--endings", "endings_pods", type=click.IntRange(1, 20000), default=None, metavar="N",
              help="Instead: N pods ending by their run time vs deleted, on a lab without a scheduler (--scale-fleet "
                   "sets its fleet, default small here; --repeat, default 2): CPU and API writes per pod.")
@click.option("--fill", "fill_source", default=None, metavar="PATH",
              help="Instead: the fill experiment on Alibaba's GPU trace from your clone of alibaba/clusterdata "
                   "or alibaba-gpu-2023, the one `kailab trace source` registered (full scale: 1,213 nodes), "
                   "binpack vs spread, one lab at a time.")
@click.option("--fill-tasks", default="default", show_default=True, help="With --fill: the task list.")
@click.option("--fill-seeds", default="1,2,3", show_default=True, help="With --fill: comma-separated seeds.")
@click.option("--fill-sample", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="With --fill: 1/N of the fleet and tasks (8: the everyday copy).")
@click.option("--fill-step", type=float, default=0.01, show_default=True,
              help="With --fill: most GPU workload per step, x the fleet's GPUs.")
@click.option("--fill-designs", default="binpack,spread", show_default=True,
              help="With --fill: the imported designs to fill (one of them: half the time; `kailab fill-merge` "
                   "reads fills run apart as one).")
@click.option("--fill-repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="With --fill: fill N times, fresh labs each time, and record the repeat spread.")
@click.option("--twin-scale", "twin_pending", type=click.IntRange(1, 776), default=None, metavar="N",
              help="Instead: a twin of Alibaba's whole GPU fleet (1,213 nodes, the registered trace's node list) "
                   "filled to 100 % with N pods of 4 GPUs pending in a queue owed them (a reclaim waiting): "
                   "where the time to a settled twin goes, and the CPU; KAI's snapshot tool on the same state.")
@click.option("--twin-sample", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="With --twin-scale: 1/N of each node pool.")
@click.option("--record-twins", "twins_folder", default=None, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Instead: record a finished `kailab twin --kai-versions/--designs` (evidence/twins-<time>) as "
                   "bench/results/<date>-twins-<--twins-label>: counts per twin, no pod or node name.")
@click.option("--twins-label", default="comparison", show_default=True, help="With --record-twins: the record's name.")
@click.option("--top", "top_cost", is_flag=True,
              help="Instead: what `kailab top` costs watching a busy lab of --scale-fleet (default large: 1,000 "
                   "nodes): its CPU as a share of one core and the refreshes it drew over 60 s.")
def bench(quick, render_docs, repeats, repeat_exercises, exercise_names, lab_name, soak, churn, churn_at_once, churn_load, scale_shapes, scale_count,
          scale_fleet, peer_only, replay_scale, side_by_side, compare_labs, vcluster_versions, vcluster_trial, endings_pods, fill_source, fill_tasks,
          fill_seeds, fill_sample, fill_step, fill_designs, fill_repeat, twin_pending, twin_sample, twins_folder,
          twins_label, top_cost) -> None:
    """Measure warm lab up/down per fleet and cold build times; write bench/results/."""
    from .. import bench as bench_mod

    if top_cost:
        from ..bench.top import top_cost as measure

        results = measure(scale_fleet, echo=lambda text: console.print(text, markup=False, highlight=False))
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        return

    if twins_folder:
        from ..bench.twin_scale import record_twins

        results = record_twins(twins_folder, twins_label)
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        return

    if twin_pending:
        from ..bench.twin_scale import twin_scale

        results = twin_scale(twin_pending, sample=twin_sample,
                             echo=lambda text: console.print(text, markup=False, highlight=False))
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        return

    if render_docs:
        from ..bench.figures import render_docs as rewrite

        written = rewrite()  # an unknown kind or a missing record: one line naming the page
        out.print("\n".join(f"rendered {p}" for p in written) or "every figure block is current")
        return

    if vcluster_versions:
        from .. import versions
        from ..bench.vcluster import vcluster_bench

        picked = [versions.kai_release(v).version for v in vcluster_versions.split(",") if v.strip()]
        if len(picked) < 2:
            raise KailabError(f"--vcluster {vcluster_versions}: name at least two KAI versions, e.g. v0.16.8,v0.17.0")
        names = [n.strip() for n in (exercise_names or "quota,borrow,reclaim,gang,fractional").split(",") if n.strip()]
        repeat = repeats or 2
        if vcluster_trial:  # the finished trial decides what is compared
            if not (vcluster_trial / "plan.json").is_file() or not (vcluster_trial / "matrix.json").is_file():
                raise KailabError(f"--vcluster-trial {vcluster_trial}: no plan.json and matrix.json there "
                                  "(name a finished trial's folder, evidence/trial-<time>)")
            plan = json.loads((vcluster_trial / "plan.json").read_text())
            if plan.get("runtime") not in ("kind", "existing"):
                raise KailabError(f"--vcluster-trial {vcluster_trial}: plan.json: runtime is {plan.get('runtime')!r}, "
                                  "not a vCluster trial (run `kailab trial --runtime kind`)")
            picked, names, repeat = plan["versions"], [Path(e).stem for e in plan["exercises"]], plan.get("repeat", 1)
        results = vcluster_bench(picked, names, repeat, echo=console.print, trial_dir=vcluster_trial)
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        sys.exit(0 if results["verdicts_equal"] else 1)

    if endings_pods:
        fleet = "small" if scale_fleet == "large" else scale_fleet  # --scale-fleet's default is --scale's
        results = bench_mod.endings(endings_pods, fleet, repeats or 2, echo=console.print)
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        return

    if fill_source:
        try:
            seeds = [int(s) for s in fill_seeds.split(",") if s.strip()]
        except ValueError:
            raise KailabError(f"--fill-seeds {fill_seeds!r}: whole numbers separated by commas") from None
        results = bench_mod.fill_bench(fill_source, fill_tasks, seeds, fill_sample, fill_step, repeat=fill_repeat,
                                       designs=[d.strip() for d in fill_designs.split(",") if d.strip()],
                                       echo=lambda text: console.print(text, markup=False, highlight=False))
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        sys.exit(1 if results["errors"] else 0)

    if side_by_side:
        try:
            workers = [int(n) for n in side_by_side.split(",") if n.strip()]
        except ValueError:
            raise KailabError(f"--exercises-side-by-side {side_by_side}: write worker counts, e.g. 0,2,3") from None
        if not workers or any(n < 0 or n > 8 for n in workers):
            raise KailabError(f"--exercises-side-by-side {side_by_side}: each count is 0 (one lab, no workers) to 8")
        results = bench_mod.exercises_side_by_side(workers, repeats or 1, echo=console.print)
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        return

    if replay_scale:
        results = bench_mod.replay_scale(echo=lambda text: console.print(text, markup=False, highlight=False))
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        return

    if compare_labs:
        names = [n.strip() for n in compare_labs.split(",") if n.strip()]
        if len(names) != 2:
            raise KailabError(f"--compare-labs {compare_labs}: name two running labs, e.g. --compare-labs binlab,kindlab")
        picked = [n.strip() for n in exercise_names.split(",")] if exercise_names else None
        results = bench_mod.compare_labs(names, picked, echo=console.print)
        out.print(bench_mod.compare_markdown(results), markup=False, highlight=False)
        sys.exit(0 if results["agree"] == results["total"] else 1)

    if scale_shapes:
        from ..scale import SHAPES

        shapes = [x.strip() for x in scale_shapes.split(",") if x.strip()]
        bad = [x for x in shapes if x not in SHAPES]
        if bad:
            raise KailabError(f"--scale {scale_shapes}: unknown shape {bad[0]!r}; use jobs, pods or jobs,pods")
        results = bench_mod.scale(shapes, scale_count, scale_fleet, echo=console.print)
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        return
    if peer_only:
        peer = bench_mod.record_peer(bench_mod.peer_comparison(runs=repeats or 5, echo=console.print))
        out.print(Path(peer["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        return

    if churn:
        results = bench_mod.churn(churn, churn_at_once, load=churn_load, echo=console.print)
        out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)
        sys.exit(0 if not results["died"] else 1)
    if soak:
        results = bench_mod.soak(soak, echo=console.print)
        out.print((Path(results["written"]).with_suffix(".md")).read_text(), markup=False, highlight=False)
        sys.exit(0 if results["clean_cycles"] == results["cycles"] else 1)
    if repeat_exercises:
        names = [n.strip() for n in exercise_names.split(",")] if exercise_names else None
        results = bench_mod.repeatability(repeat_exercises, names, lab_name, echo=console.print)
        out.print(bench_mod.repeatability_markdown(results), markup=False, highlight=False)
        out.print(f"written: {results['written']}")
        sys.exit(0 if results["passed"] == results["total"] else 1)
    results = bench_mod.run(quick=quick, repeats=repeats)
    out.print(bench_mod.markdown(results), markup=False, highlight=False)
    out.print(f"written: {results['written']}")
