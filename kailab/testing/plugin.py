"""pytest plugin: labs as session fixtures, exercise files as tests, KAI availability made visible.

- `kailab_labs` (session): brings labs up on demand (one per fleet), tears them down at the end,
  and first reaps labs of earlier test sessions that died without cleaning up.
- `pytest exercises/` collects every exercise YAML as a test item, every replay file in
  exercises/replays/ and every fill file in exercises/fills/ (see kailab.testing.items). Replays and
  fills run minutes on labs of their own: found by walking a folder they are left out unless
  `--kailab-all` (`make exercises-all`) asks for them; named on the command line they always run.
- `--kailab-on KUBECONFIG` runs every item as Jobs on that cluster instead (kailab.testing.on_cluster).
- Tests marked `kai` need KAI's components. When KAI cannot be built here and the run sets
  KAILAB_ALLOW_NO_KAI=1, they are *deselected* (never counted as passed) and the summary says
  why; otherwise they fail with the build error.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
import yaml

from ..exercise.load import load_exercise
from .. import labs
from ..labs import LabRecord, MakesLabs
from ..paths import evidence_dir, evidence_dir_why
from ..toolchain import kai_unavailable_reason
from ..replay import alibaba
from .deal import deal, last_durations
from .items import ExerciseFile, ExerciseItem, FillFile, FillItem, OwnLabsItem, ReplayFile, outcome_of
from . import on_cluster
from .labs import PENDING_ENV, kind_unavailable_reason, lab_pool, wait_for_kind_images


def pytest_addoption(parser):
    group = parser.getgroup("kailab")
    group.addoption("--kailab-lab", default=os.environ.get("KAILAB_LAB_FOR_TESTS"),
                    help="use this running lab (by name) instead of bringing labs up")
    group.addoption("--kailab-evidence", default=None, help="evidence directory for exercise runs")
    group.addoption("--kailab-all", action="store_true", default=False,
                    help="also run the replays and fills found in exercises/ (minutes each, labs of their own)")
    group.addoption("--kailab-not-run", default=None, metavar="FILE",
                    help="add what this session deselected for want of KAI or a Docker engine to FILE, and say "
                         "in red at the end what FILE holds (`make test`'s phases share one)")
    on_cluster.add_options(group)


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: needs a running binary-runtime lab")
    config.addinivalue_line("markers", "kai: needs KAI's components running in the lab")
    config.addinivalue_line("markers", "kind: needs a Docker engine for a kind-runtime lab")
    config._kailab_no_kai = None  # reason string when KAI tests were deselected
    config._kailab_no_kind = None
    config._kailab_outcomes = []
    config._kailab_heavy_left_out = []
    _refuse_side_by_side_on_a_cluster_it_cannot_make(config)
    on_cluster.configure(config)
    config.pluginmanager.register(_OutcomeCollector(config), "kailab-outcomes")


@pytest.hookimpl(trylast=True)  # after -m/-k: count only what would otherwise run
def pytest_collection_modifyitems(session, config, items):
    _deselect_kind_without_docker(config, items)
    _leave_out_heavy_items(config, items)
    # the longest first, so labs side by side (-n) finish together: a replay or a fill runs minutes on
    # labs of its own; exercises alone are dealt by their last run's time (kailab.testing.deal)
    items.sort(key=lambda item: not isinstance(item, OwnLabsItem))
    _kind_after_images_still_building(items)
    if items and all(isinstance(i, ExerciseItem) for i in items):
        items[:] = _dealt(config, items)
    needs_kai = [i for i in items if i.get_closest_marker("kai")]
    config._kailab_kai_collected = len(needs_kai)
    if not needs_kai or config.getoption("--kailab-lab") or on_cluster.cluster_of(config):
        return  # KAI runs in that lab, or in the lab image's pods: nothing of it is built here
    reason = kai_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("KAILAB_ALLOW_NO_KAI") == "1":
        config.hook.pytest_deselected(items=needs_kai)
        items[:] = [i for i in items if not i.get_closest_marker("kai")]
        config._kailab_no_kai = (len(needs_kai), reason)
    else:
        config._kailab_no_kai_error = reason


def _dealt(config, items: list) -> list:
    """Exercise items in the order that deals them evenly to the workers (one when not under xdist)."""
    try:
        fleets = {i.nodeid: load_exercise(i.path).fleet for i in items}
    except Exception:  # noqa: BLE001 - a bad file fails as its own item, in the order it came
        return items
    main = Counter(fleets.values()).most_common(1)[0][0]  # every worker has a lab of it
    config._kailab_fleets, config._kailab_main_fleet = fleets, main  # for pytest_runtest_teardown
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if workers < 2:
        return items
    # the project's evidence folder, and a given one's runs over it (a bench runs in a folder of its own)
    root = config.getoption("--kailab-evidence")
    seconds = {**last_durations(evidence_dir()), **(last_durations(Path(root)) if root else {})}
    return deal(items, workers, cost=lambda i: seconds.get(i.path.stem),
                group=lambda i: None if fleets[i.nodeid] == main else fleets[i.nodeid])


def pytest_runtest_teardown(item, nextitem):
    """A lab of another fleet than most exercises' goes once the next item does not need it: an idle
    lab spends ~9 % of a core, and the racks, dra and tiny labs idled for minutes beside the rest of
    `make exercises` (a later item of that fleet, stolen by this worker, brings one up again)."""
    fleets = getattr(item.config, "_kailab_fleets", None)
    pool = getattr(item.config, "_kailab_pool", None)
    if not fleets or pool is None or item.nodeid not in fleets:
        return
    keep = {item.config._kailab_main_fleet}
    if nextitem is not None and nextitem.nodeid in fleets:
        keep.add(fleets[nextitem.nodeid])
    pool.release(tuple(keep))


def _deselect_kind_without_docker(config, items) -> None:
    """Tests marked `kind` need a Docker engine. Without one they are deselected, never passed,
    and the summary says so in red; KAILAB_REQUIRE_KIND=1 (CI) makes that a failure instead."""
    needs = [i for i in items if i.get_closest_marker("kind")]
    config._kailab_kind_collected = len(needs)
    if not needs:
        return
    reason = kind_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("KAILAB_REQUIRE_KIND") == "1":
        config._kailab_kind_error = reason  # each of them fails with it (pytest_runtest_setup)
        return
    config.hook.pytest_deselected(items=needs)
    items[:] = [i for i in items if not i.get_closest_marker("kind")]
    config._kailab_no_kind = (len(needs), reason)


def _kind_after_images_still_building(items) -> None:
    """A cold CI builds the kind images in the background while the other tests run (.ci/run):
    KAILAB_KIND_IMAGES_PENDING names the file that says when they are ready. Tests marked `kind`
    wait for it, and come last, so the images have the longest to get ready."""
    if os.environ.get(PENDING_ENV):
        items.sort(key=lambda item: item.get_closest_marker("kind") is not None)  # stable


def pytest_runtest_setup(item):
    """A test marked `kind` fails at once, in one line, when KAILAB_REQUIRE_KIND=1 and no engine
    answers; it waits for the kind images while a cold CI builds them in the background. (A
    `usefixtures` mark added after collection is never used: pytest has resolved the fixtures by then.)"""
    if item.get_closest_marker("kind") is None:
        return
    error = getattr(item.config, "_kailab_kind_error", None)
    if error:
        pytest.fail(f"KAILAB_REQUIRE_KIND=1 but {error}", pytrace=False)
    if os.environ.get(PENDING_ENV):
        wait_for_kind_images(os.environ[PENDING_ENV], stage=images_stage(item))


def images_stage(item) -> str:
    """The stage of the kind images a test marked `kind` waits for while they build (IMAGE_STAGES): the
    one it names, else the main phase's, or every image for a test marked `alone`."""
    return item.get_closest_marker("kind").kwargs.get("images") or ("done" if item.get_closest_marker("alone") else "main")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`pytest -n auto`: labs side by side as this machine holds them (kailab.testing.workers); one
    when --kailab-lab's lab is not a binary one (a kind lab per worker is minutes of bring-up, and an
    existing cluster has no second)."""
    from .workers import auto_workers

    name = config.getoption("--kailab-lab")
    rec = LabRecord.load(name) if name else None
    if rec is not None and rec.runtime != "binary":
        return 1
    return auto_workers()


def _refuse_side_by_side_on_a_cluster_it_cannot_make(config) -> None:
    """`-n 2 --kailab-lab X` gives every worker but the first a lab of X's runtime: refused up front
    when that runtime adopts a cluster (existing), before any worker starts."""
    name, workers = config.getoption("--kailab-lab"), getattr(config.option, "numprocesses", None)
    if not name or not isinstance(workers, int) or workers < 2 or hasattr(config, "workerinput"):
        return
    rec = LabRecord.load(name)
    if rec is not None and not labs.can(rec.runtime, MakesLabs):
        raise pytest.UsageError(f"--kailab-lab {name} is a cluster kailab cannot make a second of "
                                f"({rec.runtime} runtime): run its exercises on one lab (drop -n {workers}, or -n 0)")


class _OutcomeCollector:
    """Exercise outcomes gathered where the summary is written: this process's own test reports,
    and those pytest-xdist workers send when exercises run on labs side by side (`-n`)."""

    def __init__(self, config):
        self.config = config

    def pytest_runtest_logreport(self, report):
        outcome = outcome_of(report) if report.when == "call" else None
        if outcome is not None:
            self.config._kailab_outcomes.append(outcome)


# what a pytest-xdist worker tells the controller when it ends (config.workeroutput): the tests it
# deselected for want of KAI or of a Docker engine, so the controller's summary still says so in red
_WORKER_REPORTS = ("_kailab_no_kai", "_kailab_no_kind", "_kailab_kai_collected")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker sends its workeroutput
def pytest_sessionfinish(session, exitstatus):
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        for key in _WORKER_REPORTS:
            output[key] = getattr(session.config, key, None)
    pool = getattr(session.config, "_kailab_pool", None)
    if pool is not None:
        pool.close()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller (pytest -n): every worker collected the same tests; take what one reports."""
    config = node.config
    for key in _WORKER_REPORTS:
        value = (getattr(node, "workeroutput", None) or {}).get(key)
        if value and not getattr(config, key, None):
            setattr(config, key, tuple(value) if isinstance(value, list) else value)


