"""A replay's page section: the comparison table (medians, ranges, what moved beyond the runs'
spread), fleet GPU utilisation over trace time per variant, waits per queue, expectations.
Read from the replay directory's comparison.json, written by kailab.replay.session."""

from __future__ import annotations

import json
from pathlib import Path

from .svg import PALETTE, _points, nice_max, num
from .text import esc, fmt
from .twins import is_twins

COMPARISON = "comparison.json"
FIGURES = ("jobs", "completed", "not_started", "jobs_failed", "wait_p50", "wait_p95", "wait_p99", "wait_max",
           "gpu_hours_requested", "gpu_hours_delivered", "gpu_hours_lost_to_evictions", "evicted_pods",
           "pods_deleted_before_bound")


def figure_rows(c: dict) -> list[tuple[str, list[str]]]:
    """The comparison table, one row per figure: (figure, a cell per variant — the median over its
    runs, with the range when the runs differ). Shared by comparison.md and the page."""
    labels = list(c.get("medians") or {})
    rows = []
    for scope in ["all", *(c.get("queues") or []), *(f"priority-{p}" for p in c.get("priorities") or [])]:
        for k in FIGURES:
            key = f"{scope}.{k}"
            if not any(key in c["medians"][lb] for lb in labels):
                continue
            cells = []
            for lb in labels:
                m = c["medians"][lb].get(key)
                lo, hi = (c.get("ranges") or {}).get(lb, {}).get(key, [m, m])
                cells.append("—" if m is None else (fmt(m) if lo == hi else f"{fmt(m)} ({fmt(lo)}–{fmt(hi)})"))
            rows.append((key, cells))
    for key in ("fleet.utilisation_mean", "submit.lag_p99_wall_s"):
        rows.append((key, [fmt(c["medians"][lb].get(key, "—")) for lb in labels]))
    return rows


def is_replay(d: Path) -> bool:
    return (Path(d) / COMPARISON).is_file() and not is_twins(d)  # twins write a comparison.json too


