"""Exercises on labs side by side (pytest -n): the worker count and the outcome a worker's report carries."""

import json
from dataclasses import asdict
from types import SimpleNamespace

from kailab.exercise.checks import Result
from kailab.exercise.runner import Outcome
from kailab.testing.items import OUTCOME_PROPERTY, outcome_of
from kailab.testing.workers import LAB_MIB, LABS_PER_CORE, MAX_WORKERS, auto_workers


def test_auto_workers_is_bounded_by_cores_memory_and_the_cap():
    assert auto_workers(cores=2, memory_mib=100 * LAB_MIB) == 2 * LABS_PER_CORE
    assert auto_workers(cores=2, memory_mib=100 * LAB_MIB) == 2  # this project's 2-core machine: two labs
    assert auto_workers(cores=64, memory_mib=3 * LAB_MIB + 1) == 3  # memory holds three labs
    assert auto_workers(cores=64, memory_mib=100 * LAB_MIB) == MAX_WORKERS
    assert auto_workers(cores=1, memory_mib=LAB_MIB - 1) == 1  # never fewer than one


def test_an_outcome_survives_the_trip_from_a_worker():
    outcome = Outcome("quota", "failed", [Result("s1", "expect", "bound", "4", "3", False, ["p-0"], 2.5)],
                      "/ev/run", "", {"binds": 3}, {"expect": 1.0}, ["clean-up slow"])
    report = SimpleNamespace(user_properties=[("other", "x"), (OUTCOME_PROPERTY, json.dumps(asdict(outcome)))])
    back = outcome_of(report)
    assert back == outcome
    assert back.failures[0].line().startswith("[FAIL] s1: bound")
    assert outcome_of(SimpleNamespace(user_properties=[])) is None


def test_the_side_by_side_bench_reads_junit_and_writes_its_table(tmp_path):
    """`kailab bench side-by-side`: items and outcomes from pytest's JUnit file, and the
    CPU floor (least CPU-s over the cores) in the page."""
    from kailab.bench import _junit_items, exercises_side_by_side_markdown

    junit = tmp_path / "j.xml"
    junit.write_text('<testsuites><testsuite><testcase name="quota" time="23.4"/>'
                     '<testcase name="gang" time="30.0"><failure message="x"/></testcase>'
                     '<testcase name="quota-what-if" time="120.04"/></testsuite></testsuites>')
    items = _junit_items(junit)
    assert items == [{"item": "quota", "seconds": 23.4, "outcome": "passed"},
                     {"item": "gang", "seconds": 30.0, "outcome": "failed"},
                     {"item": "quota-what-if", "seconds": 120.0, "outcome": "passed"}]
    assert _junit_items(tmp_path / "missing.xml") == []
    run = {"workers": 2, "run": 1, "wall_s": 150.0, "passed": 2, "failed": ["gang"], "items": items,
           "sum_item_s": 173.4, "cpu_seconds": 240.0, "busy_cores_mean": 1.6, "busy_cores_p90": 2.0,
           "memory_peak_mib": 2600}
    again = {**run, "run": 2, "passed": 3, "failed": [], "items": [{**i, "outcome": "passed"} for i in items],
             "cpu_seconds": 250.0}
    serial = {**again, "workers": 0, "run": 1}
    run["evidence"] = "/e/bench-sbs-1-n2-run1"
    page = exercises_side_by_side_markdown({"date": "d", "machine": {"cores": 2, "memory_gib": 24}, "fleet": "small",
                                            "kai_version": "v0.17.0", "runs": [run, again, serial]})
    assert "| 2 | 150.0 | 2/3 | gang | 173.4 | 240.0 | 1.6 / 2.0 | 2600 |" in page
    assert "**120 s**" in page and "| gang | 30.0 (failed) | 30.0 | 30.0 |" in page
    # repeatability: passes per item for each worker count, and where a failed run's evidence is
    assert "| item | -n 0 | -n 2 |" in page and "| gang | 1/1 | 1/2 |" in page and "| quota | 1/1 | 2/2 |" in page
    assert "-n 2 #1: `/e/bench-sbs-1-n2-run1`" in page


def test_the_machine_sampler_counts_busy_cores_and_memory():
    import time

    from kailab.bench import _MachineSampler

    with _MachineSampler(every=0.2) as s:
        end = time.monotonic() + 1.2
        while time.monotonic() < end:  # one core busy (the whole machine's CPU counts, so at least that)
            pass
    fig = s.figures(1.2)
    assert fig["cpu_seconds"] >= 1.0 and fig["busy_cores_mean"] > 0 and len(s.busy_cores) >= 1, (fig, s.busy_cores)
    assert fig["memory_peak_mib"] >= 0


def test_xdist_groups_keep_their_tests_on_one_worker(tmp_path):
    """make test's `--dist loadgroup` pins xdist_group tests (the kind lab's, labs of their own) to one
    worker. pytest 9.2 broke that silently (pyproject pins below it): checked with real workers."""
    import subprocess
    import sys

    (tmp_path / "test_g.py").write_text(
        "import time, pytest\n"
        "@pytest.mark.xdist_group('kind')\n"
        "@pytest.mark.parametrize('i', range(4))\n"
        "def test_grouped(i):\n    time.sleep(0.2)\n"
        "@pytest.mark.parametrize('i', range(4))\n"
        "def test_free(i):\n    time.sleep(0.2)\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
                          "-p", "no:kailab", "-o", "addopts=", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:]
    workers = {line.split()[0] for line in run.stdout.splitlines() if "test_grouped" in line and "PASSED" in line}
    assert len(workers) == 1, run.stdout[-2000:]
