"""Each kind of figure a page can hold, rendered from its record (the renderers kailab/bench/figures.py
looks up by the kind a marked block names). Each returns markdown that ends with the record's date,
machine (and commit) and a link to it.

Over 500 lines: one small function per kind of record (a record's fields are read in one place only),
sharing a handful of formatters; split by record family they would import each other's formatters."""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def _when(record: dict, link: str) -> str:
    date = str(record.get("date") or Path(link).name[:10])[:10]
    machine = record.get("machine") or {}
    where = f"{machine['cores']} cores, {machine['memory_gib']} GiB" if machine else "machine not recorded"
    commit = f", commit {record['commit'][:7]}" if record.get("commit") else ""
    return f"{date}, {where}{commit}"


def _side_by_side(record: dict, link: str) -> str:
    runs = record["runs"]
    walls = sorted(r["wall_s"] for r in runs)
    items = {i["item"] for r in runs for i in r["items"]}
    passes = {name: sum(1 for r in runs for i in r["items"] if i["item"] == name and i["outcome"] == "passed")
              for name in items}
    every = min(passes.values()) if passes else 0
    workers = sorted({r["workers"] for r in runs})
    return (f"`make exercises` on {'/'.join(map(str, workers))} labs side by side, {len(runs)} run(s) of "
            f"{len(items)} items: {sum(passes.values())} of {len(runs) * len(items)} passed "
            f"(every item at least {every}/{len(runs)}), "
            + (f"{walls[0]:.0f} s" if round(walls[0]) == round(walls[-1]) else f"{walls[0]:.0f}–{walls[-1]:.0f} s a run")
            + " "
            f"({_when(record, link)}; [record]({link}))")


def _vcluster(record: dict, link: str) -> str:
    setup = record["setup_s"]
    versions = " and ".join(sorted(setup))
    return (f"A version trial in vClusters ({versions} at once on one kind host): each vCluster's KAI bound "
            f"its probe {min(setup.values()):.0f}–{max(setup.values()):.0f} s after creation; the whole trial "
            f"took {record['vcluster_trial']['wall_s']:,.0f} s ({_when(record, link)}; [record]({link}))")


def _endings(record: dict, link: str) -> str:
    per = record["per_pod"]
    return (f"Pods ended by deletion vs by run time, {record['pods']:,} pods: {per['deleted']['cpu_ms']} vs "
            f"{per['run-time']['cpu_ms']} ms of CPU and {per['deleted']['writes']} vs {per['run-time']['writes']} "
            f"pod writes per pod ({_when(record, link)}; [record]({link}))")


def _source(record: dict, link: str) -> str:
    return f"({_when(record, link)}; [record]({link}))"


def _s(value: float) -> str:
    """Seconds as a page shows them: whole seconds from 10 up, one decimal below."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _span(values: list[float], fmt: Callable[[float], str] = _s) -> str:
    low, high = fmt(min(values)), fmt(max(values))
    return low if low == high else f"{low}–{high}"


def _pct(share: float, digits: int = 0) -> str:
    return f"{share * 100:.{digits}f} %"


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


KAI_PROCESSES = ("scheduler", "binder", "podgrouper", "queuecontroller", "podgroupcontroller")
HARNESS = "kailab (harness)"


def _scale(record: dict, link: str) -> str:
    """`kailab bench scale`: each shape's throughput, latencies, reclaim and CPU, then where the CPU went."""
    runs = record["runs"]
    rows = ["| shape | submitted | all bound | binds/s | create → bound p50 / p99 | reclaim: 1 GPU / many "
            "| CPU s: kube-apiserver / KAI's five / kailab |",
            "|---|---|---|---|---|---|---|"]
    for r in runs:
        cpu = r["cpu_seconds"]
        bound = (f"**{r['seconds_to_all_bound']:,.0f} s** ({r['seconds_to_all_bound'] / 60:.1f} min)" if r["all_bound"]
                 else f"not all: {r['bound']:,} of {r['count']:,}")
        rc = r.get("reclaim")
        reclaim = (f"**{rc['first_gpu_s']:.0f} s / {rc['many_gpus_s']:.0f} s** ({rc['many']} GPUs)" if rc
                   else "(nothing lent out at this size)")
        ttb = r["time_to_bind_s"]
        rows.append(f"| {r['count']:,} single-GPU {'Jobs' if r['shape'] == 'jobs' else r['shape']} "
                    f"| in {r['submit_seconds']:.0f} s ({r['creates_per_s']:.0f}/s) | {bound} | {r['binds_per_s']} "
                    f"| {ttb['p50']:.0f} s / {ttb['p99']:.0f} s | {reclaim} "
                    f"| {cpu.get('kube-apiserver', 0):.0f} / {r['kai_cpu_seconds']:.0f} / {cpu.get(HARNESS, 0)} |")
    cores = (record.get("machine") or {}).get("cores")
    spent = [sum(r["cpu_seconds"].values()) for r in runs]
    parts = []
    if cores:
        used = [_pct(s / (cores * r["seconds_to_all_bound"])) for s, r in zip(spent, runs)]
        parts.append(f"every process together used {_and(used)} of the {cores} cores' CPU seconds")
    parts.append("the API server alone "
                 + _and([_pct(r["cpu_seconds"].get("kube-apiserver", 0) / s) for s, r in zip(spent, runs)])
                 + " of what was spent")
    for r in runs:
        kai = sorted(((k, v) for k, v in r["cpu_seconds"].items() if k in KAI_PROCESSES), key=lambda kv: -kv[1])
        parts.append(f"KAI's processes in the {r['shape']} run, most first: " + ", ".join(f"{k} {v:.0f} s" for k, v in kai))
    parts.append("kailab's own process (submitter and bind watch) "
                 + _and([_pct(r["harness_cpu_share_of_kai"], 1) for r in runs]) + " of KAI's CPU")
    return ("\n".join(rows) + f"\n\nShapes in the order of the table, on the `{record.get('fleet', '?')}` fleet, KAI "
            f"{record.get('kai_version', '?')}: " + "; ".join(parts) + f" {_source(record, link)}")


