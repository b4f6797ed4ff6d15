"""KAI's own e2e suites against kailab labs (#24 item 4): compiled from the lab's KAI source, run on
labs side by side with stand-in pods for the KAI system pods KAI's clean-up waits for, every result
read from the suites' JUnit. CI runs the quota, reclaim and preempt suites: every spec they select
must pass on real KAI; a failure here is a finding about KAI or the lab, never to be skipped away."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from kailab import workloads
from kailab.kube import Kube
from kailab.runtimes import LabRecord
from kailab.testing.labs import kind_docker

from helpers import kailab_cli

pytestmark = [pytest.mark.lab, pytest.mark.kai]


def _kailab(args: list[str], evidence) -> subprocess.CompletedProcess:
    return kailab_cli(*args, env={"KAILAB_EVIDENCE": str(evidence)}, timeout=3600)


@pytest.mark.xdist_group("own_labs")  # labs of its own: one such test at a time beside the rest
def test_kais_quota_suite_passes_on_a_lab_of_its_own(tmp_path):
    """The e2e path end to end on one suite (KAI's quota suite, ~1 min): compiled from KAI's source, run
    against a lab made the way KAI's e2e expects, its JUnit read, the lab gone after. The CI set of three
    suites on two labs side by side is `full` (below)."""
    run = _kailab(["e2e", "quota"], tmp_path)
    out = run.stdout + run.stderr
    (e2e_dir,) = list(tmp_path.glob("e2e-*"))
    summary = json.loads((e2e_dir / "summary.json").read_text())
    assert run.returncode == 0 and summary["ok"], out[-4000:]
    suites = {name: r for ln in summary["lanes"] for name, r in ln["suites"].items()}
    assert list(suites) == ["quota"] and suites["quota"]["failed"] == 0 and suites["quota"]["passed"] >= 5, suites
    assert "stand-in pods for KAI's e2e clean-up" in out
    assert ET.parse(e2e_dir / "junit.xml").getroot().get("failures") == "0"
    for ln in summary["lanes"]:
        assert (e2e_dir / ln["label"] / "kai-logs" / "scheduler.log").stat().st_size > 0
        assert LabRecord.load(ln["lab"]["lab"]) is None


@pytest.mark.full  # ~8 min of two labs: `make test-full` (docs/dev/testing.md)
@pytest.mark.xdist_group("own_labs")
def test_kai_e2e_quota_reclaim_and_preempt_pass_on_two_labs_side_by_side(tmp_path):
    run = _kailab(["e2e", "--ci", "--labs", "2"], tmp_path)
    out = run.stdout + run.stderr
    (e2e_dir,) = list(tmp_path.glob("e2e-*"))
    summary = json.loads((e2e_dir / "summary.json").read_text())
    assert run.returncode == 0, out[-4000:]
    assert summary["ok"], (e2e_dir / "summary.md").read_text()
    suites = {name: r for ln in summary["lanes"] for name, r in ln["suites"].items()}
    assert sorted(suites) == ["preempt", "quota", "reclaim"]
    for name, r in suites.items():
        assert r["failed"] == 0 and r["passed"] >= 5, (name, r)
    # the spec that needs KAI's operator is left out by name, and says so
    assert not any("Hierarchy level fairness" in s["name"] and s["status"] == "passed" for s in suites["reclaim"]["specs"])
    assert "stand-in pods for KAI's e2e clean-up: binder-stand-in, kai-scheduler-default-stand-in" in out
    merged = ET.parse(e2e_dir / "junit.xml").getroot()
    assert len(merged.findall("testsuite")) == 3 and merged.get("failures") == "0"
    assert "KAI e2e e2e-" in (e2e_dir / "report.html").read_text()
    for ln in summary["lanes"]:  # each lab came up, ran, and is gone
        assert ln["lab"]["ginkgo"].startswith("v2."), ln["lab"]
        assert (e2e_dir / ln["label"] / "kai-logs" / "scheduler.log").stat().st_size > 0
        assert LabRecord.load(ln["lab"]["lab"]) is None


def test_a_lab_with_its_own_queues_is_refused_in_one_line_before_anything_runs(kai_lab, tmp_path):
    kube = Kube(kai_lab.kubeconfig)
    kube.apply(workloads.queue("users-own-queue", {"quota": -1, "limit": -1}))
    try:
        run = _kailab(["e2e", "--name", kai_lab.name, "quota"], tmp_path)
    finally:
        kube.delete("scheduling.run.ai/v2", "Queue", "users-own-queue")
        kube.close()
    assert run.returncode != 0
    err = run.stderr.strip().splitlines()
    assert len(err) == 1 and "has queues" in err[0] and "users-own-queue" in err[0] and "KAI's e2e preflight" in err[0], err
    assert not list(tmp_path.glob("e2e-*"))  # nothing half-made


@pytest.mark.xdist_group("operator_labs")  # a lab of its own with workload operators, beside their other tests
def test_kais_pytorch_and_ray_integration_suites_pass_on_a_lab_with_their_operators(tmp_path):
    """A sample of KAI's third-party suites in CI (the rest: `kailab e2e`, bench/results/2026-11-29-kai-e2e-
    third-party-v0.17.0.md): the lab runs the operators they need (training-operator, KubeRay) and every
    spec they select passes on real KAI."""
    run = _kailab(["e2e", "pytorch", "ray"], tmp_path)
    out = run.stdout + run.stderr
    (e2e_dir,) = list(tmp_path.glob("e2e-*"))
    summary = json.loads((e2e_dir / "summary.json").read_text())
    assert run.returncode == 0 and summary["ok"], out[-4000:]
    suites = {name: r for ln in summary["lanes"] for name, r in ln["suites"].items()}
    assert set(suites) == {"pytorch", "ray"}, suites
    for name, r in suites.items():  # none skipped: a missing operator would skip them all
        assert r["failed"] == 0 and r["passed"] >= 4 and not r.get("skipped"), (name, r)
    lab = summary["lanes"][0]["lab"]
    assert set((lab.get("operators") or {})) == {"kubeflow", "ray"}, lab
    for ln in summary["lanes"]:
        assert LabRecord.load(ln["lab"]["lab"]) is None


@pytest.mark.kind(images="main")  # a kind lab of its own (KAI from its chart, operator included), in the `alone` phase's
@pytest.mark.alone  # light stream: beside the vCluster trial, then the kind lab's own tests after it
@pytest.mark.xdist_group("kind_light")
def test_kais_operator_suites_pass_on_a_kind_lab_of_their_own(tmp_path):
    """A sample of the suites that reconfigure KAI through its operator (the rest: `kailab e2e`,
    bench/results/2026-11-29-kai-e2e-operator-kind-v0.17.0.md): topology sets the placement strategy
    through the SchedulingShard, priority turns the scheduler off and on through KAI's Config. `kailab
    e2e` brings up a kind lab for them (their runtime), never a binary one, with the kind lab's label
    filter (no `!operated`) and no stand-in pods (KAI's own pods are there)."""
    with kind_docker():  # the kind tests' engine (CI's private one), as the other kind tests reach it
        run = _kailab(["e2e", "topology", "priority"], tmp_path)
    out = run.stdout + run.stderr
    (e2e_dir,) = list(tmp_path.glob("e2e-*"))
    summary = json.loads((e2e_dir / "summary.json").read_text())
    assert run.returncode == 0 and summary["ok"], out[-4000:]
    plan = summary["plan"]
    assert plan["runtimes"] == {"v0.17.0-kind": "kind"}, plan
    assert "!operated" not in plan["label_filter"]["v0.17.0-kind"].split(" && ")
    suites = {name: r for ln in summary["lanes"] for name, r in ln["suites"].items()}
    assert set(suites) == {"topology", "priority"}, suites
    assert suites["priority"]["passed"] == 2 and suites["priority"]["failed"] == 0, suites["priority"]
    # topology: 6 pass; its 8-node spec skips itself on the 4 GPU nodes of fleet kai-e2e
    assert suites["topology"]["passed"] >= 6 and suites["topology"]["failed"] == 0, suites["topology"]
    assert "stand-in pods" not in out
    (ln,) = summary["lanes"]
    assert ln["lab"]["runtime"] == "kind" and LabRecord.load(ln["lab"]["lab"]) is None
