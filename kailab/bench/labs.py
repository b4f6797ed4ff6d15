"""Lab up/down per fleet (warm) and cold builds, and soak: many lab cycles in a row."""

from __future__ import annotations

import datetime as dt
import os
import statistics
import time
from pathlib import Path

from .. import operators, toolchain, versions
from .. import labs
from ..labs import LabRecord, LabSpec
from .common import _record, _time, machine
from .peer import peer_comparison, peer_markdown
from ..paths import lab_dir
from ..runtimes import processes
from ..toolchain import kai_unavailable_reason


def bench_lab(fleet: str, repeats: int, with_kai: bool, metrics: bool = True, operators: tuple[str, ...] = ()) -> dict:
    """Warm `up` and `down` of one fleet, `repeats` times each (binaries and seed already cached:
    one unmeasured cycle first makes sure), with the median of each phase of `up`."""
    ups, downs, phases = [], [], {}
    name = f"bench-{os.getpid()}-{fleet}"
    spec = LabSpec(name=name, runtime="binary", fleet=fleet, stack="kai" if with_kai else "none", metrics=metrics, operators=operators)
    try:
        labs.up(spec)
    finally:
        labs.down(name)
    for _ in range(repeats):
        try:
            ups.append(_time(lambda: labs.up(spec)))
            rec = LabRecord.load(name)
            for phase, (_start, took) in (rec.up_phases if rec else {}).items():
                phases.setdefault(phase, []).append(took)
            noop = _time(lambda: labs.up(spec))
        finally:
            downs.append(_time(lambda: labs.down(name)))
    return {"fleet": fleet, "with_kai": with_kai, "metrics": metrics, "operators": list(operators), "runs": repeats,
            "up_s": statistics.median(ups),
            "up_all_s": ups, "second_up_noop_s": noop, "down_s": statistics.median(downs), "down_all_s": downs,
            "up_phases_median_s": {k: round(statistics.median(v), 2) for k, v in phases.items()}}


def run(quick: bool = False, repeats: int | None = None, out_dir: Path | None = None) -> dict:
    repeats = repeats or (1 if quick else 3)
    kai_missing = kai_unavailable_reason()
    with_kai = kai_missing is None
    fleets = ["tiny"] if quick else ["tiny", "small", "large"]
    builds = {f"{m['component']}/{m['version']}": m.get("build_seconds") for m in toolchain.cached()}
    results = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(), "quick": quick, "kai_version": versions.DEFAULT_KAI if with_kai else None,
        "kai_unavailable": kai_missing,
        "cold_build_s": builds,
        "labs": [bench_lab(f, repeats, with_kai) for f in fleets],
        # what Prometheus and kube-state-metrics add to `up`: the same fleet without them
        "labs_without_metrics": [bench_lab(fleets[-1] if quick else "small", repeats, with_kai, metrics=False)],
        # what the four workload operators add to `up`: the same fleet, no metrics (kailab/operators)
        "labs_with_operators": [bench_lab(fleets[-1] if quick else "small", repeats, with_kai, metrics=False,
                                          operators=operators.parse(list(operators.OPERATORS)))] if with_kai else [],
        "peer": None if quick else peer_comparison(runs=5 if repeats >= 3 else repeats),
        "not_measured": {} if with_kai else {
            k: "needs KAI, which cannot be built here" for k in
            ("exercise_suite_s", "single_exercise_s", "bind_throughput_pods_per_s",
             "gang_bind_latency_s", "reclaim_latency_s")},
    }
    return _record(results, "-quick" if quick else "", markdown(results), out_dir)


def markdown(r: dict) -> str:
    m = r["machine"]
    lines = [f"# kailab bench, {r['date']}", "",
             f"Machine: {m['cores']} cores, {m['memory_gib']} GiB, {m['cpu']}; Python {m['python']}.",
             f"KAI: {r['kai_version'] or 'not installed (' + (r['kai_unavailable'] or '') + ')'}", "",
             "| fleet | runs | warm `up` (median s) | second `up` (no-op, s) | `down` (median s) |",
             "|---|---|---|---|---|"]
    for row in r["labs"]:
        lines.append(f"| {row['fleet']} | {row['runs']} | {row['up_s']} | {row['second_up_noop_s']} | {row['down_s']} |")
    for row in r.get("labs_without_metrics") or []:  # what Prometheus + kube-state-metrics add
        lines.append(f"| {row['fleet']}, without metrics | {row['runs']} | {row['up_s']} | "
                     f"{row['second_up_noop_s']} | {row['down_s']} |")
    for row in r.get("labs_with_operators") or []:  # what the workload operators add
        lines.append(f"| {row['fleet']}, without metrics, with operators {', '.join(row['operators'])} | {row['runs']} | "
                     f"{row['up_s']} | {row['second_up_noop_s']} | {row['down_s']} |")
    lines += ["", "Where warm `up` goes (median seconds per phase; phases in one row overlap, see "
              "kailab/runtimes/binary.py):", ""]
    for row in r["labs"]:
        phases = row.get("up_phases_median_s") or {}
        lines.append(f"- {row['fleet']}: " + ", ".join(f"{k} {v}" for k, v in phases.items()))
    peer = r.get("peer")
    if peer:
        lines += [""] + peer_markdown(peer)
    lines += ["", "| cold build | seconds |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(r["cold_build_s"].items())]
    if r["not_measured"]:
        lines += ["", "Not measured: " + ", ".join(f"{k} ({v})" for k, v in r["not_measured"].items())]
    return "\n".join(lines) + "\n"


def soak(cycles: int, fleet: str = "tiny", out_dir: Path | None = None, echo=print) -> dict:
    """`up` + `down` of a KAI lab, `cycles` times: after every `down`, whatever the lab had
    (its processes by marker, its recorded ports, its directory) must be gone."""
    name = f"bench-{os.getpid()}-soak"
    rows = []
    for i in range(1, cycles + 1):
        start = time.perf_counter()
        rec = labs.up(LabSpec(name=name, runtime="binary", fleet=fleet)).record
        up_s = time.perf_counter() - start
        ports = sorted(set(rec.ports.values()))
        start = time.perf_counter()
        labs.down(name)
        down_s = time.perf_counter() - start
        left = {"processes": len(processes.marked_pids(lab_dir(name))),
                "ports": [p for p in ports if processes.port_in_use(p)],
                "directory": lab_dir(name).exists()}
        rows.append({"cycle": i, "up_s": round(up_s, 2), "down_s": round(down_s, 2), "left": left})
        echo(f"cycle {i}/{cycles}: up {up_s:.1f} s, down {down_s:.1f} s, left {left}")
    clean = [r for r in rows if not (r["left"]["processes"] or r["left"]["ports"] or r["left"]["directory"])]
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "fleet": fleet, "cycles": cycles, "clean_cycles": len(clean), "rows": rows,
               "up_s_median": round(statistics.median(r["up_s"] for r in rows), 2),
               "down_s_median": round(statistics.median(r["down_s"] for r in rows), 2)}
    return _record(results, "-soak",
                   f"# Soak: {cycles} up/down cycles of a KAI lab ({fleet}), {results['date']}\n\n"
                   f"Cycles that left nothing behind (processes, ports, directory): **{len(clean)} / {cycles}**; "
                   f"`up` median {results['up_s_median']} s, `down` median {results['down_s_median']} s.\n", out_dir)
