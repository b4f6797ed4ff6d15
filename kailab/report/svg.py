"""The charts, as inline SVG: GPUs held per queue over time, and GPU use per node in a snapshot."""

from __future__ import annotations

from dataclasses import dataclass

from .. import evidence
from .read import SNAPSHOT_FILE, Run, Snapshot
from .series import (NodeUse, charted_queues, decided, held_series, lane_marks, node_use, peak, run_queue_order,
                     quota_lines, run_end)
from .text import esc, fmt

# queue colours (no red: red marks evictions and failures)
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
           "#17becf", "#8c8c8c")
EVICT = "#d62728"
NODE_BARS_MAX = 40  # above this many nodes a step's picture is a grid of cells, not labelled bars


def num(x: float) -> str:
    """Coordinates in the SVG (not data)."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def _points(pts: list[tuple[float, float]]) -> str:
    return " ".join(f"{num(a)},{num(b)}" for a, b in pts)


def nice_max(v: float) -> tuple[float, float]:
    """(axis top, tick step) for values up to v."""
    v = max(v, 1)
    for mag in (10 ** k for k in range(0, 8)):
        for m in (1, 2, 5):
            step = m * mag
            if v / step <= 6:
                top = step * -(-v // step)
                return (top if top >= v else top + step), step
    return v, v


def colours(run: Run, queues: list[str]) -> dict[str, str]:
    order, _ = run_queue_order(run)
    names = order + [q for q in queues if q not in order]
    return {q: PALETTE[i % len(PALETTE)] for i, q in enumerate(names)}


def node_colours(run: Run, snaps: list[Snapshot]) -> dict[str, str]:
    """Queue colours for the node pictures: the timeline's queues keep theirs."""
    return colours(run, list(held_series(run)) + [run.logical(p.get("queue")) for s in snaps
                                                  for p in s.pods or [] if isinstance(p, dict)])


# ------------------------------------------------------------------------------ timeline
@dataclass
class _Plot:
    """The timeline's geometry: the plot area above, one lane per queue below it."""
    left: int
    t_end: float
    y_top: float
    lanes: int
    width: int = 1040
    right: int = 16
    top: int = 22
    plot_h: int = 280
    lane_h: int = 18
    lane_gap: int = 36

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def lanes_top(self) -> int:
        return self.top + self.plot_h + self.lane_gap + 10

    @property
    def height(self) -> int:
        return self.lanes_top + self.lane_h * max(1, self.lanes) + 24

    def x(self, t: float) -> float:
        return self.left + self.plot_w * (t / self.t_end)

    def y(self, v: float) -> float:
        return self.top + self.plot_h - self.plot_h * (v / self.y_top)


def timeline_svg(run: Run) -> str:
    if not run.timeline:
        return (f'<p class="muted">No timeline entries ({evidence.TIMELINE} missing or empty: the run stopped '
                'before any pod was created): nothing to chart.</p>')
    series = held_series(run)
    queues = charted_queues(run, series)
    col = colours(run, queues)
    t_end = run_end(run)
    lines = quota_lines(run, t_end)
    top_val = max([v for pts in series.values() for _, v in pts]
                  + [s[2] for q in queues for segs in lines.get(q, {}).values() for s in segs] + [1])
    y_top, y_step = nice_max(top_val * 1.05)
    left = min(170, max(56, 7 * max([len(q) for q in queues] + [0]) + 16))  # room for lane labels
    p = _Plot(left, t_end, y_top, len(queues))
    parts = [f'<svg class="chart timeline" viewBox="0 0 {p.width} {p.height}" '
             f'width="{p.width}" height="{p.height}" role="img" aria-label="GPUs held per queue over time">']
    parts += _axes(p, y_step)
    parts += _quota_lines(p, queues, lines, col)
    parts += _held_lines(p, queues, series, col)
    parts += _decisions(p, run)
    parts += _violations(p, run)
    parts += _lanes(p, run, queues, col)
    parts.append("</svg>")
    return "".join(parts) + _legend(run, queues, series, lines, col)


def _steps(end: float, step: float):
    """0, step, 2 step, ... up to end; summed, not multiplied, so the labels stay as they were."""
    v = 0.0
    while v <= end + 1e-9:
        yield v
        v += step


