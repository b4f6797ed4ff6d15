"""`kailab bench`: how long the lab takes on this machine, as medians of repeated runs.

Figures go to bench/results/<date>.json and .md. Nothing here asserts a threshold: timings are
recorded, not tested. Measurements that need KAI say so when KAI is not available.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import time
from pathlib import Path

from . import toolchain, versions
from .errors import KailabError
from .paths import PROJECT_ROOT, evidence_dir
from .lab import LabRecord, LabSpec, get_runtime, lab


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


def bench_lab(fleet: str, repeats: int, with_kai: bool, metrics: bool = True) -> dict:
    """Warm `up` and `down` of one fleet, `repeats` times each (binaries and seed already cached:
    one unmeasured cycle first makes sure), with the median of each phase of `up`."""
    rt = get_runtime("binary")
    ups, downs, phases = [], [], {}
    name = f"bench-{os.getpid()}-{fleet}"
    spec = LabSpec(name=name, runtime="binary", fleet=fleet, with_kai=with_kai, metrics=metrics)
    try:
        rt.up(spec)
    finally:
        rt.down(name)
    for _ in range(repeats):
        try:
            ups.append(_time(lambda: rt.up(spec)))
            rec = LabRecord.load(name)
            for phase, (_start, took) in (rec.up_phases if rec else {}).items():
                phases.setdefault(phase, []).append(took)
            noop = _time(lambda: rt.up(spec))
        finally:
            downs.append(_time(lambda: rt.down(name)))
    return {"fleet": fleet, "with_kai": with_kai, "metrics": metrics, "runs": repeats, "up_s": statistics.median(ups),
            "up_all_s": ups, "second_up_noop_s": noop, "down_s": statistics.median(downs), "down_all_s": downs,
            "up_phases_median_s": {k: round(statistics.median(v), 2) for k, v in phases.items()}}


def peer_comparison(runs: int = 5, fleet: str = "tiny", echo=print) -> dict:
    """kailab against KWOK's own `kwokctl create cluster --runtime binary`, side by side: the same
    cached etcd, kube-apiserver, kube-controller-manager and kwok binaries, kube-scheduler off,
    alternating runs, whole commands timed from a shell's point of view (kailab's Python start-up
    included). Two peer figures: kwokctl bare (create + delete, as it ships: it returns once the
    API server answers /version, with no nodes) and kwokctl at kailab's readiness (the same fleet's
    nodes created over the API and Ready, and the API server's /readyz answering, as kailab's `up`
    waits for) — the fair comparison."""
    import subprocess
    import sys
    import tempfile

    from .fleet import load_fleet
    from .kube import Kube
    from .runtimes import clusterinfo
    from .runtimes.labkit import create_fleet
    from .runtimes.waits import wait_until

    recipes = [r for r in toolchain.recipes_for(versions.DEFAULT_KAI) if r.component != "kai"]
    built = toolchain.build_all(recipes + toolchain.peer_recipes())
    bins = {n: built[r.key] / n for r in recipes + toolchain.peer_recipes() for n in r.binaries}
    kailab_cli = [sys.executable, "-m", "kailab.cli"]
    name = f"bench-{os.getpid()}-peer"
    fl = load_fleet(fleet)
    work = Path(tempfile.mkdtemp(prefix="kailab-kwokctl-"))
    env = {**os.environ, "KWOK_WORKDIR": str(work)}
    kwokctl = [str(bins["kwokctl"])]
    create = kwokctl + ["create", "cluster", "--name", name, "--runtime", "binary",
                        f"--etcd-binary={bins['etcd']}", f"--kube-apiserver-binary={bins['kube-apiserver']}",
                        f"--kube-controller-manager-binary={bins['kube-controller-manager']}",
                        f"--kwok-controller-binary={bins['kwok']}", "--disable=kube-scheduler", "--quiet-pull"]
    delete = kwokctl + ["delete", "cluster", "--name", name]

    def run(cmd: list[str], **kw) -> None:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, **kw)

    def kwokctl_with_fleet() -> None:
        run(create)
        kc = work / "kubeconfig.yaml"
        kc.write_text(subprocess.run(kwokctl + ["get", "kubeconfig", "--name", name], check=True,
                                     capture_output=True, text=True, env=env).stdout)
        kube = Kube(kc)
        try:  # the readiness kailab's `up` returns at: /readyz, and every node of the fleet Ready
            create_fleet(kube, fl)
            wait_until("the peer's fleet to be Ready",
                       lambda: clusterinfo.ready_node_count(kube) == fl.nodes_total, timeout="nodes-ready")
            wait_until("the peer's API server /readyz", kube.readyz, timeout="apiserver-ready")
        finally:
            kube.close()
        run(delete)

    cases = {
        # the same components as kwokctl's (no Prometheus, no kube-state-metrics: kwokctl runs none by default)
        "kailab up --without-kai --without-metrics + down": lambda: (run(kailab_cli + ["up", "--fleet", fleet,
                                                                                       "--without-kai", "--without-metrics",
                                                                                       "--name", name]),
                                                    run(kailab_cli + ["down", "--name", name])),
        "kwokctl create + delete": lambda: (run(create), run(delete)),
        "kwokctl create + same fleet Ready + /readyz + delete": kwokctl_with_fleet,
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    try:
        for fn in cases.values():  # one unmeasured round: seeds, page cache
            fn()
        for i in range(runs):
            for label, fn in cases.items():
                times[label].append(_time(fn))
            echo(f"peer round {i + 1}/{runs}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()))
    finally:
        subprocess.run(delete, env=env, capture_output=True)
        subprocess.run(kailab_cli + ["down", "--name", name], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    med = {k: round(statistics.median(v), 2) for k, v in times.items()}
    ours = med["kailab up --without-kai --without-metrics + down"]
    return {"fleet": fleet, "runs": runs, "median_s": med, "all_s": times,
            "ratio_vs_kwokctl_bare": round(ours / med["kwokctl create + delete"], 2),
            "ratio_vs_kwokctl_equal_readiness": round(ours / med["kwokctl create + same fleet Ready + /readyz + delete"], 2)}


def scale(shapes: list[str], count: int | None = None, fleet: str = "large", out_dir: Path | None = None,
          echo=print) -> dict:
    """KAI's throughput at scale (kailab/scale.py), each shape on a fresh KAI lab of `fleet`.
    Default counts are KAI's scale-test shapes: 4000 single-GPU Jobs; 8000 single-GPU pods."""
    from . import scale as scale_mod
    from .fleet import load_fleet

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
        with lab(spec) as rec:
            results["runs"].append(scale_mod.run(rec, shape, count or defaults[shape], echo=echo))
        (out_dir / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
        (out_dir / f"{stem}.md").write_text(scale_mod.markdown(results["runs"], {**m, "date": results["date"]},
                                                                versions.DEFAULT_KAI))
    results["written"] = str(out_dir / f"{stem}.json")
    return results


def run(quick: bool = False, repeats: int | None = None, out_dir: Path | None = None) -> dict:
    from .toolchain import kai_unavailable_reason

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
        "peer": None if quick else peer_comparison(runs=5 if repeats >= 3 else repeats),
        "not_measured": {} if with_kai else {
            k: "needs KAI, which cannot be built here" for k in
            ("exercise_suite_s", "single_exercise_s", "bind_throughput_pods_per_s",
             "gang_bind_latency_s", "reclaim_latency_s")},
    }
    return _record(results, "-quick" if quick else "", markdown(results), out_dir)


