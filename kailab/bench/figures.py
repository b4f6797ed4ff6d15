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


RENDERERS: dict[str, Callable[[dict, str], str]] = {
    "exercises-side-by-side": _side_by_side,
    "vcluster": _vcluster,
    "endings": _endings,
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
