"""The docs cite a run's evidence folder only when it is committed: `evidence/` is the machine's own
(git ignores it), so a named folder such as evidence/trial-20261125T231454Z is a link no reader can
follow. A figure's source is its record under bench/results/; a pattern such as
`evidence/fill-<time>` says where a run writes and is no citation."""

from __future__ import annotations

import re
import subprocess

from kailab.paths import PROJECT_ROOT

NAMED_RUN = re.compile(r"(?<![\w/.-])evidence/[\w.-]*\d{8}T\d+[\w.-]*")


def _pages():
    return [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]


def cited_runs(text: str) -> list[str]:
    return [m.group(0).rstrip(".") for m in NAMED_RUN.finditer(text)]


def test_every_evidence_folder_a_page_cites_is_committed():
    tracked = subprocess.run(["git", "-C", str(PROJECT_ROOT), "ls-files", "evidence"], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    missing = [f"{page.relative_to(PROJECT_ROOT)}: {run}" for page in _pages() for run in cited_runs(page.read_text())
               if not any(t.startswith(run + "/") for t in tracked)]
    assert not missing, "evidence folders cited but not committed (cite the bench/results record):\n" + "\n".join(missing)


def test_a_named_run_is_found_and_a_pattern_is_not():
    assert cited_runs("passed (evidence/trial-20261125T231454Z).") == ["evidence/trial-20261125T231454Z"]
    assert cited_runs("one `evidence/fill-merged-<time>`, and evidence/failed-starts/") == []
