"""A whole replay: one lab per variant (a queue design, or a KAI version with one design) side by
side, the trace played `repeat` times on each, every run's records and figures on disk, then the
comparison (medians, spreads, what moved beyond the spread, expectations) and its page.

On disk (evidence/replay-<stamp>/):
  plan.json                 what was asked (trace, variants, fleet, compression, repeat)
  trace.<csv|yaml>          the trace as given;  designs/<name>.yaml  each design as given
  <variant>/lab.json        the lab's KAI version, runtime and stack (what schedules, how installed)
  <variant>/run-<i>/records.json, figures.json   per run;  error.txt when a run could not finish
  comparison.json, comparison.md, report.html
"""

from __future__ import annotations

import contextlib

import json
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import toolchain, versions, workloads
from ..errors import KailabError
from ..fleet import load_fleet
from ..kube import Kube
from ..evidence import new_folder, stamp_of
from ..paths import evidence_dir
from .. import labs
from ..labs import Lab, LabSpec
from ..scale import cpu_seconds
from ..stacks import get_stack
from ..stacks.base import HasMetricPanels
from . import figures as figs
from .design import Design
from .player import job_objects, job_outcomes, play, records
from .trace import Trace, check_against, operators_for
from ..report import write_report
from ..report.replay import figure_rows, picture_svg
from ..variants import side_by_side

COMPARISON = "comparison.json"
DRAIN_FACTOR = 2.0  # a run ends at the latest this many times the trace's compressed span after its start
DRAIN_EXTRA_S = 120.0
PROMETHEUS_SCRAPE_S = 2.0  # the lab Prometheus' scrape interval (runtimes/metrics.py)


@dataclass
class Variant:
    label: str
    design: Design
    kai_version: str
    stack: str = "kai"  # what schedules (kailab/stacks): the design's queues and the jobs become its objects


@dataclass
class Plan:
    trace: Trace
    variants: list[Variant]
    fleet: str
    compress: float
    repeat: int = 1
    runtime: str = "binary"
    timeout_s: float | None = None
    expectations: list[str] = field(default_factory=list)
    # labs at once (None: one per variant, all side by side); 1 plays the variants one after another,
    # each alone on the machine, where two large labs together would be limited by its CPU
    labs: int | None = None
    # every GPU fraction of the trace asked as one whole GPU, on every variant (trace.whole_gpus): a stack
    # that counts whole GPUs runs the same workload as KAI
    whole_gpus: bool = False
    # the slice of a longer trace played (trace.window): its bounds and what it cut or left out
    window: dict | None = None

    def deadline_s(self) -> float:
        return self.timeout_s or (self.trace.span_s / self.compress * DRAIN_FACTOR + DRAIN_EXTRA_S)

    def as_json(self) -> dict:
        return {"trace": str(self.trace.path), "jobs": len(self.trace.jobs), "fleet": self.fleet,
                "compress": self.compress, "repeat": self.repeat, "runtime": self.runtime,
                "labs_at_once": self.labs or len(self.variants), "deadline_wall_s": round(self.deadline_s(), 1),
                "expectations": self.expectations,
                "whole_gpus": self.whole_gpus, "window": self.window,
                "variants": [{"label": v.label, "design": v.design.name, "design_file": str(v.design.path),
                              "kai_version": v.kai_version, "stack": v.stack} for v in self.variants]}


def variants_for(designs: list[Design], kai_versions: list[str], stacks: list[str] | None = None) -> list[Variant]:
    """Designs side by side on one KAI version, one design on several KAI versions, or one design on
    several scheduler stacks: one axis at a time, so each difference has one cause."""
    stacks = stacks or ["kai"]
    if sum(len(axis) > 1 for axis in (designs, kai_versions, stacks)) > 1:
        raise KailabError("compare designs (--designs A,B), KAI versions (--kai-versions vA,vB) or scheduler stacks "
                          "(--stacks kai,kueue), one of them at a time")
    version = kai_versions[0] if kai_versions else versions.DEFAULT_KAI
    if len(stacks) > 1:
        return [Variant(s.replace("+", "-"), designs[0], version, s) for s in stacks]
    if len(designs) == 1 and len(kai_versions) > 1:
        return [Variant(v, designs[0], v, stacks[0]) for v in kai_versions]
    return [Variant(d.name, d, version, stacks[0]) for d in designs]


