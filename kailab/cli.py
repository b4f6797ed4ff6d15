"""The `kailab` command line."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from . import toolchain, versions
from .errors import KailabError
from .lab import LabRecord, LabSpec, get_runtime, require_kai_lab, resolve_runtime
from .runtimes import metrics

console = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def _name_option(f):
    return click.option("--name", default=lambda: os.environ.get("KAILAB_LAB", "default"),
                        show_default="default", help="Lab name (several labs can run side by side).")(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kailab")
def cli() -> None:
    """A validation lab for the KAI Scheduler on fake-GPU Kubernetes fleets."""


@cli.command()
@click.option("--runtime", default=lambda: os.environ.get("RUNTIME", "auto"), show_default="auto",
              type=click.Choice(["auto", "binary", "kind", "existing"]))
@click.option("--fleet", default=lambda: os.environ.get("FLEET") or "small", show_default="small",
              help="Fleet name (fleets/NAME.yaml) or path to a fleet file.")
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI)
@click.option("--api-port", type=int, default=None, help="kube-apiserver port (default: a free one).")
@click.option("--without-kai", is_flag=True,
              help="Bring up Kubernetes and the fleet only (infrastructure checks; exercises need KAI).")
@click.option("--without-metrics", is_flag=True,
              help="No Prometheus or kube-state-metrics (binary and kind runtimes; on by default).")
@click.option("--kubeconfig", default=None, help="With --runtime existing: the cluster to adopt.")
@click.option("--dry-run", is_flag=True, help="Print the plan (commands and manifests) without running it.")
@click.option("--images", default=lambda: os.environ.get("IMAGES", "auto"), show_default="auto",
              type=click.Choice(["auto", "local", "published"]),
              help="kind: images built here by `kailab tools images` (local), the published ones, or "
                   "auto: local when the whole set is built here.")
@_name_option
def up(runtime, fleet, kai_version, api_port, without_kai, without_metrics, kubeconfig, dry_run, images,
       name) -> None:
    """Bring a lab up (a fast no-op when it is already up and healthy)."""
    from .fleet import load_fleet

    chosen = resolve_runtime(runtime)
    if chosen != "existing":
        load_fleet(fleet)  # bad input fails here, before anything is printed or started
        if not without_kai:
            versions.kai_release(kai_version)
    spec = LabSpec(name=name, runtime=chosen, fleet=fleet, kai_version=kai_version,
                   with_kai=not without_kai, metrics=not without_metrics, api_port=api_port,
                   kubeconfig=kubeconfig, dry_run=dry_run, images=images)
    rt = get_runtime(chosen)
    if dry_run:
        out.print(rt.plan(spec), markup=False, highlight=False)
        return
    console.print(f"[bold]kailab up[/]: lab {name!r}, runtime {chosen}, fleet {fleet}, "
                  f"KAI {kai_version if not without_kai else '(not installed)'}")
    rec = rt.up(spec)
    if rt.repaired:
        console.print(f"[yellow]lab {rec.name!r} was broken: restarted {', '.join(rt.repaired)}[/]")
    console.print(f"[green]lab {rec.name!r} is up[/]: {rec.nodes} nodes, {rec.gpus} GPUs, "
                  f"KAI {rec.kai_version}. Use it with: export KUBECONFIG={rec.kubeconfig}")


@cli.command()
@_name_option
def down(name) -> None:
    """Stop every process of the lab, free its ports and remove its state."""
    rec = LabRecord.load(name)
    rt = get_runtime(rec.runtime if rec else "binary")
    stopped = rt.down(name)
    console.print(f"lab {name!r} is down" + (f" (stopped: {', '.join(stopped)})" if stopped else ""))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_name_option
def status(as_json, name) -> None:
    """Show the lab's components, nodes and GPUs."""
    rec = LabRecord.load(name)
    if rec is None:
        if as_json:
            out.print_json(json.dumps({"name": name, "state": "absent"}))
        else:
            console.print(f"no lab named {name!r}: bring one up with `kailab up`")
        sys.exit(1)
    info = get_runtime(rec.runtime).status(rec)
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
        out.print(f"KAI {info['kai_version']}, fleet {info['fleet']}: {info['nodes']}/{info['expected_nodes']} "
                  f"nodes Ready, {info['gpus']}/{info['expected_gpus']} GPUs; kubeconfig {info['kubeconfig']}")
        if info.get("prometheus"):
            out.print(f"Prometheus {info['prometheus']}")
    sys.exit(0 if info["state"] == "up" else 1)


