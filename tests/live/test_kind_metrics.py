"""A kind lab's metrics for real: kailab's Prometheus and kube-state-metrics in the cluster, KAI's
Services scraped, and KAI's time-based fair share reading that Prometheus through the
SchedulingShard's usageDBConfig (KAI's operator renders it) — the exercise passes, and fails with
usage off, exactly as on a binary lab (test_exercise_failures)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from kailab.exercise.runner import ExerciseRun
from kailab.exercise.load import load_exercise
from kailab.inputs import read_yaml
from kailab.paths import exercises_dir
from kailab.lab import runtime_of
from kailab.runtimes import kind_metrics, metrics
from kailab.runtimes.waits import wait_until
from kailab.testing.labs import kind_docker

pytestmark = [pytest.mark.kind, pytest.mark.kai, pytest.mark.lab, pytest.mark.xdist_group("kind")]
FLEET = "tiny"  # time-based-fairness's fleet


@pytest.fixture(scope="module")
def kind_tiny(kailab_labs):
    return kailab_labs.get_kind(FLEET)


def _query(url: str, promql: str) -> list[dict]:
    args = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{args}", timeout=10) as resp:  # noqa: S310
        return json.load(resp)["data"]["result"]


def test_prometheus_and_kube_state_metrics_are_lab_components_scraping_kai(kind_tiny):
    with kind_docker():
        info = runtime_of(kind_tiny).status(kind_tiny)
    assert {c: info["components"][c]["state"] for c in kind_metrics.DEPLOYMENTS} == \
        {"prometheus": "running", "kube-state-metrics": "running"}, info["components"]
    url = metrics.url(kind_tiny.ports)
    assert url.startswith("http://127.0.0.1:") and info["prometheus"] == url
    assert runtime_of(kind_tiny).usage_db_url(kind_tiny) == kind_metrics.IN_CLUSTER_URL
    # every target scraped, KAI's queue-controller (kai_queue_allocated_gpus: the usage KAI reads) among them
    wanted = {"queue-controller", "kai-scheduler-default", "kube-state-metrics"}
    wait_until("KAI's and kube-state-metrics' targets scraped",
               lambda: wanted <= {r["metric"]["job"] for r in _query(url, "up == 1")}, timeout=60)
    assert not metrics.targets_down(kind_tiny.ports)
    # KAI's default GPU capacity query, served by the real kube-state-metrics: the fleet's GPUs
    capacity = wait_until("the fleet's GPU capacity in Prometheus", lambda: _query(
        url, 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})'), timeout=60)
    assert float(capacity[0]["value"][1]) == kind_tiny.gpus


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


def test_a_component_that_dies_during_a_run_is_named_with_its_last_lines(kind_tiny):
    """On kind the cluster restarts a crashed container itself: the death shows as a restart since
    the run began, and the run's verdict names the component (runner.check_components)."""
    import subprocess

    rt = runtime_of(kind_tiny)
    rt.log_mark(kind_tiny)  # a run begins
    assert rt.dead_components(kind_tiny, set()) == []
    with kind_docker():
        out = subprocess.run(["docker", "exec", f"kailab-{kind_tiny.name}-control-plane",
                              "pkill", "-f", "^/bin/prometheus"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    dead = wait_until("the restart to show", lambda: rt.dead_components(kind_tiny, set()), timeout=120)
    assert [name for name, _ in dead] == ["prometheus"], dead
    assert rt.dead_components(kind_tiny, {"prometheus"}) == []
    with kind_docker():  # the cluster brought it back
        wait_until("prometheus running again",
                   lambda: runtime_of(kind_tiny).status(kind_tiny)["components"]["prometheus"]["state"] == "running",
                   timeout=120)
