"""Watches the API (pods, nodes, queues, podgroups, bind requests) into a ClusterState.

Every watch event updates the state under its condition variable, re-checks the invariants and
wakes the runner, so invariants see every transition, not samples, and waits need no polling.
"""

from __future__ import annotations

import logging
import threading
import time

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from ..kube import Kube
from .checks import Names, check_invariant
from .state import GPU, ClusterState, TimelineEntry

log = logging.getLogger(__name__)
WATCH_SECONDS = 60  # server-side watch timeout; the loop re-watches from the last version


class Observer:
    def __init__(self, kube: Kube, names: Names, invariants: list[str], gangs: dict[str, int] | None = None,
                 watched: dict[str, tuple[str, str, bool]] | None = None, queue_view=None,
                 owners: dict[str, str] | None = None):
        """`watched`: the stack's own objects by role (queue, group, decision: Stack.watched);
        `queue_view` reads a queue object as (name, {parent, quota, limit, status}); `owners`: the
        workload operators' kinds the lab serves (kind -> apiVersion), kept whole like Jobs."""
        self.kube, self.names, self.invariants = kube, names, list(invariants)
        self.watched, self.queue_view = dict(watched or {}), queue_view or (lambda obj: None)
        self.owners = dict(owners or {})
        self.state = ClusterState(gangs=dict(gangs or {}))
        self.violations: dict[str, tuple[float, list[str]]] = {}  # invariant -> first (t, details)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        for pc in self.kube.list("scheduling.k8s.io/v1", "PriorityClass"):
            self.state.priority_values[pc["metadata"]["name"]] = pc["value"]
        feeds = [("v1", "Pod", None, self._on_pod), ("v1", "Node", None, self._on_node),
                 ("resource.k8s.io/v1", "ResourceClaim", self.names.namespace, self._on_claim),
                 ("batch/v1", "Job", self.names.namespace, self._on_job)]
        feeds += [(api, kind, self.names.namespace, self._keeper(kind)) for kind, api in self.owners.items()]
        handlers = {"queue": self._on_queue, "group": self._on_podgroup, "decision": self._on_bindrequest}
        for role, (api_version, kind, namespaced) in self.watched.items():
            feeds.append((api_version, kind, self.names.namespace if namespaced else None, handlers[role]))
        ready = []
        for api_version, kind, ns, handler in feeds:
            try:
                res = self.kube.resource(api_version, kind)
            except ResourceNotFoundError:
                if kind in ("Pod", "Node"):
                    raise
                self.errors.append(f"{kind} ({api_version}) is not served: not observed")
                continue
            event = threading.Event()
            t = threading.Thread(target=self._watch_loop, args=(res, ns, handler, event),
                                 name=f"watch-{kind}", daemon=True)
            t.start()
            self._threads.append(t)
            ready.append(event)
        for e in ready:  # every feed has listed once: the state is complete
            e.wait(timeout=30)
        if self.state.gangs and "gang-never-partial" in self.invariants:
            tick = threading.Thread(target=self._tick, name="invariant-tick", daemon=True)
            tick.start()
            self._threads.append(tick)

    def _tick(self) -> None:
        """Re-check invariants that depend on how long a state lasts, between watch events."""
        while not self._stop.wait(0.5):
            with self.state.cond:
                self._after_change()

    def stop(self) -> None:
        self._stop.set()
        with self.state.cond:
            self.state.cond.notify_all()

    def _watch_loop(self, res, namespace, handler, ready: threading.Event) -> None:
        version = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listing = res.get(namespace=namespace) if namespace else res.get()
                    raw = listing.to_dict()
                    with self.state.cond:
                        for item in raw.get("items", []):
                            item.setdefault("apiVersion", res.group_version)
                            item.setdefault("kind", res.kind)
                            handler("ADDED", item)
                        self._after_change()
                    version = raw["metadata"]["resourceVersion"]
                    ready.set()
                kwargs = {"resource_version": version, "timeout": WATCH_SECONDS}
                if namespace:
                    kwargs["namespace"] = namespace
                for event in self.kube.dynamic.watch(res, **kwargs):
                    if self._stop.is_set():
                        return
                    obj = event["raw_object"]
                    if event["type"] == "ERROR":
                        version = None  # usually 410 Gone: list again
                        break
                    version = obj["metadata"]["resourceVersion"]
                    with self.state.cond:
                        handler(event["type"], obj)
                        self._after_change()
            except ApiException as err:
                if err.status == 410:
                    version = None
                    continue
                self.errors.append(f"watch {res.kind}: {err.status} {err.reason}")
                time.sleep(0.5)
            except Exception as err:  # noqa: BLE001 - a watch must survive connection resets
                if self._stop.is_set():
                    return
                log.debug("watch %s restarted: %s", res.kind, err)
                time.sleep(0.2)

    # ------------------------------------------------------------------ handlers (under cond)
    def _on_pod(self, kind: str, pod: dict) -> None:
        self.state.update_pod(pod, deleted=(kind == "DELETED"))
        if pod["metadata"].get("namespace") == self.names.namespace:  # not the whole lab's pods
            self.state.keep("Pod", pod, deleted=(kind == "DELETED"))

    def _on_node(self, kind: str, node: dict) -> None:
        name = node["metadata"]["name"]
        self.state.keep("Node", node, deleted=(kind == "DELETED"))
        if kind == "DELETED":
            self.state.node_gpus.pop(name, None)
        else:
            self.state.node_gpus[name] = int(((node.get("status") or {}).get("allocatable") or {}).get(GPU, 0))
            self.state.node_labels[name] = dict(node["metadata"].get("labels") or {})

    def _on_queue(self, kind: str, q: dict) -> None:
        """A queue, whatever the stack's kind: kept as "Queue" (expectations on `object: Queue`)."""
        view = self.queue_view(q)
        if view is None:
            return
        name, fields = view
        self.state.keep("Queue", q, deleted=(kind == "DELETED"))
        if kind == "DELETED":
            self.state.queues.pop(name, None)
        else:
            self.state.queues[name] = fields

    def _on_podgroup(self, kind: str, pg: dict) -> None:
        """The stack's pod group (what `podgroupOf` and `object: PodGroup` read)."""
        key = (pg["metadata"]["namespace"], pg["metadata"]["name"])
        self.state.keep("PodGroup", pg, deleted=(kind == "DELETED"))
        if kind == "DELETED":
            self.state.podgroups.pop(key, None)
        else:
            self.state.podgroups[key] = pg

    def _on_bindrequest(self, kind: str, br: dict) -> None:
        """The stack's record of a decision before the bind (KAI's BindRequest)."""
        spec = br.get("spec") or {}
        key = (br["metadata"]["namespace"], spec.get("podName", ""))
        self.state.keep("BindRequest", br, deleted=(kind == "DELETED"))
        if kind == "DELETED":
            self.state.bind_requests.discard(key)
        elif key not in self.state.bind_requests:
            self.state.bind_requests.add(key)
            # the scheduler's decision for this pod; the bind that follows is the binder's
            pod = self.state.pods.get(key)
            self.state.timeline.append(TimelineEntry(
                self.state.now(), "decided", key[1], pod.workload if pod else "", pod.queue if pod else "",
                spec.get("selectedNode"), "BindRequest created"))

    def _on_claim(self, kind: str, claim: dict) -> None:
        self.state.keep("ResourceClaim", claim, deleted=(kind == "DELETED"))

    def _on_job(self, kind: str, job: dict) -> None:
        self.state.keep("Job", job, deleted=(kind == "DELETED"))

    def _keeper(self, object_kind: str):
        """A handler keeping an operator's object (a PyTorchJob, a RayCluster) whole, as Jobs are kept."""
        return lambda kind, obj: self.state.keep(object_kind, obj, deleted=(kind == "DELETED"))

    def _after_change(self) -> None:
        self.state.version += 1
        self.state.track_gangs(self.names.namespace)
        for inv in self.invariants:
            if inv in self.violations:
                continue
            broken = check_invariant(inv, self.state, self.names)
            if broken:
                t = self.state.now()
                self.violations[inv] = (t, broken)
                self.state.timeline.append(TimelineEntry(t, "violation", "", detail=f"{inv}: {broken[0]}"))
        self.state.cond.notify_all()

    def note(self, detail: str, what: str = "fault", node: str | None = None) -> None:
        """Put something kailab did (a fault it injected, a node it changed) on the timeline."""
        with self.state.cond:
            self.state.timeline.append(TimelineEntry(self.state.now(), what, "", node=node, detail=detail))
            self.state.cond.notify_all()

    # ------------------------------------------------------------------ waiting
    def wait_for(self, predicate, timeout: float, stretch: float = 1.0, moving: float = 0.0) -> bool:
        """Wait until predicate(state) is true (re-evaluated on every change) or time runs out.

        With stretch > 1, time runs out at `timeout` only for a lab at rest: while some pod changed
        (created, bound, running, evicted, ...) less than `moving` seconds ago, the wait goes on, up to
        timeout x stretch. A lab still binding is slow, not wrong; one that stopped short is not waited for."""
        start = time.time()
        deadline, ceiling = start + timeout, start + timeout * max(1.0, stretch)
        with self.state.cond:
            while True:
                if predicate(self.state):
                    return True
                now = time.time()
                if now >= deadline and now < ceiling and self._pods_changed_within(moving):
                    deadline = min(ceiling, now + 1.0)
                left = deadline - now
                if left <= 0 or self._stop.is_set():
                    return False
                self.state.cond.wait(timeout=min(left, 1.0))

    def _pods_changed_within(self, seconds: float) -> bool:
        """Whether a pod of the run changed less than `seconds` ago (the caller holds state.cond)."""
        last = next((e.t for e in reversed(self.state.timeline) if e.pod), None)
        return last is not None and self.state.now() - last < seconds

    def wait_settled(self, quiet: float, timeout: float) -> bool:
        """Wait until no pod changes placement or phase for `quiet` seconds."""
        deadline = time.time() + timeout
        with self.state.cond:
            last_len = len(self.state.timeline)
            quiet_since = time.time()
            while time.time() < deadline:
                if len(self.state.timeline) != last_len:
                    last_len, quiet_since = len(self.state.timeline), time.time()
                if time.time() - quiet_since >= quiet:
                    return True
                self.state.cond.wait(timeout=min(0.25, max(0.01, deadline - time.time())))
        return False
