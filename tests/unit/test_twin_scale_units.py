"""The at-scale twin's snapshot (`kailab bench twin-scale N`), made before any lab: every GPU of the
fleet taken by the train queue's pods (two per node, each on its node), N pods of the serve queue pending
within its quota, in KAI's snapshot format, so the twin's own reader plans it without a note. (Its run on
the 1,213-node fleet: bench/results/*-twin-scale.md.)"""

from __future__ import annotations

import json

import pytest

from kailab.bench import twin_scale
from kailab.errors import KailabError
from kailab.twin.plan import make_plan
from kailab.twin.snapshot import load_snapshot

POOLS = [{"name": "g2-8g", "count": 3, "gpus": 8, "cpu": 96, "memoryGiB": 384, "product": "G2", "gpuMemoryMiB": 16384},
         {"name": "t4-1g", "count": 2, "gpus": 1, "cpu": 16, "memoryGiB": 64, "product": "T4", "gpuMemoryMiB": 15360}]


@pytest.fixture
def small_alibaba(monkeypatch):
    class Source:
        def __init__(self, _):
            pass

        def read(self, _):
            return ""

    monkeypatch.setattr(twin_scale.alibaba, "registered", lambda: {"format": "alibaba-gpu-2023"})
    monkeypatch.setattr(twin_scale.alibaba, "Source", Source)
    monkeypatch.setattr(twin_scale.alibaba, "fleet_from_nodes", lambda *a, **k: {"pools": POOLS})


def test_the_fleet_is_full_and_the_pending_work_is_owed_its_quota(small_alibaba, tmp_path):
    snap = twin_scale.alibaba_snapshot(3)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snap))
    plan = make_plan(load_snapshot(path), "x")
    assert plan.counts() == {"nodes": 5, "gpus": 26, "namespaces": 2, "podgroups": 11, "priorityclasses": 2,
                                  "queues": 3, "pods_bound": 8, "pods_pending": 3}
    assert plan.unknown == [] and plan.not_reproduced == {}
    shares = plan.pod_shares()
    assert sum(g for p, (q, g) in shares.items() if q == "train" and p.startswith("train/")) == 26  # every GPU
    assert {g for p, (q, g) in shares.items() if q == "serve"} == {4.0}
    quotas = {q["metadata"]["name"]: q["spec"]["resources"]["gpu"]["quota"] for q in snap["rawObjects"]["queues"]}
    assert quotas == {"org": -1, "train": 13, "serve": 13}


def test_more_pending_work_than_the_queue_is_owed_is_refused(small_alibaba):
    with pytest.raises(KailabError, match="over serve's quota"):
        twin_scale.alibaba_snapshot(4)


def test_without_the_trace_registered_it_says_how(monkeypatch):
    monkeypatch.setattr(twin_scale.alibaba, "registered", lambda: None)
    with pytest.raises(KailabError, match="trace source"):
        twin_scale.alibaba_snapshot(1)
