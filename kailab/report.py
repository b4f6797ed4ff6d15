"""Evidence report: one self-contained HTML page for one or more run directories (or a trial).

Everything is read from the evidence files (verdict.json, run.json, exercise.yaml, timeline.jsonl,
steps/*/ and final/ snapshots); nothing comes from memory or from a cluster. The page has inline
CSS and inline SVG drawn here - no JavaScript and no external resource of any kind, so it opens
offline and can be archived with the evidence. Links to the raw files are relative.

Values from the verdict (expected, observed, figures, times) are printed as written there:
strings verbatim, numbers as JSON writes them. Text is HTML-escaped; in addition "://" in text
is written as ":&#47;&#47;" - it reads the same in a browser, but the page's source then holds
no URL at all, so a plain grep proves it fetches nothing.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import evidence
from .errors import KailabError

REPORT_NAME = "report.html"
SNAPSHOT_FILES = evidence.SNAPSHOT_FILES
TOP_FILES = (*evidence.TOP_FILES,
             "scheduler-snapshot.error.txt")
HOLD_START = {"bound"}
HOLD_END = {"evicted", "deleted", "succeeded", "failed"}
# queue colours (no red: red marks evictions and failures)
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
           "#17becf", "#8c8c8c")
EVICT = "#d62728"
VERDICT_CLASS = {"passed": "v-passed", "failed": "v-failed", "error": "v-error", "interrupted": "v-interrupted"}
MAX_OFFENDING = 10
MAX_PODGROUP_ROWS = 60
NODE_BARS_MAX = 40  # above this many nodes a step's picture is a grid of cells, not labelled bars


# ---------------------------------------------------------------------------------------- text
def esc(value) -> str:
    """HTML-escaped text; '://' is written as an entity so the source never holds a URL."""
    return html.escape(str(value), quote=True).replace("://", ":&#47;&#47;")


def fmt(value) -> str:
    """A value exactly as the evidence file has it: strings verbatim, the rest as JSON writes it."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def num(x: float) -> str:
    """Coordinates in the SVG (not data)."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


# ---------------------------------------------------------------------------------------- reading
@dataclass
class Snapshot:
    index: int  # 1.. for steps; 0 for final
    name: str
    rel: str  # directory relative to the run directory
    queues: list | None = None
    podgroups: list | None = None
    pods: list | None = None
    nodes: dict | None = None


@dataclass
class Run:
    path: Path
    verdict: dict | None = None
    run: dict | None = None
    exercise: dict | None = None
    timeline: list[dict] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files missing or unreadable

    @property
    def name(self) -> str:
        for src in (self.verdict, self.run, self.exercise):
            if isinstance(src, dict) and isinstance(src.get("exercise"), str):
                return src["exercise"]
        return self.path.name

    @property
    def verdict_text(self) -> str:
        if isinstance(self.verdict, dict) and "verdict" in self.verdict:
            return fmt(self.verdict["verdict"])
        return "unknown"

    def info(self, key: str):
        for src in (self.verdict, self.run):
            if isinstance(src, dict) and src.get(key) not in (None, ""):
                return src[key]
        return None

    @property
    def queue_map(self) -> dict[str, str]:
        """real queue name -> logical name (from run.json)."""
        qs = (self.run or {}).get("queues") if isinstance(self.run, dict) else None
        if not isinstance(qs, dict):
            return {}
        return {str(real): str(logical) for logical, real in qs.items()}

    def logical(self, real) -> str:
        if real is None:
            return ""
        return self.queue_map.get(str(real), str(real))


def _read(path: Path, kind: str, problems: list[str], required: bool = True):
    if not path.exists():
        if required:
            problems.append(f"{path.name}: missing")
        return None
    try:
        text = path.read_text(errors="replace")
        return json.loads(text) if kind == "json" else yaml.safe_load(text)
    except Exception as err:  # noqa: BLE001 - a broken file is reported, not fatal
        problems.append(f"{path.name}: unreadable ({type(err).__name__}: {err})")
        return None


def _step_names(exercise: dict | None) -> list[str]:
    steps = exercise.get("steps") if isinstance(exercise, dict) else None
    if not isinstance(steps, list):
        return []
    return [str(s.get("name", "")) if isinstance(s, dict) else "" for s in steps]


def load_run(path: Path) -> Run:
    run = Run(Path(path))
    p = run.path
    run.verdict = _read(p / evidence.VERDICT, "json", run.problems)
    run.run = _read(p / evidence.RUN, "json", run.problems)
    run.exercise = _read(p / evidence.EXERCISE, "yaml", run.problems)
    for src in ("verdict", "run", "exercise"):
        if getattr(run, src) is not None and not isinstance(getattr(run, src), dict):
            run.problems.append(f"{src}: not a mapping")
            setattr(run, src, None)
    tl = p / evidence.TIMELINE
    if tl.exists():
        bad = 0
        for line in tl.read_text(errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(entry, dict) and isinstance(entry.get("t"), (int, float)):
                run.timeline.append(entry)
            else:
                bad += 1
        if bad:
            run.problems.append(f"timeline.jsonl: {bad} unreadable lines skipped")
    else:
        run.problems.append("timeline.jsonl: missing")
    names = _step_names(run.exercise)
    dirs = sorted(d for d in (p / evidence.STEPS).glob("*") if d.is_dir()) if (p / evidence.STEPS).is_dir() else []
    for d in dirs:
        m = re.match(r"(\d+)-(.*)", d.name)
        index = int(m.group(1)) if m else 0
        name = names[index - 1] if m and 0 < index <= len(names) and names[index - 1] else d.name
        run.snapshots.append(_snapshot(d, index, name, f"{evidence.STEPS}/{d.name}", run.problems))
    if (p / "final").is_dir():
        run.snapshots.append(_snapshot(p / "final", 0, "final", "final", run.problems))
    return run


def _snapshot(d: Path, index: int, name: str, rel: str, problems: list[str]) -> Snapshot:
    snap = Snapshot(index, name, rel)
    for attr, kind in (("queues", list), ("podgroups", list), ("pods", list), ("nodes", dict)):
        found: list[str] = []
        data = _read(d / f"{attr}.yaml", "yaml", found, required=False)
        problems += [f"{rel}/{x}" for x in found]
        if data is not None and not isinstance(data, kind):
            problems.append(f"{rel}/{attr}.yaml: unexpected shape, ignored")
            data = None
        setattr(snap, attr, data)
    return snap


def _is_run(d: Path) -> bool:
    return evidence.is_run(d)


def expand(evidence_dirs: list[Path]) -> list[tuple[Path, dict | None, list[Path]]]:
    """Each given directory -> (dir, matrix or None, run directories in it)."""
    out = []
    for d in evidence_dirs:
        d = Path(d)
        if not d.is_dir():
            raise KailabError(f"{d}: not a directory (give an evidence run directory, e.g. evidence/<run>)")
        if (d / evidence.MATRIX).exists():
            problems: list[str] = []
            matrix = _read(d / evidence.MATRIX, "json", problems)
            if not isinstance(matrix, dict):
                matrix = {"versions": [], "exercises": {}, "problems": problems or ["not a mapping"]}
            runs = evidence.runs_under(d)
            for cells in (matrix.get("exercises") or {}).values():
                for cell in (cells or {}).values() if isinstance(cells, dict) else []:
                    ev = cell.get("evidence") if isinstance(cell, dict) else None
                    if ev and _is_run(d / ev) and (d / ev) not in runs:
                        runs.append(d / ev)
            out.append((d, matrix, runs))
        elif _is_run(d):
            out.append((d, None, [d]))
        else:
            runs = sorted(c for c in d.iterdir() if c.is_dir() and _is_run(c))
            if not runs:
                raise KailabError(f"{d}: no evidence here (no verdict.json, run.json, exercise.yaml or matrix.json)")
            out.append((d, None, runs))
    return out


def default_output(evidence_dirs: list[Path]) -> Path:
    dirs = [Path(d).resolve() for d in evidence_dirs]
    if not dirs:
        raise KailabError("no evidence directories given")
    base = dirs[0] if len(dirs) == 1 else Path(os.path.commonpath([str(d) for d in dirs]))
    return base / REPORT_NAME


_STAMP = re.compile(r"^(?:trial-)?(\d{8}T\d{6})(?:\.(\d+))?Z")


def newest_run(root: Path) -> Path:
    """The newest run (or trial) directory under root, by the timestamp in its name."""
    root = Path(root)
    candidates = [c for c in root.iterdir() if c.is_dir() and (_is_run(c) or (c / evidence.MATRIX).exists())] \
        if root.is_dir() else []
    if not candidates:
        raise KailabError(f"no run directories under {root}: run an exercise first (`kailab run NAME`) "
                          "or name a directory (`kailab report DIR`)")

    def key(c: Path):
        m = _STAMP.match(c.name)
        if m:
            return (1, m.group(1) + "." + (m.group(2) or "").ljust(6, "0"), c.stat().st_mtime)
        return (0, "", c.stat().st_mtime)

    return max(candidates, key=key)


# ---------------------------------------------------------------------------------------- analysis
def pod_gpus(run: Run) -> dict[str, int]:
    out: dict[str, int] = {}
    for snap in run.snapshots:
        for pod in snap.pods or []:
            if isinstance(pod, dict) and pod.get("name") is not None and isinstance(pod.get("gpus"), int):
                out[str(pod["name"])] = pod["gpus"]
    return out


def queue_tree(run: Run) -> tuple[list[str], set[str]]:
    """(logical queue names in order, the logical names that are parents of others)."""
    order: list[str] = list(run.queue_map.values())
    parents: set[str] = set()

    def walk(tree, parent):
        if not isinstance(tree, dict):
            return
        for name, body in tree.items():
            name = str(name)
            if name not in order:
                order.append(name)
            if parent:
                parents.add(parent)
            walk((body or {}).get("children") if isinstance(body, dict) else None, name)

    walk((run.exercise or {}).get("queues"), None)
    for snap in run.snapshots:
        for q in snap.queues or []:
            if not isinstance(q, dict):
                continue
            parent = ((q.get("spec") or {}).get("parentQueue"))
            if parent:
                parents.add(run.logical(parent))
    return order, parents


def queue_gpu(q: dict) -> tuple[object, object]:
    gpu = (((q.get("spec") or {}).get("resources") or {}).get("gpu") or {}) if isinstance(q, dict) else {}
    return gpu.get("quota"), gpu.get("limit")


def held_series(run: Run) -> dict[str, list[tuple[float, int]]]:
    """logical queue -> [(t, GPUs held from t on)], from the timeline's bind/release entries."""
    gpus = pod_gpus(run)
    holding: dict[str, tuple[str, int]] = {}  # pod -> (queue, gpus)
    level: dict[str, int] = {}
    series: dict[str, list[tuple[float, int]]] = {}
    for e in sorted(run.timeline, key=lambda e: e["t"]):
        what, pod = e.get("what"), str(e.get("pod") or "")
        if not pod:
            continue
        if what in HOLD_START and pod not in holding:
            q = run.logical(e.get("queue"))
            n = gpus.get(pod, 1)
            holding[pod] = (q, n)
        elif what in HOLD_END and pod in holding:
            q, n = holding.pop(pod)
            n = -n
        else:
            continue
        level[q] = level.get(q, 0) + n
        pts = series.setdefault(q, [])
        if pts and pts[-1][0] == e["t"]:
            pts[-1] = (e["t"], level[q])
        else:
            pts.append((e["t"], level[q]))
    return series


