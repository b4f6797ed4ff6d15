"""The format's newer words against a real lab with KAI: the fleet's identity, object assertions
(and their negation), placement by node, node steps put back, run names in manifests. Each case
also shows the check failing when what it checks is not so."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from helpers import kailab_cli

from kailab.exercise.runner import ExerciseRun
from kailab.exercise.load import load_exercise
from kailab.fleet import fleet_difference, load_fleet
from kailab.kube import Kube
from kailab.paths import PROJECT_ROOT, exercises_dir

pytestmark = [pytest.mark.lab, pytest.mark.kai]

HEAD = """\
exercise: {name}
title: t
concept: c
fleet: {fleet}
queues:
  lab:
    gpu: {{quota: -1, limit: -1}}
    children:
      team: {{gpu: {{quota: 8, limit: -1, overQuotaWeight: 1}}}}
"""


def write(tmp_path, name: str, steps: str, fleet: str = "small"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(HEAD.format(name=name, fleet=fleet) + textwrap.dedent(steps))
    return path


def run(path, lab, tmp_path, **hooks):
    return ExerciseRun(load_exercise(path), path, lab, tmp_path / "evidence", **hooks).run()


def test_a_lab_of_another_fleet_is_refused_before_anything_is_applied(kailab_labs, tmp_path):
    lab = kailab_labs.get("small")
    # 1. by name: the racks exercise on a small lab (both have 32 GPUs: the old size check passed it)
    out = run(exercises_dir() / "rack-placement.yaml", lab, tmp_path)
    assert out.verdict == "error" and "sized for fleet racks" in out.error and "fleet small" in out.error, out.error
    assert "kailab up --fleet racks" in out.error and not out.results
    # 2. by content: a fleet file named like the lab's, same GPUs, one label different
    fleet = yaml.safe_load((PROJECT_ROOT / "fleets" / "small.yaml").read_text())
    fleet["pools"][2]["labels"] = {"zone": "b"}
    (tmp_path / "fleets").mkdir()
    (tmp_path / "fleets" / "small-zoned.yaml").write_text(yaml.safe_dump(fleet))
    path = write(tmp_path, "zoned", """\
        steps:
          - name: s
            apply: [{pods: {name: p, queue: team, count: 1, gpus: 1}}]
            expect: [{workload: p, bound: 1}]
        """, fleet="fleets/small-zoned.yaml")
    out = run(path, lab, tmp_path)
    assert out.verdict == "error" and "node l40s-0 has zone=(unset), not b" in out.error, out.error
    kube = Kube(lab.kubeconfig)
    try:  # nothing was applied: no namespace of the run exists
        assert not [n for n in kube.list("v1", "Namespace") if n["metadata"]["name"].startswith("kx-zoned-")]
    finally:
        kube.close()
    # 3. `kailab run` says it as a refusal: one line, exit 2, and no run directory left to report on
    done = kailab_cli("run", "rack-placement", "--name", lab.name, "--evidence", str(tmp_path / "cli-evidence"))
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.splitlines()[-1].startswith("kailab: error: exercise rack-placement is sized for fleet racks")
    assert "Traceback" not in done.stderr and not any((tmp_path / "cli-evidence").glob("*rack-placement*"))


OBJECTS = """\
    steps:
      - name: decided
        apply:
          - pods: {name: halves, queue: team, count: 2, gpuFraction: 0.5, nodeSelector: {kailab.io/pool: a100}}
          - pods: {name: big, queue: team, count: 1, gpus: 8, unschedulable: true, nodeSelector: {kailab.io/pool: l40s}}
        expect:
          - object: BindRequest
            of: halves
            match: {spec: {receivedResourceType: Fraction, receivedGPU: {portion: {min: PORTION, max: 1}}, selectedGPUGroups: [{regex: "."}]}}
            count: 2
          - {object: PodGroup, of: halves, match: {metadata: {annotations: {kai.scheduler/last-start-timestamp: {exists: true}}}, spec: {queue: "${queue:team}"}}, count: 2}
          - {object: Pod, of: halves, match: {metadata: {labels: {runai-gpu-group: {exists: true}}}}, count: 2}
          - {object: Queue, name: team, match: {spec: {resources: {gpu: {quota: 8}}}}}
          - {workload: halves, bound: 2, on: {nodeSelector: {kailab.io/pool: a100}}}
        stays:
          for: 3s
          that:
            - {object: BindRequest, of: big, count: 0}
            - {workload: halves, evicted: 0}
        timeout: 30s
