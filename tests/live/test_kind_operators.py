"""Workload operators on a kind lab for real: `--operators kubeflow,jobset,lws,ray` beside KAI, each a
Deployment on kind's real node from an image built here (`kailab tools images --operators all`), its
webhooks served with its own certificate management. A PyTorchJob (1 master + 3 workers) in a KAI
Queue gets KAI's PodGroup of 4 and its pods bound; an LWS's pods carry the labels its pod webhook sets;
the training-operator's validating webhook refuses a PyTorchJob without its `pytorch` container."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from helpers import wait_for
import yaml

from kailab.lab import LabSpec, get_runtime
from kailab.testing.labs import LAB_PREFIX, kind_docker

pytestmark = [pytest.mark.kind, pytest.mark.lab, pytest.mark.xdist_group("kind")]

OPERATORS = ("kubeflow", "jobset", "lws", "ray")
DEPLOYMENTS = {"training-operator", "jobset-controller", "lws-controller", "ray-operator"}
QUEUE = "ops-queue"


def _pod(name: str) -> dict:
    return {"schedulerName": "kai-scheduler", "nodeSelector": {"kailab.io/fleet": "small"},
            "containers": [{"name": name, "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}


OBJECTS = [
    {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": QUEUE},
     "spec": {"parentQueue": "default-parent-queue",
              "resources": {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("cpu", "gpu", "memory")}}},
    {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
     "metadata": {"name": "ptj", "namespace": "default", "labels": {"kai.scheduler/queue": QUEUE}},
     "spec": {"pytorchReplicaSpecs": {
         role: {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": _pod("pytorch")}}
         for role, n in (("Master", 1), ("Worker", 3))}}},
    {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
     "metadata": {"name": "lws1", "namespace": "default"},
     "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
         "metadata": {"labels": {"kai.scheduler/queue": QUEUE}}, "spec": _pod("w")}}}},
]


@pytest.fixture(scope="module")
def ops_kind_lab():
    name = f"{LAB_PREFIX}{os.getpid()}-kind-ops"
    rt = get_runtime("kind")
    try:
        with kind_docker():
            yield rt.up(LabSpec(name=name, runtime="kind", fleet="small", metrics=False, images="local",
                                operators=OPERATORS))
    finally:
        with kind_docker():
            rt.down(name)


def _kubectl(lab, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["kubectl", "--kubeconfig", str(lab.kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _until(what: str, probe, timeout: float = 90):
    return wait_for(what, probe, timeout, every=2)


def test_status_names_each_operators_deployment_running_on_the_real_node(ops_kind_lab):
    with kind_docker():
        info = get_runtime("kind").status(ops_kind_lab)
    assert info["state"] == "up", info
    assert DEPLOYMENTS <= set(info["components"]), info["components"]
    assert all(info["components"][d]["state"] == "running" for d in DEPLOYMENTS), info["components"]
    pods = json.loads(_kubectl(ops_kind_lab, "get", "pods", "-A", "-l", "app.kubernetes.io/managed-by=kailab",
                               "-o", "json").stdout)["items"]
    nodes = {p["metadata"]["labels"].get("app.kubernetes.io/name"): p["spec"].get("nodeName") for p in pods}
    assert all(nodes.get(d, "").endswith("-control-plane") for d in DEPLOYMENTS), nodes


def test_a_pytorchjob_gets_kais_gang_and_its_pods_bind_and_an_lws_gets_its_webhooks_labels(ops_kind_lab):
    _kubectl(ops_kind_lab, "apply", "-f", "-", stdin=yaml.safe_dump_all(OBJECTS))

    def groups():
        items = json.loads(_kubectl(ops_kind_lab, "get", "podgroups", "-n", "default", "-o", "json").stdout)["items"]
        return {g["metadata"]["name"]: g for g in items if g["metadata"]["name"].startswith("pg-ptj-")}

    pg = next(iter(_until("KAI's PodGroup of the PyTorchJob", groups).values()))
    assert pg["spec"]["minMember"] == 4 and pg["spec"]["queue"] == QUEUE, pg["spec"]

    def bound(selector: str, n: int):
        items = json.loads(_kubectl(ops_kind_lab, "get", "pods", "-n", "default", "-l", selector, "-o", "json").stdout)["items"]
        return items if len(items) == n and all(p["spec"].get("nodeName") for p in items) else None

    pods = _until("the PyTorchJob's 4 pods bound", lambda: bound("training.kubeflow.org/job-name=ptj", 4))
    assert all(p["spec"]["nodeName"] != "" and not p["spec"]["nodeName"].endswith("-control-plane") for p in pods)
    lws = _until("the LWS's 2 pods bound", lambda: bound("leaderworkerset.sigs.k8s.io/name=lws1", 2))
    for p in lws:  # set by its pod webhook (the StatefulSets carry only the name)
        labels = p["metadata"]["labels"]
        assert {"leaderworkerset.sigs.k8s.io/group-index", "leaderworkerset.sigs.k8s.io/group-key"} <= set(labels), labels


def test_the_training_operators_webhook_refuses_a_pytorchjob_without_its_container(ops_kind_lab):
    bad = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bad", "namespace": "default"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
               "containers": [{"name": "not-pytorch", "image": "busybox"}]}}}}}}
    done = _kubectl(ops_kind_lab, "apply", "-f", "-", stdin=json.dumps(bad), check=False)
    assert done.returncode != 0 and "validator.pytorchjob.training-operator.kubeflow.org" in done.stderr, done.stderr
