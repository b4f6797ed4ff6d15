"""A kind lab for real: KAI installed from its own chart (operator, admission webhook), KWOK and
fake-gpu-operator in the cluster, every image built here from source when no registry answers.

One lab for the module, in the order a user meets it: up, status, every exercise of its fleet
(each verdict compared with the same exercise on a binary lab of the same fleet and KAI version),
then down, after which nothing of it is left: containers, networks, files."""

from __future__ import annotations

import json
import subprocess

import pytest

from kailab.exercise.runner import run_exercise
from kailab.exercise.spec import load_exercise
from kailab.kube import Kube
from kailab.paths import exercises_dir, lab_dir
from kailab.runtimes import runtime_of
from kailab.testing.labs import kind_docker

pytestmark = [pytest.mark.kind, pytest.mark.kai, pytest.mark.lab]
FLEET = "small"


def _docker(*args: str) -> str:
    with kind_docker():
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120).stdout


@pytest.fixture(scope="module")
def kind_lab(kailab_labs):
    return kailab_labs.get_kind(FLEET)


def test_up_installs_kai_from_its_chart_with_operator_and_webhook(kind_lab):
    assert kind_lab.runtime == "kind" and kind_lab.fleet == FLEET and kind_lab.state == "up"
    with kind_docker():
        info = runtime_of(kind_lab).status(kind_lab)
    assert info["state"] == "up", info
    assert {"kai-operator", "admission", "kai-scheduler-default", "binder"} <= set(info["components"])
    assert all(c["state"] == "running" for c in info["components"].values()), info["components"]
    assert (info["nodes"], info["gpus"]) == (info["expected_nodes"], info["expected_gpus"])
    kube = Kube(kind_lab.kubeconfig)
    try:
        hooks = kube.list("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration")
        shards = kube.list("kai.scheduler/v1", "SchedulingShard")
    finally:
        kube.close()
    assert any("kai" in h["metadata"]["name"] for h in hooks), [h["metadata"]["name"] for h in hooks]
    assert shards, "KAI's operator objects (SchedulingShard) are there to configure the scheduler"


def _small_exercises() -> list:
    return sorted(p for p in exercises_dir().glob("*.yaml") if load_exercise(p).fleet == FLEET)


def test_every_exercise_passes_on_kind_with_the_binary_runtimes_verdicts(kind_lab, kailab_labs, tmp_path):
    binary_lab = kailab_labs.get(FLEET, with_kai=True, own=True)
    rows = []
    for path in _small_exercises():
        on_kind = run_exercise(path, kind_lab, tmp_path / "kind")
        on_binary = run_exercise(path, binary_lab, tmp_path / "binary")
        rows.append((path.stem, on_kind.verdict, on_binary.verdict, on_kind, on_binary))
    table = "\n".join(f"{name:28} kind={k:8} binary={b}" for name, k, b, _, _ in rows)
    print("\n" + table)
    differ = [(n, k, b) for n, k, b, _, _ in rows if k != b]
    assert not differ, f"runtimes disagree:\n{table}\n" + "\n".join(
        o.report() for _, k, b, o, ob in rows for o in (o, ob) if o.verdict != "passed")
    failed = [o.report() for _, k, _, o, _ in rows if k != "passed"]
    assert not failed, "\n".join(failed)
    assert len(rows) >= 12


def test_down_leaves_no_container_network_or_file(kind_lab, kailab_labs):
    cluster = f"kailab-{kind_lab.name}"
    with kind_docker():
        runtime_of(kind_lab).down(kind_lab.name)
    kailab_labs.labs.pop(("kind", FLEET, True), None)
    assert not lab_dir(kind_lab.name).exists()
    containers = _docker("ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={cluster}", "--format", "{{.Names}}")
    assert containers.strip() == ""
    volumes = _docker("volume", "ls", "--format", "{{json .}}")
    assert cluster not in volumes
    others = _docker("ps", "-a", "--filter", "label=io.x-k8s.kind.cluster", "--format", "{{.Names}}").strip()
    networks = json.loads(_docker("network", "ls", "--format", "{{json .Name}}").replace("\n", ",").rstrip(",").join("[]") or "[]")
    if not others:  # kind's shared network goes with the last kind cluster on the engine
        assert "kind" not in networks, networks