def check(plan: Plan, whole_gpus_hint: str = "add --whole-gpus") -> None:
    """Everything checked before a lab starts: the trace against every design and the fleet, the
    expectations' syntax, the compression."""
    if plan.compress <= 0:
        raise KailabError(f"--compress {plan.compress:g}: give a factor > 0 (e.g. 12: an hour of trace in 5 minutes)")
    if plan.repeat < 1:
        raise KailabError("--repeat: at least 1")
    fleet = load_fleet(plan.fleet)
    for v in plan.variants:
        check_against(plan.trace, v.design.leaf_queues(), f"design {v.design.path}", fleet.gpus_total,
                      products=fleet.products)
    for text in plan.expectations:
        figs.Expectation(text)  # syntax: a ValueError names the fix
    for v in plan.variants:
        check_on_stack(plan, v, whole_gpus_hint)


def check_on_stack(plan: Plan, v: Variant, whole_gpus_hint: str) -> None:
    """The design's queues and every job of the trace, made the variant's stack's objects before any
    lab starts: what the stack has no equivalent for is one line (how many jobs, which, why), never a
    job silently left out of a comparison."""
    stack = get_stack(v.stack)
    stack.queue_objects(v.design.queue_decls(), "check")
    refused: dict[str, list[str]] = {}
    for job in plan.trace.jobs:
        try:
            stack.workload_objects(job_objects(job, "check", plan.compress), f"{plan.trace.path}: job {job.name}")
        except KailabError as err:
            refused.setdefault(str(err).split(" stack: ", 1)[-1], []).append(job.name)
    if refused:
        why, names = max(refused.items(), key=lambda kv: len(kv[1]))
        total = sum(len(n) for n in refused.values())
        fractions = sum(1 for j in plan.trace.jobs if j.fractional)
        hint = (f"; or {whole_gpus_hint}: each fractional job then asks one whole GPU, on every variant"
                if fractions and not plan.whole_gpus else "")
        raise KailabError(f"{plan.trace.path}: {total} of {len(plan.trace.jobs)} jobs cannot run on the {v.stack} "
                          f"stack (e.g. {', '.join(names[:3])}): {why}{hint}")

def run_replay(plan: Plan, root: Path | None = None, echo=print, watch=None) -> Path:
    """The replay of every variant, side by side; the evidence folder. `watch(label, rec)`, when given,
    is called with each variant's lab once it is up and returns a context the variant runs inside
    (`kailab replay --watch`: its picture while it runs)."""
    check(plan)
    for version in dict.fromkeys(v.kai_version for v in plan.variants):  # builds first, one at a time
        toolchain.build_all(toolchain.recipes_for(versions.normalise(version)), None)
    out = begin(plan, root)
    stamp = stamp_of(out, "replay")
    echo(f"replay: {len(plan.trace.jobs)} jobs, {plan.trace.span_s / 3600:.2f} h of trace compressed "
         f"{plan.compress:g}x (at most {plan.deadline_s() / 60:.1f} min per run), {plan.repeat} run(s) on each of "
         f"{', '.join(v.label for v in plan.variants)}; evidence: {out}")
    lock = threading.Lock()

    def say(label: str, text: str) -> None:
        with lock:
            echo(f"  [{label}] {text}")

    cancel = threading.Event()  # Ctrl-C (or a closed terminal) reaches this thread only: the variants' stop
    # each variant stops playing and takes its lab down at the first error or Ctrl-C, before this returns
    side_by_side(plan.variants, lambda v: _variant(plan, v, out, stamp, say, watch, cancel), plan.labs, stop=cancel)
    write_outputs(out)
    return out


