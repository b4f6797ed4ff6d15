"""KAI's throughput at scale, and a replay of a large generated trace."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import time
from pathlib import Path
import tempfile

from .. import versions
from ..paths import PROJECT_ROOT
from .. import labs
from ..labs import LabSpec
from .common import _record, machine
from .. import scale as scale_mod
from ..fleet import load_fleet
from ..replay import generate as gen, session
from ..replay.design import load_design
from ..replay.trace import load_trace, write_trace


def scale(shapes: list[str], count: int | None = None, fleet: str = "large", out_dir: Path | None = None,
          echo=print) -> dict:
    """KAI's throughput at scale (kailab/scale.py), each shape on a fresh KAI lab of `fleet`.
    Default counts are KAI's scale-test shapes: 4000 single-GPU Jobs; 8000 single-GPU pods."""
    fl = load_fleet(fleet)
    defaults = {"jobs": fl.gpus_total // 2, "pods": fl.gpus_total}
    m = machine()
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": m,
               "fleet": fleet, "kai_version": versions.DEFAULT_KAI, "runs": []}
    out_dir = out_dir or PROJECT_ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = dt.date.today().isoformat() + "-scale"
    for shape in shapes:  # written after each shape: a long run stopped later keeps what it measured
        spec = LabSpec(name=f"bench-{os.getpid()}-scale", runtime="binary", fleet=fleet)
        with labs.running(spec) as lab:
            results["runs"].append(scale_mod.run(lab.record, shape, count or defaults[shape], echo=echo))
        (out_dir / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
        (out_dir / f"{stem}.md").write_text(scale_mod.markdown(results["runs"], {**m, "date": results["date"]},
                                                                versions.DEFAULT_KAI))
    results["written"] = str(out_dir / f"{stem}.json")
    return results


REPLAY_SCALE = {"jobs": 2000, "hours": 2.0, "fleet": "large", "load": 0.9, "compress": 15.0, "seed": 1,
                "queues": {"team-a": 1.0, "team-b": 1.0},
                # durations capped so the last arrivals end within the run (2 h + 30 min of trace, 10 min at 15x)
                "max_duration_s": 1800.0,
                # the scheduler's API client as a KAI user at this scale sets it (SchedulingShard args):
                # at KAI's default qps 50 each cycle waits on its own client's rate limit, one BindRequest
                # at a time behind its status writes (bench/results/2026-11-24-replay-scale.md)
                "scheduler_args": {"qps": "500", "burst": "1000"}}


def replay_scale(out_dir: Path | None = None, echo=print, params: dict | None = None) -> dict:
    """#28's scale case: a generated 2-hour trace of 2,000 jobs on the large fleet, two designs that
    differ in one queue's quota, side by side, compressed to 10 minutes. Records each design's wall
    time, the submitter's lag against the compressed inter-arrival times and the CPU each party spent."""
    p = {**REPLAY_SCALE, **(params or {})}
    gpus = load_fleet(p["fleet"]).gpus_total
    with tempfile.TemporaryDirectory(prefix="kailab-replay-scale-") as tmp:
        work = Path(tmp)
        trace_path = work / "trace.csv"
        jobs = gen.generate(gen.Profile(jobs=p["jobs"], span_s=p["hours"] * 3600, queues=p["queues"],
                                        fleet_gpus=gpus, load=p["load"], seed=p["seed"]))
        if p.get("max_duration_s"):
            jobs = [dataclasses.replace(j, duration_s=min(j.duration_s, p["max_duration_s"])) for j in jobs]
        write_trace(trace_path, jobs)
        designs = []
        args = p.get("scheduler_args") or {}
        shard = ("scheduler:\n  shard: {args: {" + ", ".join(f'{k}: "{v}"' for k, v in args.items()) + "}}\n") if args else ""
        for name, a_share in (("a-three-quarters", 0.75), ("a-one-quarter", 0.25)):
            a = int(gpus * a_share)
            (work / f"{name}.yaml").write_text(
                f"design: {name}\nqueues:\n  org:\n    gpu: {{quota: {gpus}}}\n    children:\n"
                f"      team-a: {{gpu: {{quota: {a}}}}}\n      team-b: {{gpu: {{quota: {gpus - a}}}}}\n" + shard)
            designs.append(load_design(work / f"{name}.yaml"))
        trace = load_trace(trace_path)
        plan = session.Plan(trace=trace, variants=session.variants_for(designs, []), fleet=p["fleet"],
                            compress=p["compress"], repeat=1, labs=p.get("labs"))
        start = time.monotonic()
        out = session.run_replay(plan, echo=echo)
        wall = round(time.monotonic() - start, 1)
    comparison = json.loads((out / session.COMPARISON).read_text())
    runs = {}
    for v in plan.variants:
        rec = json.loads((out / v.label / "run-1" / "records.json").read_text()) \
            if (out / v.label / "run-1" / "records.json").exists() else {}
        fig = json.loads((out / v.label / "run-1" / "figures.json").read_text()) \
            if (out / v.label / "run-1" / "figures.json").exists() else {}
        runs[v.label] = {"wall_seconds": rec.get("wall_seconds"), "timed_out": rec.get("timed_out"),
                         "cpu_seconds": rec.get("cpu_seconds"), "submit": fig.get("submit"),
                         "all": fig.get("all"), "utilisation_mean": (fig.get("fleet") or {}).get("utilisation_mean")}
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "params": p, "pods": sum(j.pods for j in trace.jobs), "replay_wall_seconds": wall,
               "evidence": str(out), "runs": runs, "errors": comparison["errors"]}
    return _record(results, "-replay-scale", replay_scale_markdown(results), out_dir)


