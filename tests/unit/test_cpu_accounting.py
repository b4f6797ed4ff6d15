"""The suite's per-test CPU figures count a test's own processes, and its children's."""

from __future__ import annotations

import subprocess
import sys

from cpu_accounting import summary_lines, tree_cpu_seconds


def test_a_childs_cpu_counts_while_it_runs_and_after_it_is_reaped():
    before = tree_cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\nwhile time.process_time()-t<0.6: pass\nimport sys; sys.stdout.write('x'); sys.stdout.flush(); time.sleep(30)"],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout.read(1) == b"x"
        alive = tree_cpu_seconds() - before
        assert alive >= 0.5, alive  # the busy child, still running, counted through the process tree
    finally:
        child.kill()
        child.wait()
    assert tree_cpu_seconds() - before >= 0.5  # reaped: its time moved into this process's


def test_the_summary_puts_the_costliest_first_and_says_the_total():
    lines = summary_lines({"a": 1.0, "b": 30.5, "c": 2.0}, top=2)
    assert lines[0].endswith("b") and lines[1].endswith("c")
    assert "33.5 CPU-s" in lines[-1] and "3 tests" in lines[-1]
