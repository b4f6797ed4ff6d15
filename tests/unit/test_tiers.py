"""The unit tier needs no browser: `make unit` passes on a machine without Chromium. The report's
browser check lives in the live tier (tests/live/test_report_live.py, marked `browser`), and a test
marked `browser` in tests/unit is a collection error, as a lab's is."""

from __future__ import annotations

import ast
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


def _item(folder: str, marks: tuple[str, ...], group: str = ""):
    def marker(m):
        if m == "xdist_group":
            return SimpleNamespace(args=(group,), kwargs={}) if group else None
        return m if m in marks else None
    return SimpleNamespace(path=Path("tests") / folder / "test_x.py", nodeid=f"tests/{folder}/test_x.py::t",
                           originalname="t", fixturenames=(), get_closest_marker=marker)


def test_a_browser_test_belongs_to_the_live_tier():
    tiers = sys.modules["conftest"]  # tests/conftest.py, as pytest loaded it
    assert "browser" in tiers._misplaced(_item("unit", ("browser",)))
    assert tiers._misplaced(_item("live", ("browser",))) is None
    assert "without a lab, kind, alone or browser mark" in tiers._misplaced(_item("live", ()))


def test_an_alone_test_runs_in_one_of_the_alone_phases_two_streams():
    """`make test` runs the `alone` phase on two workers, one xdist group each: a test in neither would
    run beside the vCluster trial or the fan-out, the two that must not run beside each other."""
    tiers = sys.modules["conftest"]
    assert "in neither of its streams" in tiers._misplaced(_item("live", ("kind", "alone")))
    assert "in neither of its streams" in tiers._misplaced(_item("live", ("kind", "alone"), "kind"))
    for stream in ("kind_heavy", "kind_light"):
        assert tiers._misplaced(_item("live", ("kind", "alone"), stream)) is None
    assert tiers._misplaced(_item("live", ("kind",), "kind")) is None


def _marked_kind(fn, module_kind: bool) -> bool:
    return module_kind or any("mark.kind" in ast.unparse(d) for d in fn.decorator_list)


def test_a_kind_test_that_runs_kailab_runs_it_against_the_kind_tests_engine():
    """CI's Docker engine is private (KAILAB_KIND_DOCKER_HOST, never DOCKER_HOST: `--runtime auto` stays
    binary for the rest), so a kind test's `kailab` subprocess reaches it only inside `kind_docker()`; one
    that did not passed on a machine with DOCKER_HOST set and failed in CI ("no Docker engine answers")."""
    found = []
    for p in sorted((UNIT.parent / "live").glob("test_*.py")):
        tree = ast.parse(p.read_text())
        module_kind = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                          and "mark.kind" in ast.unparse(n.value) for n in tree.body)
        # the module's helpers that reach the engine themselves (test_fanout_live.py's `_cli`)
        helpers = {fn.name: ast.unparse(fn) for fn in tree.body if isinstance(fn, ast.FunctionDef)}
        reach, grew = {"kind_docker"}, True
        while grew:  # and those that call one of them (`_ran` runs `_cli`)
            more = {n for n, src in helpers.items() if any(re.search(rf"\b{h}\(", src) for h in reach)}
            grew, reach = bool(more - reach), reach | more
        for fn in tree.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_") and _marked_kind(fn, module_kind)):
                continue
            src = ast.unparse(fn)
            if re.search(r"\b_?kailab(_cli)?\(", src) and not any(re.search(rf"\b{h}\(", src) for h in reach):
                found.append(f"{p.relative_to(UNIT.parent)}::{fn.name}")
    assert not found, "kind tests running kailab outside `with kind_docker():`\n" + "\n".join(found)
