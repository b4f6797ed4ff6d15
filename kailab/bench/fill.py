"""`kailab bench --fill PATH`: the fill experiment at full scale on Alibaba's trace, from the user's
clone: import, fill every design with every seed (one lab at a time: a 1,213-node lab wants the
machine), and record the table, the wall time, each lab's up time, and the CPU and peak memory of
every party (where the time goes). Recorded, never asserted."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .common import _MachineSampler, _record, machine


def fill_bench(source: str, tasks: str = "default", seeds: list[int] | None = None, sample: int = 1,
               step: float = 0.01, out_dir: Path | None = None, echo=print) -> dict:
    from ..replay.alibaba import import_trace
    from ..replay.design import load_designs
    from ..replay.fill import FillPlan, markdown, run_fill
    from ..replay.trace import load_trace

    seeds = seeds or [1, 2, 3]
    with tempfile.TemporaryDirectory(prefix="kailab-fill-bench-") as tmp:
        imported = import_trace(Path(source), Path(tmp), tasks=tasks, sample=sample)
        f = imported["files"]
        plan = FillPlan(trace=load_trace(f["trace"]), designs=load_designs(f"{f['binpack']},{f['spread']}"),
                        fleet=f["fleet"], seeds=seeds, step=step,
                        labs=1 if imported["nodes"] > 500 else None)  # a full-scale lab wants the machine alone
        t0 = time.monotonic()
        with _MachineSampler() as sampler:  # the whole machine: on a shared one, what else ran
            evidence = run_fill(plan, echo=echo)
        wall = round(time.monotonic() - t0, 1)
    summary = json.loads((evidence / "fill.json").read_text())
    runs = {}
    for d in summary["plan"]["designs"]:
        ddir = evidence / d["name"]
        up = json.loads((ddir / "up.json").read_text()) if (ddir / "up.json").exists() else {}
        runs[d["name"]] = {"up": up, "seeds": {
            s: json.loads((ddir / f"seed-{s}" / "run.json").read_text()) for s in seeds
            if (ddir / f"seed-{s}" / "run.json").exists()}}
    results = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "tasks": tasks, "sample": sample,
               "nodes": imported["nodes"], "gpus": imported["gpus"], "seeds": seeds, "step": step,
               "wall_seconds": wall, "machine_load": sampler.figures(wall), "evidence": str(evidence), "table": summary["table"], "runs": runs,
               "errors": summary["errors"]}
    lines = [markdown(summary), f"Whole bench (import, labs up, fills, labs down): {wall} s on "
             f"{results['machine']['cores']} cores; evidence {evidence}. The machine was busy "
             f"{results['machine_load']['busy_cores_mean']} cores on average (p90 "
             f"{results['machine_load']['busy_cores_p90']}) over the bench, every process on it counted.", "",
             *where_the_time_goes(runs, summary)]
    return _record(results, f"-fill-{tasks}" + (f"-1of{sample}" if sample > 1 else ""), "\n".join(lines) + "\n", out_dir)


PARTIES = ("kube-apiserver", "etcd", "scheduler", "binder", "queuecontroller", "podgrouper", "podgroupcontroller",
           "kube-controller-manager", "kwok", "kailab (harness)")


def where_the_time_goes(runs: dict, summary: dict) -> list[str]:
    """Per design and seed: wall, pods a second, each party's CPU seconds and share of the lab's, the
    machine's busy cores and what of them was not this fill (a shared machine), KAI's cycle at the
    arrived marks, nodes not Ready at the end."""
    lines = ["| design | seed | wall s | pods/s | CPU s: " + " / ".join(PARTIES) + " | harness % | machine busy cores "
             "(not this lab's) | KAI cycle ms at 50/100/130 % | peak MiB apiserver |", "|---" * 9 + "|"]
    for name, r in runs.items():
        for s, run in r["seeds"].items():
            c, wall = run.get("cpu_seconds", {}), run.get("wall_s") or 0
            ours = sum(c.get(k, 0) for k in c)
            busy = run.get("machine_cpu_seconds")
            cycle = [next((row.get("cycle_ms") for row in summary["curves"].get(name, {}).get(str(s), [])
                           if row["arrived_pct"] >= m), None) for m in (50, 100, 130)]
            lines.append(f"| {name} | {s} | {wall} | {run.get('tasks', 0) / wall:.1f} | " if wall else f"| {name} | {s} | - | - | ")
            lines[-1] += " / ".join(str(c.get(k, "-")) for k in PARTIES) + " | "
            lines[-1] += f"{100 * c.get('kailab (harness)', 0) / ours:.1f} | " if ours else "- | "
            lines[-1] += (f"{busy / wall:.2f} ({max(0.0, busy - ours) / wall:.2f}) | " if busy and wall else "- | ")
            lines[-1] += " / ".join("-" if v is None else f"{v:.0f}" for v in cycle)
            lines[-1] += f" | {run.get('peak_memory_mib', {}).get('kube-apiserver', '-')} |"
            if run.get("nodes_not_ready"):
                lines.append(f"| {name} | {s} | {run['nodes_not_ready']} node(s) not Ready at the end |" + " |" * 7)
    lines.append("")
    lines += [f"{name}: lab up in {r['up'].get('up_wall_s')} s." for name, r in runs.items() if r["up"]]
    return lines
