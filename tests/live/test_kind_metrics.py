"""KAI's time-based fair share on a kind lab, reading the lab's Prometheus through the SchedulingShard's
usageDBConfig (KAI's operator renders it): the exercise passes, and fails with usage off, exactly as on a
binary lab (test_exercise_failures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kailab.exercise.runner import ExerciseRun
from kailab.exercise.load import load_exercise
from kailab.inputs import read_yaml
from kailab.paths import exercises_dir
from kailab.runtimes.kind import metrics as kind_metrics
from kailab.testing.labs import kind_docker

# A kind cluster of its own (the tiny fleet): kept out of `make test` (`full`, docs/dev/testing.md). Prometheus
# and kube-state-metrics in a kind cluster, and a dead component there, are checked on the small kind lab
# (test_kind_lab.py); time-based fair share itself on the binary runtime (test_lessons_live, test_exercise_failures).
pytestmark = [pytest.mark.kind, pytest.mark.kai, pytest.mark.lab, pytest.mark.full, pytest.mark.xdist_group("kind")]
FLEET = "tiny"  # time-based-fairness's fleet


@pytest.fixture(scope="module")
def kind_tiny(kailab_labs):
    return kailab_labs.get_kind(FLEET)


@pytest.mark.parametrize("usage", ["on", "off"])
def test_time_based_fairness_on_kind(kind_tiny, tmp_path, usage):
    """On: beta reclaims more than an even split, KAI's operator told through the SchedulingShard.
    Off (the broken variant): the equal queues split evenly and the exercise fails on beta's share."""
    doc = read_yaml(exercises_dir() / "time-based-fairness.yaml")
    if usage == "off":
        doc["steps"][0]["scheduler"].pop("usage")
        # the even split comes within seconds; waiting the step's full timeout for beta's 5 proves no more
        doc["steps"][2]["timeout"] = "30s"
    path = tmp_path / "time-based-fairness.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with kind_docker():
        outcome = ExerciseRun(load_exercise(path), path, kind_tiny, tmp_path / "evidence").run()
    evidence = Path(outcome.evidence)
    if usage == "on":
        assert outcome.verdict == "passed", outcome.report()
        shard = yaml.safe_load(next((evidence / "scheduler-conf").glob("*.schedulingshard.yaml")).read_text())
        assert shard["usageDBConfig"]["connectionString"] == kind_metrics.IN_CLUSTER_URL
        panels = json.loads((evidence / "kai-metrics.json").read_text())["panels"]
        usage_panels = [p for p in panels if p["title"] == "Scheduler UsageDB Usage"]
        assert usage_panels and any(p.get("series") for p in usage_panels), usage_panels
    else:
        assert outcome.verdict == "failed", outcome.report()
        failed = [r for r in outcome.results if not r.passed]
        assert failed[0].step == "both ask for more than the fleet" and "queue beta bound" in failed[0].what, \
            outcome.report()
    assert json.loads((evidence / "run.json").read_text())["runtime"] == "kind"
    # the scheduler configuration the run started with: the ConfigMap KAI's operator rendered
    started = yaml.safe_load((evidence / "scheduler-conf" / "00-lab.yaml").read_text())
    assert "podaffinity" in [p["name"] for t in started["tiers"] for p in t["plugins"]]
