"""A lab's metrics processes (binary runtime with KAI): Prometheus and kube-state-metrics run as named
components, scrape KAI's five processes, kube-state-metrics and the API server, serve KAI's GPU
capacity query from a real kube-state-metrics, and their death is an error verdict naming them."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from kailab import versions
from kailab.exercise.runner import ExerciseRun
from kailab.exercise.load import load_exercise
from kailab.runtimes import metrics, processes
from kailab.runtimes.waits import wait_until
from helpers import KAILAB

pytestmark = [pytest.mark.lab, pytest.mark.kai]


def query(rec, promql: str) -> list[dict]:
    url = f"{metrics.url(rec.ports)}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310
        return json.load(resp)["data"]["result"]


def status(rec) -> dict:
    out = subprocess.run([*KAILAB, "status", "--json", "--name", rec.name], capture_output=True, text=True)
    return json.loads(out.stdout)


def test_prometheus_scrapes_kai_kube_state_metrics_and_the_api_server(kai_lab):
    info = status(kai_lab)
    assert info["state"] == "up", info
    for name in metrics.COMPONENTS:
        assert info["components"][name]["state"] == "running", info["components"]
    assert info["prometheus"] == metrics.url(kai_lab.ports)
    jobs = set(versions.KAI_COMPONENTS) | {metrics.KSM, "kube-apiserver"}

    def every_job_up():
        up = {r["metric"]["job"]: r["value"][1] for r in query(kai_lab, "up")}
        return set(up) == jobs and set(up.values()) == {"1"}

    wait_until("Prometheus to have scraped every target once", every_job_up, timeout=60)
    # KAI's default GPU capacity query for time-based fair share, served by the real kube-state-metrics
    (capacity,) = wait_until("kube-state-metrics' GPU capacity to be scraped", lambda: query(
        kai_lab, 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})'), timeout=60)
    assert float(capacity["value"][1]) == kai_lab.gpus
    # a KAI series (the scheduler's own metrics), proving KAI's endpoints are really read
    assert query(kai_lab, '{job="scheduler", __name__=~".+"}')
    # every 2 s what a run's figures read (KAI's queue series, GPU capacity); every 10 s the processes
    # that export only Go's and controller-runtime's series; the API server's large page every 20 s
    from kailab.stacks.kai import FIGURE_COMPONENTS
    every = metrics.scrape_intervals(kai_lab.ports)
    assert {job for job, s in every.items() if s == 2} == {*FIGURE_COMPONENTS, metrics.KSM}, every
    assert {job for job, s in every.items() if s == 10} == set(versions.KAI_COMPONENTS) - set(FIGURE_COMPONENTS), every
    assert every["kube-apiserver"] == 20 and metrics.figure_jobs(kai_lab.ports) == {*FIGURE_COMPONENTS, metrics.KSM}


def test_each_lab_has_its_own_prometheus_and_env_prints_it(kai_lab, kailab_labs):
    other = kailab_labs.get("small")
    urls = []
    for lab in (kai_lab, other):
        out = subprocess.run([*KAILAB, "env", "--name", lab.name], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert f"export KAILAB_PROMETHEUS_URL={metrics.url(lab.ports)}" in out.stdout.splitlines()
        urls.append(metrics.url(lab.ports))
        assert wait_until(f"lab {lab.name}'s Prometheus to report its own fleet's GPUs", lambda lab=lab: [
            r for r in query(lab, 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})')
            if float(r["value"][1]) == lab.gpus], timeout=60)
    assert urls[0] != urls[1]


def _exercise(tmp_path: Path) -> Path:
    doc = {"exercise": "metrics-death", "title": "metrics death", "concept": "fault test", "fleet": "tiny",
           "queues": {"root": {"gpu": {"quota": -1, "limit": -1},
                               "children": {"q": {"gpu": {"quota": 8, "limit": -1}}}}},
           "steps": [{"name": "a pod", "apply": [{"pods": {"name": "a", "queue": "q", "count": 1}}],
                      "expect": [{"queue": "q", "bound": 1}]},
                     {"name": "a window", "stays": {"for": "5s", "that": [{"queue": "q", "bound": {"min": 1}}]}}]}
    path = tmp_path / "metrics-death.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize("component", metrics.COMPONENTS)
def test_a_dead_metrics_process_breaks_status_and_is_the_runs_error(kai_lab, tmp_path, component):
    from kailab.runtimes.binary import BinaryRuntime

    processes.kill(processes.records(kai_lab.dir)[component])
    try:
        info = status(kai_lab)
        assert info["state"] == "broken" and info["components"][component]["state"] == "exited", info
        path = _exercise(tmp_path)
        outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
        assert outcome.verdict == "error", outcome.report()
        assert outcome.error.startswith(f"lab component died: {component}"), outcome.error
    finally:
        BinaryRuntime().restart(kai_lab, component)
    assert status(kai_lab)["components"][component]["state"] == "running"


def test_a_prometheus_that_cannot_scrape_is_reported_broken(kai_lab):
    """Stopping (not killing) kube-state-metrics leaves Prometheus running but failing a target."""
    import signal

    rec = processes.records(kai_lab.dir)[metrics.KSM]
    os.kill(rec.pid, signal.SIGSTOP)  # alive but silent: only the scrape can tell
    try:
        def failing():  # kube-state-metrics' own failure (on a busy machine another target may miss a scrape first)
            info = status(kai_lab)
            failures = info["components"][metrics.PROMETHEUS].get("scrape_failures") or []
            return info if any(f.startswith(metrics.KSM + ":") for f in failures) else None

        info = wait_until("Prometheus to report the failing scrape", failing, timeout=60)
        assert info["state"] == "broken"
        assert any(f.startswith(metrics.KSM + ":") for f in info["components"][metrics.PROMETHEUS]["scrape_failures"])
    finally:
        os.kill(rec.pid, signal.SIGCONT)
    wait_until("the scrape to recover", lambda: status(kai_lab)["state"] == "up", timeout=60)


def test_a_runs_verdict_and_report_carry_per_queue_waits(kai_lab, tmp_path):
    from kailab.report import write_report

    path = _exercise(tmp_path)
    outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
    assert outcome.verdict == "passed", outcome.report()
    figs = outcome.figures
    assert 0 <= figs["wait_p50_s.q"] <= figs["wait_p99_s.q"] <= figs["wait_max_s.q"], figs
    assert "never_bound.q" not in figs and "evicted.q" not in figs, figs
    html = write_report([Path(outcome.evidence)], tmp_path / "report.html").read_text()
    assert 'class="figures queue-figures"' in html and "wait_p99_s" in html
    assert "GPUs requested vs allocated" in html and "fleet 8 GPUs; utilisation peak 12%" in html  # 1 of 8
    # KAI's own view, by its dashboards' queries: the run's queue allocation series from Prometheus
    doc = json.loads((Path(outcome.evidence) / "kai-metrics.json").read_text())
    (alloc,) = [p for p in doc["panels"] if p["title"] == "Allocated GPUs"]
    assert alloc["promql"] == "max by (queue_name) (kai_queue_allocated_gpus)" and not alloc.get("missing"), alloc
    assert {s["labels"]["queue"] for s in alloc["series"]} <= {"root", "q"} and any(
        s["labels"]["queue"] == "q" and max(v for _, v in s["points"]) >= 1 for s in alloc["series"]), alloc
    assert "kai_queue_allocated_gpus" in html and 'class="chart kai-series"' in html


def test_kais_series_missing_for_a_runs_queues_name_the_scrapes_that_failed(kai_lab, tmp_path):
    """KAI's queuecontroller stopped (alive, silent) for a whole run: its queue series cannot reach
    Prometheus, so the evidence says so and names the scrapes it waited for, the failed one included."""
    import signal

    rec = processes.records(kai_lab.dir)["queuecontroller"]
    os.kill(rec.pid, signal.SIGSTOP)
    try:
        path = _exercise(tmp_path)
        outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
    finally:
        os.kill(rec.pid, signal.SIGCONT)
    assert outcome.verdict == "passed", outcome.report()  # the scheduler and binder need no queuecontroller
    doc = json.loads((Path(outcome.evidence) / "kai-metrics.json").read_text())
    (alloc,) = [p for p in doc["panels"] if p["title"] == "Allocated GPUs"]
    assert alloc["series"] == [] and alloc["missing"].startswith("no series for this run's queues (last scrapes: "), alloc
    assert "queuecontroller failed: " in alloc["missing"] and "scheduler up at +" in alloc["missing"], alloc
    wait_until("the scrape to recover", lambda: status(kai_lab)["state"] == "up", timeout=60)


def test_usage_on_a_lab_without_prometheus_is_one_line(kai_lab, tmp_path):
    """The same lab, recorded as running no metrics: the scheduler step refuses, naming the fix."""
    import dataclasses

    doc = yaml.safe_load(_exercise(tmp_path).read_text())
    doc["steps"][0]["scheduler"] = {"usage": {"windowSize": "1m"}}
    path = tmp_path / "metrics-death.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    lab = dataclasses.replace(kai_lab, metrics=False)
    outcome = ExerciseRun(load_exercise(path), path, lab, tmp_path / "ev").run()
    assert outcome.verdict == "error", outcome.report()
    assert "scheduler.usage needs the lab's Prometheus" in outcome.error and "--without-metrics" in outcome.error
    assert "\n" not in outcome.error.strip()
