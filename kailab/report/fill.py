"""A fill experiment's page section and picture: GPU allocated against GPU workload arrived, one
line per design (the seeds' mean), the seeds' spread shaded, the diagonal where every arrived GPU
would be placed. Read from fill.json, written by kailab.replay.fill."""

from __future__ import annotations

import json
from pathlib import Path

from .svg import PALETTE, _points, num
from .text import esc, fmt

FILL = "fill.json"


def is_fill(d: Path) -> bool:
    return (Path(d) / FILL).is_file()


def _by_step(seeds: dict[str, list[dict]]) -> list[tuple[float, float, float, float]]:
    """(arrived, mean, min, max of allocated) per step index over the seeds that reached it."""
    out = []
    for i in range(max((len(r) for r in seeds.values()), default=0)):
        rows = [r[i] for r in seeds.values() if len(r) > i]
        alloc = [r["allocated_pct"] for r in rows]
        out.append((sum(r["arrived_pct"] for r in rows) / len(rows), sum(alloc) / len(alloc), min(alloc), max(alloc)))
    return out


def allocation_svg(s: dict, css_class: str = "chart fill-alloc") -> str:
    curves = {k: _by_step(v) for k, v in (s.get("curves") or {}).items() if v}
    if not curves:
        return ""
    width, height, left, right, top, bottom = 640, 300, 52, 14, 10, 34
    x_end = max(max(p[0] for p in pts) for pts in curves.values() if pts) or 100
    x_end = max(x_end, 100)
    y_end = 100.0
    x = lambda v: left + (width - left - right) * v / x_end  # noqa: E731
    y = lambda v: top + (height - top - bottom) * (1 - v / y_end)  # noqa: E731
    parts = [f'<svg class="{css_class}" viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
             f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{height - bottom}"/>',
             f'<line class="axis" x1="{left}" x2="{width - right}" y1="{height - bottom}" y2="{height - bottom}"/>',
             f'<line x1="{num(x(0))}" y1="{num(y(0))}" x2="{num(x(100))}" y2="{num(y(100))}" stroke="#bbb" '
             'stroke-dasharray="4 4"><title>every arrived GPU placed</title></line>']
    for v in (0, 50, 100):
        parts.append(f'<text class="axis" x="{left - 4}" y="{num(y(v) + 4)}" text-anchor="end">{v}%</text>')
    for v in range(0, int(x_end) + 1, 20):
        parts.append(f'<text class="axis" x="{num(x(v))}" y="{height - bottom + 14}" text-anchor="middle">{v}%</text>')
    parts.append(f'<text class="axis" x="{width - right}" y="{height - 4}" text-anchor="end">GPU workload arrived '
                 '(% of capacity)</text>')
    parts.append(f'<text class="axis" x="{left + 6}" y="{top + 12}">GPU allocated</text>')
    for i, (name, pts) in enumerate(curves.items()):
        colour = PALETTE[i % len(PALETTE)]
        if any(lo != hi for _, _, lo, hi in pts):
            band = [(x(a), y(hi)) for a, _, _, hi in pts] + [(x(a), y(lo)) for a, _, lo, _ in reversed(pts)]
            parts.append(f'<polygon class="spread" fill="{colour}" fill-opacity="0.18" stroke="none" '
                         f'points="{_points(band)}"><title>{esc(name)}: the seeds\' spread</title></polygon>')
        parts.append(f'<polyline class="design" data-design="{esc(name)}" fill="none" stroke="{colour}" '
                     f'stroke-width="2" points="{_points([(x(a), y(m)) for a, m, _, _ in pts])}">'
                     f'<title>{esc(name)}: GPU allocated (mean over seeds)</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def _legend(names: list[str]) -> str:
    return '<div class="legend">' + "".join(
        f'<span><span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}"></span>{esc(n)}</span>'
        for i, n in enumerate(names)) + "</div>"


def fewer_seeds(s: dict, design: str, arrived_pct: float) -> str:
    """' (n of N seeds)' when only n of the fill's N seeds reached `arrived_pct` % arrived (one stopped
    before it, as a merged fill's may have), else ''."""
    seeds = len((s.get("plan") or {}).get("seeds") or [])
    n = sum(1 for rows in ((s.get("curves") or {}).get(design) or {}).values()
            if rows and rows[-1]["arrived_pct"] >= arrived_pct - 1e-9)
    return f" ({n} of {seeds} seeds)" if n < seeds else ""


def fill_svg(s: dict) -> str:
    """The picture as one standalone SVG file (README, slides)."""
    plan = s.get("plan") or {}
    names = list(s.get("curves") or {})
    chart = allocation_svg(s).replace('<svg class="chart fill-alloc"', '<svg x="10" y="52"', 1)
    legend = "".join(f'<rect x="{20 + i * 160}" y="34" width="14" height="4" fill="{PALETTE[i % len(PALETTE)]}"/>'
                     f'<text x="{40 + i * 160}" y="40" font-size="12">{esc(n)}</text>' for i, n in enumerate(names))
    title = (f'GPU allocated vs arrived: fleet {esc(fmt(plan.get("fleet_name") or plan.get("fleet")))}, seeds '
             f'{esc(", ".join(map(str, plan.get("seeds") or [])))}, KAI {esc(fmt(plan.get("kai_version")))}')
    return ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 660 370" width="660" height="370" '
            'font-family="sans-serif"><style>.axis{font-size:11px;fill:#556;stroke:#99a}text.axis{stroke:none}</style>'
            f'<rect width="660" height="370" fill="#fff"/><text x="20" y="20" font-size="14" font-weight="600">'
            f'{title}</text>{legend}{chart}</svg>\n')