def _axes(p: _Plot, y_step: float) -> list[str]:
    parts = []
    for v in _steps(p.y_top, y_step):
        parts.append(f'<line class="grid" x1="{p.left}" x2="{p.left + p.plot_w}" y1="{num(p.y(v))}" '
                     f'y2="{num(p.y(v))}"/><text class="axis" x="{p.left - 6}" y="{num(p.y(v) + 4)}" '
                     f'text-anchor="end">{num(v)}</text>')
    for t in _steps(p.t_end, nice_max(p.t_end)[1]):
        parts.append(f'<line class="grid" x1="{num(p.x(t))}" x2="{num(p.x(t))}" y1="{p.top}" '
                     f'y2="{p.top + p.plot_h}"/><text class="axis" x="{num(p.x(t))}" y="{p.top + p.plot_h + 15}" '
                     f'text-anchor="middle">{num(t)}s</text>')
    mid = p.top + p.plot_h / 2
    parts.append(f'<rect class="frame" x="{p.left}" y="{p.top}" width="{p.plot_w}" height="{p.plot_h}"/>')
    parts.append(f'<text class="axis" x="12" y="{mid}" transform="rotate(-90 12 {mid})" '
                 'text-anchor="middle">GPUs held</text>')
    return parts


def _quota_lines(p: _Plot, queues: list[str], lines: dict, col: dict[str, str]) -> list[str]:
    """Quota and limit lines, labelled at their right end; labels that would overlap are moved apart."""
    parts, labels = [], []
    for q in queues:
        for kind, dash in (("quota", "7 4"), ("limit", "2 3")):
            segs = lines.get(q, {}).get(kind) or []
            if not segs:
                continue
            pts = []
            for t0, t1, val in segs:
                pts += [(p.x(t0), p.y(val)), (p.x(t1), p.y(val))]
            vals = ", ".join(f"{fmt(s[2])} from {num(s[0])}s" for s in segs) if len(segs) > 1 else fmt(segs[0][2])
            parts.append(f'<polyline class="{kind}" data-queue="{esc(q)}" fill="none" stroke="{col[q]}" '
                         f'stroke-width="1.6" stroke-dasharray="{dash}" points="{_points(pts)}">'
                         f'<title>{esc(q)} {kind}: {esc(vals)} GPUs</title></polyline>')
            labels.append([pts[-1][0] - 4, pts[-1][1] - 4, col[q], f"{q} {kind} {fmt(segs[-1][2])}"])
    labels.sort(key=lambda lb: (round(lb[0]), -lb[1]))
    for i in range(1, len(labels)):
        prev = labels[i - 1]
        if abs(labels[i][0] - prev[0]) < 1 and prev[1] - labels[i][1] < 13:
            labels[i][1] = prev[1] - 13
    for lx, ly, c, text in labels:
        parts.append(f'<text class="linelabel" x="{num(lx)}" y="{num(max(ly, p.top + 10))}" text-anchor="end" '
                     f'fill="{c}">{esc(text)}</text>')
    return parts


def _held_lines(p: _Plot, queues: list[str], series: dict, col: dict[str, str]) -> list[str]:
    parts = []
    for i, q in enumerate(queues):  # earlier series wider, underneath: lines at equal levels stay visible
        pts_data = series.get(q, [])
        pts, level = [(p.x(0), p.y(0))], 0
        for t, v in pts_data:
            pts += [(p.x(t), p.y(level)), (p.x(t), p.y(v))]
            level = v
        pts.append((p.x(p.t_end), p.y(level)))
        parts.append(f'<polyline class="series" data-queue="{esc(q)}" fill="none" stroke="{col[q]}" '
                     f'stroke-width="{num(max(2.0, 5.0 - 1.4 * i))}" stroke-linejoin="round" points="'
                     f'{_points(pts)}"><title>{esc(q)}: GPUs held (peak {peak(pts_data)}, at the end {level})'
                     '</title></polyline>')
    return parts


def _decisions(p: _Plot, run: Run) -> list[str]:
    """A diamond on the top edge where each expectation was decided."""
    parts = []
    for r in decided(run):
        cx, ok = p.x(r["at"]), bool(r.get("passed"))
        parts.append(f'<path class="decision {"pass" if ok else "fail"}" d="M{num(cx)},{p.top - 9} l5,5 l-5,5 l-5,-5 z">'
                     f'<title>{"PASS" if ok else "FAIL"} at t={esc(fmt(r["at"]))}s - {esc(fmt(r.get("step", "")))}: '
                     f'{esc(fmt(r.get("what", "")))}: expected {esc(fmt(r.get("expected", "")))}, '
                     f'observed {esc(fmt(r.get("observed", "")))}</title></path>')
    return parts


def _violations(p: _Plot, run: Run) -> list[str]:
    parts = []
    for e in run.timeline:
        if e.get("what") == "violation":
            vx = p.x(e["t"])
            parts.append(f'<line class="violation" x1="{num(vx)}" x2="{num(vx)}" y1="{p.top}" y2="{p.top + p.plot_h}">'
                         f'<title>violation at t={esc(fmt(e["t"]))}s: {esc(fmt(e.get("detail", "")))}</title></line>')
    return parts