@cli.command()
@_name_option
def env(name) -> None:
    """Print `export KUBECONFIG=...` for the lab (use: eval "$(kailab env)")."""
    rec = LabRecord.load(name)
    if rec is None:
        raise KailabError(f"no lab named {name!r}: bring one up with `kailab up`")
    click.echo(f"export KUBECONFIG={rec.kubeconfig}")
    if rec.metrics:  # the lab's Prometheus (HTTP API), for curl/promtool or a Grafana data source
        click.echo(f"export KAILAB_PROMETHEUS_URL={metrics.url(rec.ports)}")


@cli.group()
def tools() -> None:
    """Build and list the lab's binaries (cached by component and version)."""


@tools.command("build")
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI)
@click.option("--without-kai", is_flag=True, help="Build only etcd, Kubernetes and kwok.")
def tools_build(kai_version, without_kai) -> None:
    """Build whatever is missing from the cache (never rebuilds a cached binary).

    KAI's source, first that applies: KAILAB_KAI_SOURCE (a work tree, e.g. a patched KAI: cached
    apart), the Go module proxy where it serves KAI, else the repository registered with
    `kailab tools kai-source PATH` (exactly the tag --kai-version names).
    """
    recipes = toolchain.recipes_for(versions.normalise(kai_version)) + toolchain.metrics_recipes()
    if without_kai:
        recipes = [r for r in recipes if r.component != "kai"]
    built = toolchain.build_all(recipes, console)
    for key, path in built.items():
        out.print(f"{key}: {path}")
    if not without_kai:  # KAI's operator rendering of the scheduler configuration (kai_render)
        from .stacks.kai import render as kai_render

        recipe = next(r for r in recipes if r.component == "kai")
        out.print(f"kai-render: {kai_render.ensure(recipe, toolchain.kai_tree(recipe), out.print)}")


@tools.command("images")
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI)
def tools_images(kai_version) -> None:
    """Build every image a kind lab needs from source, for hosts that reach no registry.

    The node image (Debian rootfs by mmdebstrap, kind's base files, Kubernetes, containerd, runc,
    CNI plugins and crictl built from source, the control-plane images preloaded), KWOK's, KAI's and
    fake-gpu-operator's images under their upstream names, and the charts. Needs a Docker engine,
    Go, gcc, mmdebstrap, the registered KAI repository and `kailab tools source` for
    fake-gpu-operator and cri-tools. Cached: nothing made from the same inputs is made again.
    `kailab up --runtime kind --images local` uses them.
    """
    from .images.build import build_images

    def phase(text: str) -> None:
        console.print(f"[kailab images] {text}", markup=False, highlight=False)

    s = build_images(versions.normalise(kai_version), console, phase)
    for ref in s.built_images:
        out.print(ref, markup=False, highlight=False)
    out.print(f"charts: {s.kai_chart}, {s.fgo_chart}; KWOK manifest: {s.kwok_manifest}", markup=False,
              highlight=False)


@tools.command("kai-source")
@click.argument("path", required=False)
def tools_kai_source(path) -> None:
    """Register a KAI git repository (a clone or bare mirror) to build KAI from.

    It is copied into kailab's cache as a bare mirror, so it outlives PATH; every release tag it
    holds can then be built (`kailab tools build --kai-version vX.Y.Z`). Without PATH: show the
    registered one. Use this where the Go module proxy does not serve KAI's module.
    """
    from . import kai_source

    record = kai_source.register(path) if path else kai_source.registered()
    if record is None:
        raise KailabError("no KAI repository is registered: `kailab tools kai-source PATH`")
    out.print(f"KAI repository: {record['origin']} ({record['tags']} release tags, {record['oldest']} … "
              f"{record['newest']}), mirrored at {kai_source.mirror()}", markup=False, highlight=False)


