"""What a test session deselected for want of a Docker engine (or KAI) is said in red at the very end of
its output, after pytest's own last line: a deselected test is never a passed one, and the exit status
(0) does not say so. `make test` runs the live tier in two phases; with --kailab-not-run FILE shared
between them the last phase's end says what both left out. Real pytest sessions, only the Docker
engine's answer stood in for."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")

CONFTEST = '''
import kailab.testing.plugin as plugin

plugin.kind_unavailable_reason = lambda: "no Docker engine answers (stood in)"
'''

TESTS = '''
import pytest


def test_plain():
    pass


@pytest.mark.kind
def test_on_kind_one():
    pass


@pytest.mark.kind
def test_on_kind_two():
    pass
'''


def _pytest(folder, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KAILAB_REQUIRE_KIND", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--color=yes", *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def _tail(out: str) -> list[str]:
    """The output's last lines, up to pytest's own last line (the one with the counts)."""
    lines = [line for line in out.rstrip().splitlines() if line.strip()]
    last_pytest = max(i for i, line in enumerate(lines) if re.search(r"\d+ (passed|deselected)", ANSI.sub("", line))
                      and not ANSI.sub("", line).startswith("kailab:"))
    return lines[last_pytest + 1:]


def test_deselected_kind_tests_are_said_in_red_after_pytests_last_line(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_some.py").write_text(TESTS)
    run = _pytest(tmp_path, "test_some.py")
    assert run.returncode == 0, run.stdout + run.stderr  # the deselected two do not fail the run
    tail = _tail(run.stdout)
    assert tail, f"nothing after pytest's last line:\n{run.stdout}"
    assert all("\x1b[31m" in line for line in tail), f"not red: {tail}"
    said = [ANSI.sub("", line) for line in tail]
    assert "NOT run" in said[0] and said[-1].startswith("kailab: 2 tests that need a kind lab were NOT run")
    assert "no Docker engine answers (stood in)" in said[-1]


def test_make_tests_two_phases_end_with_what_both_left_out(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_some.py").write_text(TESTS)
    not_run = tmp_path / "not-run"
    first = _pytest(tmp_path, "test_some.py", "-k", "one or plain", "--kailab-not-run", str(not_run))
    second = _pytest(tmp_path, "test_some.py", "-k", "two", "--kailab-not-run", str(not_run))
    assert first.returncode == 0 and second.returncode == 5, second.stdout  # 5: the second selected none
    said = [ANSI.sub("", line) for line in _tail(second.stdout)]
    assert len(said) == 3, said
    assert said[1].startswith("kailab: 1 tests that need a kind lab were NOT run (pytest ")
    assert "-k one or plain)" in said[1] and "-k two)" in said[2] and "not-run" not in said[1] + said[2]


def test_nothing_is_said_when_nothing_was_left_out(tmp_path):
    (tmp_path / "test_some.py").write_text("def test_plain():\n    pass\n")
    run = _pytest(tmp_path, "test_some.py")
    assert run.returncode == 0 and "NOT run" not in run.stdout and _tail(run.stdout) == []
