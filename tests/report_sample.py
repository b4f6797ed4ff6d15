"""Evidence of one passed reclaim-like run, written as a run writes it: the report's tests read it
(tests/unit/test_report.py as text, tests/live/test_report_live.py in a real browser)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

PREFIX = "x7f3a"
QUEUES = {"lab": f"{PREFIX}-lab", "research": f"{PREFIX}-research", "prod": f"{PREFIX}-prod"}

EXPECTATIONS = [
    {"step": "prod borrows research's idle share", "kind": "expect", "what": "queue prod bound GPUs",
     "expected": "8", "observed": "8", "passed": True, "offending": [], "at": 1.42},
    {"step": "research comes back", "kind": "expect", "what": "queue research bound GPUs",
     "expected": ">= 4 & <= 8", "observed": "4 <of 4 requested>", "passed": True, "offending": [], "at": 5.611},
    {"step": "research comes back", "kind": "expect", "what": "workload prod-train evicted",
     "expected": "4", "observed": "4", "passed": True,
     "offending": ["prod-train-4", "prod-train-5", "prod-train-6", "prod-train-7"], "at": 5.611},
    {"step": "research comes back", "kind": "stays", "what": "queue prod bound GPUs for 3s",
     "expected": "at least 4", "observed": "4 throughout", "passed": True, "offending": [], "at": 8.75},
    {"step": "whole run", "kind": "invariant", "what": "no-gpu-overcommit", "expected": "never violated",
     "observed": "never violated", "passed": True, "offending": [], "at": None},
]
FIGURES = {"binds": 10, "evictions": 4, "gang_bind_spread_s.research-train": 0.012}


def _pod(name: str, queue: str, gpus: int, node: str | None, workload: str) -> dict:
    return {"namespace": "kx-reclaim-7f3a", "name": name, "uid": f"uid-{name}", "workload": workload,
            "queue": QUEUES[queue], "gpus": gpus, "node": node, "phase": "Running" if node else "Pending",
            "deleting": False, "priority": 50, "preemptibility_label": None, "podgroup": f"pg-{workload}"}


def _queue(logical: str, quota: int, limit: int, parent: str | None) -> dict:
    spec = {"resources": {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = QUEUES[parent]
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": QUEUES[logical]},
            "spec": spec, "status": {}}


def make_evidence(root: Path) -> Path:
    """A passed reclaim-like run on a 2 x 4 GPU fleet: prod borrows 8 GPUs, research returns and
    takes its 4 back through 4 evictions; research's pods use 2 GPUs each."""
    d = root / "20250101T120000.00Z-reclaim-lite"
    d.mkdir(parents=True)
    exercise = {"exercise": "reclaim-lite", "title": "The owner comes back", "fleet": "tiny",
                "queues": {"lab": {"gpu": {"quota": -1, "limit": -1}, "children": {
                    "research": {"gpu": {"quota": 4, "limit": -1}},
                    "prod": {"gpu": {"quota": 4, "limit": 8}}}}},
                "steps": [{"name": "prod borrows research's idle share"}, {"name": "research comes back"}]}
    (d / "exercise.yaml").write_text(yaml.safe_dump(exercise, sort_keys=False))
    (d / "run.json").write_text(json.dumps({
        "exercise": "reclaim-lite", "lab": "pytest-1-tiny", "runtime": "binary", "kai_version": "v0.17.0",
        "fleet": "tiny", "namespace": "kx-reclaim-7f3a", "queues": QUEUES, "started": "2025-01-01T12:00:00Z"}))
    (d / "verdict.json").write_text(json.dumps({
        "exercise": "reclaim-lite", "verdict": "passed", "error": "", "kai_version": "v0.17.0",
        "lab": "pytest-1-tiny", "runtime": "binary", "expectations": EXPECTATIONS, "figures": FIGURES,
        "observer_errors": [], "evidence_notes": []}, indent=2))
    tl = []

    def add(t, what, pod, workload, queue, node=None, detail=""):
        tl.append({"t": t, "what": what, "pod": pod, "workload": workload, "queue": QUEUES[queue],
                   "node": node, "detail": detail})

    for i in range(8):
        node = f"n-{i // 4}"
        add(0.2, "created", f"prod-train-{i}", "prod-train", "prod")
        add(round(0.5 + i * 0.1, 3), "bound", f"prod-train-{i}", "prod-train", "prod", node)
        add(round(0.9 + i * 0.1, 3), "running", f"prod-train-{i}", "prod-train", "prod", node)
    for i in range(2):
        add(2.0, "created", f"research-train-{i}", "research-train", "research")
    for i in range(4, 8):
        add(3.25, "evicted", f"prod-train-{i}", "prod-train", "prod", "n-1",
            "deleted while bound: KAI eviction/preemption or a controller")
    for i in range(2):
        add(3.5 + i * 0.012, "bound", f"research-train-{i}", "research-train", "research", "n-1")
    (d / "timeline.jsonl").write_text("".join(json.dumps(e) + "\n" for e in tl))

    prod_all = [_pod(f"prod-train-{i}", "prod", 1, f"n-{i // 4}", "prod-train") for i in range(8)]
    research = [_pod(f"research-train-{i}", "research", 2, "n-1", "research-train") for i in range(2)]
    queues = [_queue("lab", -1, -1, None), _queue("research", 4, -1, "lab"), _queue("prod", 4, 8, "lab")]
    over_quota = {"name": "pg-inference-0", "labels": {},
                  "spec": {"queue": QUEUES["research"], "minMember": 1},
                  "status": {"schedulingConditions": [{
                      "type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True",
                      "reasons": [{"reason": "NonPreemptibleOverQuota",
                                   "message": "Non-preemptible workload is over quota in queue research"}]}]}}
    snaps = {
        "steps/01-prod-borrows-research-s-idle-share": (
            prod_all, {"n-0": {"allocatable": 4, "used": 4, "pods": [f"prod-train-{i}" for i in range(4)]},
                       "n-1": {"allocatable": 4, "used": 4, "pods": [f"prod-train-{i}" for i in range(4, 8)]}},
            [{"name": "pg-prod-train", "labels": {}, "spec": {"queue": QUEUES["prod"]}, "status": {}}]),
        "steps/02-research-comes-back": (
            prod_all[:4] + research,
            {"n-0": {"allocatable": 4, "used": 4, "pods": [f"prod-train-{i}" for i in range(4)]},
             "n-1": {"allocatable": 4, "used": 4, "pods": ["research-train-0", "research-train-1"]}},
            [{"name": "pg-prod-train", "labels": {}, "spec": {"queue": QUEUES["prod"]}, "status": {}},
             over_quota]),
        "final": (prod_all[:4] + research,
                  {"n-0": {"allocatable": 4, "used": 4, "pods": [f"prod-train-{i}" for i in range(4)]},
                   "n-1": {"allocatable": 4, "used": 4, "pods": ["research-train-0", "research-train-1"]}},
                  []),
    }
    for rel, (pods, nodes, pgs) in snaps.items():
        s = d / rel
        s.mkdir(parents=True)
        for name, data in (("queues", queues), ("podgroups", pgs), ("pods", pods), ("nodes", nodes),
                           ("events", [{"time": "2025-01-01T12:00:03Z", "type": "Normal", "reason": "Evict",
                                        "object": "PodGroup/pg-prod-train", "count": 4, "source": "kai-scheduler",
                                        "message": "evicted 4 pods"}])):
            (s / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return d
