"""The suite's two tiers, and its order on workers side by side.

Tiers: tests/unit/ needs no lab, no network, no build and no browser (`make unit`, first in `make test`);
tests/live/ brings labs up (marked `lab`, `kind` or `alone`) or opens a real browser (marked `browser`).
A test in the wrong folder for its marks is a collection error, so the tiers stay what their names say.

Order (`make test`: pytest -n, --dist loadgroup): longest first; the `alone` phase in two streams of
one xdist group each: the vCluster trial, then the fan-out (the two that load the cores most, never
side by side); KAI's operator suites, then the kind lab's own tests.

xdist's own order puts the groups with the most tests first and leaves every one-test unit in
collection order: CI's 1/8 fill (one test, ~1,300-1,800 s there) started half-way through the run
and was still filling when everything else had finished. Longest-first lets the workers finish
together. The seconds are CI's --durations (3 workers on 2 cores), rounded; they only order the
run, nothing asserts them, and a test missing here just keeps its place after these.
"""

from __future__ import annotations

import os
import tempfile
import time

import pytest

import cpu_accounting
from kailab.testing.labs import builds_pending

# xdist_group name, or "file::test" for a long test of no group: about how long it keeps a worker
LONGEST = {
    "fill_labs": 1500,  # `full` only
    "kind": 1000,  # Kueue's kind lab, the operators' (and, in `make test-full`, Volcano's and the metrics one): one kind cluster at a time
    "own_labs": 1300,
    "operator_labs": 800,  # the workload operators' live tests and the operator exercises' broken variants
    "test_existing_runtime.py::test_exercises_pass_through_the_existing_runtime": 250,
    "other_fleets": 400,
    "kueue_labs": 300,
    "volcano_labs": 300,
    "test_lessons_live.py::test_capstone_check_on_a_real_lab": 290,
    "test_exercise_failures.py::test_exercise_fails_when_its_key_condition_is_broken": 260,
}


def _unit(item) -> str:
    group = item.get_closest_marker("xdist_group")
    if group:
        return group.args[0] if group.args else group.kwargs.get("name", "")
    return f"{item.path.name}::{item.originalname}"


# the fleets most tests use: their labs stay up for a worker's whole session
SESSION_FLEETS = ("tiny", "small")
# groups whose tests use labs of other fleets (dra, racks) or with workload operators: those are downed
# when the group ends
OTHER_FLEETS_GROUPS = ("other_fleets", "operator_labs")


