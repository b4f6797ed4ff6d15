"""Proof that a Kueue lab schedules: a ResourceFlavor, a ClusterQueue with one GPU of quota, a
LocalQueue, and a suspended 1-GPU Job naming it — Kueue admits it (unsuspends it) and kube-scheduler
binds its pod to a fleet node. Everything is removed again; the lab is up once the pod was bound."""

from __future__ import annotations

from pathlib import Path

from ...runtimes.waits import wait_until
from .install import API

NAMESPACE = "kailab-kueue-probe"
QUEUE = "kailab-probe"


def objects() -> list[dict]:
    resources = [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "1Gi"},
                 {"name": "nvidia.com/gpu", "nominalQuota": "1"}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "kailab-probe-flavor"}},
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": QUEUE},
         "spec": {"namespaceSelector": {},
                  "resourceGroups": [{"coveredResources": [r["name"] for r in resources],
                                      "flavors": [{"name": "kailab-probe-flavor", "resources": resources}]}]}},
        {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NAMESPACE},
         "spec": {"clusterQueue": QUEUE}},
    ]


def job(probe_pod=None) -> dict:
    container = {"name": "main", "image": "kailab.io/fake-gpu-workload:never-pulled",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                               "limits": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": "1"}}}
    pod_spec = {"restartPolicy": "Never", "containers": [container], "terminationGracePeriodSeconds": 0}
    labels: dict = {}
    if probe_pod is not None:  # a stack with its own scheduler: the pod names it (and its queue)
        probe_pod(pod_spec, labels)
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "kailab-probe", "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {"suspend": True, "parallelism": 1, "completions": 1,
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


def run(kube, lab: Path, probe_pod=None, extra: list[dict] | None = None) -> None:
    """`extra`: objects the stack's own scheduler needs for the probe (its queues), removed after."""
    for obj in objects() + list(extra or []):
        wait_until(f"the API server to take {obj['kind']} {obj['metadata']['name']}", lambda o=obj: kube.apply(o) or True,
                   timeout="apiserver-ready", lab=lab, component="kueue")
    # Kueue's webhook defaults and validates Jobs: retried until it answers
    wait_until("Kueue's webhook to take the probe Job", lambda: kube.apply(job(probe_pod)) or True,
               timeout="scheduler-component-healthy", lab=lab, component="kueue",
               hint="the API server calls it on 127.0.0.1; see its log")

    def bound() -> bool:
        pods = kube.list("v1", "Pod", NAMESPACE, label_selector="job-name=kailab-probe")
        return any((p.get("spec") or {}).get("nodeName") for p in pods)

    wait_until("the probe Job to be admitted by Kueue and its pod bound", bound,
               timeout="probe-pod-bound", lab=lab, component="kueue",
               hint="kubectl get workloads,clusterqueues -A; see kueue's and kube-scheduler's logs")
    kube.delete("batch/v1", "Job", "kailab-probe", NAMESPACE)
    kube.delete_pods(NAMESPACE)
    # the probe has answered: its queues go, so a user's `kubectl get clusterqueues` sees none of kailab's
    removed = list(reversed(objects()[1:] + list(extra or [])))
    for obj in removed:
        kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))

    # gone, not just deleted: Kueue's finalizers keep a ClusterQueue and its ResourceFlavor until the
    # probe's Workload has gone, and `up` said they would not be there
    def gone() -> bool:
        return all(kube.get(o["apiVersion"], o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) is None
                   for o in removed)

    wait_until("the probe's queues to be gone (Kueue's finalizers)", gone, timeout="exercise-clean-up", lab=lab,
               component="kueue", hint="kubectl get clusterqueues,resourceflavors,workloads -A -o yaml; see kueue's log")
