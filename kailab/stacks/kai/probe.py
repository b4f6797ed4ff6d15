"""KAI's probe: before a lab with KAI counts as up, KAI must bind one real 1-GPU pod (its own probe
queues, then the pod); the queues and the pod go again once it was bound."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ...kube import Kube
from ...runtimes.labkit import PROBE_NAMESPACE
from ...runtimes.waits import wait_until
from ...workloads import probe_objects


def probe(kube: Kube, lab: Path | None = None, hint: str = "") -> None:
    """KAI must bind one real GPU pod before the lab counts as up."""
    await_probe(kube, submit_probe(kube, lab), lab, hint)


def submit_probe(kube: Kube, lab: Path | None = None) -> str:
    """Create the probe's namespace, queues and pod; returns the pod's name. The queues go in
    side by side with the pod: a new CRD's first creates can be held for seconds (see binary.py),
    and the pod needs no queue to exist before it does."""
    def create(obj: dict) -> None:
        # retried: the namespace's ServiceAccount (and on clusters, KAI's admission webhook) may
        # still be coming up. kube-controller-manager, which makes the ServiceAccount, is watched by
        # the control plane's own part (it may be started again there), the API server here
        wait_until(f"the API server to accept {obj['kind']} {obj['metadata']['name']}",
                   lambda: kube.apply(obj) or True, timeout=120, lab=lab,
                   component="kube-apiserver" if lab else None)

    objs = probe_objects(PROBE_NAMESPACE)
    queues = [o for o in objs if o["kind"] == "Queue"]
    with ThreadPoolExecutor(max_workers=len(queues)) as pool:
        pending = [pool.submit(create, q) for q in queues]
        for obj in objs:
            if obj["kind"] != "Queue":
                create(obj)
        for f in pending:
            f.result()
    return next(o for o in objs if o["kind"] == "Pod")["metadata"]["name"]


def await_probe(kube: Kube, pod: str, lab: Path | None = None, hint: str = "") -> None:
    wait_until("KAI to bind the probe pod",
               lambda: ((kube.get("v1", "Pod", pod, PROBE_NAMESPACE) or {}).get("spec") or {}).get("nodeName"),
               timeout="probe-pod-bound", lab=lab, component="scheduler" if lab else None,
               hint=hint or "check the scheduler and binder logs, and `kubectl get podgroups -A`")
    remove_probe(kube, pod)


def remove_probe(kube: Kube, pod: str) -> None:
    """The probe has answered: its pod and queues go, so a user's `kubectl get queues` (and tools
    that expect only their own queues) see none of kailab's."""
    kube.delete("v1", "Pod", pod, PROBE_NAMESPACE, grace=0)
    for q in reversed([o for o in probe_objects(PROBE_NAMESPACE) if o["kind"] == "Queue"]):  # leaf first
        kube.delete(q["apiVersion"], "Queue", q["metadata"]["name"])