"""


def test_object_assertions_read_what_kai_wrote_and_fail_when_it_differs(kailab_labs, tmp_path):
    lab = kailab_labs.get("small")
    out = run(write(tmp_path, "objects", OBJECTS.replace("PORTION", "0.5")), lab, tmp_path)
    assert out.verdict == "passed", out.report()
    assert {r.kind for r in out.results} == {"expect", "stays"}
    # a passing run's evidence holds KAI's BindRequests and the PodGroups' annotations too
    step = next((Path(out.evidence) / "steps").iterdir())
    brs = yaml.safe_load((step / "bindrequests.yaml").read_text())
    assert sorted(b["spec"]["receivedResourceType"] for b in brs) == ["Fraction", "Fraction"], brs
    pgs = yaml.safe_load((step / "podgroups.yaml").read_text())
    assert any("kai.scheduler/last-start-timestamp" in (p["annotations"] or {}) for p in pgs), pgs
    # the same run asking a portion KAI did not give: the failure names the field and the value
    out = run(write(tmp_path, "objects", OBJECTS.replace("PORTION", "0.6")), lab, tmp_path)
    assert out.verdict == "failed", out.report()
    failed = [r for r in out.results if not r.passed]
    assert [r.what for r in failed] == ["BindRequest of halves matching"], out.report()
    assert any(".spec.receivedGPU.portion" in o and "below 0.6" in o for o in failed[0].offending), failed[0]


def test_a_node_step_changes_the_node_for_the_run_and_the_fleet_is_put_back(kailab_labs, tmp_path):
    lab = kailab_labs.get("small")
    kube = Kube(lab.kubeconfig)
    small = load_fleet("small")
    seen = []
    try:
        def after(index, step, results):
            seen.append(fleet_difference(small, kube.list("v1", "Node")))

        path = exercises_dir() / "node-labels.yaml"
        out = run(path, lab, tmp_path, after_step=after)
        assert out.verdict == "passed", out.report()
        # mid-run the fleet was not as declared (so a next exercise would be refused); afterwards it is
        assert seen[0] is None and all(seen[1:]) and "label team=vision" in seen[1], seen
        assert fleet_difference(small, kube.list("v1", "Node")) is None
        timeline = (tmp_path / "evidence").glob("*/timeline.jsonl")
        text = next(timeline).read_text()
        assert '"what": "node"' in text and "label team=vision" in text and "untaint maintenance" in text
    finally:
        kube.close()


def test_run_names_in_a_manifest_become_the_runs(kailab_labs, tmp_path):
    lab = kailab_labs.get("small")
    path = write(tmp_path, "names", """\
        steps:
          - name: a hand-written pod in the run's queue
            apply:
              - manifest:
                  object:
                    apiVersion: v1
                    kind: Pod
                    metadata: {name: hand, labels: {kai.scheduler/queue: "${queue:team}"}, annotations: {ns: "${namespace}"}}
                    spec:
                      schedulerName: kai-scheduler
                      containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
            expect:
              - {workload: hand, bound: 1}
              - {object: Pod, name: hand, match: {metadata: {annotations: {ns: "${namespace}"}}}, count: 1}
            timeout: 30s
        """)
    out = run(path, lab, tmp_path)
    assert out.verdict == "passed", out.report()


SHARD = """\
    steps:
      - name: allocation off
        scheduler: {shard: SHARD}
        apply: [{pods: {name: p, queue: team, count: 1, gpus: 1}}]
        stays:
          for: 5s
          that: [{workload: p, bound: 0}]
      - name: the chart's shard again
        scheduler: {}
        expect: [{workload: p, bound: 1}]
        timeout: 60s
"""


def test_a_scheduler_step_says_any_shard_fragment_and_kai_refuses_what_it_does_not_accept(kailab_labs, tmp_path):
    """Scheduler configuration as data: a SchedulingShard fragment (here: the allocate action off),
    rendered by the lab's KAI operator code, changes what KAI does; one its SchedulingShard does not
    have is refused in one line before anything is applied."""
    lab = kailab_labs.get("small")
    out = run(write(tmp_path, "shard", SHARD.replace("SHARD", "{actions: {allocate: {enabled: false}}}")),
              lab, tmp_path)
    assert out.verdict == "passed", out.report()
    conf = yaml.safe_load((Path(out.evidence) / "scheduler-conf" / "01-binpack.yaml").read_text())
    assert "allocate" not in conf["actions"] and "reclaim" in conf["actions"]
    shard = yaml.safe_load((Path(out.evidence) / "scheduler-conf" / "01-binpack.schedulingshard.yaml").read_text())
    assert shard["actions"] == {"allocate": {"enabled": False}}
    bad = write(tmp_path, "badshard", SHARD.replace("SHARD", "{actionz: {allocate: {enabled: false}}}"))
    out = run(bad, lab, tmp_path)
    assert out.verdict == "error" and "\n" not in out.error, out.error
    assert str(bad) in out.error and "step 1 scheduler.shard" in out.error and "actionz" in out.error, out.error
    kube = Kube(lab.kubeconfig)
    try:  # nothing was applied: no namespace of the run exists
        assert not [n for n in kube.list("v1", "Namespace") if n["metadata"]["name"].startswith("kx-badshard-")]
    finally:
        kube.close()