def _warm_up(record: dict, link: str) -> str:
    """`kailab bench`: warm `up` and `down` per fleet, and the longest of `up`'s parallel parts."""
    rows = ["| fleet | warm `up` (median, all runs) | `down` | the longest part of `up` |", "|---|---|---|---|"]
    for lab in record["labs"]:
        phases = lab.get("up_phases_median_s") or {}
        parallel = {k: v for k, v in phases.items()
                    if k in ("control plane healthy", "fleet Ready", "metrics serving") or "probe bound" in k}
        longest = ""
        if parallel:
            name = max(parallel, key=parallel.get)
            longest = f"{name} {parallel[name]:.1f} s"
            inner = [k for k in ("KAI CRDs Established", "KAI serving", "probe pod bound") if k in phases]
            if "probe bound" in name and inner:
                longest += ": " + " → ".join(f"{k} {phases[k]:.1f} s" for k in inner)
        rows.append(f"| {lab['fleet']}{'' if lab.get('with_kai', True) else ' (no KAI)'} "
                    f"| **{lab['up_s']:.1f} s** ({_span(lab['up_all_s'], lambda v: f'{v:.1f}')}, {lab['runs']} runs) "
                    f"| {lab['down_s']:.2f} s | {longest} |")
    return "\n".join(rows) + f"\n\nKAI {record.get('kai_version', '?')} {_source(record, link)}"


def _cold_builds(record: dict, link: str) -> str:
    """The seconds each cached build took, as the toolchain cache recorded them when the bench ran."""
    builds = [f"{name} {_s(s)} s" for name, s in sorted(record["cold_build_s"].items()) if s is not None]
    return ("Cold builds: " + ", ".join(builds)
            + f" {_source(record, link)}")


_RATIOS = {"ratio_vs_kwokctl_equal_readiness": "kailab ÷ kwokctl at equal readiness",
           "ratio_vs_kwokctl_with_fleet": "kailab ÷ kwokctl with the same fleet Ready",
           "ratio_vs_kwokctl_bare": "kailab ÷ bare kwokctl"}


def _peer(record: dict, link: str) -> str:
    """`kailab bench peer`: each command's median and spread over the alternating runs, and the ratios."""
    peer = record.get("peer") or record
    commands = [f"`{cmd}` **{med:.2f} s** ({_span(peer['all_s'][cmd], lambda v: f'{v:.2f}')})"
                for cmd, med in peer["median_s"].items()]
    ratios = [f"{label} **{peer[key]}**" for key, label in _RATIOS.items() if peer.get(key) is not None]
    return (f"Fleet {peer['fleet']}, {peer['runs']} alternating runs, median (fastest–slowest): "
            + "; ".join(commands) + ". " + "; ".join(ratios) + f" {_source(record, link)}")


