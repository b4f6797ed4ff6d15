"""`kailab bench --fill PATH`: the fill experiment at full scale on Alibaba's trace, from the user's
clone: import, fill every design with every seed (one lab at a time: a 1,213-node lab wants the
machine), and record the table, the wall time, each lab's up time, and the CPU and peak memory of
every party (where the time goes). Recorded, never asserted."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .common import _record, machine


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
               "wall_seconds": wall, "evidence": str(evidence), "table": summary["table"], "runs": runs,
               "errors": summary["errors"]}
    lines = [markdown(summary), f"Whole bench (import, labs up, fills, labs down): {wall} s on "
             f"{results['machine']['cores']} cores; evidence {evidence}.", "",
             "| design | seed | wall (s) | steps | CPU s: kube-apiserver / etcd / scheduler / binder / queuecontroller / kailab "
             "| peak MiB: kube-apiserver / scheduler |", "|---" * 6 + "|"]
    for name, r in runs.items():
        for s, run in r["seeds"].items():
            c, m = run.get("cpu_seconds", {}), run.get("peak_memory_mib", {})
            lines.append(f"| {name} | {s} | {run.get('wall_s')} | {run.get('steps')} | " + " / ".join(
                str(c.get(k, "-")) for k in ("kube-apiserver", "etcd", "scheduler", "binder", "queuecontroller",
                                              "kailab (harness)")) + f" | {m.get('kube-apiserver', '-')} / {m.get('scheduler', '-')} |")
    lines.append("")
    lines += [f"{name}: lab up in {r['up'].get('up_wall_s')} s." for name, r in runs.items() if r["up"]]
    return _record(results, f"-fill-{tasks}" + (f"-1of{sample}" if sample > 1 else ""), "\n".join(lines) + "\n", out_dir)
