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

from kailab import labs
from kailab.labs import LabSpec
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
    try:
        with kind_docker():
            yield labs.up(LabSpec(name=name, runtime="kind", fleet="small", metrics=False, images="local",
                                operators=OPERATORS)).record
    finally:
        with kind_docker():
            labs.down(name, "kind")


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
        info = labs.open(ops_kind_lab).status()
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


def test_a_pytorchjob_of_4_binds_nothing_on_3_free_gpus_then_all_4_at_once(ops_kind_lab):
    """The binary lab's hold-then-bind (tests/live/test_operators_live.py), on KAI from its chart: blockers
    leave 3 GPUs free; a PyTorchJob of 1 master + 3 workers binds none of its pods for 10 s; one blocker
    goes and all 4 bind, never resting partly bound."""
    import time

    from kailab.exercise.state import GANG_COMMIT_GRACE
    from kailab.kube import Kube

    kube = Kube(ops_kind_lab.kubeconfig)
    _kubectl(ops_kind_lab, "apply", "-f", "-", stdin=yaml.safe_dump(OBJECTS[0]))  # the queue (idempotent)
    ns = "hold"
    _kubectl(ops_kind_lab, "create", "namespace", ns)

    def live_pods(selector: str = "") -> list[dict]:
        return [p for p in kube.list("v1", "Pod", ns, label_selector=selector or None)
                if p["status"].get("phase") not in ("Succeeded", "Failed")]

    def free_gpus() -> int:
        nodes = [n for n in kube.list("v1", "Node") if (n["metadata"].get("labels") or {}).get("kailab.io/fleet")]
        total = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes)
        used = sum(int(c["resources"].get("limits", {}).get("nvidia.com/gpu", 0))
                   for p in kube.list("v1", "Pod") if p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded", "Failed")
                   for c in p["spec"]["containers"])
        return total - used

    held = free_gpus() - 3
    blockers = [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"blocker-{i}", "namespace": ns, "labels": {"kai.scheduler/queue": QUEUE, "role": "blocker"}},
                 "spec": _pod("main")} for i in range(held)]
    kube.create_many(blockers)
    _until(f"{held} blockers bound", lambda: sum(1 for p in live_pods("role=blocker") if p["spec"].get("nodeName")) == held,
           timeout=180)
    assert free_gpus() == 3
    job = {**OBJECTS[1], "metadata": {"name": "held", "namespace": ns, "labels": {"kai.scheduler/queue": QUEUE}}}
    _kubectl(ops_kind_lab, "apply", "-f", "-", stdin=yaml.safe_dump(job))
    train = "training.kubeflow.org/job-name=held"
    _until("the PyTorchJob's 4 pods, each in KAI's PodGroup",
           lambda: len(pods := live_pods(train)) == 4 and all((p["metadata"].get("annotations") or {}).get("pod-group-name") for p in pods))
    until = time.monotonic() + 10
    while time.monotonic() < until:
        assert not any(p["spec"].get("nodeName") for p in live_pods(train))
        time.sleep(0.5)
    kube.delete("v1", "Pod", "blocker-0", ns)
    seen: list[tuple[float, int]] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (not seen or seen[-1][1] < 4):
        now = sum(1 for p in live_pods(train) if p["spec"].get("nodeName"))
        if not seen or now != seen[-1][1]:
            seen.append((time.monotonic(), now))
        time.sleep(0.2)
    assert seen[-1][1] == 4, seen
    rests = [(b - a, n) for (a, n), (b, _) in zip(seen, seen[1:]) if 0 < n < 4]
    assert all(s < GANG_COMMIT_GRACE for s, _ in rests), rests  # committed a pod at a time, never resting partly
    _kubectl(ops_kind_lab, "delete", "namespace", ns, "--wait=false")