def utilisation_svg(c: dict) -> str:
    """Fleet GPU utilisation over trace time: a line per variant (its first run)."""
    series = {k: v for k, v in (c.get("utilisation") or {}).items() if v}
    if not series:
        return ""
    width, height, left, right, top, bottom = 640, 220, 48, 12, 10, 28
    t_end = max(p[0] for s in series.values() for p in s) or 1
    x = lambda t: left + (width - left - right) * t / t_end  # noqa: E731
    y = lambda v: top + (height - top - bottom) * (1 - v)  # noqa: E731
    parts = [f'<svg class="chart replay-util" viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
             f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{height - bottom}"/>',
             f'<line class="axis" x1="{left}" x2="{width - right}" y1="{height - bottom}" y2="{height - bottom}"/>',
             f'<text class="axis" x="{left - 4}" y="{top + 8}" text-anchor="end">100%</text>',
             f'<text class="axis" x="{left - 4}" y="{height - bottom}" text-anchor="end">0</text>',
             f'<text class="axis" x="{width - right}" y="{height - 8}" text-anchor="end">{num(round(t_end / 60, 1))} min '
             'of trace</text>']
    for i, (label, pts) in enumerate(series.items()):
        parts.append(f'<polyline fill="none" stroke="{PALETTE[i % len(PALETTE)]}" stroke-width="2" '
                     f'points="{_points([(x(t), y(v)) for t, v in pts])}"><title>{esc(label)}</title></polyline>')
    parts.append("</svg>")
    legend = "".join(f'<span><span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}"></span>{esc(lb)}</span>'
                     for i, lb in enumerate(series))
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def waits_svg(c: dict) -> str:
    """Wait p95 per queue (trace seconds), a bar per variant, side by side."""
    labels = list(c.get("medians") or {})
    queues = c.get("queues") or []
    vals = {(q, lb): c["medians"][lb].get(f"{q}.wait_p95") for q in queues for lb in labels}
    got = [v for v in vals.values() if isinstance(v, (int, float))]
    if not got:
        return ""
    top_v, _ = nice_max(max(got))
    bar, gap, left, height, top, bottom = 22, 18, 48, 200, 10, 34
    width = left + len(queues) * (len(labels) * bar + gap) + 10
    y = lambda v: top + (height - top - bottom) * (1 - v / top_v)  # noqa: E731
    parts = [f'<svg class="chart replay-waits" viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
             f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{height - bottom}"/>',
             f'<text class="axis" x="{left - 4}" y="{top + 8}" text-anchor="end">{num(top_v)} s</text>',
             f'<text class="axis" x="{left - 4}" y="{height - bottom}" text-anchor="end">0</text>']
    for qi, q in enumerate(queues):
        x0 = left + 6 + qi * (len(labels) * bar + gap)
        for li, lb in enumerate(labels):
            v = vals[(q, lb)]
            if isinstance(v, (int, float)):
                parts.append(f'<rect x="{num(x0 + li * bar)}" y="{num(y(v))}" width="{bar - 3}" '
                             f'height="{num(height - bottom - y(v))}" fill="{PALETTE[li % len(PALETTE)]}">'
                             f'<title>{esc(lb)} {esc(q)}: p95 {esc(fmt(v))} s</title></rect>')
        parts.append(f'<text class="axis" x="{num(x0 + len(labels) * bar / 2)}" y="{height - bottom + 16}" '
                     f'text-anchor="middle">{esc(q)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def replay_html(d: Path, base: Path, link) -> str:
    c = json.loads((Path(d) / COMPARISON).read_text())
    plan = c.get("plan") or {}
    labels = list(c.get("medians") or {})
    moved = (c.get("differences") or {}).get("moved") or {}
    out = [f'<section class="replay"><h2>Replay {esc(Path(d).name)}: {esc(fmt(plan.get("jobs")))} jobs on '
           f'{esc(", ".join(labels))}</h2>',
           f'<p class="muted">From {link(Path(d) / COMPARISON, base)}. Trace {esc(fmt(plan.get("trace")))}, fleet '
           f'{esc(fmt(plan.get("fleet")))}, compressed {esc(fmt(plan.get("compress")))}x, '
           f'{esc(fmt(plan.get("repeat")))} run(s) per variant. Times are trace seconds. A cell is the median '
           'over runs (range when they differ); highlighted figures moved beyond the runs\' spread.</p>']
    diff = c.get("differences") or {}
    if not diff.get("judged"):
        out.append(f'<p class="problem">No difference judged: {esc(fmt(diff.get("why")))}.</p>')
    else:
        out.append('<ul class="files">' + "".join(
            f'<li><b>{esc(pair)}</b>: moved beyond the runs\' spread: {esc(", ".join(keys) or "nothing")}</li>'
            for pair, keys in (diff.get("pairs") or {}).items()) + "</ul>")
    for label, ws in (c.get("warnings") or {}).items():
        for w in dict.fromkeys(ws):
            out.append(f'<p class="problem">{esc(label)}: {esc(w)}</p>')
    for e in c.get("expectations") or []:
        cls = "v-passed" if e.get("held") else "v-failed"
        out.append(f'<p><span class="badge {cls}">{"held" if e.get("held") else "failed"}</span> '
                   f'expect <code>{esc(fmt(e.get("expect")))}</code>: {esc(fmt(e.get("figures")))}</p>')
    for label, errs in (c.get("errors") or {}).items():
        for e in errs:
            out.append(f'<p class="problem">{esc(label)}: {esc(e)}</p>')
    out.append('<figure><figcaption>Fleet GPU utilisation over the trace</figcaption>' + utilisation_svg(c) + '</figure>')
    w = waits_svg(c)
    if w:
        out.append('<figure><figcaption>Wait p95 per queue (trace seconds)</figcaption>' + w
                   + '<div class="legend">' + "".join(
                       f'<span><span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}"></span>{esc(lb)}</span>'
                       for i, lb in enumerate(labels)) + '</div></figure>')
    out.append("<table class=\"figures\"><thead><tr><th>figure</th>" + "".join(f"<th>{esc(lb)}</th>" for lb in labels)
               + "</tr></thead><tbody>")
    for key, cells in figure_rows(c):
        cls = "differs" if key in moved else ""
        out.append(f"<tr><td>{esc(key)}</td>" + "".join(f'<td class="{cls}">{esc(t)}</td>' for t in cells) + "</tr>")
    out.append("</tbody></table></section>")
    return "".join(out)


def picture_svg(c: dict) -> str:
    """The replay's picture as one standalone SVG file (README, slides): fleet utilisation over the
    trace per variant, and wait p95 per queue per variant, with their legends and a title."""
    labels = list(c.get("medians") or {})
    plan = c.get("plan") or {}
    util, waits = utilisation_svg(c).split("<div", 1)[0], waits_svg(c)
    width = 660
    legend = "".join(f'<rect x="{20 + i * 180}" y="36" width="14" height="4" fill="{PALETTE[i % len(PALETTE)]}"/>'
                     f'<text x="{40 + i * 180}" y="42" font-size="12">{esc(lb)}</text>' for i, lb in enumerate(labels))
    title = (f'Replay of {esc(Path(str(plan.get("trace", ""))).name)}: {esc(fmt(plan.get("jobs")))} jobs, fleet '
             f'{esc(fmt(plan.get("fleet")))}, {esc(fmt(plan.get("repeat")))} run(s) per design')
    inner_util = util.replace('<svg class="chart replay-util"', '<svg x="10" y="70"', 1)
    inner_waits = waits.replace('<svg class="chart replay-waits"', '<svg x="10" y="330"', 1)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} 560" width="{width}" height="560" '
            'font-family="sans-serif">'
            '<style>.axis{font-size:11px;fill:#556;stroke:#99a}text.axis{stroke:none}</style>'
            f'<rect width="{width}" height="560" fill="#fff"/>'
            f'<text x="20" y="22" font-size="14" font-weight="600">{title}</text>{legend}'
            '<text x="20" y="64" font-size="12" font-weight="600">Fleet GPU utilisation over the trace (first run)</text>'
            f'{inner_util}'
            '<text x="20" y="324" font-size="12" font-weight="600">Wait p95 per queue, trace seconds (median over runs)</text>'
            f'{inner_waits}</svg>\n')