def replay_scale_markdown(r: dict) -> str:
    p = r["params"]
    lines = [f"# Replay at scale, {r['date']}", "",
             f"{p['jobs']} jobs ({r['pods']} pods) over {p['hours']:g} h of trace on fleet {p['fleet']}, offered load "
             f"{p['load']:g}, compressed {p['compress']:g}x (the arrivals span {p['hours'] * 60 / p['compress']:.0f} min "
             f"of wall time); two designs side by side, one lab each. {r['machine']['cores']} cores. "
             f"Recorded, not asserted. Whole replay (labs up, runs, comparison): {r['replay_wall_seconds']} s.", "",
             "| design | run wall (s) | timed out | jobs completed | wait p50 / p99 (trace s) | submit lag p50 / p99 / max (wall s) "
             "| inter-arrival median (wall s) | CPU s: kube-apiserver / scheduler / binder / kailab |", "|---" * 8 + "|"]
    for label, run in r["runs"].items():
        sub, a, cpu = run.get("submit") or {}, run.get("all") or {}, run.get("cpu_seconds") or {}
        lines.append(f"| {label} | {run.get('wall_seconds')} | {run.get('timed_out')} | {a.get('completed')}/{a.get('jobs')} | "
                     f"{a.get('wait_p50')} / {a.get('wait_p99')} | {sub.get('lag_p50_wall_s')} / {sub.get('lag_p99_wall_s')} / "
                     f"{sub.get('lag_max_wall_s')} | {sub.get('inter_arrival_median_wall_s')} | "
                     f"{cpu.get('kube-apiserver')} / {cpu.get('scheduler')} / {cpu.get('binder')} / "
                     f"{cpu.get('kailab (harness)')} |")
    for label, errs in (r.get("errors") or {}).items():
        lines += [f"- {label}: {e}" for e in errs]
    lines += ["", "CPU seconds per process during each run (both labs share the machine; kailab's figure is "
              "the one process that drives both):", ""]
    lines += [f"- {label}: " + ", ".join(f"{k} {v}" for k, v in sorted((run.get("cpu_seconds") or {}).items(),
                                                                     key=lambda kv: -kv[1]))
              for label, run in r["runs"].items()]
    lines += ["", f"Evidence: {r['evidence']}"]
    return "\n".join(lines) + "\n"
