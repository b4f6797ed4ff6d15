"""Proof that a Volcano lab schedules: a Queue with one GPU deserved, and a 1-GPU pod naming
Volcano's scheduler and that queue — Volcano's controller manager gives it a PodGroup, its
scheduler binds it to a fleet node. Pod, PodGroup and Queue are removed again; the lab is up once
the pod was bound."""

from __future__ import annotations

from pathlib import Path

from ...runtimes.waits import wait_until
from .install import API, pins

NAMESPACE = "kailab-volcano-probe"
QUEUE = "kailab-probe"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def objects() -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NAMESPACE}},
            {"apiVersion": API, "kind": "Queue", "metadata": {"name": QUEUE},
             "spec": {"reclaimable": True, "deserved": {"nvidia.com/gpu": "1"}}}]


def pod() -> dict:
    container = {"name": "main", "image": "kailab.io/fake-gpu-workload:never-pulled",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                               "limits": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": "1"}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "volcano-probe", "namespace": NAMESPACE, "annotations": {QUEUE_ANNOTATION: QUEUE}},
            "spec": {"schedulerName": pins()["scheduler_name"], "restartPolicy": "Never", "containers": [container],
                     "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False}}


def run(kube, lab: Path) -> None:
    # Volcano's queue webhook validates Queues: retried until it answers
    for obj in objects():
        wait_until(f"the API server to take {obj['kind']} {obj['metadata']['name']}", lambda o=obj: kube.apply(o) or True,
                   timeout="scheduler-component-healthy", lab=lab, component="vc-webhook-manager",
                   hint="the API server calls Volcano's webhooks on 127.0.0.1; see vc-webhook-manager's log")
    # a new Queue takes no PodGroup until Volcano's controller manager has opened it
    wait_until("Volcano's controller manager to open the probe's Queue",
               lambda: ((kube.get(API, "Queue", QUEUE) or {}).get("status") or {}).get("state") == "Open",
               timeout="scheduler-component-healthy", lab=lab, component="vc-controller-manager")
    kube.apply(pod())

    def bound() -> bool:
        p = kube.get("v1", "Pod", "volcano-probe", NAMESPACE)
        return bool(p and (p.get("spec") or {}).get("nodeName"))

    wait_until("the probe pod to get a PodGroup and be bound by Volcano", bound,
               timeout="probe-pod-bound", lab=lab, component="vc-scheduler",
               hint="kubectl get podgroups,queues -A; see vc-controller-manager's and vc-scheduler's logs")
    kube.delete_pods(NAMESPACE)
    for group in kube.list(API, "PodGroup", NAMESPACE):
        kube.delete(API, "PodGroup", group["metadata"]["name"], NAMESPACE)
    # the probe has answered: its queue goes, so a user's `kubectl get queues` sees only Volcano's own
    kube.delete(API, "Queue", QUEUE)
