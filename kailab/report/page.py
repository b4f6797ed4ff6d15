"""The page: HTML sections and tables around the charts, inline CSS, and where the page is written.

Over 500 lines: one section per kind of evidence (runs, trials, comparisons, replays, e2e) sharing one
set of escaping and linking helpers; the charts themselves are in svg.py."""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from pathlib import Path
import json

from .. import evidence
from ..errors import KailabError
from .operations import QUEUE_FIGURES
from . import figure_names
from .e2e import e2e_html, is_e2e
from .fill import fill_html, is_fill
from .replay import is_replay, replay_html
from .twins import is_twins, twins_html
from .read import SNAPSHOT_FILE, Run, expand, load_run, snapshot_files, subdir_files, top_files
from .series import demand_series, fleet_gpus, run_end
from .svg import node_colours, nodes_svg, series_colour, series_svg, timeline_svg
from .text import esc, fmt

REPORT_NAME = "report.html"
VERDICT_CLASS = {"passed": "v-passed", "failed": "v-failed", "error": "v-error", "interrupted": "v-interrupted"}
MAX_OFFENDING = 10
MAX_PODGROUP_ROWS = 60
GANG_FIGURES = {"gang_bind_spread_s.": ("bind spread", "time from its first pod bound to its last"),
                "gang_decision_to_bound_s.": ("decision → all bound", "time from KAI's first BindRequest "
                                              "for it (the scheduler's decision) to its last pod bound")}


# ------------------------------------------------------------------------------ small parts
def _relpath(path: Path, base: Path) -> str:
    return os.path.relpath(Path(path).resolve(), base.resolve())


def href(path: Path, base: Path) -> str:
    return urllib.parse.quote(_relpath(path, base).replace(os.sep, "/"))


def link(path: Path, base: Path, text: str | None = None) -> str:
    return f'<a href="{href(path, base)}">{esc(text if text is not None else Path(path).name)}</a>'


def _shown_path(path: Path, base: Path) -> str:
    rel = _relpath(path, base)
    return (path.name if rel == "." or rel.startswith("..") else rel.replace(os.sep, "/")) + "/"


def verdict_badge(verdict: str) -> str:
    return f'<span class="badge {VERDICT_CLASS.get(verdict, "v-unknown")}">{esc(verdict)}</span>'


def figures_text(figures) -> str:
    if not isinstance(figures, dict) or not figures:
        return "-"
    return ", ".join(f"{k}={fmt(v)}" for k, v in figures.items())


def _muted_list(items: list[str]) -> str:
    return f'<ul class="muted">{"".join(f"<li>{esc(n)}</li>" for n in items)}</ul>'


# ------------------------------------------------------------------------------ trial matrix
def matrix_html(trial_dir: Path, matrix: dict, base: Path) -> str:
    versions = [str(v) for v in matrix.get("versions") or []]
    why = matrix.get("why_differing") if isinstance(matrix.get("why_differing"), dict) else {}
    axis = str(matrix.get("axis") or "KAI version")
    out = [f'<section class="matrix"><h2>{"Comparison" if axis != "KAI version" else "Trial"} {esc(trial_dir.name)}: '
           f'exercise &times; {esc(axis)}</h2>',
           f'<p class="muted">From {link(trial_dir / evidence.MATRIX, base)}'
           + (f', fleet {esc(fmt(matrix["fleet"]))}' if matrix.get("fleet") else "")
           + f'. {esc(fmt(matrix.get("repeat", 1)))} run(s) per cell. Rows that differ across versions come '
             'first (verdicts that differ over every repeat, or figure ranges that do not overlap); cells '
             'whose verdict differs are highlighted.</p>']
    for p in matrix.get("problems") or []:
        out.append(f'<p class="problem">{esc(evidence.MATRIX)}: {esc(p)}</p>')
    out.append("<table><thead><tr><th>exercise</th>" + "".join(f"<th>{esc(v)}</th>" for v in versions)
               + "</tr></thead><tbody>" + _ran_row(matrix, versions))
    for name, cells, verdict_differs, differs in _matrix_rows(matrix, versions):
        tds = [f'<td class="{"differs" if verdict_differs else ""}">'
               f'{_matrix_cell(trial_dir, cells.get(v), base)}</td>' for v in versions]
        mark = ' <span class="neq" title="results differ across versions">&ne;</span>' if differs else ""
        reasons = why.get(name) if isinstance(why.get(name), list) else []
        note = f'<div class="small">{esc("; ".join(fmt(r) for r in reasons))}</div>' if reasons else ""
        out.append(f'<tr class="{"row-differs" if differs else ""}"><td><b>{esc(name)}</b>{mark}{note}</td>'
                   + "".join(tds) + "</tr>")
    out.append("</tbody></table></section>")
    return "".join(out)


