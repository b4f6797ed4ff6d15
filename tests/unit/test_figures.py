"""Figures in README and docs come from their records (kailab.bench.figures): every marked block is
what its record gives, a changed number in a record shows as a stale block, and a bad block is one
line naming the page."""

from __future__ import annotations

import json
import shutil

import pytest

from kailab.bench import figures
from kailab.errors import KailabError
from kailab.paths import PROJECT_ROOT

RECORD = PROJECT_ROOT / "bench" / "results" / "2026-11-27-endings-2000.json"


def test_every_figure_block_is_what_its_record_gives():
    blocks = [m for page in figures.pages() for m in figures.BLOCK.finditer(page.read_text())]
    assert len(blocks) >= 3, "README's headline results are rendered blocks"
    assert figures.stale() == [], "run `kailab bench --render-docs` and commit the pages"


def test_a_number_changed_in_a_record_changes_the_block(tmp_path):
    page = PROJECT_ROOT / "README.md"
    before = figures.render("endings", str(RECORD.relative_to(PROJECT_ROOT)), page)
    changed = tmp_path / RECORD.name
    shutil.copy(RECORD, changed)
    record = json.loads(changed.read_text())
    record["per_pod"]["deleted"]["cpu_ms"] = 77.7
    changed.write_text(json.dumps(record))
    after = figures.render("endings", str(changed), page)
    assert "50.61" in before and "77.7" in after and after != before


def test_each_block_says_its_date_machine_and_record():
    text = figures.render("endings", str(RECORD.relative_to(PROJECT_ROOT)), PROJECT_ROOT / "README.md")
    assert "2026-11-27, 2 cores, 24 GiB" in text
    assert "[record](bench/results/2026-11-27-endings-2000.md)" in text
    from_docs = figures.render("endings", str(RECORD.relative_to(PROJECT_ROOT)), PROJECT_ROOT / "docs" / "results.md")
    assert "[record](../bench/results/2026-11-27-endings-2000.md)" in from_docs


@pytest.mark.parametrize("kind, record, fragment", [
    ("nonsense", "bench/results/2026-11-27-endings-2000.json", "figure kind 'nonsense' is unknown"),
    ("endings", "bench/results/no-such-record.json", "figure record bench/results/no-such-record.json"),
])
def test_a_bad_block_is_one_line_naming_the_page(kind, record, fragment):
    with pytest.raises(KailabError) as err:
        figures.render(kind, record, PROJECT_ROOT / "README.md")
    assert "\n" not in str(err.value) and "README.md" in str(err.value) and fragment in str(err.value)