WINDOWS = ("stays", "settle")


def _suite(record: dict, link: str) -> str:
    """`kailab bench repeat-exercises`: where the suite's wall time went, summed over exercises and runs."""
    exercises = record["exercises"]
    total = sum(s for e in exercises.values() for s in e["seconds"])
    walls = [w for e in exercises.values() for w in e.get("wall", [])]
    part: dict[str, float] = {}
    for w in walls:
        for k, v in w.items():
            part[k] = part.get(k, 0.0) + v
    windows = sum(part.get(k, 0.0) for k in WINDOWS)
    expect = {name: sum(w.get("expect", 0.0) for w in e.get("wall", [])) for name, e in exercises.items()}
    most = max(expect, key=expect.get)
    known = (*WINDOWS, "expect", "clean-up", "evidence")
    rest = {k: v for k, v in part.items() if k not in known}
    return (f"{len(exercises)} exercises, {_times(record['runs'])} each on one lab, {record['passed']} / "
            f"{record['total']} passed: **{total:.0f} s** in all, of which **{windows:.0f} s are windows the "
            f"exercises ask for** (" + ", ".join(f"`{k}` {part.get(k, 0.0):.0f} s" for k in WINDOWS) + "), "
            f"{part.get('expect', 0.0):.0f} s waiting for KAI to get where an `expect` says ({expect[most]:.0f} s "
            f"of it in {most}), {part.get('clean-up', 0.0):.0f} s clean-up (about "
            f"{part.get('clean-up', 0.0) / max(len(walls), 1):.1f} s an exercise), {part.get('evidence', 0.0):.0f} s "
            f"evidence, {sum(rest.values()):.0f} s the rest ({', '.join(sorted(rest, key=lambda k: -rest[k]))}) "
            f"{_source(record, link)}")


def _runtimes(record: dict, link: str) -> str:
    """`kailab bench compare-labs`: which rows passed on every lab, which not, and each runtime's wall seconds."""
    rows, labs = record["rows"], record["labs"]
    both = [r for r in rows if all(lab["verdict"] == "passed" for lab in r["labs"].values())]
    names = sorted({r["exercise"] for r in rows})
    what = "exercises" if len(names) == len(rows) else f"runs of {_and(names)}"
    runtimes = " and ".join(f"{rt} ({name})" for name, rt in labs.items())
    differ = [f"{r['exercise']}: " + ", ".join(f"{labs[n]} {lab['verdict']}" for n, lab in r["labs"].items())
              for r in rows if r not in both]
    seconds = ", ".join(f"{rt} {_span([r['labs'][name]['seconds'] for r in rows if name in r['labs']])} s"
                        for name, rt in labs.items())
    return (f"Fleet {record['fleet']}, KAI {record.get('kai_version', '?')}, labs {runtimes}: **{len(both)} of "
            f"{len(rows)}** {what} passed on all of them" + (f" (not: {'; '.join(differ)})" if differ else "")
            + f"; wall seconds {'per exercise' if what == 'exercises' else 'per run'}: {seconds} {_source(record, link)}")


def _repeatability(record: dict, link: str) -> str:
    """`kailab bench repeat-exercises N`: runs passed, and the least any exercise passed; for one exercise,
    the runtime its lab ran on (when recorded) and its runs' seconds."""
    exercises = record["exercises"]
    if len(exercises) == 1:
        (name, e), = exercises.items()
        lab = f" on a {record['runtime']} lab" if record.get("runtime") else ""
        return (f"**{record['passed']} / {record['total']}** runs of {name} passed{lab}, one after another, each "
                f"{_span(e['seconds'])} s (median {_s(_median(e['seconds']))} s) {_source(record, link)}")
    least = min((e["passed"], e["runs"]) for e in exercises.values())
    every = (f"every exercise {least[1]} / {least[1]}" if all(e["passed"] == e["runs"] for e in exercises.values())
             else f"the least any exercise passed {least[0]} / {least[1]}")
    return (f"**{record['passed']} / {record['total']}** runs passed, {every} ({len(exercises)} exercises, "
            f"{_times(record['runs'])} each: {', '.join(sorted(exercises))}) {_source(record, link)}")