def _ran_row(matrix: dict, versions: list[str]) -> str:
    """What each version's lab really ran, as its scheduler reported it (kai.json), when known."""
    ran = matrix.get("kai") if isinstance(matrix.get("kai"), dict) else {}
    if not ran:
        return ""
    cells = []
    for v in versions:
        k = ran.get(v) if isinstance(ran.get(v), dict) else {}
        said = f'{fmt(k.get("scheduler_version") or "?")} @ {fmt(k.get("scheduler_commit") or "?")[:12]}'
        cells.append(f'<td class="small">{esc(said)}</td>')
    return '<tr><td class="small">scheduler ran</td>' + "".join(cells) + "</tr>"


def _matrix_rows(matrix: dict, versions: list[str]) -> list[tuple[str, dict, bool, bool]]:
    """(exercise, its cells, verdicts differ, the matrix lists it as differing): differing rows first."""
    cells_by_ex = matrix.get("exercises") if isinstance(matrix.get("exercises"), dict) else {}
    listed = [str(n) for n in matrix.get("differing") or []] if isinstance(matrix.get("differing"), list) else []
    rows = []
    for name, cells in cells_by_ex.items():
        cells = cells if isinstance(cells, dict) else {}
        verdicts = {fmt((cells.get(v) or {}).get("verdict", "not run")) for v in versions}
        # the matrix decides what differs (repeats, overlapping ranges): a flake is not a difference
        rows.append((str(name), cells, len(verdicts) > 1, str(name) in listed))
    rows.sort(key=lambda r: (not (r[2] or r[3])))  # stable: otherwise in file order
    return rows


def _matrix_cell(trial_dir: Path, c, base: Path) -> str:
    c = c if isinstance(c, dict) else {}
    body = verdict_badge(fmt(c.get("verdict", "not run")))
    figs = figures_text(c.get("figures"))
    if figs != "-":
        body += f'<div class="figs" title="{esc(figs)}">{esc(figure_names.text(c.get("figures")))}</div>'
    if c.get("error"):
        body += f'<div class="err small">{esc(fmt(c["error"]))}</div>'
    if isinstance(c.get("runs"), int) and c.get("runs", 0) > 1:
        body += f'<div class="small">{esc(fmt(c.get("passed")))}/{esc(fmt(c["runs"]))} passed</div>'
    if c.get("evidence"):
        body += f'<div class="small">{link(trial_dir / str(c["evidence"]), base, "evidence")}</div>'
    return body


# ------------------------------------------------------------------------------ tables
def _people_figures(figs, titles: dict[int, str]) -> str:
    """Labelled figures with units, one chip each; the machine keys on hover (title)."""
    pairs = figure_names.described(figs, titles)
    if not pairs:
        return "-"
    return "".join(f'<span class="fig"><span class="fig-label">{esc(label)}</span> {esc(value)}</span>'
                   for label, value in pairs)


