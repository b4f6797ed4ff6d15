"""The kueue stack on a real binary lab: Kueue's controller manager and kube-scheduler as lab
components, what Kueue does with a ClusterQueue's quota (measured here, never assumed from its
docs), and a lab that leaves nothing behind. Kueue is built from its registered repository."""

from __future__ import annotations

import subprocess

import pytest

from helpers import bound_then_held, kailab_cli, stack_lab
from kailab.kube import Kube
from kailab import labs
from kailab.labs import LabRecord
from kailab.runtimes import processes

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("own_labs")]  # a lab of its own, one such test at a time

API = "kueue.x-k8s.io/v1beta2"
NS = "kueue-quota"


@pytest.fixture(scope="module")
def kueue_lab():
    with stack_lab("kueue") as rec:
        yield rec


def _job(name: str, gpus: int) -> dict:
    container = {"name": "main", "image": "kailab.io/never-pulled",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                               "limits": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": str(gpus)}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [container],
                                                            "terminationGracePeriodSeconds": 0}}}}


def test_the_lab_runs_kueue_and_kube_scheduler_as_named_components(kueue_lab):
    assert kueue_lab.stack["name"] == "kueue" and kueue_lab.stack["version"] == "v0.19.2"
    report = labs.open(kueue_lab).status()
    assert report["state"] == "up", report
    for name in ("kueue", "kube-scheduler"):
        assert report["components"][name]["state"] == "running"
    assert report["stack"] == {"name": "kueue", "version": "v0.19.2"}
    # and `kailab status` says so to people (it said "KAI none" before)
    said = kailab_cli("status", "--name", kueue_lab.name, timeout=None)
    assert said.returncode == 0 and "kueue v0.19.2, fleet" in said.stdout and "KAI" not in said.stdout, said.stdout
    assert not any(n in report["components"] for n in ("scheduler", "binder", "admission"))  # no KAI in it
    kube = Kube(kueue_lab.kubeconfig)
    try:  # the probe's queues went with it: a user's `kubectl get clusterqueues` sees none of kailab's
        assert not kube.list(API, "ClusterQueue") and not kube.list(API, "ResourceFlavor")
    finally:
        kube.close()


def test_kueue_admits_within_a_clusterqueues_gpu_quota_and_holds_the_rest(kueue_lab):
    """Quota 2 GPUs, three 1-GPU Jobs: two admitted and bound, the third held suspended (a window)."""
    kube = Kube(kueue_lab.kubeconfig)
    try:
        res = [{"name": "cpu", "nominalQuota": "10"}, {"name": "memory", "nominalQuota": "10Gi"},
               {"name": "nvidia.com/gpu", "nominalQuota": "2"}]
        for obj in [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                    {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "gpus"}},
                    {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "team"},
                     "spec": {"namespaceSelector": {}, "resourceGroups": [
                         {"coveredResources": [r["name"] for r in res], "flavors": [{"name": "gpus", "resources": res}]}]}},
                    {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "team", "namespace": NS},
                     "spec": {"clusterQueue": "team"}}]:
            kube.apply(obj)
        for i in range(3):
            kube.apply(_job(f"j{i}", 1))

        # two bound, the third held for a window, not just at one moment
        bound = bound_then_held(kube, NS, 2, name=lambda p: p["metadata"]["labels"]["job-name"])
        held = [j["metadata"]["name"] for j in kube.list("batch/v1", "Job", NS) if j["spec"].get("suspend")]
        assert len(held) == 1 and held[0] not in bound
        cq = kube.get(API, "ClusterQueue", "team")
        assert cq["status"]["admittedWorkloads"] == 2 and cq["status"]["pendingWorkloads"] == 1
    finally:
        kube.close()


def test_a_dead_kueue_is_named_and_down_leaves_nothing(kueue_lab):
    pid = processes.records(kueue_lab.dir)["kueue"].pid
    lab = labs.open(kueue_lab)
    lab.kill("kueue")
    dead = dict(lab.dead_components(ignore=set()))
    assert "kueue" in dead and "kube-scheduler" not in dead
    # the names a death of the stack's is reported under: its processes here (and its kind Deployment's)
    assert {"kueue", "kube-scheduler"} <= lab.scheduler_components()
    labs.down(kueue_lab.name)
    assert LabRecord.load(kueue_lab.name) is None
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
