"""A KAI e2e run's page section: per lab and suite, specs ran / passed / failed / skipped, every
failed spec with KAI's e2e message, the suites a lab cannot run and why. Read from the run
directory's summary.json, written by kailab.e2e.session."""

from __future__ import annotations

import json
from pathlib import Path

from .text import esc, fmt

SUMMARY = "summary.json"


def is_e2e(d: Path) -> bool:
    return (Path(d) / SUMMARY).is_file() and (Path(d) / "plan.json").is_file() and Path(d).name.startswith("e2e-")


def _runtimes(plan: dict) -> str:
    """The runtime(s) of a run's labs: one per lane since the operator's suites run on kind labs
    (plan["runtimes"]); earlier records name one (plan["runtime"])."""
    if "runtimes" in plan:
        return ", ".join(f"{lane}: {rt}" for lane, rt in plan["runtimes"].items())
    return fmt(plan.get("runtime"))


def _filters(plan: dict) -> str:
    """The label filter, one per lane (its runtime's) or, in earlier records, one for the run."""
    f = plan["label_filter"]
    if isinstance(f, dict):
        return "; ".join(f"{esc(lane)}: <code>{esc(text)}</code>" for lane, text in f.items())
    return f"<code>{esc(f)}</code>"


def e2e_html(d: Path, base: Path, link) -> str:
    s = json.loads((Path(d) / SUMMARY).read_text())
    plan, t = s["plan"], s["totals"]
    cls = "v-passed" if s["ok"] else "v-failed"
    out = [f'<section class="e2e"><h2>KAI e2e {esc(Path(d).name)}: <span class="badge {cls}">'
           f'{"passed" if s["ok"] else "failed"}</span> {t["tests"] - t["skipped"]} specs ran, {t["passed"]} passed, '
           f'{t["failed"]} failed, {t["skipped"]} skipped</h2>',
           f'<p class="muted">KAI {esc(", ".join(plan["kai_versions"]))} on fleet {esc(fmt(plan["fleet"]))} '
           f'({esc(_runtimes(plan))}); label filter {_filters(plan)}. '
           f'From {link(Path(d) / SUMMARY, base)}; merged JUnit: {link(Path(d) / "junit.xml", base)}.</p>',
           '<table class="figures"><thead><tr><th>lab</th><th>suite</th><th>ran</th><th>passed</th><th>failed</th>'
           '<th>skipped</th><th>seconds</th><th>output</th></tr></thead><tbody>']
    for ln in s["lanes"]:
        for name, r in ln["suites"].items():
            log = Path(d) / ln["label"] / name / "output.log"
            logcell = link(log, base, "output.log") if log.is_file() else ""
            if "error" in r:
                out.append(f'<tr><td>{esc(ln["label"])}</td><td>{esc(name)}</td><td colspan="5" class="problem">'
                           f'{esc(r["error"])}</td><td>{logcell}</td></tr>')
                continue
            bad = ' class="differs"' if r["failed"] else ""
            out.append(f'<tr><td>{esc(ln["label"])}</td><td>{esc(name)}</td><td>{r["tests"] - r["skipped"]}</td>'
                       f'<td>{r["passed"]}</td><td{bad}>{r["failed"]}</td><td>{r["skipped"]}</td>'
                       f'<td>{r["seconds"]:.0f}</td><td>{logcell}</td></tr>')
    out.append("</tbody></table>")
    for ln in s["lanes"]:
        if ln["error"]:
            out.append(f'<p class="problem">{esc(ln["label"])}: {esc(ln["error"])}</p>')
        fails = [(n, sp) for n, r in ln["suites"].items() for sp in r.get("specs", []) if sp["status"] == "failed"]
        if fails:
            out.append('<ul class="files">' + "".join(
                f'<li><b>{esc(ln["label"])} {esc(n)}</b>: {esc(sp["name"])} — <code>{esc(sp["message"][:400])}</code></li>'
                for n, sp in fails) + "</ul>")
    skipped = plan.get("skipped_specs") or {}
    not_run = plan.get("suites_not_run") or {}
    if skipped or not_run:
        out.append('<p class="muted">Not run on a lab, and why:</p><ul class="files">'
                   + "".join(f'<li>{esc(suite)}: “{esc(text)}” — {esc(why)}</li>'
                             for suite, texts in skipped.items() for text, why in texts.items())
                   + "".join(f'<li>suite {esc(n)} ({esc(v["package"])}) — {esc(v["why"])}</li>' for n, v in not_run.items())
                   + "".join(f'<li>label {esc(k)} — {esc(v)}</li>' for k, v in (plan.get("labels_left_out") or {}).items())
                   + "</ul>")
    out.append("</section>")
    return "".join(out)
