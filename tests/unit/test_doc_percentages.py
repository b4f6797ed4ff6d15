"""A percentage a page states beside a record it cites is in that record: in a paragraph of README or
docs/ that links bench/results/<name>.md, every "N %" outside figure blocks (which are rendered from
their records) must appear in the record's .md or .json. A figure no record holds is removed, not
kept with a link that does not back it."""

from __future__ import annotations

import re
from pathlib import Path

from kailab.paths import PROJECT_ROOT

FIGURE_BLOCK = re.compile(r"<!-- figure:.*?<!-- /figure -->", re.S)
RECORD_LINK = re.compile(r"\]\(((?:\.\./)*bench/results/[^)#\s]+)\)")
PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?) ?%")


def _pages() -> list[Path]:
    return [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]


def unbacked(page: Path, text: str) -> list[str]:
    """Each percentage of a paragraph citing records that none of those records holds."""
    found = []
    for para in re.split(r"\n\s*\n", FIGURE_BLOCK.sub("", text)):
        records = [(page.parent / link).resolve() for link in RECORD_LINK.findall(para)]
        if not records:
            continue
        held = "".join(p.read_text() for r in records for p in (r, r.with_suffix(".json")) if p.is_file())
        found += [f"{page.relative_to(PROJECT_ROOT)}: {m.group(0)!r} (records: {', '.join(r.name for r in records)})"
                  for m in PERCENT.finditer(para) if m.group(1) not in held]
    return found


def test_every_percentage_beside_a_record_is_in_it():
    found = [line for page in _pages() for line in unbacked(page, page.read_text())]
    assert not found, "percentages their cited records do not hold:\n" + "\n".join(found)


def test_a_percentage_the_record_lacks_is_found():
    page = PROJECT_ROOT / "docs" / "fan-out.md"
    text = ("Two Jobs, merged into one fill whose table reads binpack 97.5 % of the GPUs allocated "
            "([record](../bench/results/2026-11-28-fanout-kind.md)).\n")
    assert unbacked(page, text) == ["docs/fan-out.md: '97.5 %' (records: 2026-11-28-fanout-kind.md)"]
