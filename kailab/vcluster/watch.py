"""No interference, watched on the host while the versions run: every pod outside the trial's
namespaces keeps its identity, its node and its restart count (a host workload is never restarted or
rescheduled), and each vCluster's pods land only on its own pool or the infra node (neither KAI
binds into the other's pool), and no scheduler of the host's own groups a vCluster's pods (a host
KAI's PodGroup in a trial's namespace: its name would sync back into the virtual pod). A poll every
`every` seconds; each violation is kept once, with when."""

from __future__ import annotations

import threading
import time

from kubernetes.dynamic.exceptions import ResourceNotFoundError

from ..kube import Kube
from ..stacks.kai.vocabulary import PODGROUP_API


class HostWatch(threading.Thread):
    def __init__(self, kubeconfig: str, trial_namespaces: dict[str, str], own_nodes: dict[str, set[str]],
                 every: float = 2.0) -> None:
        """`trial_namespaces`: namespace -> version; `own_nodes`: version -> the nodes its pods may use
        (computed from names: its pool's prefix and the infra node)."""
        super().__init__(daemon=True)
        self.kubeconfig, self.trial_namespaces, self.own_nodes, self.every = kubeconfig, trial_namespaces, own_nodes, every
        self.baseline: dict[str, dict] = {}
        self.violations: list[dict] = []
        self.seen: set[str] = set()
        self.polls = 0
        self.errors: list[str] = []
        self.bound: dict[str, set[str]] = {}  # version -> its pods seen bound on the host
        self._stopping = threading.Event()
        self.started_at = time.time()
        self._host_podgroups = True  # False once the host is known not to serve KAI's PodGroups

    def _pods(self, kube: Kube) -> list[dict]:
        return kube.list("v1", "Pod")

    def _host_pod(self, p: dict) -> dict:
        statuses = (p.get("status") or {}).get("containerStatuses") or []
        return {"uid": p["metadata"]["uid"], "node": (p.get("spec") or {}).get("nodeName"),
                "restarts": sum(c.get("restartCount", 0) for c in statuses)}

    def start_baseline(self) -> None:
        kube = Kube(self.kubeconfig)
        try:
            for p in self._pods(kube):
                if p["metadata"]["namespace"] not in self.trial_namespaces:
                    self.baseline[f"{p['metadata']['namespace']}/{p['metadata']['name']}"] = self._host_pod(p)
        finally:
            kube.close()

    def _note(self, key: str, what: str) -> None:
        if key not in self.seen:
            self.seen.add(key)
            self.violations.append({"at": round(time.time() - self.started_at, 1), "what": what})

    def check(self, kube: Kube) -> None:
        now = {}
        for p in self._pods(kube):
            ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
            version = self.trial_namespaces.get(ns)
            if version is None:
                now[f"{ns}/{name}"] = self._host_pod(p)
                continue
            node = (p.get("spec") or {}).get("nodeName")
            if node:
                self.bound.setdefault(version, set()).add(name)
                if not any(node == n or (n.endswith("-") and node.startswith(n)) for n in self.own_nodes[version]):
                    self._note(f"bind {ns}/{name}", f"pod {ns}/{name} of KAI {version}'s vCluster is bound to "
                                                    f"node {node}, outside its pool")
        if self._host_podgroups:
            self._check_host_podgroups(kube)
        for key, was in self.baseline.items():
            got = now.get(key)
            if got is None:
                self._note(f"gone {key}", f"host pod {key} is gone (it ran on {was['node']})")
            elif got["uid"] != was["uid"]:
                self._note(f"uid {key}", f"host pod {key} was replaced")
            elif got["node"] != was["node"]:
                self._note(f"node {key}", f"host pod {key} moved from {was['node']} to {got['node']}")
            elif got["restarts"] != was["restarts"]:
                self._note(f"restart {key}", f"host pod {key} restarted ({was['restarts']} -> {got['restarts']})")

    def _check_host_podgroups(self, kube: Kube) -> None:
        try:
            for ns, version in self.trial_namespaces.items():
                for pg in kube.list(PODGROUP_API, "PodGroup", ns):
                    name = pg["metadata"]["name"]
                    self._note(f"podgroup {ns}/{name}", f"the host's own KAI grouped pods of KAI {version}'s vCluster "
                                                        f"under its PodGroup {ns}/{name}")
        except ResourceNotFoundError:  # a host without KAI's CRDs has no PodGroup to look at
            self._host_podgroups = False

    def run(self) -> None:
        kube = Kube(self.kubeconfig)
        try:
            while not self._stopping.wait(self.every):
                try:
                    self.check(kube)
                    self.polls += 1
                except Exception as err:  # noqa: BLE001 - one failed poll is noted, the watch goes on
                    self.errors.append(f"{type(err).__name__}: {str(err)[:200]}")
        finally:
            kube.close()

    def stop(self) -> dict:
        self._stopping.set()
        self.join(timeout=30)
        return {"verdict": "passed" if not self.violations else "broken", "violations": self.violations,
                "host_pods_watched": len(self.baseline), "polls": self.polls, "every_seconds": self.every,
                "poll_errors": self.errors[:20],
                "version_pods_seen_bound": {v: len(pods) for v, pods in self.bound.items()}}