def _soak(record: dict, link: str) -> str:
    """`kailab bench soak N`: cycles that left nothing behind, and `up`/`down` medians."""
    note = f"; {record['note']}" if record.get("note") else ""
    return (f"**{record['clean_cycles']} / {record['cycles']}** up/down cycles of a KAI lab ({record['fleet']} "
            f"fleet) left nothing behind (processes, ports, directory); `up` median {record['up_s_median']} s, "
            f"`down` median {record['down_s_median']} s{note} {_source(record, link)}")


def _vcluster_trial(record: dict, link: str) -> str:
    """`kailab bench vcluster`: the trial's times, each exercise in a vCluster vs a plain kind lab, verdicts."""
    versions = record["versions"]
    inside, plain = record["in_vcluster_wall_s"], record["plain_kind"]
    ratios, rows = [], ["| exercise | " + " | ".join(f"{v}: vCluster / plain kind" for v in versions) + " |",
                        "|---|" + "---|" * len(versions)]
    for ex in record["exercises"]:
        cells = []
        for v in versions:
            a, b = inside.get(v, {}).get(ex), plain.get(v, {}).get("exercise_wall_s", {}).get(ex)
            if a is None or not b:
                cells.append("—")
                continue
            ratios.append(a / b)
            cells.append(f"{a} s / {b} s ({a / b:.1f}×)")
        rows.append(f"| {ex} | " + " | ".join(cells) + " |")
    cells = [(ex, v) for ex, per in record.get("verdicts", {}).items() for v in per]
    same = [(ex, v) for ex, v in cells if len({w.split()[0] for w in record["verdicts"][ex][v].values()}) == 1]
    per = lambda d: ", ".join(f"{d[v]} s ({v})" for v in versions)  # noqa: E731
    return (f"{_and(versions)} at once in vClusters on one kind host (host up {record['host_up_s']:.0f} s): each "
            f"vCluster's KAI bound its probe {per(record['setup_s'])} after creation; the "
            f"{len(record['exercises'])} exercises, {_times(record.get('repeat', 1))} each, every version at once "
            f"in {record['exercises_s']:.0f} s; delete-to-clean {per(record['rollback_s'])}; the whole trial with "
            f"its binary labs {record['vcluster_trial']['wall_s']:,.0f} s. An exercise's first run in a vCluster "
            f"(every version at once) against a plain kind lab of the same version alone"
            + (f", {min(ratios):.1f}–{max(ratios):.1f}× its time:" if ratios else ":") + "\n\n"
            + "\n".join(rows) + "\n\n"
            f"Verdicts the same in the vCluster, on a binary lab and on a plain kind lab in **{len(same)} of "
            f"{len(cells)}** exercise × version cells {_source(record, link)}")


def _churn(record: dict, link: str) -> str:
    """`kailab bench churn N`: starts that came up or died, `up` times, retries by cause, the machine's load."""
    load = record.get("machine_load") or {}
    cores = (record.get("machine") or {}).get("cores")
    beside = f", with `{record['load']}` running beside them ({len(record['load_runs'])} runs)" if record.get("load") else ""
    retries = "; ".join(f"{cause}: {n}" for cause, n in record.get("retries_by_cause", {}).items())
    deaths = "; ".join(f"{cause}: {n}" for cause, n in record.get("deaths_by_cause", {}).items())
    return (f"{record['starts']} starts of a `{record['fleet']}` lab, {record['at_once']} at a time{beside}, in "
            f"{record['wall_s'] / 60:.1f} min"
            + (" (stopped early)" if record.get("interrupted") else "")
            + f": **{record['ok']} of {record['starts']} came up, {record['died']} died**"
            + (f" ({deaths})" if deaths else "")
            + f" (median `up` {record['up_s_median']:.0f} s, slowest {record['up_s_max']:.0f} s)"
            + (f"; busy cores {load['busy_cores_mean']} of {cores} on average (p90 {load['busy_cores_p90']})"
               if load.get("busy_cores_mean") is not None and cores else "")
            + f"; starts with a start retry: {record['starts_with_retries']} of {record['starts']}"
            + (f" ({retries})" if retries else "")
            + f" {_source(record, link)}")