def repeatability(runs: int, names: list[str] | None = None, lab_name: str | None = None,
                  out_dir: Path | None = None, echo=print) -> dict:
    """Every exercise `runs` times in a row against one lab: passes per exercise, wall time per
    run, and the failing checks of any run that did not pass (a flake is a bug to find)."""
    from .exercise.runner import resolve_exercise
    from .exercise.spec import load_exercise
    from .paths import exercises_dir
    from .lab import require_kai_lab

    paths = [resolve_exercise(n) for n in names] if names else sorted(exercises_dir().glob("*.yaml"))
    fleets = {load_exercise(p).fleet for p in paths}  # validated before any lab work
    if lab_name is None:
        if len(fleets) != 1:
            raise KailabError(f"exercises for several fleets ({', '.join(sorted(fleets))}): pass --lab")
        spec = LabSpec(name=f"bench-{os.getpid()}-repeat", runtime="binary", fleet=fleets.pop())
        with lab(spec) as rec:
            records = _repeat_on(rec, runs, paths, echo)
    else:
        rec = require_kai_lab(lab_name, "repeatability runs")
        other = sorted(p.stem for p in paths if load_exercise(p).fleet != rec.fleet)
        if other:  # on another fleet they would only time out
            raise KailabError(f"lab {lab_name} runs fleet {rec.fleet}, but {', '.join(other)} need another fleet: "
                              f"leave them out with --exercises, or pass a lab of their fleet")
        records = _repeat_on(rec, runs, paths, echo)
    per: dict[str, dict] = {}
    for run_ in records:
        e = per.setdefault(run_["exercise"], {"runs": 0, "passed": 0, "seconds": [], "not_passed": [], "wall": []})
        e["wall"].append(run_.get("wall") or {})
        e["runs"] += 1
        e["passed"] += run_["verdict"] == "passed"
        e["seconds"].append(run_["seconds"])
        if run_["verdict"] != "passed":
            e["not_passed"].append(run_)
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "kai_version": records[0]["kai_version"] if records else None, "runtime": rec.runtime,
               "runs": runs, "exercises": per,
               "passed": sum(e["passed"] for e in per.values()), "total": len(records)}
    return _record(results, "-repeatability", repeatability_markdown(results), out_dir)


