"""The docs hold together: every relative link and anchor in README.md and docs/ resolves, every page
under docs/ is reachable from README by links, and README stays a front page (at most 250 lines)."""

from __future__ import annotations

import re
from pathlib import Path

from kailab.paths import PROJECT_ROOT

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _pages() -> list[Path]:
    return [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    return [t for t in LINK.findall(FENCE.sub("", page.read_text()))
            if not re.match(r"^[a-z]+:", t)]


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in _pages():
        for target in _links(page):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(PROJECT_ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(PROJECT_ROOT)}: {target} (no heading for #{anchor})")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_reachable_from_readme():
    seen, todo = set(), [PROJECT_ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        todo += [(page.parent / t.partition("#")[0]).resolve() for t in _links(page) if t.partition("#")[0]]
    unreached = [str(p.relative_to(PROJECT_ROOT)) for p in _pages() if p not in seen]
    assert not unreached, f"pages no link from README leads to: {unreached}"


def test_readme_is_a_front_page():
    lines = (PROJECT_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail to a page under docs/"


def test_the_slug_matches_githubs():
    assert _slug("How pods end") == "how-pods-end"
    assert _slug("KAI's own e2e suites (for people who patch KAI)") == "kais-own-e2e-suites-for-people-who-patch-kai"
    assert _slug("`kailab compare`, and Kueue") == "kailab-compare-and-kueue"