def _twin_scale(record: dict, link: str) -> str:
    s, c, d = record["seconds"], record["snapshot"], record["decided"]
    tool = record.get("against_snapshot_tool")
    return (f"A twin of {c['nodes']:,} nodes, {c['gpus']:,} GPUs, {c['pods_bound']:,} pods bound and "
            f"{c['pods_pending']} pending: settled **{s['to_settled']} s** after the command started (lab up "
            f"{s['lab_up']} s, the state in and checked {s['state_in']} s, KAI deciding {s['kai_deciding']} s; then "
            f"{s['settle_window']:g} s of quiet to call it settled), {record['cpu_s_machine']:,} CPU-s of the machine, "
            f"{record['round_trip_differences']} round-trip differences; KAI placed {d['placed']} and evicted {d['evicted']}"
            + (f"; KAI's snapshot tool agreed on {tool['alike']} of {tool['pods_decided']} pods "
               f"({tool['agreement']:.1%}) in {tool['tool_seconds']} s" if tool else "")
            + f" ({_when(record, link)}; [record]({link}))")


def _twins(record: dict, link: str) -> str:
    v = record["variants"]
    queues = record.get("queues_gpus", {})
    lines = ["| twin | KAI | design | placed | still pending | evicted | settled | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {k} | {x['kai_version']} | {x['design']} | {x['placed']} | {x['still_pending']} | {x['evicted']} | "
              f"{'yes' if x['settled'] else 'no'} | {x['seconds']} |" for k, x in v.items()]
    if queues:
        lines += ["", "| queue | GPUs in the snapshot | " + " | ".join(f"after, {k}" for k in v) + " |",
                  "|---" * (len(v) + 2) + "|"]
        lines += [f"| {q} | {g['before']:g} | " + " | ".join(f"{g.get(k, 0):g}" for k in v) + " |" for q, g in queues.items()]
    lines += ["", f"{record['pending_in_snapshot']} pods pending in the snapshot; decided differently: "
              f"**{record['decided_differently']}** (placed by one, pending or evicted in another), placed on other "
              f"nodes: {record['placed_differently']} ({_when(record, link)}; [record]({link}))"]
    return "\n".join(lines)


def _median(values: list[float]) -> float:
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f}"


def _duration(seconds: float, both: bool = False) -> str:
    """Minutes from 10 minutes up (with the seconds when `both`), seconds below."""
    if seconds < 600:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" + (f" ({seconds:,.0f} s)" if both else "")


def _side_by_side_runs(record: dict, link: str) -> str:
    """`kailab bench side-by-side`: per number of labs, items passed, wall seconds, the CPU-seconds
    every process spent (and what that is over the machine's cores), peak memory, and the longest item."""
    cores = (record.get("machine") or {}).get("cores")
    by: dict[int, list[dict]] = {}
    for r in record["runs"]:
        by.setdefault(r["workers"], []).append(r)
    parts = []
    for workers, runs in by.items():
        walls = [r["wall_s"] for r in runs]
        items = sum(len(r["items"]) for r in runs)
        passed = sum(1 for r in runs for i in r["items"] if i["outcome"] == "passed")
        labs = "one lab (`LABS=0`)" if workers == 0 else f"{workers} labs side by side"
        wall = (f"**{walls[0]:.0f} s**" if len(runs) == 1
                else f"**{_median(walls):.0f} s** median ({_span(walls, lambda v: f'{v:.0f}')} s)")
        cpu = [r["cpu_seconds"] for r in runs if r.get("cpu_seconds") is not None]
        memory = [r["memory_peak_mib"] for r in runs if r.get("memory_peak_mib") is not None]
        parts.append(f"{labs}, {_times(len(runs)) if len(runs) == 1 else f'{len(runs)} runs'}: **{passed} / {items}** "
                     f"items passed, {wall}"
                     + (f", {_span(cpu, lambda v: f'{v:.0f}')} CPU-s" if cpu else "")
                     + (f" ({_span([c / cores for c in cpu], lambda v: f'{v:.0f}')} s over {cores} cores)"
                        if cpu and cores else "")
                     + (f", peak memory {_span(memory, _gib)} GiB" if memory else ""))
    longest: dict[str, list[float]] = {}
    for r in record["runs"]:
        top = max(r["items"], key=lambda i: i["seconds"])
        longest.setdefault(top["item"], []).append(top["seconds"])
    names = {i["item"] for r in record["runs"] for i in r["items"]}
    return (f"`make exercises` ({len(names)} items), fleet `{record.get('fleet', '?')}`, KAI "
            f"{record.get('kai_version', '?')}: " + "; ".join(parts) + ". The longest item of a run: "
            + ", ".join(f"{name} {_span(s, lambda v: f'{v:.0f}')} s" for name, s in longest.items())
            + f" {_source(record, link)}")