@tools.command("source")
@click.argument("project")
@click.argument("path", required=False)
def tools_source(project, path) -> None:
    """Register a git repository of PROJECT to build from where the Go module proxy refuses it.

    PROJECT: kai, fake-gpu-operator, cri-tools, kube-state-metrics. The repository is copied into
    kailab's cache as a bare mirror (it outlives PATH); its release tags can then be built. Without
    PATH: show the registered one.
    """
    from . import sources

    record = sources.register(project, path) if path else sources.registered(project)
    if record is None:
        raise KailabError(f"no {project} repository is registered: "
                          f"`{sources.register_command(sources.project(project).name)} PATH`")
    out.print(f"{sources.project(project).title} repository: {record['origin']} ({record['tags']} release "
              f"tags, {record['oldest']} … {record['newest']}), mirrored at {sources.mirror(project)}",
              markup=False, highlight=False)


def _source_text(entry: dict) -> str:
    src = entry.get("source") or {"kind": "module-proxy"}
    if src["kind"] == "repository":
        return f"repository {src['origin']} @ {src['commit'][:12]}"
    if src["kind"] == "work-tree":
        return f"work tree {src['tree']}"
    return "module proxy"


@tools.command("list")
def tools_list() -> None:
    """Show what the binary cache holds, and where each build's source came from."""
    entries = toolchain.cached()
    table = Table(title=f"binary cache {toolchain.cache_dir() / 'bin'}")
    for col in ("component", "version", "binaries", "source", "built", "seconds"):
        table.add_column(col)
    for e in entries:
        table.add_row(e["component"], e["version"], ", ".join(e["binaries"]), _source_text(e),
                      e["built_at"], str(e.get("build_seconds", "")))
    out.print(table if entries else "the binary cache is empty: run `kailab tools build`")


@tools.command("clean-seeds")
def tools_clean_seeds() -> None:
    """Forget the baked etcd seeds labs start from (the next `up` bakes a fresh one, ~5 s)."""
    from .runtimes import seed

    n = seed.remove_all()
    console.print(f"removed {n} seed(s) from {seed.seeds_dir()}")


@cli.command()
@click.argument("exercises", nargs=-1, required=True)
@click.option("--evidence", "evidence_root", type=click.Path(file_okay=False), default=None,
              help="Where run directories go (default: evidence/).")
@click.option("--labs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Labs side by side: the named lab and N-1 of its runtime and KAI version, brought down at the end.")
@_name_option
def run(exercises, evidence_root, labs, name) -> None:
    """Run exercises (names from exercises/ or paths) against a running lab."""
    from .exercise.runner import resolve_exercise, run_exercise
    from .exercise.spec import load_exercise

    rec = require_kai_lab(name, "exercises")  # each exercise's fleet size is checked by its preflight
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
    from .exercise.summary import print_summary

    print_summary(out, outcomes)
    sys.exit(0 if all(o.verdict == "passed" for o in outcomes) else 1)


@cli.command()
@click.argument("evidence_dirs", nargs=-1, type=click.Path(exists=True, file_okay=False), metavar="[EVIDENCE_DIR]...")
def report(evidence_dirs) -> None:
    """Write report.html (one self-contained page) for run or trial directories (default: the newest run)."""
    from .paths import evidence_dir
    from .report import newest_run, write_report

    dirs = [Path(d) for d in evidence_dirs] or [newest_run(evidence_dir())]
    click.echo(str(write_report(dirs)))


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
def validate(paths) -> None:
    """Validate exercise files (default: every file in exercises/) without touching a cluster."""
    from .exercise.spec import load_exercise
    from .paths import exercises_dir

    files = [Path(p) for p in paths] or sorted(exercises_dir().glob("*.yaml"))
    unchecked = None
    for f in files:
        ex = load_exercise(f)
        shards = [(i, s.scheduler) for i, s in enumerate(ex.steps) if s.scheduler is not None and s.scheduler.shard]
        if shards:  # a SchedulingShard fragment is KAI's to accept: its operator code renders it
            from . import toolchain
            from .stacks.kai import rendered_setting

            unchecked = toolchain.kai_unavailable_reason()
            for i, value in shards if not unchecked else []:
                rendered_setting(f"{f}: step {i + 1}", value, versions.DEFAULT_KAI, "http://prometheus.invalid:9090")
        out.print(f"{f}: ok ({len(ex.steps)} steps, fleet {ex.fleet})")
    if unchecked:
        out.print(f"scheduler.shard fragments not checked against KAI (its source is not here: {unchecked})")


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the exercise format."""
    from .exercise.spec import json_schema

    click.echo(json.dumps(json_schema(), indent=2))


@cli.command()
@click.option("--render", is_flag=True, help="Regenerate docs/course/ from the exercise files.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="With --render: where to write (default: docs/course/).")
def course(render, out_dir) -> None:
    """List the training course's lessons in order, with your progress."""
    from . import course as course_mod

    if render:
        for path in course_mod.render_all(Path(out_dir) if out_dir else None):
            out.print(f"written: {path}", markup=False, highlight=False)
        return
    table = Table(title="kailab course (kailab lesson NAME)")
    for col in ("#", "lesson", "title", "status"):
        table.add_column(col)
    for number, name_, title, state in course_mod.course_rows():
        table.add_row(number, name_, title, f"[green]{state}[/]" if state == "done" else state)
    out.print(table)
    out.print(f"progress: {course_mod.status_path()}", markup=False, highlight=False)


