"""The pods of a fill's namespace as they are now (a watch of them), and what the run keeps of pods a
lab component deleted after they were bound."""

from __future__ import annotations

import re
import threading
from collections import Counter
from pathlib import Path

from .. import workloads
from ..kube import Kube, watch_pods
from .fragmentation import Node, Shape


class FleetState:
    """The pods of a run's namespace as they are now (a watch), per node: whole GPUs, shared devices,
    CPU and memory held. What each pod asks is its task's shape, registered before it is created."""

    def __init__(self, kube: Kube, namespace: str, nodes: dict[str, Node]):
        self.fleet = nodes  # as empty: nodes() starts from a copy
        self.shapes: dict[str, tuple[int, Shape]] = {}  # pod name -> (step, shape)
        self.pods: dict[str, dict] = {}
        self.in_step: dict[int, set[str]] = {}  # step -> its pods seen (polled 5 times a second: not a scan)
        self.gone_pods: dict[str, int] = {}  # pod name -> step: deleted after it was bound, not by us
        self.lost: Counter = Counter()  # step -> pods of it deleted by anyone but us, bound or not
        self.ours: set[str] = set()  # pods this run deleted as unplaced
        self.lock = threading.Lock()
        self.stopping, self.ready, self.errors = threading.Event(), threading.Event(), []
        self.thread = threading.Thread(target=watch_pods, args=(kube, namespace, self._see, self.stopping,
                                                                self.errors, self.ready), daemon=True)

    def expect(self, name: str, step: int, s: Shape) -> None:
        with self.lock:
            self.shapes[name] = (step, s)

    def _see(self, kind: str, pod: dict) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        name = meta["name"]
        with self.lock:
            if name not in self.shapes:
                return
            if kind == "DELETED" or meta.get("deletionTimestamp"):
                old = self.pods.pop(name, None)
                if old:
                    self.in_step[old["step"]].discard(name)
                if old and name not in self.ours:
                    self.lost[old["step"]] += 1
                    if old["node"]:
                        self.gone_pods[name] = old["step"]
                return
            step, s = self.shapes[name]
            self.in_step.setdefault(step, set()).add(name)
            self.pods[name] = {"step": step, "shape": s, "node": spec.get("nodeName"),
                               "group": (meta.get("labels") or {}).get(workloads.GPU_GROUP_LABEL),
                               "podgroup": (meta.get("annotations") or {}).get(workloads.PODGROUP_ANNOTATION)}

    def removed(self, step: int) -> int:
        """Pods of the step that somebody else deleted: they will never be seen again, so the step
        settles without them (KAI v0.17.0's binder deleted a bound shared-GPU pod it found without its
        reservation pod, in a race between two binds on one node)."""
        with self.lock:
            return self.lost[step]

    def step_pods(self, step: int) -> list[tuple[str, dict]]:
        with self.lock:
            return [(n, self.pods[n]) for n in self.in_step.get(step, ())]

    def nodes(self) -> dict[str, Node]:
        out = {n: v.empty() for n, v in self.fleet.items()}
        with self.lock:
            pods = list(self.pods.values())
        for p in pods:
            node, s = out.get(p["node"] or ""), p["shape"]
            if node is None:
                continue
            node.cpu_used += s.cpu_milli
            node.memory_used += s.memory_mib
            if 0 < s.milli < 1000:
                key = p["group"] or f"unlabelled-{id(p)}"  # the binder labels it as it binds
                node.shared[key] = node.shared.get(key, 0) + s.milli
            else:
                node.whole_used += s.milli // 1000
        return out


def log_lines(logs: Path, names: set[str]) -> str:
    """Every line of the lab's component logs that names one of `names`, under its log's name."""
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(names)) + r")\b")
    out = []
    for log in sorted(logs.glob("*.log")) if logs.is_dir() else []:
        with open(log, errors="replace") as f:
            hits = [line for line in f if pattern.search(line)]
        if hits:
            out.append(f"== {log.name}\n" + "".join(hits))
    return "\n".join(out) or f"(no log under {logs} names them)\n"