def step_starts(run: Run) -> dict[int, float | None]:
    """Step index -> its approximate start (the last decision time of the step before it)."""
    names = _step_names(run.exercise)
    last_at: dict[str, float] = {}
    for r in (run.verdict or {}).get("expectations") or []:
        if isinstance(r, dict) and isinstance(r.get("at"), (int, float)):
            s = str(r.get("step"))
            last_at[s] = max(last_at.get(s, r["at"]), r["at"])
    starts: dict[int, float | None] = {1: 0.0}
    for i in range(2, len(names) + 1):
        starts[i] = last_at.get(names[i - 2])
    return starts


def quota_lines(run: Run, t_end: float) -> dict[str, dict[str, list[tuple[float, float, object]]]]:
    """logical queue -> {"quota"|"limit": [(t0, t1, value)]} from the snapshots' queues.yaml."""
    steps = [s for s in run.snapshots if s.index > 0 and s.queues is not None]
    final = next((s for s in run.snapshots if s.index == 0 and s.queues), None)
    values: dict[str, dict[str, list[tuple[int, object]]]] = {}
    for snap in steps + ([final] if final else []):
        for q in snap.queues or []:
            if not isinstance(q, dict):
                continue
            name = run.logical((q.get("metadata") or {}).get("name"))
            quota, limit = queue_gpu(q)
            for kind, v in (("quota", quota), ("limit", limit)):
                values.setdefault(name, {}).setdefault(kind, []).append((snap.index, v))
    starts = step_starts(run)
    out: dict[str, dict[str, list[tuple[float, float, object]]]] = {}
    for name, kinds in values.items():
        for kind, seq in kinds.items():
            step_seq = [(i, v) for i, v in seq if i > 0] or seq
            segs: list[tuple[float, float, object]] = []
            for i, v in step_seq:
                prev = segs[-1][0] if segs else 0.0
                t0 = starts.get(i) if i > 0 else None
                t0 = prev if t0 is None else min(max(float(t0), prev), t_end)
                if segs and json.dumps(segs[-1][2]) == json.dumps(v):
                    continue  # unchanged: the running segment goes on
                if segs:
                    segs[-1] = (segs[-1][0], t0, segs[-1][2])
                segs.append((0.0 if not segs else t0, t_end, v))
            out.setdefault(name, {})[kind] = [s for s in segs if s[1] > s[0]
                                              and isinstance(s[2], (int, float)) and not isinstance(s[2], bool)
                                              and s[2] >= 0]
    return out


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