def _at_mark(rows: list[dict], mark: float, key: str):
    """`key` at the first step whose arrived share reached `mark` % (as the fill's table reads it)."""
    return next((r.get(key) for r in rows if r["arrived_pct"] >= mark - 1e-9), None)


FILL_FIGURES = {"allocated_pct": "GPU allocated", "fragmented_pct": "GPU fragmented", "unplaced_gpu_pct": "GPU unplaced"}


def _fill(record: dict, link: str) -> str:
    """`kailab bench fill`: each design's GPU allocated, fragmented and unplaced at the arrived marks (the
    seeds' range), which design led, and per design and seed the pods, wall time, the lab's CPU and where
    it went, and what the steps recorded (first unplaced pod, KAI's cycle, evictions) when the record keeps them."""
    table, curves = record["table"], record.get("curves") or {}
    marks = list(dict.fromkeys(float(k.split("@")[1].rstrip("%")) for d in table.values() for k in d))
    cores = (record.get("machine") or {}).get("cores")
    seeds = record.get("seeds") or []
    kai = (record.get("plan") or {}).get("kai_version")
    scale = "full scale" if record.get("sample", 1) == 1 else f"1/{record['sample']} of each node pool and of the tasks"
    head = (f"Task list `{record['tasks']}`, {scale} ({record['nodes']:,} nodes, {record['gpus']:,} GPUs)"
            + (f", KAI {kai}" if kai else "") + f", seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}, "
            f"steps of at most {record['step'] * 100:g} % of the fleet's GPUs; % of the fleet's GPUs when the arrived "
            "GPU workload reached each mark" + (" (the seeds' range)" if len(seeds) > 1 else "") + ":")
    rows = ["| design | figure | " + " | ".join(f"arrived {m:g} %" for m in marks) + " |",
            "|---|---|" + "---|" * len(marks)]
    for design, figs in table.items():
        for key, label in FILL_FIGURES.items():
            cells = [figs.get(f"{key}@{m:g}%") for m in marks]
            rows.append(f"| {design} | {label} | "
                        + " | ".join("—" if c is None else _span(c, lambda v: f"{v:.1f}") for c in cells) + " |")
        if design in curves:
            cells = [[v for v in (_at_mark(r, m, "cpu_allocated_pct") for r in curves[design].values()) if v is not None]
                     for m in marks]
            rows.append(f"| {design} | CPU allocated | "
                        + " | ".join(_span(c, lambda v: f"{v:.1f}") if c else "—" for c in cells) + " |")
    out = [head, "", *rows, ""]
    designs = list(table)
    if len(designs) == 2:
        a, b = designs
        lead = []
        for m in marks:
            x, y = table[a].get(f"allocated_pct@{m:g}%"), table[b].get(f"allocated_pct@{m:g}%")
            if not x or not y:
                continue
            lead.append(a if min(x) > max(y) else b if min(y) > max(x) else "neither")
        said = []
        for who in dict.fromkeys(lead):
            at = [f"{m:g}" for m, w in zip(marks, lead) if w == who]
            other = b if who == a else a
            what = ("the seeds' ranges overlap" if who == "neither" else
                    f"{who}'s lowest seed above {other}'s highest" if len(seeds) > 1 else f"{who} allocated more")
            said.append(f"{what} at " + ("every mark" if len(at) == len(lead) else _and(at) + " % arrived"))
        out += ["GPU allocated: " + "; ".join(said) + ".", ""]
    runs = ["| design, seed | pods | steps | wall | lab CPU-s | ÷ " + (f"{cores} cores" if cores else "cores")
            + " | the machine's other CPU | the lab's CPU, most first | peak GiB: kube-apiserver / KAI's scheduler |",
            "|---|---|---|---|---|---|---|---|---|"]
    notes, up, not_ready = [], [], []
    for design, r in record["runs"].items():
        if r.get("up", {}).get("up_wall_s") is not None:
            up.append(f"{design} {r['up']['up_wall_s']:.0f} s")
        for seed, run in r["seeds"].items():
            cpu, wall = run.get("cpu_seconds") or {}, run["wall_s"]
            lab = sum(cpu.values())
            share = sorted(((k, v) for k, v in cpu.items() if k != HARNESS), key=lambda kv: -kv[1])[:5]
            where = ", ".join(f"{k} {_pct(v / lab)}" for k, v in share) + (
                f"; harness {_pct(cpu[HARNESS] / lab, 1)}" if HARNESS in cpu else "") if lab else "—"
            other = run.get("machine_cpu_seconds")
            peak = run.get("peak_memory_mib") or {}
            runs.append(f"| {design}, seed {seed} | {run['tasks']:,} | {run['steps']} | {_duration(wall, True)} "
                        f"| {lab:,.0f} | " + (_duration(lab / cores) if cores and lab else "—") + " | "
                        + (f"{max(0.0, other - lab) / wall:.2f} core" if other is not None else "—") + f" | {where} | "
                        + (f"{_gib(peak['kube-apiserver'])} / {_gib(peak['scheduler'])}"
                           if "kube-apiserver" in peak and "scheduler" in peak else "—") + " |")
            if "nodes_not_ready" in run:
                not_ready.append(run["nodes_not_ready"])
            steps = (curves.get(design) or {}).get(str(seed))
            if not steps:
                continue
            first = next((s["arrived_pct"] for s in steps if s["unplaced_pods"] > 0), None)
            cycle = [s["cycle_ms"] for s in steps if s.get("cycle_ms") is not None]
            at100 = _at_mark(steps, 100, "cycle_ms")
            note = (f"{design}, seed {seed}: "
                    + (f"the first pod unplaced at {first:.1f} % arrived" if first is not None else "no pod unplaced")
                    + f", {_at_mark(steps, marks[-1], 'unplaced_pods'):,} pods unplaced at {marks[-1]:g} %"
                    + f", {max(s['evicted_pods'] for s in steps)} evicted"
                    + (f", {len(run['deleted_after_bound'])} deleted after binding" if "deleted_after_bound" in run else "")
                    + (f"; KAI's cycle {at100 / 1000:.1f} s at 100 % arrived" if at100 is not None else "")
                    + (f", {max(cycle) / 1000:.1f} s at its longest" if cycle else ""))
            if all("submit_s" in s for s in steps):
                sub, total = sum(s["submit_s"] for s in steps), sum(s["settle_s"] for s in steps)
                note += (f"; creating the steps' pods, one POST at a time, took {sub:,.0f} s of the steps' {total:,.0f} s "
                         f"({_pct(sub / total)}, {run['tasks'] / sub:.1f} pods a second)")
            notes.append(note + ".")
    out += [*runs, "", *notes]
    tail = []
    if up:
        tail.append("lab up in " + ", ".join(up))
    if not_ready:
        tail.append(f"nodes not Ready at the end: {_span(not_ready, str)}" + (" in every run" if len(not_ready) > 1 else ""))
    load = record.get("machine_load") or {}
    tail.append(f"the whole bench (labs up, fills, labs down) {record['wall_seconds'] / 60:.1f} min"
                + (f", the machine {load['busy_cores_mean']} of {cores} cores busy on average"
                   if load.get("busy_cores_mean") is not None and cores else ""))
    tail = "; ".join(tail)
    return "\n".join(out) + "\n" + tail[:1].upper() + tail[1:] + f" {_source(record, link)}"


