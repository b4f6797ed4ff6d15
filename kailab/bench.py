"""`kailab bench`: how long the lab takes on this machine, as medians of repeated runs.

Figures go to bench/results/<date>.json and .md. Nothing here asserts a threshold: timings are
recorded, not tested. Measurements that need KAI say so when KAI is not available.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

from . import toolchain, versions
from .paths import PROJECT_ROOT
from .runtimes.base import LabSpec
from .runtimes.binary import BinaryRuntime


def machine() -> dict:
    mem_kb = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cores": os.cpu_count(), "memory_gib": round(mem_kb / 1048576), "cpu": cpu,
            "python": platform.python_version(), "kernel": platform.release()}


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return round(time.perf_counter() - start, 2)


def bench_lab(fleet: str, repeats: int, with_kai: bool) -> dict:
    """Warm `up` and `down` of one fleet, `repeats` times each (binaries already cached)."""
    rt = BinaryRuntime()
    ups, downs = [], []
    name = f"bench-{os.getpid()}-{fleet}"
    for _ in range(repeats):
        try:
            ups.append(_time(lambda: rt.up(LabSpec(name=name, runtime="binary", fleet=fleet, with_kai=with_kai))))
            noop = _time(lambda: rt.up(LabSpec(name=name, runtime="binary", fleet=fleet, with_kai=with_kai)))
        finally:
            downs.append(_time(lambda: rt.down(name)))
    return {"fleet": fleet, "runs": repeats, "up_s": statistics.median(ups), "up_all_s": ups,
            "second_up_noop_s": noop, "down_s": statistics.median(downs), "down_all_s": downs}


def run(quick: bool = False, repeats: int | None = None, out_dir: Path | None = None) -> dict:
    from .pytest_plugin import kai_unavailable_reason

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
        "not_measured": {} if with_kai else {
            k: "needs KAI, which cannot be built here" for k in
            ("exercise_suite_s", "single_exercise_s", "bind_throughput_pods_per_s",
             "gang_bind_latency_s", "reclaim_latency_s")},
    }
    out_dir = out_dir or PROJECT_ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = dt.date.today().isoformat() + ("-quick" if quick else "")
    (out_dir / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    (out_dir / f"{stem}.md").write_text(markdown(results))
    results["written"] = str(out_dir / f"{stem}.json")
    return results


def markdown(r: dict) -> str:
    m = r["machine"]
    lines = [f"# kailab bench, {r['date']}", "",
             f"Machine: {m['cores']} cores, {m['memory_gib']} GiB, {m['cpu']}; Python {m['python']}.",
             f"KAI: {r['kai_version'] or 'not installed (' + (r['kai_unavailable'] or '') + ')'}", "",
             "| fleet | runs | warm `up` (median s) | second `up` (no-op, s) | `down` (median s) |",
             "|---|---|---|---|---|"]
    for lab in r["labs"]:
        lines.append(f"| {lab['fleet']} | {lab['runs']} | {lab['up_s']} | {lab['second_up_noop_s']} | {lab['down_s']} |")
    lines += ["", "| cold build | seconds |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(r["cold_build_s"].items())]
    if r["not_measured"]:
        lines += ["", "Not measured: " + ", ".join(f"{k} ({v})" for k, v in r["not_measured"].items())]
    return "\n".join(lines) + "\n"
