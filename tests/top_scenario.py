"""One small scene for `kailab top`, the same on any lab: a root queue with two children, one of
them over its limit (KAI leaves a pod pending, saying OverLimit), and what `top --json` must show
of it — read from the API server's own objects, independently of kailab.top."""

from __future__ import annotations

import contextlib
import json
import time
import uuid

from kailab import workloads
from kailab.kube import Kube
from kailab.runtimes.waits import wait_until

from helpers import kailab_cli

PODGROUPS = ("scheduling.run.ai/v2alpha2", "PodGroup")


def _holders(kube: Kube) -> tuple[float, list[str]]:
    """The fleet's free GPUs, and the live pods holding GPUs (namespace/name: GPUs)."""
    total = sum(float(n["status"].get("allocatable", {}).get("nvidia.com/gpu", 0)) for n in kube.list("v1", "Node"))
    held = []
    for p in kube.list("v1", "Pod"):
        if p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded", "Failed"):
            gpus = sum(float((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu") or 0)
                       for c in p["spec"]["containers"])
            if gpus:
                held.append((f"{p['metadata']['namespace']}/{p['metadata']['name']}", gpus))
    return total - sum(g for _, g in held), [f"{n}: {g:g}" for n, g in held]


def _wait_free(kube: Kube, gpus: int, timeout: float = 120) -> None:
    """The lab shared with the tests before this one: their pods may still be ending."""
    deadline = time.monotonic() + timeout
    while (free := _holders(kube))[0] < gpus:
        if time.monotonic() > deadline:
            raise AssertionError(f"the lab has {free[0]:g} GPUs free after {timeout:g} s, the scene needs {gpus}: "
                                 f"held by {', '.join(free[1])}")
        time.sleep(1)


@contextlib.contextmanager
def scene(kube: Kube):
    """(namespace, queue prefix) with a's 4 one-GPU pods under limit 3 and b's 2; removed after."""
    tag = uuid.uuid4().hex[:5]
    ns, q = f"top-{tag}", f"top{tag}"
    _wait_free(kube, 6)
    try:
        kube.apply(workloads.namespace(ns))
        kube.apply(workloads.queue(f"{q}-root", {"quota": -1, "limit": -1}))
        kube.apply(workloads.queue(f"{q}-a", {"quota": 2, "limit": 3}, parent=f"{q}-root"))
        kube.apply(workloads.queue(f"{q}-b", {"quota": 2, "limit": -1}, parent=f"{q}-root"))
        wait_until("default ServiceAccount", lambda: kube.core.read_namespaced_service_account("default", ns),
                   timeout=60)
        for pod in workloads.pods("a", ns, f"{q}-a", 4) + workloads.pods("b", ns, f"{q}-b", 2):
            kube.apply(pod)

        def settled():
            pods = kube.list("v1", "Pod", ns)
            bound = [p for p in pods if p["spec"].get("nodeName")]
            said = [g for g in kube.list(*PODGROUPS, ns) if (g.get("status") or {}).get("schedulingConditions")]
            return len(pods) == 6 and len(bound) == 5 and said
        try:
            wait_until("5 of the scene's 6 pods bound and KAI's reason for the sixth", settled, timeout=90)
        except Exception as err:  # say what the lab held: the scene is sized for 6 free GPUs
            raise AssertionError(f"{err}; GPUs free and held: {_holders(kube)}") from None
        yield ns, q
    finally:
        kube.delete("v1", "Namespace", ns)
        for name in (f"{q}-a", f"{q}-b", f"{q}-root"):
            kube.delete("scheduling.run.ai/v2", "Queue", name)


def top_json(*where: str) -> dict:
    done = kailab_cli("top", "--json", *where)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def shown(snap: dict, q: str) -> dict:
    """What top shows of the scene's queues: per queue its figures and KAI's reason, by short name."""
    return {r["name"].removeprefix(q + "-"): {
        "gpus": r["gpus"], "running": r["running"], "pending": r["pending"], "quota": r["quota"],
        "limit": r["limit"], "depth": r["depth"],
        "reason": (r["oldest_pending"] or {}).get("reason")} for r in snap["queues"] if r["name"].startswith(q + "-")}


EXPECTED = {  # what KAI v0.17.0 does with the scene, on every runtime
    "root": {"gpus": 5.0, "running": 5, "pending": 1, "quota": -1.0, "limit": -1.0, "depth": 0, "reason": "OverLimit"},
    "a": {"gpus": 3.0, "running": 3, "pending": 1, "quota": 2.0, "limit": 3.0, "depth": 1, "reason": "OverLimit"},
    "b": {"gpus": 2.0, "running": 2, "pending": 0, "quota": 2.0, "limit": -1.0, "depth": 1, "reason": None},
}