# ---------------------------------------------------------------------------------------- drawing
def colours(run: Run, queues: list[str]) -> dict[str, str]:
    order, _ = queue_tree(run)
    names = order + [q for q in queues if q not in order]
    return {q: PALETTE[i % len(PALETTE)] for i, q in enumerate(names)}


def timeline_svg(run: Run) -> str:
    series = held_series(run)
    order, parents = queue_tree(run)
    seen = {run.logical(e.get("queue")) for e in run.timeline if e.get("queue")}
    queues = [q for q in order if q in seen or q in series or q not in parents]
    queues += sorted(q for q in set(series) | seen if q not in queues and q)
    if not run.timeline:
        return ('<p class="muted">No timeline entries (timeline.jsonl missing or empty: the run stopped '
                'before any pod was created): nothing to chart.</p>')
    col = colours(run, queues)
    ats = [r["at"] for r in (run.verdict or {}).get("expectations") or []
           if isinstance(r, dict) and isinstance(r.get("at"), (int, float))]
    t_end = max([e["t"] for e in run.timeline] + ats + [0.0])
    t_end = t_end if t_end > 0 else 1.0
    lines = quota_lines(run, t_end)
    top_val = max([v for pts in series.values() for _, v in pts]
                  + [s[2] for q in queues for segs in lines.get(q, {}).values() for s in segs] + [1])
    y_top, y_step = nice_max(top_val * 1.05)
    W, right, top, plot_h = 1040, 16, 22, 280
    left = min(170, max(56, 7 * max([len(q) for q in queues] + [0]) + 16))  # room for lane labels
    plot_w = W - left - right
    lane_h, lane_gap = 18, 36
    lanes_top = top + plot_h + lane_gap + 10
    H = lanes_top + lane_h * max(1, len(queues)) + 24

    def x(t: float) -> float:
        return left + plot_w * (t / t_end)

    def y(v: float) -> float:
        return top + plot_h - plot_h * (v / y_top)

    parts = [f'<svg class="chart timeline" viewBox="0 0 {W} {H}" '
             f'width="{W}" height="{H}" role="img" aria-label="GPUs held per queue over time">']
    # grid and axes
    v = 0.0
    while v <= y_top + 1e-9:
        parts.append(f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{num(y(v))}" y2="{num(y(v))}"/>'
                     f'<text class="axis" x="{left - 6}" y="{num(y(v) + 4)}" text-anchor="end">{num(v)}</text>')
        v += y_step
    _, t_step = nice_max(t_end)
    t = 0.0
    while t <= t_end + 1e-9:
        parts.append(f'<line class="grid" x1="{num(x(t))}" x2="{num(x(t))}" y1="{top}" y2="{top + plot_h}"/>'
                     f'<text class="axis" x="{num(x(t))}" y="{top + plot_h + 15}" text-anchor="middle">{num(t)}s</text>')
        t += t_step
    parts.append(f'<rect class="frame" x="{left}" y="{top}" width="{plot_w}" height="{plot_h}"/>')
    parts.append(f'<text class="axis" x="12" y="{top + plot_h / 2}" transform="rotate(-90 12 {top + plot_h / 2})" '
                 'text-anchor="middle">GPUs held</text>')
    # quota and limit lines (their labels at the right end, moved apart where they would overlap)
    labels: list[list] = []
    for q in queues:
        for kind, dash in (("quota", "7 4"), ("limit", "2 3")):
            segs = lines.get(q, {}).get(kind) or []
            if not segs:
                continue
            pts = []
            for t0, t1, val in segs:
                pts += [(x(t0), y(val)), (x(t1), y(val))]
            vals = ", ".join(f"{fmt(s[2])} from {num(s[0])}s" for s in segs) if len(segs) > 1 else fmt(segs[0][2])
            parts.append(f'<polyline class="{kind}" data-queue="{esc(q)}" fill="none" stroke="{col[q]}" '
                         f'stroke-width="1.6" stroke-dasharray="{dash}" points="'
                         + " ".join(f"{num(a)},{num(b)}" for a, b in pts)
                         + f'"><title>{esc(q)} {kind}: {esc(vals)} GPUs</title></polyline>')
            labels.append([pts[-1][0] - 4, pts[-1][1] - 4, col[q], f"{q} {kind} {fmt(segs[-1][2])}"])
    labels.sort(key=lambda lb: (round(lb[0]), -lb[1]))
    for i in range(1, len(labels)):
        prev = labels[i - 1]
        if abs(labels[i][0] - prev[0]) < 1 and prev[1] - labels[i][1] < 13:
            labels[i][1] = prev[1] - 13
    for lx, ly, c, text in labels:
        parts.append(f'<text class="linelabel" x="{num(lx)}" y="{num(max(ly, top + 10))}" text-anchor="end" '
                     f'fill="{c}">{esc(text)}</text>')
    # held series
    for i, q in enumerate(queues):  # earlier series wider, underneath: lines at equal levels stay visible
        pts_data = series.get(q, [])
        pts, level = [(x(0), y(0))], 0
        for t, v in pts_data:
            pts += [(x(t), y(level)), (x(t), y(v))]
            level = v
        pts.append((x(t_end), y(level)))
        peak = max([v for _, v in pts_data] + [0])
        parts.append(f'<polyline class="series" data-queue="{esc(q)}" fill="none" stroke="{col[q]}" '
                     f'stroke-width="{num(max(2.0, 5.0 - 1.4 * i))}" stroke-linejoin="round" points="'
                     + " ".join(f"{num(a)},{num(b)}" for a, b in pts)
                     + f'"><title>{esc(q)}: GPUs held (peak {peak}, at the end {level})</title></polyline>')
    # expectation decisions on the top edge
    for r in (run.verdict or {}).get("expectations") or []:
        if isinstance(r, dict) and isinstance(r.get("at"), (int, float)):
            cx, ok = x(r["at"]), bool(r.get("passed"))
            parts.append(f'<path class="decision {"pass" if ok else "fail"}" d="M{num(cx)},{top - 9} l5,5 l-5,5 l-5,-5 z">'
                         f'<title>{"PASS" if ok else "FAIL"} at t={esc(fmt(r["at"]))}s - {esc(fmt(r.get("step", "")))}: '
                         f'{esc(fmt(r.get("what", "")))}: expected {esc(fmt(r.get("expected", "")))}, '
                         f'observed {esc(fmt(r.get("observed", "")))}</title></path>')
    # invariant violations
    for e in run.timeline:
        if e.get("what") == "violation":
            vx = x(e["t"])
            parts.append(f'<line class="violation" x1="{num(vx)}" x2="{num(vx)}" y1="{top}" y2="{top + plot_h}">'
                         f'<title>violation at t={esc(fmt(e["t"]))}s: {esc(fmt(e.get("detail", "")))}</title></line>')
    # bind / eviction lanes
    parts.append(f'<text class="axis" x="{left}" y="{lanes_top - 6}">binds (up) and evictions (red, down) '
                 'per queue; other releases grey</text>')
    marks: dict[tuple[str, float, str], list[str]] = {}
    for e in run.timeline:
        what = e.get("what")
        if what in ("bound", "evicted", "deleted", "succeeded", "failed") and e.get("pod"):
            kind = {"bound": "bind", "evicted": "evict"}.get(what, "release")
            marks.setdefault((run.logical(e.get("queue")), e["t"], kind), []).append(str(e["pod"]))
    for i, q in enumerate(queues):
        ly = lanes_top + i * lane_h
        mid = ly + lane_h / 2
        parts.append(f'<line class="lane" x1="{left}" x2="{left + plot_w}" y1="{num(mid)}" y2="{num(mid)}"/>'
                     f'<text class="lanelabel" x="{left - 6}" y="{num(mid + 4)}" text-anchor="end" '
                     f'fill="{col[q]}">{esc(q)}</text>')
        for (mq, t, kind), pods in sorted(marks.items(), key=lambda kv: kv[0][1]):
            if mq != q:
                continue
            mx = x(t)
            y1, y2, stroke = {"bind": (mid - 8, mid, col[q]), "evict": (mid, mid + 8, EVICT),
                              "release": (mid - 3, mid + 3, "#999")}[kind]
            shown = ", ".join(pods[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
            label = {"bind": "bound", "evict": "evicted", "release": "released"}[kind]
            parts.append(f'<line class="tick tick-{kind}" x1="{num(mx)}" x2="{num(mx)}" y1="{num(y1)}" '
                         f'y2="{num(y2)}" stroke="{stroke}"><title>t={esc(fmt(t))}s: {len(pods)} {label}: '
                         f'{esc(shown)}</title></line>')
    parts.append("</svg>")
    legend = []
    for q in queues:
        segs = lines.get(q, {})
        quota = ", ".join(fmt(s[2]) for s in segs.get("quota", [])) or "-"
        limit = ", ".join(fmt(s[2]) for s in segs.get("limit", [])) or "-"
        real = next((r for r, lg in run.queue_map.items() if lg == q), "")
        peak = max([v for _, v in series.get(q, [])] + [0])
        legend.append(f'<span class="legend-item"><span class="swatch" style="background:{col[q]}"></span>'
                      f'<b>{esc(q)}</b>{f" <span class=muted>({esc(real)})</span>" if real and real != q else ""}'
                      f' peak {peak} GPUs, quota {esc(quota)}, limit {esc(limit)}</span>')
    legend.append('<span class="legend-item"><span class="swatch dashed"></span>quota '
                  '<span class="swatch dotted"></span>limit (from queues.yaml; none drawn when unlimited)</span>')
    return "".join(parts) + f'<div class="legend">{"".join(legend)}</div>'


def nodes_svg(run: Run, snap: Snapshot, col: dict[str, str]) -> str:
    nodes = snap.nodes or {}
    if not nodes:
        return '<p class="muted">no nodes recorded</p>'
    pods = {str(p.get("name")): p for p in snap.pods or [] if isinstance(p, dict)}
    rows = []
    for name, info in nodes.items():
        info = info if isinstance(info, dict) else {}
        alloc, used = info.get("allocatable"), info.get("used")
        alloc_n = alloc if isinstance(alloc, (int, float)) else 0
        used_n = used if isinstance(used, (int, float)) else 0
        segs: dict[str, int] = {}
        for pod in info.get("pods") or []:
            p = pods.get(str(pod))
            q = run.logical(p.get("queue")) if p else ""
            segs[q] = segs.get(q, 0) + (p.get("gpus", 1) if p and isinstance(p.get("gpus"), int) else 1)
        rows.append((str(name), alloc, used, alloc_n, used_n, segs))
    max_alloc = max([r[3] for r in rows] + [r[4] for r in rows] + [1])
    if len(rows) > NODE_BARS_MAX:
        cell, per_row = 11, 60
        h = ((len(rows) + per_row - 1) // per_row) * cell + 4
        out = [f'<svg class="chart nodes grid" viewBox="0 0 {per_row * cell + 4} {h}" '
               f'width="{per_row * cell + 4}" height="{h}">']
        for i, (name, alloc, used, an, un, _) in enumerate(rows):
            frac = un / an if an else (1.0 if un else 0.0)
            fill = EVICT if un > an else f"rgba(78,121,167,{0.12 + 0.88 * min(frac, 1):.2f})"
            out.append(f'<rect class="node-bar" x="{2 + (i % per_row) * cell}" y="{2 + (i // per_row) * cell}" '
                       f'width="{cell - 2}" height="{cell - 2}" fill="{fill}"><title>{esc(name)}: '
                       f'{esc(fmt(used))}/{esc(fmt(alloc))} GPUs used</title></rect>')
        out.append("</svg>")
        total_u = sum(r[4] for r in rows)
        total_a = sum(r[3] for r in rows)
        return "".join(out) + f'<p class="muted">{len(rows)} nodes, {num(total_u)}/{num(total_a)} GPUs used</p>'
    label_w, bar_w, row_h = 96, 220, 20
    W = label_w + bar_w + 64
    H = row_h * len(rows) + 6
    out = [f'<svg class="chart nodes" viewBox="0 0 {W} {H}" width="{W}" height="{H}">']
    for i, (name, alloc, used, an, un, segs) in enumerate(rows):
        y0 = 3 + i * row_h
        full = bar_w * an / max_alloc
        out.append(f'<text class="nodelabel" x="{label_w - 6}" y="{y0 + 13}" text-anchor="end">{esc(name)}</text>')
        out.append(f'<rect class="node-bar" data-node="{esc(name)}" x="{label_w}" y="{y0 + 2}" width="{num(full)}" '
                   f'height="{row_h - 6}"><title>{esc(name)}: {esc(fmt(used))}/{esc(fmt(alloc))} GPUs used</title></rect>')
        # used, split by queue where the step's pods.yaml says whose pods they are
        xpos, left_over = float(label_w), un
        for q, n in sorted(segs.items()):
            n = min(n, max(left_over, 0))
            if n <= 0:
                continue
            w = bar_w * n / max_alloc
            out.append(f'<rect class="node-used" x="{num(xpos)}" y="{y0 + 2}" width="{num(w)}" height="{row_h - 6}" '
                       f'fill="{col.get(q, "#8c8c8c")}"><title>{esc(q or "unknown queue")}: {n} GPUs</title></rect>')
            xpos += w
            left_over -= n
        if left_over > 0:
            w = bar_w * left_over / max_alloc
            out.append(f'<rect class="node-used" x="{num(xpos)}" y="{y0 + 2}" width="{num(w)}" height="{row_h - 6}" '
                       f'fill="#8c8c8c"><title>held by pods not in pods.yaml (e.g. being deleted)</title></rect>')
        over = ' over' if un > an else ''
        out.append(f'<text class="nodevalue{over}" x="{label_w + bar_w + 6}" y="{y0 + 13}">'
                   f'{esc(fmt(used))}/{esc(fmt(alloc))}</text>')
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------------------------- HTML parts
def href(path: Path, base: Path) -> str:
    rel = os.path.relpath(Path(path).resolve(), base.resolve())
    return urllib.parse.quote(rel.replace(os.sep, "/"))


def link(path: Path, base: Path, text: str | None = None) -> str:
    return f'<a href="{href(path, base)}">{esc(text if text is not None else Path(path).name)}</a>'


def verdict_badge(verdict: str) -> str:
    return f'<span class="badge {VERDICT_CLASS.get(verdict, "v-unknown")}">{esc(verdict)}</span>'


def figures_text(figures) -> str:
    if not isinstance(figures, dict) or not figures:
        return "-"
    return ", ".join(f"{k}={fmt(v)}" for k, v in figures.items())


def matrix_html(trial_dir: Path, matrix: dict, base: Path) -> str:
    versions = [str(v) for v in matrix.get("versions") or []]
    cells_by_ex = matrix.get("exercises") if isinstance(matrix.get("exercises"), dict) else {}
    listed = [str(n) for n in matrix.get("differing") or []] if isinstance(matrix.get("differing"), list) else []
    rows = []
    for name, cells in cells_by_ex.items():
        cells = cells if isinstance(cells, dict) else {}
        verdicts = {fmt((cells.get(v) or {}).get("verdict", "not run")) for v in versions}
        # the matrix decides what differs (repeats, overlapping ranges): a flake is not a difference
        rows.append((str(name), cells, len(verdicts) > 1, str(name) in listed))
    rows.sort(key=lambda r: (not (r[2] or r[3])))  # differing rows first, otherwise in file order
    out = [f'<section class="matrix"><h2>Trial {esc(trial_dir.name)}: exercise &times; KAI version</h2>',
           f'<p class="muted">From {link(trial_dir / evidence.MATRIX, base)}'
           + (f', fleet {esc(fmt(matrix["fleet"]))}' if matrix.get("fleet") else "")
           + f'. {esc(fmt(matrix.get("repeat", 1)))} run(s) per cell. Rows that differ across versions come '
             'first (verdicts that differ over every repeat, or figure ranges that do not overlap); cells '
             'whose verdict differs are highlighted.</p>']
    why = matrix.get("why_differing") if isinstance(matrix.get("why_differing"), dict) else {}
    for p in matrix.get("problems") or []:
        out.append(f'<p class="problem">matrix.json: {esc(p)}</p>')
    out.append("<table><thead><tr><th>exercise</th>" + "".join(f"<th>{esc(v)}</th>" for v in versions)
               + "</tr></thead><tbody>")
    for name, cells, verdict_differs, differs in rows:
        tds = []
        for v in versions:
            c = cells.get(v) if isinstance(cells.get(v), dict) else {}
            verdict = fmt(c.get("verdict", "not run"))
            body = verdict_badge(verdict)
            figs = figures_text(c.get("figures"))
            if figs != "-":
                body += f'<div class="figs">{esc(figs)}</div>'
            if c.get("error"):
                body += f'<div class="err small">{esc(fmt(c["error"]))}</div>'
            if isinstance(c.get("runs"), int) and c.get("runs", 0) > 1:
                body += f'<div class="small">{esc(fmt(c.get("passed")))}/{esc(fmt(c["runs"]))} passed</div>'
            if c.get("evidence"):
                body += f'<div class="small">{link(trial_dir / str(c["evidence"]), base, "evidence")}</div>'
            tds.append(f'<td class="{"differs" if verdict_differs else ""}">{body}</td>')
        mark = ' <span class="neq" title="results differ across versions">&ne;</span>' if differs else ""
        reasons = why.get(name) if isinstance(why.get(name), list) else []
        note = f'<div class="small">{esc("; ".join(fmt(r) for r in reasons))}</div>' if reasons else ""
        out.append(f'<tr class="{"row-differs" if differs else ""}"><td><b>{esc(name)}</b>{mark}{note}</td>'
                   + "".join(tds) + "</tr>")
    out.append("</tbody></table></section>")
    return "".join(out)


def _shown_path(path: Path, base: Path) -> str:
    rel = os.path.relpath(Path(path).resolve(), base.resolve())
    return (path.name if rel == "." or rel.startswith("..") else rel.replace(os.sep, "/")) + "/"


def summary_html(runs: list[Run], base: Path) -> str:
    out = ['<section class="summary"><h2>Exercises</h2><table><thead><tr><th>exercise</th><th>verdict</th>'
           '<th>key figures</th><th>KAI</th><th>evidence</th></tr></thead><tbody>']
    for i, r in enumerate(runs):
        figs = (r.verdict or {}).get("figures")
        out.append(f'<tr><td><a href="#run-{i + 1}">{esc(r.name)}</a></td><td>{verdict_badge(r.verdict_text)}</td>'
                   f'<td class="figs">{esc(figures_text(figs))}</td><td>{esc(fmt(r.info("kai_version") or "-"))}</td>'
                   f'<td>{link(r.path, base, _shown_path(r.path, base))}</td></tr>')
    out.append("</tbody></table></section>")
    return "".join(out)


def expectations_html(run: Run) -> str:
    exps = (run.verdict or {}).get("expectations")
    if not isinstance(exps, list) or not exps:
        return '<p class="muted">No expectation was evaluated (the run stopped before its first check).</p>'
    out = ['<table class="expectations"><thead><tr><th>step</th><th>kind</th><th>what</th><th>expected</th>'
           '<th>observed</th><th>result</th><th>at</th><th>pods (examples)</th></tr></thead><tbody>']
    for r in exps:
        if not isinstance(r, dict):
            continue
        ok = bool(r.get("passed"))
        off = r.get("offending") if isinstance(r.get("offending"), list) else []
        shown = ", ".join(fmt(o) for o in off[:MAX_OFFENDING]) + (f" … and {len(off) - MAX_OFFENDING} more"
                                                                    if len(off) > MAX_OFFENDING else "")
        at = r.get("at")
        out.append(f'<tr class="{"pass" if ok else "fail"}"><td>{esc(fmt(r.get("step", "")))}</td>'
                   f'<td>{esc(fmt(r.get("kind", "")))}</td><td>{esc(fmt(r.get("what", "")))}</td>'
                   f'<td class="val">{esc(fmt(r.get("expected", "")))}</td>'
                   f'<td class="val">{esc(fmt(r.get("observed", "")))}</td>'
                   f'<td><span class="badge {"v-passed" if ok else "v-failed"}">{"PASS" if ok else "FAIL"}</span></td>'
                   f'<td class="num">{esc(fmt(at)) + "s" if at is not None else ""}</td>'
                   f'<td class="small">{esc(shown)}</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


def podgroups_html(run: Run) -> str:
    out = ['<table class="podgroups"><thead><tr><th>step</th><th>podgroup</th><th>queue</th>'
           '<th>condition</th><th>reasons</th></tr></thead><tbody>']
    any_rows = False
    notes = []
    for snap in run.snapshots:
        if snap.podgroups is None:
            continue
        rows = []
        for pg in snap.podgroups:
            if not isinstance(pg, dict):
                continue
            queue = run.logical(((pg.get("spec") or {}).get("queue")) or (pg.get("labels") or {}).get("kai.scheduler/queue"))
            for c in ((pg.get("status") or {}).get("schedulingConditions") or []):
                if not isinstance(c, dict):
                    continue
                reasons = [x for x in c.get("reasons") or [] if isinstance(x, dict)]
                text = "".join(f'<div><b class="reason">{esc(fmt(x.get("reason", "")))}</b>'
                               + (f' <span class="small">{esc(fmt(x["message"]))}</span>' if x.get("message") else "")
                               + "</div>" for x in reasons)
                if not reasons and (c.get("reason") or c.get("message")):
                    text = (f'<div><b class="reason">{esc(fmt(c.get("reason", "")))}</b> '
                            f'<span class="small">{esc(fmt(c.get("message", "")))}</span></div>')
                cond = fmt(c.get("type", "")) + (f" ({fmt(c['nodePool'])})" if c.get("nodePool") else "")
                rows.append(f'<td>{esc(pg.get("name", ""))}</td><td>{esc(queue)}</td><td>{esc(cond)}</td><td>{text}</td>')
        label = snap.name if snap.index == 0 else f"{snap.index}. {snap.name}"
        if not rows:
            notes.append(f"{label}: {len(snap.podgroups)} podgroups, none with scheduling conditions")
            continue
        any_rows = True
        shown = rows[:MAX_PODGROUP_ROWS]
        for j, row in enumerate(shown):
            head = f'<td rowspan="{len(shown)}">{esc(label)}</td>' if j == 0 else ""
            out.append(f"<tr>{head}{row}</tr>")
        if len(rows) > MAX_PODGROUP_ROWS:
            notes.append(f"{label}: {len(rows) - MAX_PODGROUP_ROWS} more conditions in {snap.rel}/podgroups.yaml")
    out.append("</tbody></table>")
    html_notes = "".join(f'<li>{esc(n)}</li>' for n in notes)
    if not any_rows:
        return (f'<ul class="muted">{html_notes}</ul>' if notes
                else '<p class="muted">No podgroups.yaml snapshots in this run.</p>')
    return "".join(out) + (f'<ul class="muted">{html_notes}</ul>' if notes else "")


def files_html(run: Run, base: Path) -> str:
    p = run.path
    top = [link(p / f, base) for f in TOP_FILES if (p / f).exists()]
    for sub in ("manifests", "logs", "dump"):
        if (p / sub).is_dir():
            files = sorted(f for f in (p / sub).rglob("*") if f.is_file())
            if files:
                top.append(f'{esc(sub)}/: ' + ", ".join(link(f, base, str(f.relative_to(p / sub))) for f in files))
    out = [f'<ul class="files"><li>{"</li><li>".join(top) or "no top-level files"}</li>']
    for snap in run.snapshots:
        d = p / snap.rel
        links = [link(d / f, base) for f in SNAPSHOT_FILES if (d / f).exists()]
        label = snap.name if snap.index == 0 else f"{snap.index}. {snap.name}"
        out.append(f'<li>{esc(snap.rel)}/ <span class="muted">({esc(label)})</span>: {", ".join(links) or "empty"}</li>')
    out.append("</ul>")
    return "".join(out)


def run_html(i: int, run: Run, base: Path) -> str:
    v = run.verdict or {}
    verdict = run.verdict_text
    title = (run.exercise or {}).get("title")
    head = [("KAI version", run.info("kai_version")), ("lab", run.info("lab")), ("runtime", run.info("runtime")),
            ("fleet", (run.run or {}).get("fleet") or (run.exercise or {}).get("fleet")),
            ("namespace", (run.run or {}).get("namespace")), ("started", (run.run or {}).get("started"))]
    out = [f'<section class="run" id="run-{i + 1}" data-exercise="{esc(run.name)}" data-verdict="{esc(verdict)}"><h2>{esc(run.name)} {verdict_badge(verdict)}</h2>']
    if title:
        out.append(f'<p class="title">{esc(fmt(title))}</p>')
    out.append('<dl class="header">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(fmt(val)) if val not in (None, '') else '-'}</dd>"
                                             for k, val in head)
               + f'<dt>evidence</dt><dd>{link(run.path, base, str(run.path))}</dd></dl>')
    if v.get("error"):
        out.append(f'<div class="error-box"><b>error:</b> <span class="error-text">{esc(fmt(v["error"]))}</span></div>')
    for label, key in (("observer errors", "observer_errors"), ("evidence notes", "evidence_notes")):
        items = v.get(key) if isinstance(v.get(key), list) else []
        if items:
            out.append(f'<div class="notes"><b>{label}:</b><ul>'
                       + "".join(f"<li>{esc(fmt(x))}</li>" for x in items) + "</ul></div>")
    if run.problems:
        out.append('<div class="notes"><b>files:</b><ul>' + "".join(f'<li>{esc(p)}</li>' for p in run.problems)
                   + "</ul></div>")
    out.append("<h3>Expectations</h3>" + expectations_html(run))
    figs = v.get("figures") if isinstance(v.get("figures"), dict) else {}
    out.append("<h3>Figures</h3>")
    if figs:
        gang_rows = {"gang_bind_spread_s.": ("bind spread", "time from its first pod bound to its last"),
                     "gang_decision_to_bound_s.": ("decision → all bound", "time from KAI's first BindRequest "
                                                   "for it (the scheduler's decision) to its last pod bound")}
        gang = {k: gang_rows[p] for k in figs for p in gang_rows if str(k).startswith(p)}
        rest = {k: val for k, val in figs.items() if k not in gang}
        out.append('<table class="figures"><tbody>'
                   + "".join(f'<tr class="gang"><th>gang {esc(str(k).split(".", 1)[1])}: {esc(label)}</th>'
                             f'<td class="num">{esc(fmt(figs[k]))} s</td><td class="muted small">{esc(k)}: '
                             f'{esc(meaning)}</td></tr>' for k, (label, meaning) in gang.items())
                   + "".join(f'<tr><th>{esc(k)}</th><td class="num">{esc(fmt(val))}</td><td></td></tr>'
                             for k, val in rest.items())
                   + "</tbody></table>")
    else:
        out.append('<p class="muted">none recorded</p>')
    out.append("<h3>GPUs held per queue over time</h3>")
    out.append('<p class="muted small">Reconstructed from timeline.jsonl: a pod holds its GPUs (from pods.yaml, '
               'else 1) from <i>bound</i> until <i>evicted</i>, <i>deleted</i>, <i>succeeded</i> or <i>failed</i>. '
               'Diamonds on the top edge: when each expectation was decided (green pass, red fail); red '
               'vertical lines: invariant violations.</p>')
    out.append(f'<div class="chartbox">{timeline_svg(run)}</div>')
    out.append("<h3>GPU occupancy per node, per step</h3>")
    snaps = [s for s in run.snapshots if s.nodes is not None]
    if snaps:
        series_queues = list(held_series(run)) + [run.logical(p.get("queue")) for s in snaps for p in s.pods or []
                                                  if isinstance(p, dict)]
        col = colours(run, series_queues)
        out.append('<div class="nodegrid">')
        for s in snaps:
            label = "final" if s.index == 0 else f"step {s.index}: {s.name}"
            out.append(f'<figure><figcaption>{esc(label)}</figcaption>{nodes_svg(run, s, col)}</figure>')
        out.append("</div>")
    else:
        out.append('<p class="muted">No nodes.yaml snapshots in this run.</p>')
    out.append("<h3>PodGroup scheduling conditions per step</h3>" + podgroups_html(run))
    out.append("<h3>Raw evidence</h3>" + files_html(run, base))
    out.append("</section>")
    return "".join(out)


CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;background:#f6f7f9;color:#1d2430;font-size:14px}
main{max-width:1180px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:18px;margin:0 0 8px}h3{font-size:15px;margin:20px 0 6px;color:#344}
section{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:14px 18px;margin:14px 0}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #e6e8eb;padding:4px 7px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.val{font-family:ui-monospace,"DejaVu Sans Mono",monospace;white-space:pre-wrap}
td.num{font-family:ui-monospace,"DejaVu Sans Mono",monospace;white-space:nowrap}
tr.fail td{background:#fff1f0}.small{font-size:12px}.muted{color:#667}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff;vertical-align:middle}
.v-passed{background:#2e7d32}.v-failed{background:#c62828}.v-error{background:#b3261e;outline:2px solid #f4a}
.v-interrupted{background:#c77c00}.v-unknown{background:#777}
.error-box{background:#fdecea;border:1px solid #f5c2c0;border-radius:6px;padding:8px 10px;margin:8px 0;white-space:pre-wrap;word-break:break-word}
.notes{font-size:12px;color:#444}.notes ul{margin:2px 0 6px}.problem,.err{color:#b3261e}
dl.header{display:grid;grid-template-columns:max-content 1fr max-content 1fr max-content 1fr;gap:2px 12px;margin:4px 0 8px;font-size:13px}
dl.header dt{color:#667}dl.header dd{margin:0;word-break:break-all}
.title{margin:0 0 6px;font-style:italic}
.chartbox{overflow-x:auto}svg.chart{max-width:100%;height:auto;font-family:inherit}
svg .grid{stroke:#e8eaed;stroke-width:1}svg .frame{fill:none;stroke:#b8bec6}svg .axis{font-size:11px;fill:#556}
svg .lane{stroke:#eceef1}svg .lanelabel,svg .linelabel{font-size:11px;font-weight:600}
svg .tick{stroke-width:2}svg .tick-evict{stroke-width:2.6}svg .violation{stroke:#d62728;stroke-width:1.5;stroke-dasharray:4 2}
svg .decision.pass{fill:#2e7d32}svg .decision.fail{fill:#c62828}
svg .node-bar{fill:#eef0f3;stroke:#c3c8cf}svg .nodelabel,svg .nodevalue{font-size:11px;fill:#334}svg .nodevalue.over{fill:#d62728;font-weight:700}
.legend{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:12px;margin:4px 0 0}
.swatch{display:inline-block;width:14px;height:4px;margin:0 5px 2px 0;vertical-align:middle}
.swatch.dashed{background:none;border-top:2px dashed #667;height:0}.swatch.dotted{background:none;border-top:2px dotted #667;height:0;margin-left:8px}
.nodegrid{display:flex;flex-wrap:wrap;gap:10px 26px}figure{margin:0}figcaption{font-size:12px;font-weight:600;margin-bottom:2px}
.reason{color:#8a1c1c}td.differs{background:#fff4d6;outline:2px solid #e0a800}.neq{color:#c77c00;font-weight:700}
.figs{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
table.figures{width:auto;min-width:420px}ul.files{font-size:12px;margin:0;padding-left:18px}ul.files li{margin:2px 0}
a{color:#1f5fa8}
"""


def render_report(evidence_dirs: list[Path], base: Path | None = None) -> str:
    """The report page for these run (or trial) directories; links are relative to `base`
    (default: where write_report puts the page)."""
    evidence_dirs = [Path(d) for d in evidence_dirs]
    base = Path(base) if base is not None else default_output(evidence_dirs).parent
    groups = expand(evidence_dirs)
    runs: list[Run] = []
    matrices = []
    for d, matrix, run_dirs in groups:
        if matrix is not None:
            matrices.append(matrix_html(d, matrix, base))
        runs += [load_run(r) for r in run_dirs]
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    verdicts = [r.verdict_text for r in runs]
    tally = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts)) or "no runs"
    body = [f'<header><h1>kailab evidence report</h1><p class="muted">{len(runs)} run(s): {esc(tally)}. '
            f'Generated {esc(generated)} from the evidence files; nothing here is fetched from anywhere.</p></header>']
    body += matrices
    if runs:
        body.append(summary_html(runs, base))
    body += [run_html(i, r, base) for i, r in enumerate(runs)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>kailab report: {esc(', '.join(dict.fromkeys(r.name for r in runs)) or 'no runs')}</title>"
            f"<style>{CSS}</style></head><body><main>" + "".join(body) + "</main></body></html>\n")


def write_report(evidence_dirs: list[Path], out: Path | None = None) -> Path:
    """Write report.html (inside the run directory, or in the directories' common parent)."""
    evidence_dirs = [Path(d) for d in evidence_dirs]
    target = Path(out) if out is not None else default_output(evidence_dirs)
    if target.is_dir():
        target = target / REPORT_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_report(evidence_dirs, base=target.parent), encoding="utf-8")
    return target