def summary_html(runs: list[Run], base: Path) -> str:
    out = ['<section class="summary"><h2>Exercises</h2><table><thead><tr><th>exercise</th><th>verdict</th>'
           '<th>key figures</th><th>KAI</th><th>evidence</th></tr></thead><tbody>']
    for i, r in enumerate(runs):
        figs = (r.verdict or {}).get("figures")
        titles = figure_names.step_titles(r.exercise)
        out.append(f'<tr><td><a href="#run-{i + 1}">{esc(r.name)}</a></td><td>{verdict_badge(r.verdict_text)}</td>'
                   f'<td class="figs" title="{esc(figures_text(figs))}">{_people_figures(figs, titles)}</td>'
                   f'<td>{esc(fmt(r.info("kai_version") or "-"))}</td>'
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


def _condition_text(c: dict) -> str:
    """A scheduling condition's reasons (KAI's words), or its own reason and message when it has none."""
    reasons = [x for x in c.get("reasons") or [] if isinstance(x, dict)]
    text = "".join(f'<div><b class="reason">{esc(fmt(x.get("reason", "")))}</b>'
                   + (f' <span class="small">{esc(fmt(x["message"]))}</span>' if x.get("message") else "")
                   + "</div>" for x in reasons)
    if not reasons and (c.get("reason") or c.get("message")):
        text = (f'<div><b class="reason">{esc(fmt(c.get("reason", "")))}</b> '
                f'<span class="small">{esc(fmt(c.get("message", "")))}</span></div>')
    return text


def _condition_rows(run: Run, podgroups: list) -> list[str]:
    """A table row's cells (after the step) for each scheduling condition of each podgroup."""
    rows = []
    for pg in podgroups:
        if not isinstance(pg, dict):
            continue
        queue = run.logical(((pg.get("spec") or {}).get("queue")) or (pg.get("labels") or {}).get("kai.scheduler/queue"))
        for c in ((pg.get("status") or {}).get("schedulingConditions") or []):
            if not isinstance(c, dict):
                continue
            cond = fmt(c.get("type", "")) + (f" ({fmt(c['nodePool'])})" if c.get("nodePool") else "")
            rows.append(f'<td>{esc(pg.get("name", ""))}</td><td>{esc(queue)}</td><td>{esc(cond)}</td>'
                        f'<td>{_condition_text(c)}</td>')
    return rows


def podgroups_html(run: Run) -> str:
    out = ['<table class="podgroups"><thead><tr><th>step</th><th>podgroup</th><th>queue</th>'
           '<th>condition</th><th>reasons</th></tr></thead><tbody>']
    any_rows = False
    notes = []
    for snap in run.snapshots:
        if snap.podgroups is None:
            continue
        rows = _condition_rows(run, snap.podgroups)
        if not rows:
            notes.append(f"{snap.label}: {len(snap.podgroups)} podgroups, none with scheduling conditions")
            continue
        any_rows = True
        shown = rows[:MAX_PODGROUP_ROWS]
        for j, row in enumerate(shown):
            head = f'<td rowspan="{len(shown)}">{esc(snap.label)}</td>' if j == 0 else ""
            out.append(f"<tr>{head}{row}</tr>")
        if len(rows) > MAX_PODGROUP_ROWS:
            notes.append(f"{snap.label}: {len(rows) - MAX_PODGROUP_ROWS} more conditions in "
                         f"{snap.rel}/{SNAPSHOT_FILE['podgroups']}")
    out.append("</tbody></table>")
    if not any_rows:
        return (_muted_list(notes) if notes
                else f'<p class="muted">No {SNAPSHOT_FILE["podgroups"]} snapshots in this run.</p>')
    return "".join(out) + (_muted_list(notes) if notes else "")


def claims_html(run: Run) -> str:
    """DRA: per step, each ResourceClaim's pods, node and devices, and the devices held per node
    ('' for a run with no claims)."""
    snaps = [s for s in run.snapshots if s.claims]
    if not snaps:
        return ""
    out = ["<h3>ResourceClaims (DRA) per step: who holds which devices</h3>"]
    for snap in snaps:
        per_node: dict[str, int] = {}
        for c in snap.claims:
            if c.get("node"):
                per_node[c["node"]] = per_node.get(c["node"], 0) + len(c.get("devices") or [])
        held = ", ".join(f"{esc(n)}: {k}" for n, k in sorted(per_node.items())) or "none"
        out.append(f'<p class="small"><b>{esc(snap.label)}</b> — devices held per node: {held}</p>'
                   "<table><thead><tr><th>claim</th><th>pods</th><th>node</th><th>devices</th></tr></thead><tbody>")
        for c in snap.claims:
            devices = ", ".join(c.get("devices") or []) or ("not allocated" if not c.get("allocated") else "")
            out.append(f"<tr><td>{esc(fmt(c.get('name')))}</td><td>{esc(', '.join(c.get('pods') or []) or '—')}</td>"
                       f"<td>{esc(fmt(c.get('node') or '—'))}</td><td class=\"val\">{esc(devices)}</td></tr>")
        out.append("</tbody></table>")
    return "".join(out)


def files_html(run: Run, base: Path) -> str:
    top = [link(f, base) for f in top_files(run)]
    for sub, files in subdir_files(run):
        top.append(f'{esc(sub)}/: ' + ", ".join(link(f, base, str(f.relative_to(run.path / sub))) for f in files))
    out = [f'<ul class="files"><li>{"</li><li>".join(top) or "no top-level files"}</li>']
    for snap in run.snapshots:
        links = [link(f, base) for f in snapshot_files(run, snap)]
        out.append(f'<li>{esc(snap.rel)}/ <span class="muted">({esc(snap.label)})</span>: '
                   f'{", ".join(links) or "empty"}</li>')
    out.append("</ul>")
    return "".join(out)


# ------------------------------------------------------------------------------ a run's section
def _run_header(i: int, run: Run, base: Path) -> str:
    verdict = run.verdict_text
    title = (run.exercise or {}).get("title")
    head = [("KAI version", run.info("kai_version")), ("lab", run.info("lab")), ("runtime", run.info("runtime")),
            ("fleet", (run.run or {}).get("fleet") or (run.exercise or {}).get("fleet")),
            ("namespace", (run.run or {}).get("namespace")), ("started", (run.run or {}).get("started"))]
    out = [f'<section class="run" id="run-{i + 1}" data-exercise="{esc(run.name)}" data-verdict="{esc(verdict)}">'
           f'<h2>{esc(run.name)} {verdict_badge(verdict)}</h2>']
    if title:
        out.append(f'<p class="title">{esc(fmt(title))}</p>')
    out.append('<dl class="header">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(fmt(val)) if val not in (None, '') else '-'}</dd>"
                                             for k, val in head)
               + f'<dt>evidence</dt><dd>{link(run.path, base, str(run.path))}</dd></dl>')
    return "".join(out)


