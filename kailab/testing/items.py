"""pytest collection of exercise files: `pytest exercises/` runs each YAML file as one test."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import tempfile

from .. import evidence
from ..errors import KailabError
from ..exercise.checks import Result
from ..exercise.runner import ExerciseRun, Outcome
from ..exercise.load import load_exercise
from .. import labs
from ..labs import MakesLabs
from ..report.figure_names import text as figure_text
from . import on_cluster
from .labs import lab_pool
from ..replay import session
from ..replay.fill import markdown, run_fill
from ..replay.fill_spec import fill_plan, load_fill
from ..replay.spec import load_replay


OUTCOME_PROPERTY = "kailab_outcome"


def outcome_of(report) -> Outcome | None:
    """The exercise outcome a test report carries (from this process or a pytest-xdist worker)."""
    for key, value in getattr(report, "user_properties", None) or []:
        if key == OUTCOME_PROPERTY:
            data = json.loads(value)
            data["results"] = [Result(**r) for r in data.get("results", [])]
            return Outcome(**data)
    return None


class ExerciseFile(pytest.File):
    def collect(self):
        yield ExerciseItem.from_parent(self, name=self.path.stem)


class ExerciseItem(pytest.Item):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.add_marker(pytest.mark.kai)
        self.add_marker(pytest.mark.lab)
        self.outcome = None

    def runtest(self) -> None:
        ex = load_exercise(self.path)  # a bad file fails here, before any lab work
        root = self.config.getoption("--kailab-evidence")
        cluster = on_cluster.cluster_of(self.config)
        if cluster is not None:  # a Job on that cluster, a lab of its own in its pod
            self.outcome = on_cluster.exercise(cluster, self.path, Path(root) if root else None)
        else:
            pool = lab_pool(self.config)
            lab = pool.get(ex.fleet, operators=tuple(ex.operators))
            lacks = set(ex.operators) - {f"{n}@{v}" for n, v in ((lab.stack or {}).get("operators") or {}).items()}
            if (lab.fleet != ex.fleet or lacks) and labs.can(lab.runtime, MakesLabs):
                # --kailab-lab's lab is of another fleet, or lacks the exercise's operators: one beside it,
                # same runtime and KAI
                lab = pool.get(ex.fleet, own=True, runtime=lab.runtime, kai_version=lab.kai_version,
                               operators=tuple(ex.operators))
            self.outcome = ExerciseRun(ex, self.path, lab, Path(root) if root else None).run()
        # the outcome travels in the test report: with labs side by side (pytest -n) the summary and
        # report.html are written by the controlling process, which ran no exercise itself
        self.user_properties.append((OUTCOME_PROPERTY, json.dumps(asdict(self.outcome))))
        # the figures as the report and the terminal summary name them (JUnit property; allure label below)
        figures = figure_text(self.outcome.figures, {i: s.name for i, s in enumerate(ex.steps, 1)})
        self.user_properties.append(("key figures", figures))
        _attach(self.outcome, figures)
        for w in self.outcome.warnings:  # shown in pytest's warnings summary, even on a pass
            self.warn(pytest.PytestWarning(f"{ex.exercise}: {w}"))
        if self.outcome.verdict != "passed":
            raise ExerciseFailed(self.outcome)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ExerciseFailed):
            return excinfo.value.outcome.report()
        if isinstance(excinfo.value, KailabError):  # bad file, lab or build: one clear line
            return f"{type(excinfo.value).__name__}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"exercise {self.name}"


class ExerciseFailed(Exception):
    def __init__(self, outcome):
        super().__init__(outcome.report())
        self.outcome = outcome


def _attach(outcome, figures: str) -> None:
    """Evidence into allure: the verdict and the timeline travel with the test result, and the key
    figures (as the report and the terminal name them) are the result's description."""
    try:
        import allure
    except ImportError:  # pragma: no cover
        return
    allure.dynamic.description(f"Key figures: {figures}")
    root = Path(outcome.evidence)
    for name, kind in ((evidence.VERDICT, allure.attachment_type.JSON), (evidence.TIMELINE, allure.attachment_type.TEXT)):
        if (root / name).exists():
            allure.attach.file(str(root / name), name=name, attachment_type=kind)


class OwnLabsItem(pytest.Item):
    """A file run as one item on labs of its own (one per design): a replay or a fill. Its failure
    is its comparison or one line, never a traceback."""

    kind = ""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.add_marker(pytest.mark.kai)
        self.add_marker(pytest.mark.lab)

    def evidence_root(self) -> Path | None:
        root = self.config.getoption("--kailab-evidence")
        return Path(root) if root else None

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, (OwnLabsFailed, KailabError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"{self.kind} {self.name}"


class OwnLabsFailed(Exception):
    pass


class ReplayItem(OwnLabsItem):
    kind = "replay"

    def runtest(self) -> None:
        _, plan = load_replay(self.path)  # a bad file fails here, before any lab starts
        cluster = on_cluster.cluster_of(self.config)
        out = (on_cluster.replay(cluster, plan, self.evidence_root()) if cluster is not None
               else session.run_replay(plan, self.evidence_root(), echo=lambda text: None))
        comparison = json.loads((out / session.COMPARISON).read_text())
        self.user_properties.append(("replay_evidence", str(out)))
        if not comparison["ok"]:
            raise OwnLabsFailed(session.markdown(comparison) + f"\nreplay evidence: {out}")


class FillItem(OwnLabsItem):
    """exercises/fills/*.yaml: the fill experiment on a registered public trace (kailab.replay.fill_spec)."""

    kind = "fill"

    def runtest(self) -> None:
        spec = load_fill(self.path)  # a bad file fails here, before any lab starts
        with tempfile.TemporaryDirectory(prefix="kailab-fill-import-") as tmp:
            # no trace registered: a KailabError naming the command that registers it (a failure, never a skip)
            plan, cluster = fill_plan(spec, Path(tmp)), on_cluster.cluster_of(self.config)
            out = (on_cluster.fill(cluster, plan, self.evidence_root()) if cluster is not None
                   else run_fill(plan, self.evidence_root(), echo=lambda text: None))
        summary = json.loads((out / "fill.json").read_text())
        self.user_properties.append(("fill_evidence", str(out)))
        if not summary["ok"]:
            raise OwnLabsFailed(markdown(summary) + f"\nfill evidence: {out}")


class OneItemFile(pytest.File):
    """A replay file (exercises/replays/) or a fill file (exercises/fills/): one item."""

    item: type[OwnLabsItem] = ReplayItem

    def collect(self):
        yield self.item.from_parent(self, name=self.path.stem)


class ReplayFile(OneItemFile):
    item = ReplayItem


class FillFile(OneItemFile):
    item = FillItem