def evidence_root(config) -> tuple[Path, str]:
    """Where this session's runs keep their evidence, and why there: --kailab-evidence, else
    $KAILAB_EVIDENCE, else evidence/ in the folder pytest runs in."""
    given = config.getoption("--kailab-evidence")
    return (Path(given), "--kailab-evidence") if given else (evidence_dir(), evidence_dir_why())


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    outcomes = getattr(config, "_kailab_outcomes", [])
    if outcomes:
        from rich.console import Console

        from ..exercise.summary import print_summary
        from ..report import write_report

        terminalreporter.write_sep("=", "kailab exercises")
        stream = terminalreporter._tw._file
        print_summary(Console(file=stream, soft_wrap=True), outcomes)
        root, why = evidence_root(config)
        terminalreporter.write_line(f"evidence: {root.resolve()} ({why})")
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
    heavy = getattr(config, "_kailab_heavy_left_out", [])
    if heavy:  # said, never hidden: these are not run, not passed
        terminalreporter.write_line(f"kailab: left out {len(heavy)} item(s) that take minutes on labs of their own "
                                    f"(replays, fills, the workload operators' exercises: {', '.join(heavy)}): "
                                    "`make exercises-all` or --kailab-all runs them")


def _not_run(config) -> list[str]:
    """A line for each kind of test this session deselected for want of what it needs."""
    lines = []
    args = list(config.invocation_params.args)
    for i, arg in reversed(list(enumerate(args))):  # the file that gathers these lines is no part of what ran
        if arg == "--kailab-not-run":
            del args[i:i + 2]
        elif arg.startswith("--kailab-not-run="):
            del args[i]
    ran = " ".join(["pytest", *args])
    kind_info = getattr(config, "_kailab_no_kind", None)
    if kind_info:
        n, reason = kind_info
        lines.append(f"{n} tests that need a kind lab were NOT run ({ran}): {reason}")
    info = getattr(config, "_kailab_no_kai", None)
    if info:
        n, reason = info
        lines.append(f"{n} tests that need KAI were NOT run ({ran}): {reason}; build KAI (kailab tools build) "
                     "to run them")
    return lines


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """What was deselected for want of KAI or of a Docker engine, in red after pytest's last line, where
    a run's end is read: deselected tests never count as passed, and the exit status does not say so.
    With --kailab-not-run FILE, what earlier sessions wrote there too (`make test` runs the live tier
    in two phases), and this session's lines are added to it."""
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller says it
        return
    lines = _not_run(config)
    path = config.getoption("--kailab-not-run", default=None)
    if path:
        earlier = Path(path).read_text().splitlines() if Path(path).is_file() else []
        if lines:
            with open(path, "a") as f:
                f.writelines(line + "\n" for line in lines)
        lines = [line for line in earlier if line.strip()] + lines
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if not lines or reporter is None:
        return
    reporter.write_sep("!", "kailab: tests NOT run: deselected, never counted as passed", red=True)
    for line in lines:
        reporter.write_line(f"kailab: {line}", red=True)
    reporter._tw.flush()