def _run_notes(run: Run) -> str:
    """The run's error, the observer's and the evidence writer's notes, and files that could not be read."""
    v = run.verdict or {}
    out = []
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
    return "".join(out)


def _figures_html(run: Run) -> str:
    """The verdict's figures; per-gang timings get a label and their meaning."""
    v = run.verdict or {}
    figs = v.get("figures") if isinstance(v.get("figures"), dict) else {}
    if not figs:
        return '<p class="muted">none recorded</p>'
    gang = {k: GANG_FIGURES[p] for k in figs for p in GANG_FIGURES if str(k).startswith(p)}
    per_queue = {k for k in figs if str(k).split(".", 1)[0] in QUEUE_FIGURES and "." in str(k)}
    rest = {k: val for k, val in figs.items() if k not in gang and k not in per_queue}
    return (_queue_figures_html({k: figs[k] for k in per_queue}) + '<table class="figures"><tbody>'
            + "".join(f'<tr class="gang"><th>gang {esc(str(k).split(".", 1)[1])}: {esc(label)}</th>'
                      f'<td class="num">{esc(fmt(figs[k]))} s</td><td class="muted small">{esc(k)}: '
                      f'{esc(meaning)}</td></tr>' for k, (label, meaning) in gang.items())
            + "".join(f'<tr><th>{esc(k)}</th><td class="num">{esc(fmt(val))}</td><td></td></tr>'
                      for k, val in rest.items())
            + "</tbody></table>")


def _queue_figures_html(figs: dict) -> str:
    """One row per queue: pending-to-bound waits (from the timeline), evictions, pods never bound."""
    if not figs:
        return ""
    queues = sorted({str(k).split(".", 1)[1] for k in figs})
    head = "".join(f"<th>{esc(c)}</th>" for c in QUEUE_FIGURES)
    rows = "".join(f"<tr><th>{esc(q)}</th>" + "".join(
        f'<td class="num">{esc(fmt(figs.get(f"{c}.{q}", 0 if c in ("evicted", "never_bound") else "-")))}</td>'
        for c in QUEUE_FIGURES) + "</tr>" for q in queues)
    return (f'<table class="figures queue-figures"><thead><tr><th>queue</th>{head}</tr></thead>'
            f'<tbody>{rows}</tbody></table><p class="muted small">Waits: seconds from a pod\'s <i>created</i> '
            f'to its first <i>bound</i> in {evidence.TIMELINE} (nearest-rank quantiles).</p>')


def _demand_html(run: Run) -> str:
    req, alloc = demand_series(run)
    if len(req) < 2 and len(alloc) < 2:
        return '<p class="muted">no pods in the timeline</p>'
    t_end = run_end(run)
    fleet = fleet_gpus(run)
    series = [{"labels": {"GPUs": "requested"}, "points": req}, {"labels": {"GPUs": "allocated"}, "points": alloc}]
    text = ""
    if fleet:
        # time-weighted mean of the allocated step function over the run
        area = sum((t1 - t0) * v for (t0, v), (t1, _) in zip(alloc, alloc[1:] + [(t_end, 0)]))
        text = (f"fleet {fmt(fleet)} GPUs; utilisation peak {fmt(round(100 * max(v for _, v in alloc) / fleet))}%, "
                f"mean {fmt(round(100 * area / (t_end * fleet)))}% over {fmt(round(t_end, 1))} s")
    legend = " ".join(f'<span style="color:{series_colour(run, s, i)}">&#9632;</span> {esc(s["labels"]["GPUs"])}'
                      for i, s in enumerate(series))
    return (series_svg(run, series, t_end) + f'<p class="small">{legend}; {esc(text)} (from '
            f'{evidence.TIMELINE}: a pod asks from <i>created</i>, holds from <i>bound</i>)</p>')


