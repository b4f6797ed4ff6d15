"""`kailab bench`: figures, recorded under bench/results/, never asserted.

Plain `kailab bench` measures lab up/down and builds; every other experiment is a subcommand
(`kailab bench soak 50`). The mode flags these replaced (`kailab bench --soak 50`) still work for one
release, hidden from --help: each runs its subcommand, with a line on stderr naming the new spelling."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import click
from click.core import ParameterSource

from ..errors import KailabError
from .base import cli, console, option, out

_DIR = click.Path(exists=True, file_okay=False, path_type=Path)


def _echo(text) -> None:
    console.print(text, markup=False, highlight=False)


def _show(results: dict) -> None:
    """The record's page, as bench/results/ keeps it."""
    out.print(Path(results["written"]).with_suffix(".md").read_text(), markup=False, highlight=False)


def _names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",")] if text else None


@cli.group(invoke_without_command=True)
@click.option("--quick", is_flag=True, help="tiny fleet, one run (for CI).")
@option("--repeat", "repeats", old="--repeats", type=click.IntRange(min=1), default=None,
        help="runs per measurement (default 3, quick 1).")
# the mode flags the subcommands replaced, and their `With --X:` options: hidden, kept for one release
@click.option("--render-docs", "render_docs", is_flag=True, hidden=True)
@click.option("--repeat-exercises", "repeat_exercises", type=click.IntRange(1, 100), default=None, hidden=True)
@click.option("--exercises", "exercise_names", default=None, hidden=True)
@option("--name", "lab_name", old="--lab", default=None, hidden=True)
@click.option("--soak", type=click.IntRange(1, 1000), default=None, hidden=True)
@click.option("--churn", type=click.IntRange(2, 10000), default=None, hidden=True)
@click.option("--churn-at-once", type=click.IntRange(1, 8), default=2, hidden=True)
@click.option("--churn-load", default=None, metavar="COMMAND", hidden=True)
@click.option("--scale", "scale_shapes", default=None, hidden=True)
@click.option("--scale-count", type=click.IntRange(1, 100000), default=None, hidden=True)
@click.option("--scale-fleet", default="large", hidden=True)
@click.option("--peer", "peer_only", is_flag=True, hidden=True)
@click.option("--replay-scale", "replay_scale", is_flag=True, hidden=True)
@click.option("--exercises-side-by-side", "side_by_side", default=None, hidden=True)
@click.option("--compare-labs", "compare_labs", default=None, hidden=True)
@click.option("--vcluster", "vcluster_versions", default=None, metavar="VERSIONS", hidden=True)
@click.option("--vcluster-trial", "vcluster_trial", default=None, type=_DIR, hidden=True)
@click.option("--endings", "endings_pods", type=click.IntRange(1, 20000), default=None, metavar="N", hidden=True)
@click.option("--fill", "fill_source", default=None, metavar="PATH", hidden=True)
@click.option("--fill-tasks", default="default", hidden=True)
@click.option("--fill-seeds", default="1,2,3", hidden=True)
@click.option("--fill-sample", type=click.IntRange(1, 1000), default=1, hidden=True)
@click.option("--fill-step", type=float, default=0.01, hidden=True)
@click.option("--fill-designs", default="binpack,spread", hidden=True)
@click.option("--fill-repeat", type=click.IntRange(1, 20), default=1, hidden=True)
@click.option("--twin-scale", "twin_pending", type=click.IntRange(1, 776), default=None, metavar="N", hidden=True)
@click.option("--twin-sample", type=click.IntRange(1, 1000), default=1, hidden=True)
@click.option("--record-twins", "twins_folder", default=None, type=_DIR, hidden=True)
@click.option("--twins-label", default="comparison", hidden=True)
@click.option("--top", "top_cost", is_flag=True, hidden=True)
@click.pass_context
def bench(ctx: click.Context, quick, repeats, **old) -> None:
    """Measure warm lab up/down per fleet and cold build times; write bench/results/.

    Each other experiment is a subcommand: `kailab bench COMMAND --help` for its arguments.
    """
    if ctx.invoked_subcommand:
        given = [p for p in ctx.command.params if p.expose_value
                 and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE]
        mode = next((m for m in _MODES for p in given if m.param == p.name), None)
        if mode is not None:
            raise click.UsageError(f"{mode.flag} is the old spelling of `kailab bench {mode.command.name}`: "
                                   "give one of them", ctx)
        if given:
            raise click.UsageError(f"{given[0].opts[0]} before {ctx.invoked_subcommand}: a subcommand takes its own "
                                   f"options after its name (kailab bench {ctx.invoked_subcommand} --help)", ctx)
        return
    mode = next((m for m in _MODES if old[m.param]), None)  # the order the mode flags were read in
    if mode is not None:
        mode.run(ctx, repeats, old)
        return
    from .. import bench as bench_mod

    results = bench_mod.run(quick=quick, repeats=repeats)
    out.print(bench_mod.markdown(results), markup=False, highlight=False)
    out.print(f"written: {results['written']}")


