"""What a binary lab's Prometheus scrapes, and how often: seconds' resolution only for the series a
run's figures read (the live check: tests/live/test_metrics.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kailab import versions
from kailab.runtimes import metrics
from kailab.stacks.kai import FIGURE_COMPONENTS, KaiAddon


@pytest.mark.parametrize("text,seconds", [("2s", 2), ("10s", 10), ("1m", 60), ("1m30s", 90), ("500ms", 0.5)])
def test_prometheus_durations_read_as_seconds(text, seconds):
    assert metrics._seconds(text) == seconds


def test_kais_figure_processes_every_2s_the_others_every_10s():
    ports = {f"{c}.metrics": 20000 + i for i, c in enumerate(versions.KAI_COMPONENTS)}
    jobs = {j["job_name"]: j for j in KaiAddon.scrape_jobs(None, ports)}
    assert set(jobs) == set(versions.KAI_COMPONENTS)
    # the UsageDB's allocation and the panels' queue series come from these two
    assert set(FIGURE_COMPONENTS) == {"scheduler", "queuecontroller"}
    for name, job in jobs.items():
        assert job["static_configs"] == [{"targets": [f"127.0.0.1:{ports[name + '.metrics']}"]}]
        assert job.get("scrape_interval") == (None if name in FIGURE_COMPONENTS else metrics.SLOW_SCRAPE_INTERVAL)
    config = metrics.scrape_config({"kube-state-metrics.metrics": 1, "kube-apiserver": 2}, Path("/pki"), list(jobs.values()))
    assert config["global"]["scrape_interval"] == metrics.SCRAPE_INTERVAL == "2s"
    ksm = next(j for j in config["scrape_configs"] if j["job_name"] == metrics.KSM)
    assert "scrape_interval" not in ksm  # KAI's GPU capacity query reads it
