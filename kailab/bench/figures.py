"""Figures in README and docs, rendered from the records under bench/results/ so none goes stale.

A page holds a marked block:

    <!-- figure: KIND bench/results/<record>.json -->
    ...what `render(KIND, record)` gives...
    <!-- /figure -->

`kailab bench --render-docs` rewrites every block from its record; tests/unit/test_figures.py fails
when a block differs from what its record gives (a number changed in a record, or edited by hand in
a page). Each rendering says its record's date and machine, and its commit when the record has one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

from ..errors import KailabError
from ..paths import PROJECT_ROOT

BLOCK = re.compile(r"(<!-- figure: (\S+) (\S+) -->\n)(.*?)(<!-- /figure -->)", re.S)


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
    """`kailab bench --scale`: each shape's throughput, latencies, reclaim and CPU, then where the CPU went."""
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
    """`kailab bench --peer`: each command's median and spread over the alternating runs, and the ratios."""
    peer = record.get("peer") or record
    commands = [f"`{cmd}` **{med:.2f} s** ({_span(peer['all_s'][cmd], lambda v: f'{v:.2f}')})"
                for cmd, med in peer["median_s"].items()]
    ratios = [f"{label} **{peer[key]}**" for key, label in _RATIOS.items() if peer.get(key) is not None]
    return (f"Fleet {peer['fleet']}, {peer['runs']} alternating runs, median (fastest–slowest): "
            + "; ".join(commands) + ". " + "; ".join(ratios) + f" {_source(record, link)}")


WINDOWS = ("stays", "settle")


def _suite(record: dict, link: str) -> str:
    """`kailab bench --repeat-exercises`: where the suite's wall time went, summed over exercises and runs."""
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
    """`kailab bench --compare-labs`: which rows passed on every lab, which not, and each runtime's wall seconds."""
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
    """`kailab bench --repeat-exercises N`: runs passed, and the least any exercise passed."""
    exercises = record["exercises"]
    least = min((e["passed"], e["runs"]) for e in exercises.values())
    every = (f"every exercise {least[1]} / {least[1]}" if all(e["passed"] == e["runs"] for e in exercises.values())
             else f"the least any exercise passed {least[0]} / {least[1]}")
    return (f"**{record['passed']} / {record['total']}** runs passed, {every} ({len(exercises)} exercises, "
            f"{_times(record['runs'])} each: {', '.join(sorted(exercises))}) {_source(record, link)}")


def _soak(record: dict, link: str) -> str:
    """`kailab bench --soak N`: cycles that left nothing behind, and `up`/`down` medians."""
    note = f"; {record['note']}" if record.get("note") else ""
    return (f"**{record['clean_cycles']} / {record['cycles']}** up/down cycles of a KAI lab ({record['fleet']} "
            f"fleet) left nothing behind (processes, ports, directory); `up` median {record['up_s_median']} s, "
            f"`down` median {record['down_s_median']} s{note} {_source(record, link)}")


def _vcluster_trial(record: dict, link: str) -> str:
    """`kailab bench --vcluster`: the trial's times, each exercise in a vCluster vs a plain kind lab, verdicts."""
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
    """`kailab bench --churn N`: starts that came up or died, `up` times, retries by cause, the machine's load."""
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


RENDERERS: dict[str, Callable[[dict, str], str]] = {
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
}


def _link(path: Path, page: Path) -> str:
    """The record as a link from the page: its markdown beside the JSON when there is one."""
    readable = path.with_suffix(".md") if path.with_suffix(".md").exists() else path
    if not readable.is_relative_to(PROJECT_ROOT) or not page.is_relative_to(PROJECT_ROOT):
        return readable.as_posix()
    up = [".."] * len(page.parent.relative_to(PROJECT_ROOT).parts)
    return Path(*up, readable.relative_to(PROJECT_ROOT)).as_posix()


def render(kind: str, record_path: str, page: Path) -> str:
    """The block's text (ending in a newline) for a figure of `kind` from a record, as `page` shows it."""
    if kind not in RENDERERS:
        raise KailabError(f"{page}: figure kind {kind!r} is unknown (known: {', '.join(sorted(RENDERERS))})")
    path = PROJECT_ROOT / record_path
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise KailabError(f"{page}: figure record {record_path}: {err}") from None
    return RENDERERS[kind](record, _link(path, page)) + "\n"


def pages() -> list[Path]:
    return [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]


def rendered(page: Path) -> str:
    """The page's text with every figure block rendered from its record."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group(2), m.group(3), page) + m.group(5), page.read_text())


def stale() -> list[str]:
    """'page: kind record' for every block whose text differs from what its record gives."""
    out = []
    for page in pages():
        text = page.read_text()
        for m in BLOCK.finditer(text):
            if m.group(4) != render(m.group(2), m.group(3), page):
                out.append(f"{page.relative_to(PROJECT_ROOT)}: {m.group(2)} {m.group(3)}")
    return out


def render_docs() -> list[Path]:
    """Rewrite every page whose blocks are stale; returns the pages written."""
    written = []
    for page in pages():
        new = rendered(page)
        if new != page.read_text():
            page.write_text(new)
            written.append(page)
    return written