def begin(plan: Plan, root: Path | None = None) -> Path:
    """evidence/replay-<stamp>/ with the plan, the trace and the designs as given; its path."""
    out = new_folder(root or evidence_dir(), "replay")
    (out / "designs").mkdir()
    (out / "plan.json").write_text(json.dumps(plan.as_json(), indent=2))
    shutil.copyfile(plan.trace.path, out / f"trace{plan.trace.path.suffix.lower()}")
    for v in plan.variants:
        shutil.copyfile(v.design.path, out / "designs" / f"{v.design.name}.yaml")
    return out


def write_outputs(out: Path) -> dict:
    """comparison.json and .md, replay.svg and report.html from what `out` holds; the comparison."""
    comparison = compare(out)
    (out / COMPARISON).write_text(json.dumps(comparison, indent=2))
    (out / "comparison.md").write_text(markdown(comparison))
    (out / "replay.svg").write_text(picture_svg(comparison))
    write_report([out])
    return comparison


def _variant(plan: Plan, v: Variant, out: Path, stamp: str, say, watch=None, cancel=None) -> None:
    vdir = out / v.label
    vdir.mkdir()
    spec = LabSpec(name=f"replay-{stamp.lower()}-{v.label}"[:50].rstrip("-"), runtime=plan.runtime,
                   fleet=plan.fleet, kai_version=v.kai_version, stack=v.stack,
                   operators=operators_for(plan.trace))  # the operators of the kinds the trace's rows name
    try:
        with labs.running(spec) as lab, (watch(v.label, lab.record) if watch else contextlib.nullcontext()):
            rec = lab.record
            write_lab_json(vdir, lab)
            say(v.label, f"lab {rec.name} up ({rec.nodes} nodes, {rec.gpus} GPUs, KAI {rec.kai_version})")
            kube = Kube(rec.kubeconfig)
            try:
                apply_design(kube, lab, v.design, vdir)
                for i in range(1, plan.repeat + 1):
                    _one_run(plan, v, lab, kube, vdir / f"run-{i}", i, say, cancel)
            finally:
                kube.close()
    except KailabError as err:
        (vdir / "error.txt").write_text(str(err) + "\n")
        say(v.label, f"error: {err}")


def write_lab_json(vdir: Path, lab: Lab) -> None:
    """What the variant ran on: the lab, its KAI version, fleet size and stack."""
    rec = lab.record
    (vdir / "lab.json").write_text(json.dumps({"lab": rec.name, "runtime": rec.runtime, "kai_version": rec.kai_version,
                                                "fleet": rec.fleet, "gpus": rec.gpus, "nodes": rec.nodes,
                                                "start_retries": rec.start_retries,
                                                "stack": {**lab.describe(),
                                                          **({"operators": rec.stack["operators"]}
                                                             if (rec.stack or {}).get("operators") else {})}},
                                               indent=2))


def apply_design(kube: Kube, lab: Lab, design: Design, vdir: Path) -> None:
    """The design's scheduler setting, if it has one (its queues are made in each run's namespace)."""
    if design.spec.scheduler is not None:
        url = lab.usage_db_url() if design.spec.scheduler.usage is not None else None
        if design.spec.scheduler.usage is not None and not url:
            raise KailabError(f"{design.path}: scheduler.usage needs the lab's Prometheus, which lab {lab.name} lacks")
        setting = lab.scheduler_setting(design.spec.scheduler, url, f"{design.path}: step 1")
        import yaml

        (vdir / "scheduler-conf.yaml").write_text(yaml.safe_dump(setting.conf, sort_keys=False))
        lab.configure_scheduler(setting)