def soak(cycles: int, fleet: str = "tiny", out_dir: Path | None = None, echo=print) -> dict:
    """`up` + `down` of a KAI lab, `cycles` times: after every `down`, whatever the lab had
    (its processes by marker, its recorded ports, its directory) must be gone."""
    from .paths import lab_dir
    from .runtimes import processes

    rt = get_runtime("binary")
    name = f"bench-{os.getpid()}-soak"
    rows = []
    for i in range(1, cycles + 1):
        start = time.perf_counter()
        rec = rt.up(LabSpec(name=name, runtime="binary", fleet=fleet))
        up_s = time.perf_counter() - start
        ports = sorted(set(rec.ports.values()))
        start = time.perf_counter()
        rt.down(name)
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


def _repeat_on(lab_rec, runs: int, paths: list[Path], echo) -> list[dict]:
    from .exercise.runner import run_exercise

    records: list[dict] = []
    root = evidence_dir() / f"repeat-{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    for i in range(1, runs + 1):
        for p in paths:
            start = time.perf_counter()
            outcome = run_exercise(p, lab_rec, root)
            rec = {"exercise": outcome.exercise, "run": i, "verdict": outcome.verdict,
                   "seconds": round(time.perf_counter() - start, 1), "evidence": outcome.evidence,
                   "kai_version": lab_rec.kai_version, "wall": outcome.wall,
                   "failed": [r.line() for r in outcome.results if not r.passed][:3]}
            records.append(rec)
            echo(f"run {i}/{runs} {rec['exercise']}: {rec['verdict']} in {rec['seconds']} s")
    return records


