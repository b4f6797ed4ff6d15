"""`kailab bench fill PATH`: the fill experiment at full scale on Alibaba's trace, from the user's
clone: import, fill every design with every seed (one lab at a time: a 1,213-node lab wants the
machine), and record the table, the wall time, each lab's up time, and the CPU and peak memory of
every party (where the time goes). Recorded, never asserted."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from ..errors import KailabError
from .common import _MachineSampler, _record, machine
from ..replay.alibaba import PLACEMENTS, import_trace
from ..replay.design import load_designs
from ..replay.fill import FIGURES, FillPlan, MARKS, at_mark, markdown, run_fill
from ..replay.trace import load_trace



def fill_bench(source: str, tasks: str = "default", seeds: list[int] | None = None, sample: int = 1,
               step: float = 0.01, out_dir: Path | None = None, echo=print, repeat: int = 1,
               designs: list[str] | None = None) -> dict:
    """Import, then fill `repeat` times (fresh labs each time, the same seeds): with more than one,
    the repeat spread of every figure at the arrived marks is recorded too. `designs`: the imported
    designs to fill (a full-scale design and seed takes the machine for most of an hour; fills run
    apart are read as one by `kailab fill-merge`)."""
    designs = designs or list(PLACEMENTS)
    for d in designs:
        if d not in PLACEMENTS:
            raise KailabError(f"--designs {','.join(designs)}: {d!r} is not an imported design; "
                              f"give some of {','.join(PLACEMENTS)}")

    seeds = seeds or [1, 2, 3]
    done = []
    with tempfile.TemporaryDirectory(prefix="kailab-fill-bench-") as tmp:
        imported = import_trace(Path(source), Path(tmp), tasks=tasks, sample=sample)
        f = imported["files"]
        plan = FillPlan(trace=load_trace(f["trace"]), designs=load_designs(",".join(f[d] for d in designs)),
                        fleet=f["fleet"], seeds=seeds, step=step,
                        labs=1 if imported["nodes"] > 500 else None)  # a full-scale lab wants the machine alone
        for i in range(repeat):
            if repeat > 1:
                echo(f"fill bench: run {i + 1} of {repeat}")
            done.append(_one(plan, echo))
    first = done[0]
    results = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "tasks": tasks, "sample": sample, "designs": designs,
               "nodes": imported["nodes"], "gpus": imported["gpus"], "seeds": seeds, "step": step, "repeat": repeat,
               "wall_seconds": first["wall"], "machine_load": first["load"], "evidence": str(first["evidence"]),
               "table": first["summary"]["table"], "runs": first["runs"],
               **kept(first["summary"]),
               "errors": {k: v for d in done for k, v in d["summary"]["errors"].items()},
               **({"repeats": [{k: d[k] for k in ("wall", "load", "runs")} | {"evidence": str(d["evidence"]),
                                "table": d["summary"]["table"], "errors": d["summary"]["errors"]} for d in done],
                   "repeat_spread": repeat_spread([d["summary"] for d in done])} if repeat > 1 else {})}
    lines = [markdown(first["summary"])]
    for i, d in enumerate(done, 1):
        lines += [(f"Run {i} of {repeat}: " if repeat > 1 else "") + f"whole bench (labs up, fills, labs down): {d['wall']} s on "
                  f"{results['machine']['cores']} cores; evidence {d['evidence']}. The machine was busy "
                  f"{d['load']['busy_cores_mean']} cores on average (p90 {d['load']['busy_cores_p90']}), every "
                  "process on it counted.", "", *where_the_time_goes(d["runs"], d["summary"]), ""]
    if repeat > 1:
        lines += spread_lines(results["repeat_spread"], repeat)
    return _record(results, f"-fill-{tasks}" + (f"-1of{sample}" if sample > 1 else "")
                   + (f"-seeds{'-'.join(map(str, seeds))}" if sample == 1 else "")
                   + ("" if designs == list(PLACEMENTS) else "-" + "-".join(designs)) + (f"-x{repeat}" if repeat > 1 else ""),
                   "\n".join(lines) + "\n", out_dir)


def kept(summary: dict) -> dict:
    """What a record keeps of a fill besides its table: the plan and every seed's steps, so `kailab
    fill-merge` reads the record as it reads the evidence folder, which stays on the machine that ran it."""
    return {"plan": summary["plan"], "curves": summary["curves"]}


def _one(plan, echo) -> dict:
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
            s: json.loads((ddir / f"seed-{s}" / "run.json").read_text()) for s in plan.seeds
            if (ddir / f"seed-{s}" / "run.json").exists()}}
    return {"evidence": evidence, "wall": wall, "load": sampler.figures(wall), "summary": summary, "runs": runs}


def repeat_spread(summaries: list[dict]) -> dict:
    """Per design, seed and figure at each mark: [min, max] over the repeated fills (one run each)."""
    out: dict = {}
    for s in summaries:
        for design, seeds in s["curves"].items():
            for seed, rows in seeds.items():
                for m in MARKS:
                    for key in FIGURES:
                        v = at_mark(rows, m, key)
                        if v is not None:
                            out.setdefault(design, {}).setdefault(seed, {}).setdefault(f"{key}@{m:.0%}", []).append(v)
    return {d: {seed: {k: [min(v), max(v), len(v)] for k, v in figs.items()} for seed, figs in seeds.items()}
            for d, seeds in out.items()}


def spread_lines(spread: dict, repeat: int) -> list[str]:
    lines = [f"Repeat spread: the same seed filled {repeat} times, fresh labs each time; GPU allocated (%) at "
             "each arrived mark, min-max over the runs (what KAI's own timing moves):", "",
             "| design | seed | " + " | ".join(f"arrived {m:.0%}" for m in MARKS) + " |", "|---" * (len(MARKS) + 2) + "|"]
    for design, seeds in spread.items():
        for seed, figs in seeds.items():
            cells = []
            for m in MARKS:
                v = figs.get(f"allocated_pct@{m:.0%}")
                cells.append("-" if v is None else f"{v[0]:.1f}-{v[1]:.1f}" + ("" if v[2] == repeat else f" ({v[2]} runs)"))
            lines.append(f"| {design} | {seed} | " + " | ".join(cells) + " |")
    return lines + [""]


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
    for name, seeds in summary.get("curves", {}).items():  # the harness's POSTs, one at a time: a bound of its own
        for s, rows in seeds.items():
            if rows and all("submit_s" in row for row in rows):
                sub, total = sum(row["submit_s"] for row in rows), sum(row["settle_s"] for row in rows)
                lines.append(f"{name}, seed {s}: submitting the steps' pods took {sub:.0f} s of the {total:.0f} s "
                             f"the steps took ({100 * sub / total:.0f} %).")
    for name, r in runs.items():  # placed, then deleted by a component: say so and where the words are
        for s, run in r["seeds"].items():
            gone = run.get("deleted_after_bound") or {}
            if gone:
                lines.append(f"{name}, seed {s}: {len(gone)} pod(s) bound and then deleted by a lab component, not "
                             f"by the fill ({', '.join(sorted(gone)[:10])}{' …' if len(gone) > 10 else ''}); the "
                             f"components' log lines naming them are in {name}/seed-{s}/deleted-pods.log.")
    return lines