def _one_run(plan: Plan, v: Variant, lab: Lab, kube: Kube, rdir: Path, i: int, say, cancel=None) -> None:
    rdir.mkdir(parents=True)
    ns = f"replay-run-{i}"
    kube.apply(workloads.namespace(ns, labels={"kailab.io/replay": v.label}))
    kube.apply(workloads.service_account("default", ns))
    stack, rec = lab.stack, lab.record
    queue_objects = stack.queue_objects(v.design.queue_decls(), ns)  # a stack's queues may live in the namespace
    for obj in queue_objects:
        kube.apply(obj)
    (rdir / "queues.json").write_text(json.dumps(queue_objects, indent=1))  # what the stack was given, reusable
    mark = time.time()
    log_mark = lab.log_mark()
    cpu0 = cpu_seconds(rec.dir)
    say(v.label, f"run {i}: playing {len(plan.trace.jobs)} jobs")
    ledger, clock = play(kube, plan.trace, ns, plan.compress, plan.deadline_s(),
                         on_progress=lambda text: say(v.label, f"run {i}: {text}"),
                         translate=lambda objs, job: stack.workload_objects(objs, f"{plan.trace.path}: job {job}"),
                         cancel=cancel)
    rec_data = records(plan.trace, ledger, clock, plan.compress, job_outcomes(kube, ns))
    cpu1 = cpu_seconds(rec.dir)  # what each lab process spent: which party limits a big replay
    rec_data["cpu_seconds"] = {k: round(cpu1[k] - cpu0.get(k, 0), 1) for k in cpu1}
    rec_data["wall_seconds"] = round(clock["end"] - clock["t0"], 1)
    dead = lab.dead_components(ignore=set())
    if dead:
        ours = lab.scheduler_components()
        title = lab.stack.title
        rec_data["error"] = "; ".join(f"{title if c in ours else 'lab'} component died: {c}" for c, _ in dead)
        (rdir / "error.txt").write_text(rec_data["error"] + "\n" + "\n".join(log for _, log in dead) + "\n")
    if rec.metrics:
        from ..runtimes import metrics

        end = time.time()
        time.sleep(2 * PROMETHEUS_SCRAPE_S)  # KAI's counter as scraped after the run's last eviction
        rec_data["evicted_by_action"] = stack.evictions_by_action(
            metrics.url(rec.ports), mark, end + 2 * PROMETHEUS_SCRAPE_S) if isinstance(stack, HasMetricPanels) else {}
    (rdir / "records.json").write_text(json.dumps(rec_data, indent=1))
    try:  # KAI's own account of the run, to explain what the figures show
        for name, data in lab.scheduler_logs(log_mark).items():
            (rdir / "logs").mkdir(exist_ok=True)
            (rdir / "logs" / name).write_bytes(data)
    except Exception as err:  # noqa: BLE001 - the figures stand without the logs; say why they are missing
        (rdir / "logs-missing.txt").write_text(f"{type(err).__name__}: {err}\n")
    f = figs.run_figures(rec_data, rec.gpus)
    f["evicted_by_action"] = (rec_data.get("evicted_by_action") or {}).get("by_action", {})
    (rdir / "figures.json").write_text(json.dumps(f, indent=2))
    a = f["all"]
    say(v.label, f"run {i}: {a['completed']}/{a['jobs']} jobs completed, wait p50 {a['wait_p50']} s / "
                 f"p99 {a['wait_p99']} s (trace time), utilisation {f['fleet']['utilisation_mean']}, "
                 f"submit lag p99 {f['submit']['lag_p99_wall_s']} s wall"
                 + (f"; {rec_data['error']}" if dead else "") + (" (timed out)" if clock["timed_out"] else ""))
    if i < plan.repeat:  # the next run starts on an empty fleet; after the last, the lab goes down
        kube.delete("v1", "Namespace", ns)
        wait_gone(kube, ns)