@pytest.fixture(scope="session")
def kailab_labs(request):
    return lab_pool(request.config)


@pytest.fixture(scope="session")
def kai_lab(kailab_labs, request) -> LabRecord:  # noqa: F811 - the fixture, not a function to call
    """A tiny lab with KAI running."""
    reason = kai_unavailable_reason()
    if reason and not kailab_labs.external:
        pytest.fail(f"this test needs KAI, which cannot be built here: {reason}", pytrace=False)
    return kailab_labs.get("tiny")


@pytest.fixture(scope="session")
def infra_lab(kailab_labs) -> LabRecord:
    """A tiny lab: the control plane and the fleet (with KAI when it can be built)."""
    return kailab_labs.get("tiny")


def pytest_collect_file(parent, file_path: Path):
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    if file_path.parent.name == "replays":
        return ReplayFile.from_parent(parent, path=file_path)
    if file_path.parent.name == "fills":
        return FillFile.from_parent(parent, path=file_path)
    if file_path.parent.name == "exercises" or _named(parent.config, file_path):
        return ExerciseFile.from_parent(parent, path=file_path)  # `kailab run --labs N` names files anywhere
    return None


def _leave_out_heavy_items(config, items) -> None:
    """The everyday set: replays and fills found by walking exercises/ wait for `--kailab-all`."""
    if not config.getoption("--kailab-all"):
        heavy = [i for i in items if (isinstance(i, OwnLabsItem) or _needs_operators(i))
                 and not _named(config, Path(i.path))]
        if heavy:
            config.hook.pytest_deselected(items=heavy)
            items[:] = [i for i in items if i not in heavy]
            config._kailab_heavy_left_out = sorted(Path(i.path).name for i in heavy)
    if any(isinstance(i, FillItem) for i in items) and alibaba.registered() is None:
        raise pytest.UsageError(alibaba.not_registered())  # before any lab, not after minutes of them


def _needs_operators(item) -> bool:
    """An exercise of the workload operators' kinds: on labs of its own (with the operators), minutes
    more than the everyday set holds (docs/operators.md), so in `make exercises-all`."""
    if not isinstance(item, ExerciseItem):
        return False
    try:
        return bool((yaml.safe_load(Path(item.path).read_text()) or {}).get("operators"))
    except (OSError, yaml.YAMLError):
        return False  # a bad file is the item's own error, when it runs


def _named(config, file_path: Path) -> bool:
    """The file was named on the command line (not found by walking a directory)."""
    return any(Path(arg.split("::")[0]).resolve() == file_path.resolve() for arg in config.args)