def repeatability_markdown(r: dict) -> str:
    m = r["machine"]
    lines = [f"# Exercise repeatability, {r['date']}", "",
             f"Each exercise {r['runs']} times in a row on one {r.get('runtime') or 'binary'} lab, KAI {r['kai_version']}; "
             f"{m['cores']} cores, {m['memory_gib']} GiB. Total: **{r['passed']} / {r['total']}** passed.", "",
             "| exercise | passed / runs | wall s (median, min-max) |", "|---|---|---|"]
    for name, e in sorted(r["exercises"].items()):
        secs = e["seconds"]
        lines.append(f"| {name} | {e['passed']} / {e['runs']} | {statistics.median(secs):.1f} "
                     f"({min(secs):.1f}-{max(secs):.1f}) |")
    kinds = sorted({k for e in r["exercises"].values() for w in e.get("wall", []) for k in w})
    if kinds:
        lines += ["", "Where each exercise's wall time goes (median seconds per run; `stays` and `settle` are "
                  "windows the exercise asks for, `expect` ends when KAI gets there, `evidence` is "
                  "snapshots and logs, `clean-up` waits for the namespace's pods to be gone):", "",
                  "| exercise | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
        totals = {k: 0.0 for k in kinds}
        for name, e in sorted(r["exercises"].items()):
            meds = {k: statistics.median([w.get(k, 0.0) for w in e["wall"]]) for k in kinds}
            for k in kinds:
                totals[k] += meds[k]
            lines.append(f"| {name} | " + " | ".join(f"{meds[k]:.1f}" for k in kinds) + " |")
        lines.append("| **all** | " + " | ".join(f"**{totals[k]:.0f}**" for k in kinds) + " |")
    flakes = [rec for e in r["exercises"].values() for rec in e["not_passed"]]
    if flakes:
        lines += ["", "Runs that did not pass:"]
        lines += [f"- {rec['exercise']} run {rec['run']}: {rec['verdict']}: {'; '.join(rec['failed'])} "
                  f"({rec['evidence']})" for rec in flakes]
    return "\n".join(lines) + "\n"


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


def peer_markdown(peer: dict) -> list[str]:
    lines = [f"Side by side with KWOK's own kwokctl (fleet {peer['fleet']}, {peer['runs']} alternating "
             "runs, whole commands, same binaries):", "", "| command | median s |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in peer["median_s"].items()]
    lines += ["", f"Ratio kailab / kwokctl bare: **{peer['ratio_vs_kwokctl_bare']}**; "
              f"kailab / kwokctl at equal readiness (same fleet Ready, /readyz): **{peer['ratio_vs_kwokctl_equal_readiness']}**."]
    return lines


def record_peer(peer: dict, out_dir: Path | None = None) -> dict:
    """`kailab bench --peer` on its own: bench/results/<date>-peer.{json,md}."""
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(), **peer}
    text = "\n".join([f"# kailab up/down against kwokctl, {results['date']}", "",
                      f"{results['machine']['cores']} cores. Recorded, not asserted.", ""] + peer_markdown(peer)) + "\n"
    return _record(results, "-peer", text, out_dir)


def _record(results: dict, suffix: str, text: str, out_dir: Path | None) -> dict:
    """Write a mode's results as bench/results/<date><suffix>.json and .md; returns them, with
    where they went."""
    out_dir = out_dir or PROJECT_ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = dt.date.today().isoformat() + suffix
    n = 1
    while (out_dir / f"{stem}.json").exists() and not suffix.endswith("-quick"):  # never over a recorded result
        n += 1
        stem = f"{dt.date.today().isoformat()}{suffix}-{n}"
    (out_dir / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    (out_dir / f"{stem}.md").write_text(text)
    results["written"] = str(out_dir / f"{stem}.json")
    return results


def compare_labs(names: list[str], exercise_names: list[str] | None = None, out_dir: Path | None = None,
                 echo=print) -> dict:
    """The same exercises on two running labs of one fleet and KAI version (e.g. a binary and a kind
    lab): verdicts and figures side by side. A disagreement is a finding naming what differs."""
    from .exercise.runner import resolve_exercise, run_exercise
    from .exercise.spec import load_exercise
    from .paths import exercises_dir
    from .lab import require_kai_lab

    labs = [require_kai_lab(n, "lab comparisons") for n in names]
    if len({(r.fleet, r.kai_version) for r in labs}) != 1:
        raise KailabError("--compare-labs: the labs differ in fleet or KAI version ("
                          + ", ".join(f"{r.name}: {r.fleet} {r.kai_version}" for r in labs) + "): compare like with like")
    paths = ([resolve_exercise(n) for n in exercise_names] if exercise_names
             else sorted(p for p in exercises_dir().glob("*.yaml") if load_exercise(p).fleet == labs[0].fleet))
    root = evidence_dir() / f"compare-{dt.datetime.now(dt.timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    rows = []
    for p in paths:
        row = {"exercise": p.stem, "labs": {}}
        for rec in labs:
            start = time.perf_counter()
            o = run_exercise(p, rec, root / rec.name)
            row["labs"][rec.name] = {"runtime": rec.runtime, "verdict": o.verdict,
                                     "seconds": round(time.perf_counter() - start, 1),
                                     "figures": {k: v for k, v in o.figures.items() if not k.startswith("expected_after")},
                                     "failed": [r.line() for r in o.failures][:3], "evidence": o.evidence}
            echo(f"{p.stem} on {rec.name} ({rec.runtime}): {o.verdict}")
        verdicts = {v["verdict"] for v in row["labs"].values()}
        row["agree"] = len(verdicts) == 1
        rows.append(row)
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "fleet": labs[0].fleet, "kai_version": labs[0].kai_version,
               "labs": {r.name: r.runtime for r in labs}, "rows": rows,
               "agree": sum(r["agree"] for r in rows), "total": len(rows)}
    return _record(results, "-runtimes", compare_markdown(results), out_dir)


def compare_markdown(r: dict) -> str:
    names = list(r["labs"])
    lines = [f"# The same exercises on {len(names)} labs, {r['date']}", "",
             f"Fleet {r['fleet']}, KAI {r['kai_version']}; " + ", ".join(f"`{n}`: {rt}" for n, rt in r["labs"].items())
             + f". Verdicts agree on **{r['agree']} / {r['total']}** exercises.", "",
             "| exercise | " + " | ".join(f"{r['labs'][n]} verdict (s)" for n in names) + " | agree |",
             "|---|" + "---|" * len(names) + "---|"]
    for row in r["rows"]:
        cells = [f"{row['labs'][n]['verdict']} ({row['labs'][n]['seconds']:.0f})" for n in names]
        lines.append(f"| {row['exercise']} | " + " | ".join(cells) + f" | {'yes' if row['agree'] else '**no**'} |")
    differ = [row for row in r["rows"] if not row["agree"] or any(v["verdict"] != "passed" for v in row["labs"].values())]
    if differ:
        lines += ["", "Runs that did not pass or disagree:"]
        for row in differ:
            for n, v in row["labs"].items():
                if v["verdict"] != "passed":
                    lines.append(f"- {row['exercise']} on {n} ({v['runtime']}): {v['verdict']}: {'; '.join(v['failed'])}")
    return "\n".join(lines) + "\n"


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
    import tempfile

    from .fleet import load_fleet
    from .replay import generate as gen
    from .replay import session
    from .replay.design import load_design
    from .replay.trace import load_trace, write_trace

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


class _MachineSampler:
    """The whole machine's CPU (busy cores, from /proc/stat) and memory in use (MemTotal -
    MemAvailable) sampled once a second while a command runs: what labs side by side cost."""

    def __init__(self):
        import threading

        self.stop = threading.Event()
        self.busy_cores: list[float] = []
        self.mem_mib: list[int] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _cpu() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields) - idle, sum(fields)

    @staticmethod
    def _mem() -> int:
        info = {}
        with open("/proc/meminfo") as f:
            for line in f:
                key, value = line.split(":", 1)
                info[key] = int(value.split()[0])
        return (info["MemTotal"] - info["MemAvailable"]) // 1024

    def _run(self) -> None:
        cores = os.cpu_count() or 1
        busy0, total0 = self._cpu()
        while not self.stop.wait(1.0):
            busy, total = self._cpu()
            if total > total0:
                self.busy_cores.append(round(cores * (busy - busy0) / (total - total0), 2))
            busy0, total0 = busy, total
            self.mem_mib.append(self._mem())

    def __enter__(self):
        self.mem_before = self._mem()
        self.cpu_before = self._cpu()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        busy, total = self._cpu()
        ticks = os.sysconf("SC_CLK_TCK")
        self.cpu_seconds = round((busy - self.cpu_before[0]) / ticks, 1)
        return False

    def figures(self, wall: float) -> dict:
        return {"cpu_seconds": self.cpu_seconds, "busy_cores_mean": round(self.cpu_seconds / wall, 2) if wall else 0,
                "busy_cores_p90": round(sorted(self.busy_cores)[int(0.9 * (len(self.busy_cores) - 1))], 2)
                if self.busy_cores else 0,
                "memory_peak_mib": max(0, max(self.mem_mib, default=self.mem_before) - self.mem_before)}