def wait_gone(kube: Kube, ns: str, timeout: float = 180) -> None:
    """The next run starts on an empty fleet: wait until the namespace (and its pods) are gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and kube.get("v1", "Namespace", ns) is not None:
        kube.delete_pods(ns)
        time.sleep(1)


def compare(out: Path) -> dict:
    """The comparison, read back from every run's figures.json (never from memory)."""
    plan = json.loads((out / "plan.json").read_text())
    by: dict[str, list[dict]] = {}
    errors: dict[str, list[str]] = {}
    for v in plan["variants"]:
        vdir = out / v["label"]
        runs = sorted(vdir.glob("run-*"), key=lambda p: int(p.name.split("-")[1]))
        by[v["label"]] = [json.loads((r / "figures.json").read_text()) for r in runs if (r / "figures.json").exists()]
        errors[v["label"]] = ([(vdir / "error.txt").read_text().strip()] if (vdir / "error.txt").exists() else []) + \
            [f"{r.name}: {(r / 'error.txt').read_text().splitlines()[0]}" for r in runs if (r / "error.txt").exists()]
    medians = {label: figs.medians(runs) for label, runs in by.items() if runs}
    checked = []
    for text in plan["expectations"]:
        try:
            for held, what in figs.Expectation(text).check(medians):
                checked.append({"expect": text, "held": held, "figures": what})
        except ValueError as err:
            checked.append({"expect": text, "held": False, "figures": str(err)})
    late = {label: [w] for label, runs in by.items() if (w := figs.fell_behind(runs))}
    return {"plan": plan, "runs": {label: len(runs) for label, runs in by.items()}, "errors": errors,
            "warnings": {label: ws for label, ws in late.items() if ws},
            "medians": medians, "ranges": {label: figs.ranges(runs) for label, runs in by.items() if runs},
            "differences": figs.differences(by), "expectations": checked,
            "utilisation": {label: runs[0]["fleet"]["utilisation_series"] for label, runs in by.items() if runs},
            "queues": sorted({q for runs in by.values() for r in runs for q in r["queues"]}),
            "priorities": sorted({c for runs in by.values() for r in runs for c in (r.get("priorities") or {})}),
            "ok": all(c["held"] for c in checked) and not any(errors.values()) and all(by.values())}


def _hours(s: float) -> str:
    return f"{s:g} s" if s < 3600 else f"{s / 3600:g} h"


def markdown(c: dict) -> str:
    labels = list(c["medians"])
    plan = c["plan"]
    moved = c["differences"].get("moved", {})
    lines = [f"# Replay of {plan['trace']} ({plan['jobs']} jobs)", "",
             f"Fleet {plan['fleet']}, compression {plan['compress']:g}x, {plan['repeat']} run(s) per variant. "
             "Times are trace seconds (wall seconds x compression); each cell is the median over runs, "
             "with the range when runs differ. **Bold**: moved beyond the runs' spread between some pair of variants (pairs listed below).", ""]
    stacks = {v.get("stack", "kai") for v in plan["variants"]}
    if stacks != {"kai"}:
        lines += ["Scheduler stacks: " + ", ".join(f"{v['label']} = {v.get('stack', 'kai')}" for v in plan["variants"])
                  + " (one lab each, the same design and trace)." , ""]
    if plan.get("window"):
        w = plan["window"]
        lines += [f"A window of the trace: the jobs arriving from {_hours(w['from_s'])} to {_hours(w['to_s'])} of it, "
                  f"each cut at its end ({w['cut']} were); {w['running_before']} jobs still running at its start "
                  f"({w['running_before_gpus']:g} GPUs) were left out: the fleet started empty.", ""]
    if plan.get("whole_gpus"):
        lines += ["Every job of GPU fractions asked one whole GPU per pod instead, on every variant (--whole-gpus).", ""]
    lines += ["| figure | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]

    for key, cells in figure_rows(c):
        lines.append(f"| {key} | " + " | ".join(f"**{t}**" if key in moved else t for t in cells) + " |")
    if not c["differences"]["judged"]:
        lines += ["", f"No difference judged: {c['differences']['why']}."]
    else:
        lines += ["", f"Moved beyond the spread of repeated runs ({c['differences']['figures_compared']} figures "
                      "compared, pair by pair):"]
        for pair, keys in c["differences"]["pairs"].items():
            lines.append(f"- {pair}: " + (", ".join(keys) if keys else "nothing"))
    for label, ws in (c.get("warnings") or {}).items():
        lines += [f"\n- {label}: warning: {w}" for w in dict.fromkeys(ws)]
    for e in c["expectations"]:
        lines.append(f"\n- expect `{e['expect']}`: {'held' if e['held'] else 'FAILED'} ({e['figures']})")
    for label, errs in c["errors"].items():
        for e in errs:
            lines.append(f"\n- {label}: error: {e}")
    return "\n".join(lines) + "\n"
