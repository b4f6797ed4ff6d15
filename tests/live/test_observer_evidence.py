"""The harness's own machinery against a real API server: the watch-fed state and timeline,
invariants seen on the watch stream, stays-windows, count expectations, evidence files.

Here the test itself places pods (spec.nodeName), standing in for a scheduler, so these tests
prove what kailab *observes*; what KAI *decides* is proven by the exercises.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
import time
import uuid

import pytest
from helpers import place_pod

from kailab import workloads
from kailab.evidence import EvidenceDir
from kailab.exercise.checks import Names, evaluate_count
from kailab.exercise.observer import Observer
from kailab.exercise.spec import CountExpect
from kailab.kube import Kube
from kailab.runtimes.waits import wait_until
from kailab.stacks import get_stack

pytestmark = pytest.mark.lab


@pytest.fixture
def env(infra_lab):
    kube = Kube(infra_lab.kubeconfig)
    ns = f"obs-{uuid.uuid4().hex[:6]}"
    kube.apply(workloads.namespace(ns))
    wait_until("default ServiceAccount", lambda: kube.core.read_namespaced_service_account("default", ns), timeout=60)
    names = Names(prefix="x0000", namespace=ns)
    yield kube, ns, names
    kube.delete("v1", "Namespace", ns)
    kube.close()


def place(kube: Kube, ns: str, name: str, node: str | None, gpus: int = 1, workload: str = "w") -> None:
    place_pod(kube, ns, name, node, "x0000-q", workload, gpus)


@contextmanager
def observing(kube: Kube, names: Names, invariants: list[str], gangs: dict | None = None):
    kai = get_stack("kai")  # the stack whose objects this lab serves
    obs = Observer(kube, names, invariants, gangs, watched=kai.watched(), queue_view=kai.queue_view)
    obs.start()
    try:
        yield obs
    finally:
        obs.stop()


def test_timeline_records_bind_run_and_eviction_from_the_watch(env):
    kube, ns, names = env
    with observing(kube, names, []) as obs:
        place(kube, ns, "p0", "a100-0")
        place(kube, ns, "p1", "a100-0")
        place(kube, ns, "waiting", None)
        assert obs.wait_for(lambda s: sum(p.running for p in s.pods.values() if p.namespace == ns) == 2, 30)
        # someone else deletes a bound pod: that is an eviction
        kube.delete("v1", "Pod", "p0", ns)
        # kailab deletes one itself: that is not
        with obs.state.cond:
            obs.state.our_deletions.add(next(p.uid for p in obs.state.pods.values() if p.name == "p1"))
        kube.delete("v1", "Pod", "p1", ns)
        assert obs.wait_for(lambda s: not any(p.name in ("p0", "p1") for p in s.pods.values()), 30)
        with obs.state.cond:
            kinds = [(e.what, e.pod) for e in obs.state.timeline if e.pod in ("p0", "p1", "waiting")]
        assert ("bound", "p0") in kinds and ("running", "p0") in kinds
        assert ("evicted", "p0") in kinds
        assert ("deleted", "p1") in kinds and ("evicted", "p1") not in kinds
        assert ("bound", "waiting") not in kinds
        assert obs.state.evicted_since(0, workload="w") == 1


def test_gpu_overcommit_is_caught_on_the_watch_stream(env):
    """The API lets anyone set nodeName: 5 one-GPU pods on a 4-GPU node is an overcommit."""
    kube, ns, names = env
    with observing(kube, names, ["no-gpu-overcommit"]) as obs:
        for i in range(5):
            place(kube, ns, f"over-{i}", "a100-1")
        assert obs.wait_for(lambda s: "no-gpu-overcommit" in obs.violations, 30)
        t, details = obs.violations["no-gpu-overcommit"]
        assert details == ["node a100-1 holds 5 GPUs of 4"]
        for i in range(5):
            kube.delete("v1", "Pod", f"over-{i}", ns, grace=0)


def test_a_gang_left_partial_is_a_violation_once_it_rests_there(env):
    """The test binds 2 of a 4-pod gang itself and nothing completes it: not a commit in progress,
    a partial gang. (KAI's own one-BindRequest-per-pod commits pass: the gang exercise.)"""
    kube, ns, names = env
    with observing(kube, names, ["gang-never-partial"], gangs={"g": 4}) as obs:
        for i in range(4):
            place(kube, ns, f"g-{i}", "a100-0" if i < 2 else None, workload="g")
        assert obs.wait_for(lambda s: s.gang_allocation(ns)["g"] == (2, 4), 30)
        assert "gang-never-partial" not in obs.violations  # could still be KAI committing it
        assert obs.wait_for(lambda s: "gang-never-partial" in obs.violations, 30)
        t, details = obs.violations["gang-never-partial"]
        assert details[0].startswith("gang g: 2 of 4 pods allocated for ")
        with obs.state.cond:
            since = obs.state.gang_partial_since["g"]
        assert t - since >= obs.state.gang_grace


def test_count_expectation_sees_bound_and_pending(env):
    kube, ns, names = env
    with observing(kube, names, []) as obs:
        place(kube, ns, "b0", "a100-0", workload="mix")
        place(kube, ns, "b1", None, workload="mix")
        exp = CountExpect(workload="mix", bound=1, pending=1)
        assert obs.wait_for(lambda s: all(r.passed for r in evaluate_count(s, exp, names, 0, "s")), 30)
        wrong = CountExpect(workload="mix", bound=2)
        with obs.state.cond:
            (result,) = evaluate_count(obs.state, wrong, names, 0, "s")
        assert not result.passed
        assert (result.expected, result.observed) == ("2", "1")
        assert result.offending == ["b0@a100-0"]


def test_evidence_snapshot_and_namespace_dump_never_hold_secrets(env, tmp_path):
    kube, ns, names = env
    kube.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
                "stringData": {"token": "TOPSECRET-VALUE"}})
    with observing(kube, names, []) as obs:
        place(kube, ns, "e0", "a100-0")
        assert obs.wait_for(lambda s: any(p.name == "e0" and p.running for p in s.pods.values()), 30)
        ev = EvidenceDir(tmp_path, "harness")
        ev.snapshot("steps/01-x", kube, ns, obs.state, "", get_stack("kai").snapshot_objects(kube, ns, []))
        ev.dump_namespace(kube, ns)
        ev.timeline(obs.state.timeline)
    files = {p.relative_to(ev.path).as_posix() for p in ev.path.rglob("*") if p.is_file()}
    assert {"steps/01-x/pods.yaml", "steps/01-x/nodes.yaml", "steps/01-x/events.yaml",
            "steps/01-x/queues.yaml", "steps/01-x/podgroups.yaml", "timeline.jsonl", "dump/Pod.core.yaml"} <= files
    assert not any("Secret" in f for f in files)
    for f in ev.path.rglob("*"):
        if f.is_file():
            text = f.read_text(errors="replace")
            assert "TOPSECRET" not in text and "PRIVATE KEY" not in text
    lines = [json.loads(line) for line in (ev.path / "timeline.jsonl").read_text().splitlines()]
    assert any(e["what"] == "bound" and e["pod"] == "e0" for e in lines)


def test_wait_settled_returns_after_a_quiet_period(env):
    kube, ns, names = env
    with observing(kube, names, []) as obs:
        place(kube, ns, "s0", "a100-0")
        start = time.time()
        assert obs.wait_settled(quiet=1.0, timeout=30)
        assert time.time() - start >= 1.0