def _junit_items(path: Path) -> list[dict]:
    import xml.etree.ElementTree as ET

    if not path.is_file():
        return []
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "failed" if case.find("failure") is not None or case.find("error") is not None else \
            "skipped" if case.find("skipped") is not None else "passed"
        out.append({"item": case.get("name"), "seconds": round(float(case.get("time") or 0), 1), "outcome": outcome})
    return out


def exercises_side_by_side(workers: list[int], repeats: int = 1, fleet: str = "small",
                           out_dir: Path | None = None, echo=print) -> dict:
    """`make exercises` as it runs (`pytest exercises/ --kailab-lab NAME -n N --dist worksteal`: every
    exercise and replay, labs side by side) for each N in `workers` (0 = one lab, serially), on a
    lab brought up for it and down after: wall time, verdicts, each item's time, and what the whole
    machine spent (CPU seconds, busy cores, memory peak) — where the time goes, and what bounds it."""
    import subprocess
    import sys
    import tempfile

    from .paths import exercises_dir

    name = f"bench-{os.getpid()}-sbs"
    rt = get_runtime("binary")
    runs = []
    with tempfile.TemporaryDirectory(prefix="kailab-sbs-") as tmp:
        try:
            rt.up(LabSpec(name=name, runtime="binary", fleet=fleet, with_kai=True))
            for n in workers:
                for r in range(repeats):
                    junit = Path(tmp) / f"junit-{n}-{r}.xml"
                    cmd = [sys.executable, "-m", "pytest", str(exercises_dir()), "--kailab-lab", name,
                           "-n", str(n), "--dist", "worksteal", "-p", "no:cacheprovider", "-q",
                           "--kailab-evidence", str(Path(tmp) / f"evidence-{n}-{r}"), f"--junitxml={junit}"]
                    echo(f"side by side: -n {n}, run {r + 1}/{repeats} ...")
                    start = time.monotonic()
                    with _MachineSampler() as sampler:
                        proc = subprocess.run(cmd, capture_output=True, text=True)
                    wall = round(time.monotonic() - start, 1)
                    items = _junit_items(junit)
                    run = {"workers": n, "run": r + 1, "wall_s": wall, "exit": proc.returncode,
                           "passed": sum(i["outcome"] == "passed" for i in items),
                           "failed": [i["item"] for i in items if i["outcome"] == "failed"],
                           "items": items, "sum_item_s": round(sum(i["seconds"] for i in items), 1),
                           **sampler.figures(wall)}
                    if proc.returncode != 0:  # a failure is investigated: its evidence outlives the bench
                        kept = evidence_dir() / f"bench-sbs-{os.getpid()}-n{n}-run{r + 1}"
                        if (Path(tmp) / f"evidence-{n}-{r}").is_dir():
                            shutil.copytree(Path(tmp) / f"evidence-{n}-{r}", kept, dirs_exist_ok=True)
                        kept.mkdir(parents=True, exist_ok=True)
                        (kept / "pytest-output.txt").write_text(proc.stdout + proc.stderr)
                        run["evidence"] = str(kept)
                        echo(f"  failed: {', '.join(run['failed']) or 'exit ' + str(proc.returncode)}; evidence kept in {kept}")
                    runs.append(run)
                    echo(f"  -n {n}: {wall} s, {run['passed']}/{len(items)} passed, "
                         f"{run['cpu_seconds']} CPU-s ({run['busy_cores_mean']} cores busy on average)")
        finally:
            rt.down(name)
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "fleet": fleet, "kai_version": versions.DEFAULT_KAI, "runs": runs}
    return _record(results, "-exercises-side-by-side", exercises_side_by_side_markdown(results), out_dir)