def _lanes(p: _Plot, run: Run, queues: list[str], col: dict[str, str]) -> list[str]:
    """Below the plot, a lane per queue: ticks up for binds, down (red) for evictions, grey for releases."""
    parts = [f'<text class="axis" x="{p.left}" y="{p.lanes_top - 6}">binds (up) and evictions (red, down) '
             'per queue; other releases grey</text>']
    marks = lane_marks(run)
    for i, q in enumerate(queues):
        mid = p.lanes_top + i * p.lane_h + p.lane_h / 2
        parts.append(f'<line class="lane" x1="{p.left}" x2="{p.left + p.plot_w}" y1="{num(mid)}" y2="{num(mid)}"/>'
                     f'<text class="lanelabel" x="{p.left - 6}" y="{num(mid + 4)}" text-anchor="end" '
                     f'fill="{col[q]}">{esc(q)}</text>')
        for t, kind, pods in marks.get(q, []):
            mx = p.x(t)
            y1, y2, stroke = {"bind": (mid - 8, mid, col[q]), "evict": (mid, mid + 8, EVICT),
                              "release": (mid - 3, mid + 3, "#999")}[kind]
            shown = ", ".join(pods[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
            label = {"bind": "bound", "evict": "evicted", "release": "released"}[kind]
            parts.append(f'<line class="tick tick-{kind}" x1="{num(mx)}" x2="{num(mx)}" y1="{num(y1)}" '
                         f'y2="{num(y2)}" stroke="{stroke}"><title>t={esc(fmt(t))}s: {len(pods)} {label}: '
                         f'{esc(shown)}</title></line>')
    return parts


def _legend(run: Run, queues: list[str], series: dict, lines: dict, col: dict[str, str]) -> str:
    legend = []
    for q in queues:
        segs = lines.get(q, {})
        quota = ", ".join(fmt(s[2]) for s in segs.get("quota", [])) or "-"
        limit = ", ".join(fmt(s[2]) for s in segs.get("limit", [])) or "-"
        real = next((r for r, lg in run.queue_map.items() if lg == q), "")
        legend.append(f'<span class="legend-item"><span class="swatch" style="background:{col[q]}"></span>'
                      f'<b>{esc(q)}</b>{f" <span class=muted>({esc(real)})</span>" if real and real != q else ""}'
                      f' peak {peak(series.get(q, []))} GPUs, quota {esc(quota)}, limit {esc(limit)}</span>')
    legend.append('<span class="legend-item"><span class="swatch dashed"></span>quota '
                  f'<span class="swatch dotted"></span>limit (from {SNAPSHOT_FILE["queues"]}; none drawn when unlimited)</span>')
    return f'<div class="legend">{"".join(legend)}</div>'


# ------------------------------------------------------------------------------ nodes
def nodes_svg(run: Run, snap: Snapshot, col: dict[str, str]) -> str:
    if not snap.nodes:
        return '<p class="muted">no nodes recorded</p>'
    rows = node_use(run, snap)
    if len(rows) > NODE_BARS_MAX:
        return _node_grid(rows)
    return _node_bars(rows, col)


def _node_grid(rows: list[NodeUse]) -> str:
    """Many nodes: a cell each, darker the more of its GPUs are used, red when over-used."""
    cell, per_row = 11, 60
    h = ((len(rows) + per_row - 1) // per_row) * cell + 4
    out = [f'<svg class="chart nodes grid" viewBox="0 0 {per_row * cell + 4} {h}" '
           f'width="{per_row * cell + 4}" height="{h}">']
    for i, r in enumerate(rows):
        an, un = r.alloc_n, r.used_n
        frac = un / an if an else (1.0 if un else 0.0)
        fill = EVICT if un > an else f"rgba(78,121,167,{0.12 + 0.88 * min(frac, 1):.2f})"
        out.append(f'<rect class="node-bar" x="{2 + (i % per_row) * cell}" y="{2 + (i // per_row) * cell}" '
                   f'width="{cell - 2}" height="{cell - 2}" fill="{fill}"><title>{esc(r.name)}: '
                   f'{esc(fmt(r.used))}/{esc(fmt(r.alloc))} GPUs used</title></rect>')
    out.append("</svg>")
    total_u = sum(r.used_n for r in rows)
    total_a = sum(r.alloc_n for r in rows)
    return "".join(out) + f'<p class="muted">{len(rows)} nodes, {num(total_u)}/{num(total_a)} GPUs used</p>'


def _node_bars(rows: list[NodeUse], col: dict[str, str]) -> str:
    """A labelled bar per node: its GPUs, the used part split by queue."""
    max_alloc = max([r.alloc_n for r in rows] + [r.used_n for r in rows] + [1])
    label_w, bar_w, row_h = 96, 220, 20
    W = label_w + bar_w + 64
    H = row_h * len(rows) + 6
    out = [f'<svg class="chart nodes" viewBox="0 0 {W} {H}" width="{W}" height="{H}">']
    for i, r in enumerate(rows):
        y0 = 3 + i * row_h
        full = bar_w * r.alloc_n / max_alloc
        out.append(f'<text class="nodelabel" x="{label_w - 6}" y="{y0 + 13}" text-anchor="end">{esc(r.name)}</text>')
        out.append(f'<rect class="node-bar" data-node="{esc(r.name)}" x="{label_w}" y="{y0 + 2}" width="{num(full)}" '
                   f'height="{row_h - 6}"><title>{esc(r.name)}: {esc(fmt(r.used))}/{esc(fmt(r.alloc))} GPUs used'
                   '</title></rect>')
        # used, split by queue where the step's pods.yaml says whose pods they are
        xpos, left_over = float(label_w), r.used_n
        for q, n in sorted(r.by_queue.items()):
            n = min(n, max(left_over, 0))
            if n <= 0:
                continue
            w = bar_w * n / max_alloc
            out.append(f'<rect class="node-used" x="{num(xpos)}" y="{y0 + 2}" width="{num(w)}" height="{row_h - 6}" '
                       f'fill="{col.get(q, "#8c8c8c")}"><title>{esc(q or "unknown queue")}: {num(n)} GPUs</title></rect>')
            xpos += w
            left_over -= n
        if left_over > 0:
            w = bar_w * left_over / max_alloc
            out.append(f'<rect class="node-used" x="{num(xpos)}" y="{y0 + 2}" width="{num(w)}" height="{row_h - 6}" '
                       f'fill="#8c8c8c"><title>held by pods not in {SNAPSHOT_FILE["pods"]} (e.g. being deleted)</title></rect>')
        over = ' over' if r.used_n > r.alloc_n else ''
        out.append(f'<text class="nodevalue{over}" x="{label_w + bar_w + 6}" y="{y0 + 13}">'
                   f'{esc(fmt(r.used))}/{esc(fmt(r.alloc))}</text>')
    out.append("</svg>")
    return "".join(out)


def series_colour(run: Run, s: dict, i: int) -> str:
    """A queue's series in the queue's colour on every chart of the run; others by position."""
    queue = (s.get("labels") or {}).get("queue")
    return colours(run, [queue])[queue] if queue else PALETTE[-1 - i % len(PALETTE)]


def series_svg(run: Run, series: list[dict], t_end: float) -> str:
    """One panel of KAI's series (kai-metrics.json): a line per series over the run's time."""
    series = [s for s in series if s.get("points")]
    if not series:
        return ""
    width, height, left, right, top, bottom = 520, 180, 56, 12, 10, 24
    values = [p[1] for s in series for p in s["points"] if p[1] == p[1]]  # NaN != NaN: KAI's empty buckets
    t_end = max([t_end] + [p[0] for s in series for p in s["points"]])
    y_top = (nice_max(max(values + [0]) * 1.05)[0] if max(values + [0]) >= 1 else max(values + [0]) * 1.1) or 1
    x = lambda t: left + (width - left - right) * t / (t_end or 1)  # noqa: E731
    y = lambda v: top + (height - top - bottom) * (1 - v / y_top)  # noqa: E731
    parts = [f'<svg class="chart kai-series" viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
             f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{height - bottom}"/>',
             f'<line class="axis" x1="{left}" x2="{width - right}" y1="{height - bottom}" y2="{height - bottom}"/>',
             f'<text class="axis" x="{left - 4}" y="{top + 8}" text-anchor="end">{y_top:.3g}</text>',
             f'<text class="axis" x="{left - 4}" y="{height - bottom}" text-anchor="end">0</text>',
             f'<text class="axis" x="{width - right}" y="{height - 6}" text-anchor="end">{num(t_end)} s</text>']
    for i, s in enumerate(series):
        pts = [(x(t), y(v)) for t, v in s["points"] if v == v]
        parts.append(f'<polyline fill="none" stroke="{series_colour(run, s, i)}" stroke-width="2" '
                     f'points="{_points(pts)}"/>')
    parts.append("</svg>")
    return "".join(parts)