@cli.command()
@click.argument("lesson_name", metavar="LESSON")
@click.option("--no-pause", is_flag=True, help="Do not wait for predictions (also when stdin is not a terminal).")
@click.option("--check", "check_file", type=click.Path(dir_okay=False), default=None,
              help="capstone only: your queue tree file to check.")
@click.option("--evidence", "evidence_root", type=click.Path(file_okay=False), default=None,
              help="Where the run's evidence goes (default: evidence/).")
@_name_option
def lesson(lesson_name, no_pause, check_file, evidence_root, name) -> None:
    """A guided lesson: predict each step, run the exercise on the lab, compare (or: capstone --check FILE)."""
    from . import course as course_mod

    spec = course_mod.load_course()
    root = Path(evidence_root) if evidence_root else None
    if lesson_name == spec.capstone.name:
        if check_file is None:
            for line in course_mod.capstone_brief(spec):
                click.echo(line)
            return
        sys.exit(course_mod.run_capstone(check_file, name, click.echo, root, spec))
    if check_file is not None:
        raise KailabError(f"--check is for `kailab lesson {spec.capstone.name}` only")
    chosen = course_mod.find_lesson(lesson_name, spec)
    pause = not no_pause and course_mod.interactive()
    sys.exit(course_mod.run_lesson(chosen, name, pause, click.echo, evidence_root=root))


def _terminate(signum, frame):  # noqa: ARG001
    # SIGTERM takes the same clean path as Ctrl-C: nothing half-made is left behind
    raise KeyboardInterrupt


@cli.command()
@click.option("--versions", "version_text", required=True, help="Comma-separated KAI versions, e.g. v0.16.8,v0.17.0")
@click.option("--exercises", default="quota,borrow,reclaim,gang", show_default=True,
              help="Comma-separated exercise names or paths.")
@click.option("--fleet", default="small", show_default=True)
@click.option("--parallel", type=int, default=None, help="Labs at once (default: cores/2, at least 1).")
@click.option("--runtime", type=click.Choice(["binary", "kind"]), default="binary", show_default=True,
              help="binary: one local lab per version; kind: one vCluster per version on one kind host (Docker).")
@click.option("--dry-run", is_flag=True, help="With --runtime kind: print every command and file, run nothing.")
@click.option("--repeat", type=click.IntRange(1, 20), default=2, show_default=True,
              help="Runs of each exercise per version: a difference must hold over repeats, not be a flake.")
def trial(version_text, exercises, fleet, parallel, runtime, dry_run, repeat) -> None:
    """Run the same exercises against several KAI versions side by side; write a matrix."""
    from . import trial as trial_mod

    version_list = trial_mod.parse_versions(version_text)  # fails before any lab starts
    names = [e.strip() for e in exercises.split(",") if e.strip()]
    if dry_run:
        if runtime != "kind":
            raise KailabError("--dry-run needs --runtime kind (the binary runtime has no plan to print)")
        out.print(trial_mod.dry_run_kind(version_list, names, fleet), markup=False, highlight=False)
        return
    trial_dir = trial_mod.run_trial(version_list, names, fleet, parallel, console=console, repeat=repeat,
                                    runtime=runtime)
    from . import evidence

    matrix = json.loads((trial_dir / evidence.MATRIX).read_text())
    out.print(trial_mod.matrix_markdown(matrix), markup=False, highlight=False)
    out.print(f"trial evidence: {trial_dir}")
    ok = all(c["runs"] and c["passed"] == c["runs"] for row in matrix["exercises"].values() for c in row.values())
    sys.exit(0 if ok else 1)