# the old spelling `--lab` of the hidden `--name` above is only the old mode flags' path: the rename
# itself is `bench repeat-exercises`'s (tests/unit/test_renamed_flags.py lists each rename once)
del next(p for p in bench.params if p.name == "old_lab_name").renamed_to


@bench.command("top", short_help="What `kailab top` costs watching a busy lab.")
@click.option("--fleet", default="large", show_default=True, help="the busy lab's fleet (large: 1,000 nodes).")
def bench_top(fleet) -> None:
    """What `kailab top` costs watching a busy lab: its CPU as a share of one core and the refreshes
    it drew over 60 s."""
    from ..bench.top import top_cost

    _show(top_cost(fleet, echo=_echo))


@bench.command("e2e", short_help="KAI's whole e2e: `kailab e2e --all`, then `--dra`.")
@click.option("--kai-version", default="", help="the KAI version whose suites run (default: the default KAI).")
@click.option("--without-dra", is_flag=True, help="leave out the DRA run (`kailab e2e --dra`).")
def bench_e2e(kai_version, without_dra) -> None:
    """KAI's whole e2e on kailab: `kailab e2e --all` (the binary and kind lanes side by side), then
    `kailab e2e --dra`, each timed with the machine's CPU; the record has every suite's ran / passed /
    failed / skipped / seconds, every failure, and the coverage line (specs run of KAI's own)."""
    from ..bench.e2e import e2e_bench

    _show(e2e_bench(kai_version, dra=not without_dra, echo=_echo))


@bench.command("record-twins", short_help="Record a finished `kailab twin` comparison.")
@click.argument("folder", metavar="DIR", type=_DIR)
@click.option("--label", default="comparison", show_default=True, help="the record's name.")
def bench_record_twins(folder, label) -> None:
    """Record a finished `kailab twin --kai-versions/--designs` (DIR: evidence/twins-<time>) as
    bench/results/<date>-twins-<label>: counts per twin, no pod or node name."""
    from ..bench.twin_scale import record_twins

    _show(record_twins(folder, label))


@bench.command("twin-scale", short_help="A twin of Alibaba's whole GPU fleet, N pods pending.")
@click.argument("pending", metavar="N", type=click.IntRange(1, 776))
@click.option("--sample", type=click.IntRange(1, 1000), default=1, show_default=True, help="1/N of each node pool.")
def bench_twin_scale(pending, sample) -> None:
    """A twin of Alibaba's whole GPU fleet (1,213 nodes, the registered trace's node list) filled to
    100 % with N pods of 4 GPUs pending in a queue owed them (a reclaim waiting): where the time to a
    settled twin goes, and the CPU; KAI's snapshot tool on the same state."""
    from ..bench.twin_scale import twin_scale

    _show(twin_scale(pending, sample=sample, echo=_echo))


@bench.command("render-docs", short_help="Rewrite the figure blocks of README and docs/.")
def bench_render_docs() -> None:
    """Rewrite the figure blocks of README and docs/ from their records (no lab)."""
    from ..bench.figures import render_docs

    written = render_docs()  # an unknown kind or a missing record: one line naming the page
    out.print("\n".join(f"rendered {p}" for p in written) or "every figure block is current")


@bench.command("vcluster", short_help="A KAI version trial in vClusters, beside kind labs.")
@click.argument("versions_text", metavar="VERSIONS")
@click.option("--exercises", "exercise_names", default=None,
              help="comma-separated names (default quota,borrow,reclaim,gang,fractional).")
@click.option("--repeat", type=click.IntRange(min=1), default=2, show_default=True, help="runs of each.")
@click.option("--trial", "trial_dir", default=None, type=_DIR,
              help="read this finished `kailab trial --runtime kind` (evidence/trial-*) instead of running one; "
                   "only the plain kind labs run.")