def _kai_metrics_html(run: Run) -> str:
    """Each panel of kai-metrics.json: its chart, its PromQL and source, or why it is missing."""
    try:
        doc = json.loads((run.path / evidence.KAI_METRICS).read_text())
    except (OSError, ValueError):
        return f'<p class="muted">no {evidence.KAI_METRICS}: the lab ran no Prometheus</p>'
    t_end, out = run_end(run), []
    for panel in doc.get("panels") or []:
        head = (f'<div class="kai-panel"><b>{esc(str(panel.get("title")))}</b> '
                f'<code class="promql">{esc(str(panel.get("promql", "")))}</code> '
                f'<span class="muted small">({esc(str(panel.get("source")))})</span>')
        if panel.get("missing"):
            out.append(head + f'<p class="muted">missing: {esc(str(panel["missing"]))}</p></div>')
            continue
        if "by_action" in panel:
            out.append(head + "<p>" + (esc(", ".join(f"{a}: {n}" for a, n in panel["by_action"].items() if n))
                                       or "none") + "</p></div>")
            continue
        series = [s for s in panel.get("series") or [] if s.get("points")]
        legend = " ".join(f'<span style="color:{series_colour(run, s, i)}">&#9632;</span> '
                          + esc(", ".join(f"{k}={v}" for k, v in s["labels"].items() if k != "queue_name") or "-")
                          for i, s in enumerate(series))
        out.append(head + series_svg(run, series, t_end) + f'<p class="small">{legend}</p></div>')
    return "".join(out)


def _timeline_html(run: Run) -> str:
    return (f'<p class="muted small">Reconstructed from {evidence.TIMELINE}: a pod holds its GPUs (from '
            f'{SNAPSHOT_FILE["pods"]}, else 1) from <i>bound</i> until <i>evicted</i>, <i>deleted</i>, '
            '<i>succeeded</i> or <i>failed</i>. Diamonds on the top edge: when each expectation was decided '
            '(green pass, red fail); red vertical lines: invariant violations.</p>'
            f'<div class="chartbox">{timeline_svg(run)}</div>')


def _nodes_html(run: Run) -> str:
    snaps = [s for s in run.snapshots if s.nodes is not None]
    if not snaps:
        return f'<p class="muted">No {SNAPSHOT_FILE["nodes"]} snapshots in this run.</p>'
    col = node_colours(run, snaps)
    out = ['<div class="nodegrid">']
    for s in snaps:
        label = "final" if s.index == 0 else f"step {s.index}: {s.name}"
        out.append(f'<figure><figcaption>{esc(label)}</figcaption>{nodes_svg(run, s, col)}</figure>')
    out.append("</div>")
    return "".join(out)


def _top_html(run: Run) -> str:
    """The lab as `kailab top` showed it at the end of each step ('' for a run without the pictures)."""
    from ..top.screen import as_text

    snaps = [s for s in run.snapshots if s.top]
    if not snaps:
        return ""
    out = ["<h3>The lab at each step (kailab top: queues, waits and KAI's reasons, GPUs, evictions)</h3>"]
    for s in snaps:
        label = "final" if s.index == 0 else f"step {s.index}: {s.name}"
        try:
            text = as_text(s.top, label, width=130)
        except (KeyError, TypeError, ValueError) as err:  # a hand-edited or older file: said, not fatal
            text = f"{s.rel}/{evidence.TOP}: unreadable ({type(err).__name__}: {err})"
        out.append(f'<figure><figcaption>{esc(label)}</figcaption><pre class="top">{esc(text.rstrip())}</pre></figure>')
    return "".join(out)