@cli.command()
@click.option("--quick", is_flag=True, help="tiny fleet, one run (for CI).")
@click.option("--repeats", type=int, default=None, help="runs per measurement (default 3, quick 1).")
@click.option("--repeat-exercises", "repeat_exercises", type=click.IntRange(1, 100), default=None,
              help="Instead: run every exercise N times in a row on one lab; passes per exercise.")
@click.option("--exercises", "exercise_names", default=None, help="With --repeat-exercises: comma-separated names.")
@click.option("--lab", "lab_name", default=None,
              help="With --repeat-exercises: a running lab to use (default: one brought up and down for it).")
@click.option("--soak", type=click.IntRange(1, 1000), default=None,
              help="Instead: N up/down cycles of a KAI lab; checks nothing is left after each down.")
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
                   "lab): wall, verdicts, item times, the machine's CPU and memory; --repeats runs of each.")
@click.option("--compare-labs", "compare_labs", default=None,
              help="Instead: LAB,LAB — the same exercises on two running labs of one fleet and KAI version "
                   "(e.g. binary and kind): verdicts side by side.")
def bench(quick, repeats, repeat_exercises, exercise_names, lab_name, soak, scale_shapes, scale_count,
          scale_fleet, peer_only, replay_scale, side_by_side, compare_labs) -> None:
    """Measure warm lab up/down per fleet and cold build times; write bench/results/."""
    from . import bench as bench_mod

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
        from .scale import SHAPES

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
def replay(trace_file, design_text, version_text, fleet, compress, repeat, expectations, timeout, runtime,
           labs_at_once) -> None:
    """Replay a workload trace against queue designs (or KAI versions) side by side and compare
    waits, completions, GPU-hours, utilisation and evictions. Exit 1 when an expectation fails."""
    from .replay import session
    from .replay.design import load_designs
    from .replay.trace import load_trace

    trace = load_trace(trace_file)
    designs = load_designs(design_text)
    kai_versions = [versions.kai_release(v).version for v in version_text.split(",") if v.strip()]
    plan = session.Plan(trace=trace, variants=session.variants_for(designs, kai_versions), fleet=fleet,
                        compress=compress, repeat=repeat, runtime=runtime, timeout_s=timeout,
                        expectations=list(expectations), labs=labs_at_once)
    try:
        session.check(plan)
    except ValueError as err:
        raise KailabError(str(err)) from None
    out_dir = session.run_replay(plan, echo=lambda text: console.print(text, markup=False, highlight=False))
    comparison = json.loads((out_dir / session.COMPARISON).read_text())
    out.print(session.markdown(comparison), markup=False, highlight=False)
    out.print(f"replay evidence: {out_dir} (report: {out_dir / 'report.html'})")
    sys.exit(0 if comparison["ok"] else 1)


@cli.command()
@click.argument("suite_names", nargs=-1, metavar="[SUITE]...")
@click.option("--kai-versions", "version_text", default="",
              help="Comma-separated KAI versions, one lab each side by side (default: the default KAI).")