def bench_vcluster(versions_text, exercise_names, repeat, trial_dir) -> None:
    """A KAI version trial in vClusters (VERSIONS: e.g. v0.16.8,v0.17.0) with its binary labs, and a
    plain kind lab per version: speed and verdicts side by side."""
    from .. import versions
    from ..bench.vcluster import vcluster_bench

    picked = [versions.kai_release(v).version for v in versions_text.split(",") if v.strip()]
    if len(picked) < 2:
        raise KailabError(f"bench vcluster {versions_text}: name at least two KAI versions, e.g. v0.16.8,v0.17.0")
    names = [n.strip() for n in (exercise_names or "quota,borrow,reclaim,gang,fractional").split(",") if n.strip()]
    if trial_dir:  # the finished trial decides what is compared
        if not (trial_dir / "plan.json").is_file() or not (trial_dir / "matrix.json").is_file():
            raise KailabError(f"--trial {trial_dir}: no plan.json and matrix.json there "
                              "(name a finished trial's folder, evidence/trial-<time>)")
        plan = json.loads((trial_dir / "plan.json").read_text())
        if plan.get("runtime") not in ("kind", "existing"):
            raise KailabError(f"--trial {trial_dir}: plan.json: runtime is {plan.get('runtime')!r}, "
                              "not a vCluster trial (run `kailab trial --runtime kind`)")
        picked, names, repeat = plan["versions"], [Path(e).stem for e in plan["exercises"]], plan.get("repeat", 1)
    results = vcluster_bench(picked, names, repeat, echo=console.print, trial_dir=trial_dir)
    _show(results)
    sys.exit(0 if results["verdicts_equal"] else 1)


@bench.command("endings", short_help="N pods ended by their run time vs deleted.")
@click.argument("pods", metavar="N", type=click.IntRange(1, 20000))
@click.option("--fleet", default="small", show_default=True, help="the lab's fleet.")
@click.option("--repeat", "repeats", type=click.IntRange(min=1), default=2, show_default=True, help="runs of each.")
def bench_endings(pods, fleet, repeats) -> None:
    """N pods ending by their run time vs deleted, on a lab without a scheduler: CPU and API writes
    per pod."""
    from .. import bench as bench_mod

    _show(bench_mod.endings(pods, fleet, repeats, echo=console.print))


@bench.command("fill", short_help="The fill experiment on Alibaba's GPU trace.")
@click.argument("source", metavar="PATH")
@click.option("--tasks", default="default", show_default=True, help="the task list.")
@click.option("--seeds", default="1,2,3", show_default=True, help="comma-separated seeds.")
@click.option("--sample", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="1/N of the fleet and tasks (8: the everyday copy).")
@click.option("--step", type=float, default=0.01, show_default=True,
              help="most GPU workload per step, x the fleet's GPUs.")
@click.option("--designs", default="binpack,spread", show_default=True,
              help="the imported designs to fill (one of them: half the time; `kailab fill-merge` reads fills "
                   "run apart as one).")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="fill N times, fresh labs each time, and record the repeat spread.")
def bench_fill(source, tasks, seeds, sample, step, designs, repeat) -> None:
    """The fill experiment on Alibaba's GPU trace from PATH, your clone of alibaba/clusterdata or
    alibaba-gpu-2023, the one `kailab trace source` registered (full scale: 1,213 nodes), binpack vs
    spread, one lab at a time."""
    from .. import bench as bench_mod

    try:
        picked = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise KailabError(f"--seeds {seeds!r}: whole numbers separated by commas") from None
    results = bench_mod.fill_bench(source, tasks, picked, sample, step, repeat=repeat,
                                   designs=[d.strip() for d in designs.split(",") if d.strip()], echo=_echo)
    _show(results)
    sys.exit(1 if results["errors"] else 0)


@bench.command("side-by-side", short_help="`make exercises` for each N of a list, e.g. 0,2,3.")
@click.argument("counts", metavar="COUNTS")
@click.option("--repeat", "repeats", type=click.IntRange(min=1), default=1, show_default=True, help="runs of each.")
def bench_side_by_side(counts, repeats) -> None:
    """`make exercises` (pytest exercises/ -n N) for each N of COUNTS, e.g. 0,2,3 (0 = one lab):
    wall, verdicts, item times, the machine's CPU and memory."""
    from .. import bench as bench_mod

    try:
        workers = [int(n) for n in counts.split(",") if n.strip()]
    except ValueError:
        raise KailabError(f"bench side-by-side {counts}: write worker counts, e.g. 0,2,3") from None
    if not workers or any(n < 0 or n > 8 for n in workers):
        raise KailabError(f"bench side-by-side {counts}: each count is 0 (one lab, no workers) to 8")
    _show(bench_mod.exercises_side_by_side(workers, repeats, echo=console.print))