@pytest.hookimpl(trylast=True)  # after pytest's own teardown: the test's fixtures may still use the lab
def pytest_runtest_teardown(item, nextitem):
    """A group's labs of other fleets go down when its last test on this worker is done: xdist sends a
    group whole, so none of its tests comes later, and an idle lab spent ~9 % of a core for the rest of
    CI's hour (a test of another group needing one brings it up again)."""
    group = _unit(item)
    pool = getattr(item.config, "_kailab_pool", None)
    if pool is None or group not in OTHER_FLEETS_GROUPS or (nextitem is not None and _unit(nextitem) == group):
        return
    pool.release(SESSION_FLEETS)


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: opens pages in a real browser (Debian's Chromium): the live tier")
    # xdist reorders its work units by size unless told not to; this file's order is the one wanted
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


LIVE_MARKS = ("lab", "kind", "alone", "browser")
# The `alone` phase's two streams (the Makefile's ALONE: -n 2 --dist loadgroup). The vCluster trial and the
# fan-out share the heavy one, so they never run side by side; an `alone` test of neither would run beside both
ALONE_STREAMS = ("kind_heavy", "kind_light")
LAB_FIXTURES = ("kailab_labs", "kai_lab", "infra_lab", "kind_lab")  # each brings a lab up


def _misplaced(item) -> str | None:
    tier = item.path.parent.name
    live = any(item.get_closest_marker(m) for m in LIVE_MARKS)
    if tier == "unit" and live:
        return f"{item.nodeid}: marked {'/'.join(m for m in LIVE_MARKS if item.get_closest_marker(m))} in tests/unit (move it to tests/live)"
    labs = [f for f in LAB_FIXTURES if f in getattr(item, "fixturenames", ())]
    if tier == "unit" and labs:
        return f"{item.nodeid}: uses {', '.join(labs)} (a lab) in tests/unit (move it to tests/live, marked lab)"
    if tier == "live" and not live:
        return f"{item.nodeid}: in tests/live without a lab, kind, alone or browser mark (mark it, or move it to tests/unit)"
    if tier == "live" and item.get_closest_marker("alone") and _unit(item) not in ALONE_STREAMS:
        return f"{item.nodeid}: marked alone in neither of its streams (add xdist_group {' or '.join(ALONE_STREAMS)}: tests/conftest.py)"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    misplaced = [m for m in map(_misplaced, items) if m]
    if misplaced:
        raise pytest.UsageError("tests in the wrong tier:\n" + "\n".join(misplaced))
    for item in items:  # a module's sampled-out parameter sets (FULL_ONLY: their ids) run only in `make test-full`
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.id in getattr(item.module, "FULL_ONLY", ()):
            item.add_marker(pytest.mark.full)
    building = builds_pending()
    items.sort(key=lambda item: (building and _unit(item) in BUILT_IN_BACKGROUND_GROUPS, -LONGEST.get(_unit(item), 0),
                                 building and item.path.name in BUILT_IN_BACKGROUND_FILES,
                                 KIND_ORDER.get(item.path.name, 0)))  # stable


# A cold CI builds what only some tests need in the background (.ci/builds: the workload operators,
# Kueue's and Volcano's binaries, KAI's e2e suites, KAI v0.16.8) and says so in this variable: the groups
# that use them, and the files of other groups that do, run after the rest, so those builds have the
# longest to get made. A test that comes to one first only waits on its build's lock: order, not correctness.
BUILT_IN_BACKGROUND_GROUPS = ("operator_labs", "kueue_labs", "volcano_labs")
BUILT_IN_BACKGROUND_FILES = ("test_compare.py", "test_kai_e2e.py", "test_kueue_lab.py", "test_trial_live.py",
                             "test_volcano_lab.py")


# Within a kind group: in the `alone` phase's heavy stream, the vCluster trial (which downs its host when
# done) before the fan-out's host of three nodes; in its light stream KAI's operator suites (a file of
# other groups: 0) before the kind lab's own tests, their `down` last (after them while .ci/builds still
# builds KAI's e2e suites: BUILT_IN_BACKGROUND_FILES). In the main phase's kind group, Kueue's kind lab first
KIND_ORDER = {"test_kind_host_vcluster_trial.py": 1, "test_kind_lab.py": 2, "test_kind_stacks.py": 1,
              "test_fanout_live.py": 2}


# ---- what each live test cost in CPU (tests/cpu_accounting.py): printed after the run, the costliest first


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.path.parent.name == "live":
        item._kailab_cpu_start = cpu_accounting.tree_cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    start = getattr(item, "_kailab_cpu_start", None)
    if call.when == "teardown" and start is not None:
        outcome.get_result().user_properties.append(
            (cpu_accounting.KEY, round(cpu_accounting.tree_cpu_seconds() - start, 1)))


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        cpu = dict(report.user_properties).get(cpu_accounting.KEY)
        if cpu is not None:
            _CPU[report.nodeid] = cpu
    node = getattr(report, "node", None)  # pytest-xdist's worker, on the controller's copy of a report
    if node is not None and "/live/" in f"/{report.nodeid}":
        worker = node.gateway.id
        # as LONGEST names it: the group, or a test of none without its parameters
        group = report.nodeid.rsplit("@", 1)[1] if "@" in report.nodeid else (
            report.nodeid.rsplit("/", 1)[-1].split("[", 1)[0])
        _GROUPS[group] = _GROUPS.get(group, 0.0) + report.duration
        _WORKERS.setdefault(worker, {"groups": set()})["groups"].add(group)
        _WORKERS[worker]["done"] = time.monotonic()


_CPU: dict[str, float] = {}  # this process's: the controller's holds every worker's tests
# each xdist group's wall time (its tests' set-up, call and tear-down) and when each worker's last test
# ended: what LONGEST's estimates are for, and how long a worker idled at the end of the phase
_GROUPS: dict[str, float] = {}
_WORKERS: dict[str, dict] = {}
_STARTED = time.monotonic()


def pytest_terminal_summary(terminalreporter):
    if hasattr(terminalreporter.config, "workerinput"):
        return
    if _WORKERS:
        terminalreporter.write_sep("=", "wall seconds by xdist group, and when each worker ended")
        for group, wall in sorted(_GROUPS.items(), key=lambda kv: -kv[1])[:20]:
            terminalreporter.write_line(f"{wall:8.0f} s  {group}")
        terminalreporter.write_line(f"{sum(_GROUPS.values()):8.0f} s  in all, {len(_GROUPS)} groups and tests of none")
        for worker, w in sorted(_WORKERS.items()):
            groups = ", ".join(sorted(g for g in w["groups"] if "::" not in g))
            terminalreporter.write_line(f"{worker}: its last test ended {w['done'] - _STARTED:.0f} s into the run"
                                        f" (groups: {groups or 'none'})")
    if not _CPU:
        return
    terminalreporter.write_sep("=", "CPU-seconds by test (this process tree's)")
    for line in cpu_accounting.summary_lines(_CPU):
        terminalreporter.write_line(line)
    if os.environ.get("KAILAB_TEST_CPU_FILE"):
        cpu_accounting.write(_CPU, os.environ["KAILAB_TEST_CPU_FILE"])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """kailab's cache in a fresh folder (KAILAB_CACHE), no KAI source of the developer's (KAILAB_KAI_SOURCE);
    Go's compiled packages in one folder for every test, worker and run (KAILAB_GO_CACHE): a build in a
    fresh one compiles Go's runtime again (~9 s a test)."""
    monkeypatch.setenv("KAILAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KAILAB_GO_CACHE", os.path.join(tempfile.gettempdir(), f"kailab-tests-go-build-{os.getuid()}"))
    monkeypatch.delenv("KAILAB_KAI_SOURCE", raising=False)
    return tmp_path / "cache"