def exercises_side_by_side_markdown(r: dict) -> str:
    cores = r["machine"]["cores"]
    lines = [f"# `make exercises` on labs side by side, {r['date']}", "",
             f"`pytest exercises/ --kailab-lab <a {r['fleet']} lab> -n N --dist worksteal` (what `make exercises` runs), "
             f"KAI {r['kai_version']}, binary runtime; {cores} cores, {r['machine']['memory_gib']} GiB. CPU and memory "
             "are the whole machine's while the command ran (anything else running is in them). Recorded, not asserted.",
             "", "| -n | wall s | passed | failed | sum of item times s | CPU-s | busy cores mean / p90 | memory peak MiB |",
             "|---|---|---|---|---|---|---|---|"]
    for run in r["runs"]:
        lines.append(f"| {run['workers']} | {run['wall_s']} | {run['passed']}/{len(run['items'])} | "
                     f"{', '.join(run['failed']) or '-'} | {run['sum_item_s']} | {run['cpu_seconds']} | "
                     f"{run['busy_cores_mean']} / {run['busy_cores_p90']} | {run['memory_peak_mib']} |")
    if r["runs"]:
        counts = sorted({run["workers"] for run in r["runs"]})
        names = sorted({i["item"] for run in r["runs"] for i in run["items"]})
        lines += ["", "Passes per item over the runs (repeatability):", "",
                  "| item | " + " | ".join(f"-n {n}" for n in counts) + " |", "|---" * (len(counts) + 1) + "|"]
        for name in names:
            cells = []
            for n in counts:
                hits = [i for run in r["runs"] if run["workers"] == n for i in run["items"] if i["item"] == name]
                cells.append(f"{sum(i['outcome'] == 'passed' for i in hits)}/{len(hits)}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        kept = [run for run in r["runs"] if run.get("evidence")]
        if kept:
            lines += ["", "Evidence of the runs that failed: " + ", ".join(
                f"-n {run['workers']} #{run['run']}: `{run['evidence']}`" for run in kept)]
        floor = min(run["cpu_seconds"] for run in r["runs"]) / cores
        lines += ["", f"The CPU the run needs, spread over {cores} cores, is a floor no number of labs gets under: "
                      f"**{floor:.0f} s** (the least CPU-s of these runs / {cores})."]
        lines += ["", "Items (seconds; each run's own):", "", "| item | " + " | ".join(
            f"-n {run['workers']} #{run['run']}" for run in r["runs"]) + " |", "|---" * (len(r["runs"]) + 1) + "|"]
        for n in names:
            cells = []
            for run in r["runs"]:
                hit = next((i for i in run["items"] if i["item"] == n), None)
                cells.append("-" if hit is None else f"{hit['seconds']}" + ("" if hit["outcome"] == "passed" else f" ({hit['outcome']})"))
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