@click.option("--labs", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Labs per KAI version, side by side; the suites are split over them.")
@click.option("--ci", "ci_set", is_flag=True, help="Only the suites CI runs (quota, reclaim, preempt).")
@click.option("--fleet", default="kai-e2e", show_default=True, help="The fleet of the labs it brings up.")
@click.option("--lab", "lab_name", default=None,
              help="A running lab to use instead (it must have no queues of its own: KAI's clean-up deletes every queue).")
@click.option("--focus", multiple=True, help="Only specs matching this regular expression (Ginkgo --focus); repeatable.")
@click.option("--list", "list_only", is_flag=True, help="List the suites a lab can run, and those it cannot, with why.")
@click.option("--dra", "dra_set", is_flag=True,
              help="KAI's DRA specs (resources, preempt, reclaim) on fleet kai-e2e-dra, which has DRA devices.")
@click.option("--build-only", is_flag=True, help="Only compile the suites (into kailab's cache) and exit.")
def e2e(suite_names, version_text, labs, ci_set, fleet, lab_name, focus, list_only, dra_set, build_only) -> None:
    """Run KAI's own e2e suites (Ginkgo, from the KAI version's source) against labs; report ran /
    passed / failed / skipped per suite in the terminal, JUnit and report.html. Exit 1 on a failure."""
    from .stacks.kai.e2e import session
    from .stacks.kai.e2e.suites import registry
    from .fleet import load_fleet

    reg = registry()
    if list_only:
        for s in reg.run.values():
            extra = f"; leaves out: {'; '.join(f'{t} ({w})' for t, w in s.skip.items())}" if s.skip else ""
            out.print(f"{s.name:20} {s.path}{' [ci]' if s.ci else ''}{extra}", markup=False, highlight=False)
        for n, (pkg, why) in reg.not_run.items():
            out.print(f"{n:20} cannot run on a lab: {why}", markup=False, highlight=False)
        out.print(f"label filter: {reg.label_filter()}", markup=False, highlight=False)
        return
    if dra_set:
        if suite_names or focus or ci_set or fleet != "kai-e2e":
            raise KailabError("--dra picks its own suites, focus and fleet (data/kai-e2e.yaml): leave out SUITE, "
                              "--focus, --ci and --fleet")
        suite_names, focus, fleet = tuple(reg.dra["suites"]), tuple(reg.dra["focus"]), reg.dra["fleet"]
    suites = reg.select(list(suite_names), ci=ci_set)
    if build_only:
        from .stacks.kai.e2e import build

        for v in session.check_versions(version_text, None):
            _, binaries = build.ensure(v, suites, out.print)
            for name, path in binaries.items():
                out.print(f"{v} {name}: {path}", markup=False, highlight=False)
        return
    lab_version = None
    if lab_name:
        from .lab import require_kai_lab

        if version_text or labs != 1:
            raise KailabError("--lab runs on that one lab: leave out --kai-versions and --labs")
        from .stacks.kai.e2e import cluster
        from .kube import Kube

        rec = require_kai_lab(lab_name, "KAI's e2e suites")
        kube = Kube(rec.kubeconfig)
        try:
            cluster.preflight(kube, lab_name)  # refused before anything is built or written
        finally:
            kube.close()
        lab_version = rec.kai_version
    else:
        load_fleet(fleet)  # a bad fleet is one line before anything is built
    plan = session.Plan(suites=suites, kai_versions=session.check_versions(version_text, lab_version), labs=labs,
                        fleet=fleet, lab_name=lab_name, focus=list(focus))
    out_dir = session.run_e2e(plan, echo=lambda text: console.print(text, markup=False, highlight=False))
    summary = json.loads((out_dir / session.SUMMARY).read_text())
    out.print(session.markdown(summary), markup=False, highlight=False)
    out.print(f"e2e evidence: {out_dir} (report: {out_dir / 'report.html'}, JUnit: {out_dir / 'junit.xml'})")
    sys.exit(0 if summary["ok"] else 1)


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
    from .fleet import load_fleet
    from .replay import generate as gen
    from .replay.trace import load_trace, write_trace

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


@trace.command("check")
@click.argument("trace_file", metavar="TRACE")
@click.option("--designs", "design_text", default="", help="Also check its queues against these designs.")
@click.option("--fleet", default="small", show_default=True)
def trace_check(trace_file, design_text, fleet) -> None:
    """Check a trace (and, with --designs, that its queues are theirs); one line per problem found first."""
    from .fleet import load_fleet
    from .replay.design import load_designs
    from .replay.generate import offered_load
    from .replay.trace import check_against, load_trace

    t = load_trace(trace_file)
    gpus = load_fleet(fleet).gpus_total
    for d in (load_designs(design_text) if design_text else []):
        check_against(t, d.leaf_queues(), f"design {d.path}", gpus)
    out.print(f"{trace_file}: {len(t.jobs)} jobs, queues {', '.join(t.queues())}, span {t.span_s / 3600:.2f} h, "
              f"offered load {offered_load(t.jobs, gpus):.2f} of fleet {fleet}", markup=False)


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    # a shell starting us in the background may have set SIGINT to 'ignore'; Ctrl-C must still
    # take the clean path (interrupt, stop what started, keep evidence)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        console.print("interrupted")
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except KailabError as err:
        click.echo(f"kailab: error: {err}", err=True)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