@bench.command("replay-scale", short_help="A 2-hour, 2,000-job trace on the large fleet.")
def bench_replay_scale() -> None:
    """A 2-hour, 2,000-job generated trace on the large fleet, two designs side by side, compressed
    15x, the scheduler's client at qps 500: wall time per design, submission lag, CPU per party."""
    from .. import bench as bench_mod

    _show(bench_mod.replay_scale(echo=_echo))


@bench.command("compare-labs", short_help="The same exercises on two running labs.")
@click.argument("labs_text", metavar="LAB,LAB")
@click.option("--exercises", "exercise_names", default=None,
              help="comma-separated names (default: every one of the fleet).")
def bench_compare_labs(labs_text, exercise_names) -> None:
    """The same exercises on two running labs of one fleet and KAI version (e.g. binary and kind):
    verdicts side by side."""
    from .. import bench as bench_mod

    names = [n.strip() for n in labs_text.split(",") if n.strip()]
    if len(names) != 2:
        raise KailabError(f"bench compare-labs {labs_text}: name two running labs, "
                          "e.g. bench compare-labs binlab,kindlab")
    results = bench_mod.compare_labs(names, _names(exercise_names), echo=console.print)
    out.print(bench_mod.compare_markdown(results), markup=False, highlight=False)
    sys.exit(0 if results["agree"] == results["total"] else 1)


@bench.command("scale", short_help="KAI's throughput at scale: jobs, pods or both.")
@click.argument("shapes_text", metavar="SHAPES")
@click.option("--count", type=click.IntRange(1, 100000), default=None,
              help="objects per shape (default: the fleet's GPUs / 2 Jobs, its GPUs in pods).")
@click.option("--fleet", default="large", show_default=True, help="the fleet.")
def bench_scale(shapes_text, count, fleet) -> None:
    """KAI's throughput at scale, SHAPES 'jobs', 'pods' or 'jobs,pods' (each on a fresh lab of the fleet)."""
    from .. import bench as bench_mod
    from ..scale import SHAPES

    shapes = [x.strip() for x in shapes_text.split(",") if x.strip()]
    bad = [x for x in shapes if x not in SHAPES]
    if bad:
        raise KailabError(f"bench scale {shapes_text}: unknown shape {bad[0]!r}; use jobs, pods or jobs,pods")
    _show(bench_mod.scale(shapes, count, fleet, echo=console.print))


@bench.command("peer", short_help="The side-by-side with kwokctl.")
@click.option("--repeat", "repeats", type=click.IntRange(min=1), default=5, show_default=True, help="alternating runs.")
def bench_peer(repeats) -> None:
    """Only the side-by-side with kwokctl."""
    from .. import bench as bench_mod

    _show(bench_mod.record_peer(bench_mod.peer_comparison(runs=repeats, echo=console.print)))


@bench.command("churn", short_help="N lab starts: deaths at start by cause.")
@click.argument("starts", metavar="N", type=click.IntRange(2, 10000))
@click.option("--at-once", type=click.IntRange(1, 8), default=2, show_default=True, help="labs starting at once.")
@click.option("--load", default=None, metavar="COMMAND",
              help="a command run again and again beside the starts, e.g. 'make exercises'.")
def bench_churn(starts, at_once, load) -> None:
    """N KAI lab starts (fleet small, with metrics), --at-once at a time, each brought down again:
    deaths at start by cause (whole logs kept under evidence/failed-starts) and retries."""
    from .. import bench as bench_mod

    results = bench_mod.churn(starts, at_once, load=load, echo=console.print)
    _show(results)
    sys.exit(0 if not results["died"] else 1)


@bench.command("soak", short_help="N up/down cycles, checking nothing is left.")
@click.argument("cycles", metavar="N", type=click.IntRange(1, 1000))
def bench_soak(cycles) -> None:
    """N up/down cycles of a KAI lab; checks nothing is left after each down."""
    from .. import bench as bench_mod

    results = bench_mod.soak(cycles, echo=console.print)
    _show(results)
    sys.exit(0 if results["clean_cycles"] == results["cycles"] else 1)


