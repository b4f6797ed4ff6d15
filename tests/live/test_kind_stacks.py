"""Kueue and Volcano on kind labs for real (issues #41, #43): each stack from its own chart, air-gapped
(`--images local`: every image and chart built here by `kailab tools images --stack NAME`), its pods on
kind's real node, KWOK's fleet beside them. One lab per stack, in the order a user meets it: up, status
naming its Deployments, two of the five exercises passing with the same per-stack expectations as on
the binary runtime (tests/live/test_kueue_exercises.py, test_volcano_exercises.py: the others run there),
a killed container named by its Deployment, then down, after which nothing of it is left. Each lab is minutes of bring-up on a 2-core host: only
borrow and gang run here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kailab.exercise.runner import run_exercise
from kailab.exercise.load import resolve_exercise
from kailab import labs
from kailab.labs import LabSpec
from kailab.paths import lab_dir
from kailab.testing.labs import LAB_PREFIX, kind_docker

# in the kind group: one kind cluster at a time on the machine (three at once starved KAI's operator
# until its liveness probe restarted it, an `error` verdict for a reason that is not KAI's)
pytestmark = [pytest.mark.kind, pytest.mark.lab, pytest.mark.xdist_group("kind")]

# what `status` must name: each stack's Deployments in the cluster (kueue.yaml, volcano.yaml `kind:`)
COMPONENTS = {"kueue": {"kueue-controller-manager"},
              "volcano": {"volcano-admission", "volcano-controllers", "volcano-scheduler"}}
EXERCISES = ["borrow", "gang"]


# Volcano's kind lab is `full` (make test-full): one stack's chart on kind keeps that path in make test
# (Kueue's), and Volcano's own behaviour runs on binary labs (tests/live/test_volcano*.py)
@pytest.fixture(scope="module", params=["kueue", pytest.param("volcano", marks=pytest.mark.full)])
def stack_kind_lab(request):
    stack = request.param
    name = f"{LAB_PREFIX}{os.getpid()}-kind-{stack}"
    try:
        with kind_docker():
            yield labs.up(LabSpec(name=name, runtime="kind", fleet="small", stack=stack,
                                metrics=False, images="local")).record
    finally:
        with kind_docker():
            labs.down(name, "kind")  # nothing left when the down test already took it


def _docker(*args: str) -> str:
    with kind_docker():
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120).stdout


def test_up_installs_the_stack_from_its_chart_and_status_names_it(stack_kind_lab):
    stack = stack_kind_lab.stack["name"]
    with kind_docker():
        info = labs.open(stack_kind_lab).status()
    assert info["state"] == "up", info
    assert COMPONENTS[stack] <= set(info["components"]), info["components"]
    assert all(c["state"] == "running" for c in info["components"].values()), info["components"]
    assert (info["nodes"], info["gpus"]) == (info["expected_nodes"], info["expected_gpus"])
    # air-gapped: the stack runs from the images built here, and not one KAI container runs (kailab's node
    # image holds the default KAI's images, for the labs that install it: here they are never used)
    node = f"kailab-{stack_kind_lab.name}-control-plane"
    listed = json.loads(_docker("exec", node, "crictl", "images", "-o", "json"))["images"]
    tags_of = {i["id"]: i.get("repoTags") or [] for i in listed}
    containers = json.loads(_docker("exec", node, "crictl", "ps", "-a", "-o", "json"))["containers"]
    used = {t for c in containers for t in tags_of.get(c.get("imageRef", ""), [c.get("imageRef", "")])}
    assert not any("kai-scheduler" in t for t in used), used
    assert any(("kueue/kueue:" if stack == "kueue" else "volcanosh/vc-scheduler:") in t for t in used), used


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_exercise_passes_on_the_stack_on_kind(stack_kind_lab, exercise, tmp_path):
    out = run_exercise(resolve_exercise(exercise), stack_kind_lab, tmp_path)
    assert out.verdict == "passed", out.report()
    run = json.loads((Path(out.evidence) / "run.json").read_text())
    stack = stack_kind_lab.stack["name"]
    assert run["runtime"] == "kind" and "helm chart" in run["install"], run
    assert json.loads((Path(out.evidence) / "verdict.json").read_text())["stack"] == stack
    final = Path(out.evidence) / "final"
    if stack == "kueue":  # Kueue's own objects are the run's evidence, as on binary
        assert (final / "clusterqueues.yaml").is_file() and (final / "workloads.yaml").is_file()
    else:
        assert (final / "queues.yaml").is_file() and (final / "podgroups.yaml").is_file()
    if exercise == "gang":  # the stack's own expectation of the loose job is checked, not skipped
        checked = {(r.step, r.what) for r in out.results}
        assert any(s.startswith("the same job") and w.startswith("workload loose-job") for s, w in checked), checked


# the process to kill in the node, by how its container starts it (its image's entry point), and the
# Deployment its death must be named by
KILLED = {"kueue": ("/manager ", "kueue-controller-manager"), "volcano": ("/vc-scheduler ", "volcano-scheduler")}


def test_a_stack_container_killed_in_the_cluster_is_a_death_named_by_its_deployment(stack_kind_lab):
    """The cluster restarts the killed container itself; the runtime still reports it as a death of
    the stack's Deployment, with how it ended, as it does for KAI's (test_kind_lab)."""
    from kailab.runtimes.waits import wait_until

    start, deployment = KILLED[stack_kind_lab.stack["name"]]
    lab = labs.open(stack_kind_lab)  # one Lab for the run: what log_mark marks, dead_components reads
    lab.log_mark()
    assert lab.dead_components(set()) == []
    node = f"kailab-{stack_kind_lab.name}-control-plane"
    script = (f'for p in /proc/[0-9]*; do c=$(tr "\\0" " " < $p/cmdline 2>/dev/null); '
              f'case "$c" in "{start}"*) echo ${{p#/proc/}};; esac; done')
    [pid] = _docker("exec", node, "sh", "-c", script).split()
    _docker("exec", node, "kill", "-9", pid)
    dead = wait_until(f"{deployment}'s restart to show", lambda: lab.dead_components(set()) or None,
                      timeout=90, hint=f"kubectl get pods -A ({stack_kind_lab.kubeconfig})")
    assert [name for name, _ in dead] == [deployment], dead
    assert "exit code 137" in dead[0][1], dead[0][1]


def test_down_leaves_no_container_volume_or_file(stack_kind_lab):
    cluster = f"kailab-{stack_kind_lab.name}"
    with kind_docker():
        labs.down(stack_kind_lab.name, "kind")
    assert not lab_dir(stack_kind_lab.name).exists()
    containers = _docker("ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={cluster}", "--format", "{{.Names}}")
    assert containers.strip() == ""
    assert cluster not in _docker("volume", "ls", "--format", "{{json .}}")
