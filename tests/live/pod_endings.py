"""How pods end on a lab's KWOK nodes, checked the same way on every runtime (tests/live/test_pod_endings.py
on a binary lab, tests/live/test_kind_lab.py on a kind lab): what a kubelet would do, read from the API's
watch. Each check places its pods itself (spec.nodeName), so no scheduler is involved, and runs in a
namespace of its own that it removes."""

from __future__ import annotations

import threading
import time
import uuid
from contextlib import contextmanager

from kailab import workloads
from kailab.kube import Kube
from kailab.runtimes.waits import wait_until

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


class PodHistory:
    """Every state the watch showed of each pod of a namespace, in order (a pod gone is marked)."""

    def __init__(self, kube: Kube, namespace: str):
        from kubernetes import watch

        self.kube, self.namespace = kube, namespace
        self.seen: dict[str, list[dict]] = {}
        self.gone: set[str] = set()
        self._watch = watch.Watch()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._follow()
        except Exception:  # noqa: BLE001 - the stream closed under stop(); a check then reports what it saw
            pass

    def _follow(self) -> None:
        for event in self._watch.stream(self.kube.core.list_namespaced_pod, self.namespace, timeout_seconds=300,
                                        _request_timeout=310):
            pod = self.kube.api_client.sanitize_for_serialization(event["object"])
            name = pod["metadata"]["name"]
            with self._cond:
                self.seen.setdefault(name, []).append(pod)
                if event["type"] == "DELETED":
                    self.gone.add(name)
                self._cond.notify_all()

    def stop(self) -> None:
        self._watch.stop()

    def wait(self, what: str, predicate, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}; seen: "
                                         + "; ".join(f"{n}: {[state_of(p) for p in ps]}" for n, ps in self.seen.items()))
                self._cond.wait(min(left, 1.0))

    def names(self, prefix: str) -> list[str]:
        with self._cond:
            return sorted(n for n in self.seen if n.startswith(prefix))

    def ended(self, name: str) -> dict | None:
        """The pod as it was when it first showed a terminal phase."""
        with self._cond:
            return next((p for p in self.seen.get(name, []) if phase(p) in ("Succeeded", "Failed")), None)


def phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def exit_code(pod: dict) -> int | None:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (c.get("state") or {}).get("terminated")
        if terminated:
            return terminated.get("exitCode")
    return None


def state_of(pod: dict) -> str:
    deleting = " deleting" if pod["metadata"].get("deletionTimestamp") else ""
    return f"{phase(pod)}{deleting}/{exit_code(pod)}"


@contextmanager
def namespace(kube: Kube):
    name = f"endings-{uuid.uuid4().hex[:6]}"
    kube.apply(workloads.namespace(name))
    history = PodHistory(kube, name)
    try:
        yield name, history
    finally:
        history.stop()
        kube.delete("v1", "Namespace", name)
        kube.delete_pods(name)


