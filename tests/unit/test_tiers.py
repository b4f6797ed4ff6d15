"""The unit tier needs no browser: `make unit` passes on a machine without Chromium. The report's
browser check lives in the live tier (tests/live/test_report_live.py, marked `browser`), and a test
marked `browser` in tests/unit is a collection error, as a lab's is."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

UNIT = Path(__file__).parent
BROWSER = re.compile(r"chromium|playwright|selenium|webdriver|mark\.browser", re.I)


def test_no_unit_test_opens_a_browser():
    found = [f"{p.relative_to(UNIT.parent)}:{n}: {line.strip()}" for p in sorted(UNIT.glob("*.py")) if p != Path(__file__)
             for n, line in enumerate(p.read_text().splitlines(), 1) if BROWSER.search(line)]
    assert not found, "a browser in the unit tier (move the test to tests/live, marked browser):\n" + "\n".join(found)


def _item(folder: str, marks: tuple[str, ...]):
    return SimpleNamespace(path=Path("tests") / folder / "test_x.py", nodeid=f"tests/{folder}/test_x.py::t",
                           fixturenames=(), get_closest_marker=lambda m: m if m in marks else None)


def test_a_browser_test_belongs_to_the_live_tier():
    tiers = sys.modules["conftest"]  # tests/conftest.py, as pytest loaded it
    assert "browser" in tiers._misplaced(_item("unit", ("browser",)))
    assert tiers._misplaced(_item("live", ("browser",))) is None
    assert "without a lab, kind, alone or browser mark" in tiers._misplaced(_item("live", ()))