@bench.command("repeat-exercises", short_help="Every exercise N times on one lab.")
@click.argument("runs", metavar="N", type=click.IntRange(1, 100))
@click.option("--exercises", "exercise_names", default=None, help="comma-separated names.")
@option("--name", "lab_name", old="--lab", default=None,
        help="a running lab to use (default: one brought up and down for it).")
def bench_repeat_exercises(runs, exercise_names, lab_name) -> None:
    """Run every exercise N times in a row on one lab; passes per exercise."""
    from .. import bench as bench_mod

    results = bench_mod.repeatability(runs, _names(exercise_names), lab_name, echo=console.print)
    out.print(bench_mod.repeatability_markdown(results), markup=False, highlight=False)
    out.print(f"written: {results['written']}")
    sys.exit(0 if results["passed"] == results["total"] else 1)


@dataclass(frozen=True)
class _Mode:
    """An old mode flag of `kailab bench` (the group's parameter `param`) and the subcommand it became:
    `argument`, the subcommand's argument the flag's value goes to (none for a plain flag); `options`, the
    group's parameters (its old `With --X:` options) that go to the subcommand's, each by its name there,
    and how its value changes on the way, if it does."""

    flag: str
    param: str
    command: click.Command
    argument: str | None = None
    options: dict[str, str | tuple[str, Callable[[Any], Any]]] = field(default_factory=dict)

    def run(self, ctx: click.Context, repeats: int | None, old: dict) -> None:
        given = dict(old, repeats=repeats)
        kwargs = {self.argument: given[self.param]} if self.argument else {}
        spelled = [f"kailab bench {self.command.name}", *([shlex.quote(str(given[self.param]))] if self.argument else [])]
        for before, after in self.options.items():
            if ctx.get_parameter_source(before) is not ParameterSource.COMMANDLINE:
                continue  # the subcommand's default is the one the flag had
            name, change = after if isinstance(after, tuple) else (after, lambda v: v)
            kwargs[name] = change(given[before])
            opt = next(p for p in self.command.params if p.name == name)
            spelled += [opt.opts[0], shlex.quote(str(kwargs[name]))]
        click.echo(f"kailab: note: {self.flag} is deprecated (kept for one release): use {' '.join(spelled)}",
                   err=True)
        ctx.invoke(self.command, **kwargs)


_MODES = [
    _Mode("--top", "top_cost", bench_top, options={"scale_fleet": "fleet"}),
    _Mode("--record-twins", "twins_folder", bench_record_twins, "folder", {"twins_label": "label"}),
    _Mode("--twin-scale", "twin_pending", bench_twin_scale, "pending", {"twin_sample": "sample"}),
    _Mode("--render-docs", "render_docs", bench_render_docs),
    _Mode("--vcluster", "vcluster_versions", bench_vcluster, "versions_text",
          {"exercise_names": "exercise_names", "repeats": "repeat", "vcluster_trial": "trial_dir"}),
    # --scale-fleet's default was --scale's, large: with --endings it meant small
    _Mode("--endings", "endings_pods", bench_endings, "pods",
          {"scale_fleet": ("fleet", lambda f: "small" if f == "large" else f), "repeats": "repeats"}),
    _Mode("--fill", "fill_source", bench_fill, "source",
          {"fill_tasks": "tasks", "fill_seeds": "seeds", "fill_sample": "sample", "fill_step": "step",
           "fill_designs": "designs", "fill_repeat": "repeat"}),
    _Mode("--exercises-side-by-side", "side_by_side", bench_side_by_side, "counts", {"repeats": "repeats"}),
    _Mode("--replay-scale", "replay_scale", bench_replay_scale),
    _Mode("--compare-labs", "compare_labs", bench_compare_labs, "labs_text", {"exercise_names": "exercise_names"}),
    _Mode("--scale", "scale_shapes", bench_scale, "shapes_text", {"scale_count": "count", "scale_fleet": "fleet"}),
    _Mode("--peer", "peer_only", bench_peer, options={"repeats": "repeats"}),
    _Mode("--churn", "churn", bench_churn, "starts", {"churn_at_once": "at_once", "churn_load": "load"}),
    _Mode("--soak", "soak", bench_soak, "cycles"),
    _Mode("--repeat-exercises", "repeat_exercises", bench_repeat_exercises, "runs",
          {"exercise_names": "exercise_names", "lab_name": "lab_name"}),
]