def run_html(i: int, run: Run, base: Path) -> str:
    return (_run_header(i, run, base) + _run_notes(run)
            + "<h3>Expectations</h3>" + expectations_html(run)
            + "<h3>Figures</h3>" + _figures_html(run)
            + "<h3>GPUs held per queue over time</h3>" + _timeline_html(run)
            + "<h3>GPUs requested vs allocated, fleet utilisation</h3>" + _demand_html(run)
            + "<h3>KAI's view (its Grafana dashboards' queries, from the lab's Prometheus)</h3>" + _kai_metrics_html(run)
            + "<h3>GPU occupancy per node, per step</h3>" + _nodes_html(run)
            + "<h3>PodGroup scheduling conditions per step</h3>" + podgroups_html(run)
            + claims_html(run)
            + _top_html(run)
            + "<h3>Raw evidence</h3>" + files_html(run, base)
            + "</section>")


# ------------------------------------------------------------------------------ the page
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;background:#f6f7f9;color:#1d2430;font-size:14px}
main{max-width:1180px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:18px;margin:0 0 8px}h3{font-size:15px;margin:20px 0 6px;color:#344}
section{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:14px 18px;margin:14px 0}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #e6e8eb;padding:4px 7px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.val{font-family:ui-monospace,"DejaVu Sans Mono",monospace;white-space:pre-wrap}
td.num{font-family:ui-monospace,"DejaVu Sans Mono",monospace;white-space:nowrap}
pre.top{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:11.5px;background:#10141a;color:#d8dee9;padding:8px 10px;border-radius:6px;overflow-x:auto;line-height:1.25}
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
.figs{font-size:12px}.fig{display:inline-block;margin:1px 4px 1px 0;padding:0 5px;border:1px solid #dde;border-radius:3px;background:#f7f8fb;white-space:nowrap}.fig-label{color:#667}
table.figures{width:auto;min-width:420px}ul.files{font-size:12px;margin:0;padding-left:18px}ul.files li{margin:2px 0}
a{color:#1f5fa8}
"""


def default_output(evidence_dirs: list[Path]) -> Path:
    dirs = [Path(d).resolve() for d in evidence_dirs]
    if not dirs:
        raise KailabError("no evidence directories given")
    base = dirs[0] if len(dirs) == 1 else Path(os.path.commonpath([str(d) for d in dirs]))
    return base / REPORT_NAME


def render_report(evidence_dirs: list[Path], base: Path | None = None) -> str:
    """The report page for these run (or trial) directories; links are relative to `base`
    (default: where write_report puts the page)."""
    evidence_dirs = [Path(d) for d in evidence_dirs]
    base = Path(base) if base is not None else default_output(evidence_dirs).parent
    runs: list[Run] = []
    matrices = [replay_html(d, base, link) for d in evidence_dirs if is_replay(d)]
    matrices += [twins_html(d, base, link) for d in evidence_dirs if is_twins(d)]
    matrices += [e2e_html(d, base, link) for d in evidence_dirs if is_e2e(d)]
    matrices += [fill_html(d, base, link) for d in evidence_dirs if is_fill(d)]
    for d, matrix, run_dirs in expand([d for d in evidence_dirs
                                       if not is_replay(d) and not is_e2e(d) and not is_fill(d) and not is_twins(d)]):
        if matrix is not None:
            matrices.append(matrix_html(d, matrix, base))
        runs += [load_run(r) for r in run_dirs]
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    verdicts = [r.verdict_text for r in runs]
    tally = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
    replays = sum(1 for d in evidence_dirs if is_replay(d))
    e2es = sum(1 for d in evidence_dirs if is_e2e(d))
    fills = sum(1 for d in evidence_dirs if is_fill(d))
    twins = sum(1 for d in evidence_dirs if is_twins(d))
    held = [f"{n} {what}{'s' if n != 1 else ''}" + (f" ({tally})" if what == "exercise run" else "")
            for n, what in ((len(runs), "exercise run"), (replays, "replay"), (e2es, "e2e session"),
                            (fills, "fill experiment"), (twins, "twin comparison"),
                            (len(matrices) - replays - e2es - fills - twins, "trial")) if n]
    said = "; ".join(held) or "nothing: no exercise runs, replays, trials or e2e sessions"
    body = [f'<header><h1>kailab evidence report</h1><p class="muted">{esc(said)}. '
            f'Generated {esc(generated)} from the evidence files; nothing here is fetched from anywhere.</p></header>']
    body += matrices
    if runs:
        body.append(summary_html(runs, base))
    body += [run_html(i, r, base) for i, r in enumerate(runs)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>kailab report: {esc(', '.join(dict.fromkeys([r.name for r in runs] + [Path(d).name for d in evidence_dirs if is_replay(d) or is_e2e(d) or is_fill(d) or is_twins(d)])) or 'no runs')}</title>"
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