def fill_html(d: Path, base: Path, link) -> str:
    s = json.loads((Path(d) / FILL).read_text())
    plan = s.get("plan") or {}
    names = list(s.get("curves") or {})
    out = [f'<section class="fill"><h2>Fill {esc(Path(d).name)}: {esc(", ".join(names))} on fleet '
           f'{esc(fmt(plan.get("fleet_name") or plan.get("fleet")))}</h2>',
           f'<p class="muted">From {link(Path(d) / FILL, base)}. Tasks of {esc(fmt(plan.get("trace")))} sampled to '
           f'{esc(fmt(plan.get("target")))} x the fleet\'s GPUs with seeds {esc(", ".join(map(str, plan.get("seeds") or [])))}, '
           f'submitted in steps of {esc(fmt(plan.get("step")))} of capacity; a step\'s pods still pending after '
           f'{esc(fmt(plan.get("settle_s")))} s without a bind are removed as unplaced.</p>']
    for name, err in (s.get("errors") or {}).items():
        out.append(f'<p class="problem">{esc(name)}: {esc(err)}</p>')
    out.append('<figure><figcaption>GPU allocated against GPU workload arrived (% of capacity); shaded: the '
               'seeds\' spread; dashed: every arrived GPU placed</figcaption>' + allocation_svg(s) + _legend(names)
               + '</figure>')
    marks = sorted({k.split("@")[1] for row in (s.get("table") or {}).values() for k in row}, key=lambda m: float(m[:-1]))
    out.append('<table class="figures"><thead><tr><th>design</th><th>figure</th>' + "".join(
        f"<th>arrived {esc(m)}</th>" for m in marks) + "</tr></thead><tbody>")
    for name, row in (s.get("table") or {}).items():
        for key, label in (("allocated_pct", "GPU allocated"), ("fragmented_pct", "GPU fragmented"),
                           ("unplaced_gpu_pct", "GPU unplaced")):
            cells = []
            for m in marks:
                v = row.get(f"{key}@{m}")
                cells.append("—" if v is None else (f"{fmt(v[0])} %" if v[0] == v[1] else f"{fmt(v[0])}–{fmt(v[1])} %")
                             + fewer_seeds(s, name, float(m.rstrip("%"))))
            out.append(f"<tr><td>{esc(name)}</td><td>{esc(label)}</td>" + "".join(f"<td>{esc(c)}</td>" for c in cells)
                       + "</tr>")
    out.append("</tbody></table></section>")
    return "".join(out)
