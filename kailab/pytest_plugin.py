"""pytest plugin: labs as session fixtures, exercise files as tests, KAI availability made visible.

- `kailab_labs` (session): brings labs up on demand (one per fleet), tears them down at the end,
  and first reaps labs of earlier test sessions that died without cleaning up.
- `pytest exercises/` collects every exercise YAML as a test item (see kailab.exercise.items).
- Tests marked `kai` need KAI's components. When KAI cannot be built here and the run sets
  KAILAB_ALLOW_NO_KAI=1, they are *deselected* (never counted as passed) and the summary says
  why; otherwise they fail with the build error.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from .errors import KailabError
from .paths import state_dir
from .runtimes.base import LabRecord, LabSpec

LAB_PREFIX = "pytest-"


def pytest_addoption(parser):
    group = parser.getgroup("kailab")
    group.addoption("--kailab-lab", default=os.environ.get("KAILAB_LAB_FOR_TESTS"),
                    help="use this running lab (by name) instead of bringing labs up")
    group.addoption("--kailab-evidence", default=None, help="evidence directory for exercise runs")


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: needs a running binary-runtime lab")
    config.addinivalue_line("markers", "kai: needs KAI's components running in the lab")
    config._kailab_no_kai = None  # reason string when KAI tests were deselected


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_sessions() -> list[str]:
    """Take down labs left by test sessions whose pytest process no longer exists."""
    from .runtimes.binary import BinaryRuntime

    reaped = []
    for lab in sorted(state_dir().glob(f"{LAB_PREFIX}*")):
        m = re.match(rf"{LAB_PREFIX}(\d+)-", lab.name)
        if lab.is_dir() and m and not _pid_alive(int(m.group(1))):
            BinaryRuntime().down(lab.name)
            reaped.append(lab.name)
    return reaped


@functools.lru_cache(maxsize=1)
def kai_unavailable_reason() -> str | None:
    """None when KAI's binaries are cached or can be built; else why not (asked once a session)."""
    from . import toolchain, versions

    release = versions.kai_release(os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI)
    recipe = toolchain.kai_recipe(release)
    if toolchain.is_cached(recipe):
        return None
    try:
        toolchain.kai_origin(recipe)  # a work tree, the module proxy or a registered repository
    except KailabError as err:
        return str(err)
    return None


def pytest_collection_modifyitems(session, config, items):
    needs_kai = [i for i in items if i.get_closest_marker("kai")]
    config._kailab_kai_collected = len(needs_kai)
    if not needs_kai or config.getoption("--kailab-lab"):
        return
    reason = kai_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("KAILAB_ALLOW_NO_KAI") == "1":
        config.hook.pytest_deselected(items=needs_kai)
        items[:] = [i for i in items if not i.get_closest_marker("kai")]
        config._kailab_no_kai = (len(needs_kai), reason)
    else:
        config._kailab_no_kai_error = reason


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    outcomes = getattr(config, "_kailab_outcomes", [])
    if outcomes:
        from rich.console import Console

        from .cli import summary_table

        from .report import write_report

        terminalreporter.write_sep("=", "kailab exercises")
        Console(file=terminalreporter._tw._file, soft_wrap=True).print(summary_table(outcomes))
        try:
            page = write_report([Path(o.evidence) for o in outcomes])
            terminalreporter.write_line(f"report: {page}")
        except Exception as err:  # noqa: BLE001 - the verdicts above stand; say why there is no page
            terminalreporter.write_line(f"report: not written ({type(err).__name__}: {err})")
    kai_reports = [r for key in ("passed", "failed", "error")
                   for r in terminalreporter.stats.get(key, [])
                   if getattr(r, "when", "call") == "call" and "kai" in getattr(r, "keywords", {})]
    if kai_reports or getattr(config, "_kailab_kai_collected", 0):
        outcome = {k: sum(1 for r in kai_reports if r.outcome == k) for k in ("passed", "failed")}
        terminalreporter.write_line(f"kailab: {len(kai_reports)} tests marked `kai` ran against KAI "
                                    f"({outcome['passed']} passed, {outcome['failed']} failed)")
    info = getattr(config, "_kailab_no_kai", None)
    if info:
        n, reason = info
        terminalreporter.write_sep("!", f"kailab: {n} tests that need KAI were NOT run", red=True)
        terminalreporter.write_line(f"reason: {reason}")
        terminalreporter.write_line("They are deselected, not passed. Build KAI (kailab tools build) to run them.")


class LabPool:
    """Labs for this session, keyed by (fleet, with_kai); brought up lazily, all torn down at the end."""

    def __init__(self, config):
        self.config = config
        self.labs: dict[tuple[str, bool], LabRecord] = {}
        self.external = config.getoption("--kailab-lab")

    def get(self, fleet: str = "tiny", with_kai: bool | None = None) -> LabRecord:
        if self.external:
            rec = LabRecord.load(self.external)
            if rec is None or rec.state != "up":
                raise KailabError(f"--kailab-lab {self.external}: no such lab is up")
            return rec
        if with_kai is None:
            with_kai = kai_unavailable_reason() is None
        key = (fleet, with_kai)
        if key not in self.labs:
            from .runtimes.binary import BinaryRuntime

            name = f"{LAB_PREFIX}{os.getpid()}-{fleet}" + ("" if with_kai else "-nokai")
            self.labs[key] = BinaryRuntime().up(LabSpec(name=name, runtime="binary", fleet=fleet,
                                                        with_kai=with_kai))
        return self.labs[key]

    def close(self) -> None:
        from .runtimes.binary import BinaryRuntime

        for rec in self.labs.values():
            BinaryRuntime().down(rec.name)
        self.labs.clear()


def lab_pool(config) -> LabPool:
    """The session's LabPool, shared by fixtures and exercise items; created on first use."""
    pool = getattr(config, "_kailab_pool", None)
    if pool is None:
        reap_dead_sessions()
        pool = config._kailab_pool = LabPool(config)
    return pool


def pytest_sessionfinish(session, exitstatus):
    pool = getattr(session.config, "_kailab_pool", None)
    if pool is not None:
        pool.close()


@pytest.fixture(scope="session")
def kailab_labs(request):
    return lab_pool(request.config)


@pytest.fixture(scope="session")
def kai_lab(kailab_labs, request) -> LabRecord:
    """A tiny lab with KAI running."""
    reason = kai_unavailable_reason()
    if reason and not kailab_labs.external:
        pytest.fail(f"this test needs KAI, which cannot be built here: {reason}", pytrace=False)
    return kailab_labs.get("tiny", with_kai=True)


@pytest.fixture(scope="session")
def infra_lab(kailab_labs) -> LabRecord:
    """A tiny lab: the control plane and the fleet (with KAI when it can be built)."""
    return kailab_labs.get("tiny")


def pytest_collect_file(parent, file_path: Path):
    if file_path.suffix in (".yaml", ".yml") and file_path.parent.name == "exercises":
        from .exercise.items import ExerciseFile

        return ExerciseFile.from_parent(parent, path=file_path)
    return None
