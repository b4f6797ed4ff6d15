"""Figures in README and docs, rendered from the records under bench/results/ so none goes stale.

A page holds a marked block:

    <!-- figure: KIND bench/results/<record>.json -->
    ...what `render(KIND, record)` gives...
    <!-- /figure -->

`kailab bench render-docs` rewrites every block from its record; tests/unit/test_figures.py fails
when a block differs from what its record gives (a number changed in a record, or edited by hand in
a page). Each rendering says its record's date and machine, and its commit when the record has one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import KailabError
from ..paths import PROJECT_ROOT
from .renderers import RENDERERS  # one entry per kind of block

BLOCK = re.compile(r"(<!-- figure: (\S+) (\S+) -->\n)(.*?)(<!-- /figure -->)", re.S)


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
