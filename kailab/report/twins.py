"""A `kailab twin --kai-versions/--designs` comparison in report.html: each twin's counts, each queue's GPUs,
the pods decided differently (placed by one twin, pending in KAI's words or evicted in another), and
how each twin's first session compared with KAI's own snapshot tool."""

from __future__ import annotations

import json
from pathlib import Path

from .text import esc, fmt

COMPARISON = "comparison.json"
MAX_ROWS = 200


def is_twins(d: Path) -> bool:
    try:
        return "pending_in_snapshot" in json.loads((Path(d) / COMPARISON).read_text())
    except (OSError, ValueError):
        return False


def twins_html(d: Path, base: Path, link) -> str:
    d = Path(d)
    c = json.loads((d / COMPARISON).read_text())
    labels = list(c["variants"])
    out = [f'<section class="twins"><h2>Twins {esc(d.name)}: {esc(", ".join(labels))}</h2>',
           f'<p class="muted">From {link(d / COMPARISON, base)}. {esc(fmt(c["pending_in_snapshot"]))} pods were pending '
           f'in the snapshot; decided differently: <b>{esc(fmt(c["decided_differently"]))}</b> (placed by one twin, '
           f'pending or evicted in another); placed on other nodes: {esc(fmt(c["placed_differently"]))}.</p>',
           '<table class="figures"><thead><tr><th>twin</th><th>KAI</th><th>design</th><th>placed</th><th>still pending</th>'
           '<th>evicted</th><th>settled</th><th>seconds</th><th>against KAI\'s snapshot tool</th></tr></thead><tbody>']
    for k, v in c["variants"].items():
        if v.get("error"):
            out.append(f'<tr><td>{esc(k)}</td><td>{esc(fmt(v.get("kai_version")))}</td><td>{esc(fmt(v.get("design")))}</td>'
                       f'<td colspan="6" class="problem">{esc(v["error"])}</td></tr>')
            continue
        tool = ""
        try:
            a = json.loads((d / k / "twin.json").read_text()).get("against_snapshot_tool")
            if a:
                tool = (f'{a["alike"]} of {a["pods_decided"]} pods alike ({a["agreement"]:.0%})' if a["pods_decided"]
                        else f'neither placed a pod: {(a.get("neither") or {}).get("pending", 0)} pending in both')
        except (OSError, ValueError):
            pass
        out.append(f'<tr><td>{esc(k)}</td><td>{esc(fmt(v["kai_version"]))}</td><td>{esc(fmt(v["design"]))}</td>'
                   f'<td>{esc(fmt(v["placed"]))}</td><td>{esc(fmt(v["still_pending"]))}</td><td>{esc(fmt(v["evicted"]))}</td>'
                   f'<td>{"yes" if v["settled"] else "no"}</td><td>{esc(fmt(v["seconds"]))}</td><td>{esc(tool or "—")}</td></tr>')
    out.append("</tbody></table>")
    if c.get("queues_gpus"):
        out.append('<table class="figures"><thead><tr><th>queue</th><th>GPUs in the snapshot</th>'
                   + "".join(f"<th>after, {esc(k)}</th>" for k in labels) + "</tr></thead><tbody>")
        for q, g in c["queues_gpus"].items():
            cells = [g.get(k, 0) for k in labels]
            cls = "differs" if len(set(cells)) > 1 else ""
            out.append(f"<tr><td>{esc(q)}</td><td>{esc(fmt(g['before']))}</td>"
                       + "".join(f'<td class="{cls}">{esc(fmt(x))}</td>' for x in cells) + "</tr>")
        out.append("</tbody></table>")
    rows = c.get("differences") or []
    if rows:
        out.append('<table class="figures"><thead><tr><th>pod</th><th>kind</th>'
                   + "".join(f"<th>{esc(k)}</th>" for k in labels) + "</tr></thead><tbody>")
        for r in rows[:MAX_ROWS]:
            cls = "differs" if r["kind"] == "decision" else ""
            out.append(f"<tr><td>{esc(r['pod'])}</td><td>{esc(r['kind'])}</td>"
                       + "".join(f'<td class="{cls}">{esc(r["outcomes"].get(k, ""))}</td>' for k in labels) + "</tr>")
        out.append("</tbody></table>")
        if len(rows) > MAX_ROWS:
            out.append(f'<p class="muted">… and {len(rows) - MAX_ROWS} more in {link(d / COMPARISON, base)}.</p>')
    out.append("</section>")
    return "".join(out)