def _pod(ns: str, name: str, node: str, annotations: dict | None = None, grace: int | None = None) -> dict:
    spec: dict = {"nodeName": node, "restartPolicy": "Never",
                  "containers": [{"name": "main", "image": workloads.IMAGE,
                                  "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}}, "spec": spec}


def _job(ns: str, name: str, node: str, annotations: dict | None = None, completions: int = 1,
         policy: bool = False) -> dict:
    template = {k: v for k, v in _pod(ns, name, node, annotations).items() if k in ("metadata", "spec")}
    del template["metadata"]["name"], template["metadata"]["namespace"]
    spec: dict = {"parallelism": 1, "completions": completions, "backoffLimit": 0, "template": template}
    if policy:
        spec["podFailurePolicy"] = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _running(history: PodHistory, name: str) -> None:
    history.wait(f"{name} Running", lambda: any(phase(p) == "Running" for p in history.seen.get(name, [])))


def _job_condition(kube: Kube, ns: str, name: str, kind: str, timeout: float = 60) -> dict:
    def status():
        return (kube.get("batch/v1", "Job", name, ns) or {}).get("status") or {}

    wait_until(f"Job {name} {kind}", lambda: any(c.get("type") == kind and c.get("status") == "True"
                                                 for c in status().get("conditions") or []), timeout=timeout)
    return status()


def deleted_job_pod_fails_its_backoff_limit_0_job(kube: Kube, node: str) -> None:
    """A Job with backoffLimit 0 whose running pod is deleted: the pod keeps its deletionTimestamp
    while still Running, then ends Failed with exit 143 before it goes; the Job counts one failure
    and fails, making no replacement."""
    with namespace(kube) as (ns, history):
        kube.apply(_job(ns, "train", node))
        history.wait("the Job's pod", lambda: history.names("train-"))
        (pod,) = history.names("train-")
        _running(history, pod)
        kube.delete("v1", "Pod", pod, ns)
        status = _job_condition(kube, ns, "train", "Failed")
        assert status.get("failed") == 1 and not status.get("succeeded"), status
        assert any(c.get("reason") == "BackoffLimitExceeded" for c in status["conditions"]), status
        history.wait(f"{pod} gone", lambda: pod in history.gone)
        states = history.seen[pod]
        ended = history.ended(pod)
        assert ended is not None and phase(ended) == "Failed" and exit_code(ended) == 143, [state_of(p) for p in states]
        first_deleting = next(i for i, p in enumerate(states) if p["metadata"].get("deletionTimestamp"))
        assert phase(states[first_deleting]) == "Running", [state_of(p) for p in states]  # still running while it terminates
        assert states.index(ended) > first_deleting
        terminated = ended["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["reason"] == "Error" and terminated.get("finishedAt"), terminated
        time.sleep(2)  # the Job controller had time to make a replacement: it must not have
        assert history.names("train-") == [pod], history.names("train-")


def pod_exiting_0_on_termination_ends_succeeded(kube: Kube, node: str) -> None:
    """kailab.io/termination-exit-code: "0" (a process that exits cleanly on SIGTERM): Succeeded."""
    with namespace(kube) as (ns, history):
        kube.apply(_pod(ns, "clean", node, {workloads.TERMINATION_EXIT_CODE_ANNOTATION: "0"}))
        _running(history, "clean")
        kube.delete("v1", "Pod", "clean", ns)
        history.wait("clean gone", lambda: "clean" in history.gone)
        ended = history.ended("clean")
        assert ended is not None and phase(ended) == "Succeeded" and exit_code(ended) == 0, \
            [state_of(p) for p in history.seen["clean"]]
        assert ended["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


def conditions_set_before_deletion_stay_until_the_end(kube: Kube, node: str) -> None:
    """A DisruptionTarget condition written before the delete (as KAI's evictor or the eviction API
    writes it) is still on the pod when it ends Failed."""
    with namespace(kube) as (ns, history):
        kube.apply(_pod(ns, "evicted", node))
        _running(history, "evicted")
        # with its transition time, as KAI's evictor writes it (one without looks stale to the disruption
        # controller, which sets it False at once)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kube.core.patch_namespaced_pod_status("evicted", ns, {"status": {"conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": "kailab test", "lastTransitionTime": now}]}})
        kube.delete("v1", "Pod", "evicted", ns)
        history.wait("evicted gone", lambda: "evicted" in history.gone)
        ended = history.ended("evicted")
        assert ended is not None and phase(ended) == "Failed", [state_of(p) for p in history.seen["evicted"]]
        conditions = {c["type"]: c for c in ended["status"].get("conditions") or []}
        assert conditions.get("DisruptionTarget", {}).get("reason") == "PreemptionByScheduler", conditions


def run_time_pods_complete_their_job(kube: Kube, node: str) -> None:
    """Pods with a run time end Succeeded after it (exit 0), one after another: a Job of 2 completions
    and parallelism 1 is Complete with 2 succeeded. A run time with kailab.io/exit-code 3 ends Failed
    with 3."""
    with namespace(kube) as (ns, history):
        kube.apply(_job(ns, "short", node, {workloads.RUN_DURATION_ANNOTATION: "2s"}, completions=2))
        kube.apply(_pod(ns, "crash", node, {workloads.RUN_DURATION_ANNOTATION: "2s",
                                            workloads.EXIT_CODE_ANNOTATION: "3"}))
        status = _job_condition(kube, ns, "short", "Complete")
        assert status.get("succeeded") == 2 and not status.get("failed"), status
        pods = history.names("short-")
        assert len(pods) == 2 and all(phase(history.ended(p) or {}) == "Succeeded" and exit_code(history.ended(p)) == 0
                                      for p in pods), {p: [state_of(s) for s in history.seen[p]] for p in pods}
        history.wait("crash ended", lambda: history.ended("crash") is not None)
        crash = history.ended("crash")
        assert phase(crash) == "Failed" and exit_code(crash) == 3, [state_of(p) for p in history.seen["crash"]]
        assert not crash["metadata"].get("deletionTimestamp")  # it ended by itself, nobody deleted it