def _replay(record: dict, link: str) -> str:
    """`kailab replay --repeat N`: each queue's wait p95 / p99 per variant (median, runs' range; bold where it moved
    beyond the runs' spread), what moved between each pair, the expectations, the submitter's lag."""
    plan, diff, med, rng = record["plan"], record["differences"], record["medians"], record["ranges"]
    labels = [v["label"] for v in plan["variants"]]
    versions = sorted({v["kai_version"] for v in plan["variants"] if v.get("kai_version")})
    moved = diff.get("moved", {})
    rows = ["| figure, trace s | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for q in record.get("queues", []):
        for fig in ("wait_p95", "wait_p99"):
            key, cells = f"{q}.{fig}", []
            for label in labels:
                if key not in med.get(label, {}):
                    cells.append("—")
                    continue
                lo, hi = rng.get(label, {}).get(key, [med[label][key]] * 2)
                text = _s(med[label][key]) + ("" if _s(lo) == _s(hi) else f" ({_s(lo)}–{_s(hi)})")
                cells.append(f"**{text}**" if key in moved else text)
            rows.append(f"| {key} | " + " | ".join(cells) + " |")
    if diff.get("judged"):
        pairs = [f"{pair}: " + (f"{len(keys)} moved" if keys else "**nothing moved**") for pair, keys in diff["pairs"].items()]
        judged = f"Beyond the runs' spread, of {diff['figures_compared']} figures compared: " + "; ".join(pairs)
    else:
        judged = f"No difference judged: {diff.get('why', '')}"
    held = [e for e in record.get("expectations", []) if e["held"]]
    lag = [v for label in labels for v in rng.get(label, {}).get("submit.lag_p99_wall_s", [])]
    behind = [label for label, ws in (record.get("warnings") or {}).items() if any("fell behind" in w for w in ws)]
    return (f"`{Path(plan['trace']).name}` ({plan['jobs']} jobs), fleet `{plan['fleet']}`, compressed "
            f"{plan['compress']:g}×, {len(labels)} variants, {_times(plan['repeat'])} each"
            + (f", KAI {', '.join(versions)}" if versions else "") + "; each cell the median over the runs (their range):"
            + "\n\n" + "\n".join(rows) + "\n\n" + judged
            + (f". Expectations held: {len(held)} of {len(record.get('expectations', []))}" if record.get("expectations") else "")
            + (f". The submitter's lag p99: {_span(lag, lambda v: f'{v:.1f}')} s wall" if lag else "")
            + (f"; it fell behind the trace in {'every variant' if len(behind) == len(labels) else _and(behind)}"
               if behind else "")
            + f" {_source(record, link)}")


def _endings_table(record: dict, link: str) -> str:
    """`kailab bench endings N`: per pod, CPU of all lab processes and of kube-apiserver, pod writes and DELETEs,
    for pods ended by their run time and pods deleted; each run's CPU-seconds."""
    per, grace = record["per_pod"], record.get("termination_grace_s")
    deletes = {mode: [r["requests"].get("DELETE", 0) / r["pods"] for r in record["runs"] if r["mode"] == mode]
               for mode in per}
    label = {"run-time": "run time (then the namespace goes)",
             "deleted": "deleted (then the node ends it" + (f" within the {grace:g} s termination grace" if grace else "")
                        + ", and removes it)"}
    rows = ["| ending | CPU per pod, all lab processes | kube-apiserver CPU per pod | pod writes per pod "
            "| DELETE requests per pod |", "|---|---|---|---|---|"]
    for mode, p in per.items():
        dels = f"{sum(deletes[mode]) / len(deletes[mode]):.1f}" if deletes[mode] else "—"
        rows.append(f"| {label.get(mode, mode)} | {p['cpu_ms']:.1f} ms | {p['apiserver_cpu_ms']:.1f} ms "
                    f"| {p['writes']:.1f} | {dels} |")
    runs = [r["cpu_total_s"] for r in record["runs"]]
    extra = per["deleted"]["writes"] - per["run-time"]["writes"] if {"deleted", "run-time"} <= set(per) else None
    return ("\n".join(rows) + f"\n\n{record['pods']:,} pods on the `{record['fleet']}` fleet, each mode "
            f"{_times(record.get('repeats', 1))}, alternating; all lab processes {_span(runs, lambda v: f'{v:.1f}')} CPU-s a run"
            + (f"; a deleted pod {extra:.1f} more writes" if extra is not None else "") + f" {_source(record, link)}")


def _top(record: dict, link: str) -> str:
    """`kailab bench top`: what kailab top costs watching a busy lab."""
    return (f"`kailab top --interval {record['interval_s']:g}` on the {record['fleet']} fleet ({record['nodes']:,} nodes, "
            f"{record['pods_standing']:,} pods standing, {record['pods_churned_per_s']} arriving a second and ending after "
            f"20 s): **{record['refreshes']} refreshes in {record['window_s']:g} s** (period mean "
            f"{record['refresh_period_mean_s']} s, max {record['refresh_period_max_s']} s) for **{record['top_core_share']:.1%} "
            f"of one core** ({_when(record, link)}; [record]({link}))")


RENDERERS: dict[str, Callable[[dict, str], str]] = {
    "top": _top,
    "twin-scale": _twin_scale,
    "twins": _twins,
    "exercises-side-by-side": _side_by_side,
    "vcluster": _vcluster,
    "endings": _endings,
    "scale": _scale,
    "warm-up": _warm_up,
    "cold-builds": _cold_builds,
    "peer": _peer,
    "suite": _suite,
    "runtimes": _runtimes,
    "repeatability": _repeatability,
    "soak": _soak,
    "vcluster-trial": _vcluster_trial,
    "churn": _churn,
    "side-by-side-runs": _side_by_side_runs,
    "fill": _fill,
    "replay": _replay,
    "endings-table": _endings_table,
}
