"""The lab made to look the way KAI's e2e expects a cluster to look, and put back afterwards.

What KAI's e2e reads from a cluster (test/e2e/modules, KAI v0.17.0):
- every spec's clean-up waits for exactly one Running pod labelled `app=binder` and one labelled
  `app=kai-scheduler-default` in namespace kai-scheduler (KAI's own pods under its chart). A binary
  lab runs KAI as local processes, so there are no such pods: kailab creates a **stand-in** pod for
  each that the cluster lacks — a plain pod bound to a CPU node, named `<app>-stand-in` and labelled
  `kailab.io/e2e-stand-in`, which KWOK reports Running. It does nothing; KAI's real process is the
  lab's. Where the cluster has KAI's pods (kind, existing) no stand-in is made.
- its preflight refuses any Queue not labelled `app=engine-e2e` other than KAI's default queues,
  and its clean-up deletes every Queue: a lab with the user's queues is refused here, in one line.
- the ray.io suite tells KubeRay is installed by a Deployment `kuberay-operator` in namespace `ray`
  (its chart's, as KAI's CI installs it), besides the CRDs. A lab runs KubeRay as a local process, so
  on a lab that runs it kailab makes a **stand-in Deployment** of that name with 0 replicas (no pod,
  label `kailab.io/e2e-stand-in`), and the namespace if missing, for the length of the run. The
  other operators' suites look only for their CRDs.
- the numa suite reads NUMA zones from NodeResourceTopology objects, one per node, which KAI's CI gets
  from fake-gpu-operator 0.2's status-exporter; no lab publishes them, so for its run kailab applies the
  CRD (from the module KAI's go.mod pins) and publishes one per GPU node in the layout of KAI's nightly
  `numa-full` kind cluster (hack/fake-gpu-operator-values.yaml): two zones, half the node's GPUs, 1 CPU
  and 2Gi each, two nodes `single-numa-node`, one `restricted`, one `best-effort`; nodes past the
  fourth `restricted` (KAI's default layout), CPU nodes none.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

import yaml

from ..errors import KailabError
from ..fleet import DRA_PLUGIN_LABEL  # DRA GPUs: not a node "without GPUs" either
from ..stacks.kai.install import KAI_NAMESPACE
from ..images.gomod import module_dir
from ..kube import Kube
from ..runtimes.waits import wait_until

QUEUE_API = "scheduling.run.ai/v2"
ALLOWED_QUEUES = {"default-queue", "default-parent-queue"}  # KAI's e2e preflight allows these
SYSTEM_APPS = ("binder", "kai-scheduler-default")  # what KAI's e2e clean-up waits for
STAND_IN_LABEL = "kailab.io/e2e-stand-in"
READY_TIMEOUT_S = 60.0
# operator -> (namespace, Deployment) a suite Gets to tell the operator is installed (ray.io:
# SkipIfRayNotInstalled, KAI v0.17.0)
OPERATOR_DEPLOYMENTS = {"ray": ("ray", "kuberay-operator")}


def preflight(kube: Kube, lab: str) -> None:
    queues = [q["metadata"]["name"] for q in kube.list(QUEUE_API, "Queue")
              if q["metadata"]["name"] not in ALLOWED_QUEUES
              and (q["metadata"].get("labels") or {}).get("app") != "engine-e2e"]
    if queues:
        raise KailabError(f"lab {lab} has queues {', '.join(sorted(queues))}: KAI's e2e preflight refuses them "
                          "and its clean-up deletes every queue; run `kailab e2e` without --name (it brings up "
                          "a lab of its own) or use a fresh lab")


def _gpus(node) -> int:
    """A node's allocatable device-plugin GPUs."""
    return int((node.status.allocatable or {}).get("nvidia.com/gpu", "0"))


def _stand_in_node(kube: Kube) -> str:
    """An untainted, schedulable node without GPUs (a pod on it takes nothing a spec counts on)."""
    nodes = kube.core.list_node().items
    fit = [n for n in nodes if not n.spec.unschedulable and not n.spec.taints]
    fit.sort(key=lambda n: (_gpus(n), DRA_PLUGIN_LABEL in (n.metadata.labels or {}), n.metadata.name))
    if not fit:
        raise KailabError("no untainted node to hold the stand-in pods KAI's e2e waits for")
    return fit[0].metadata.name


def _stand_in_deployment(namespace: str, name: str) -> dict:
    labels = {"app": name, STAND_IN_LABEL: "true"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"replicas": 0, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)},
                                  "spec": {"containers": [{"name": "stand-in", "image": "kailab/stand-in"}]}}}}


@contextmanager
def stand_ins(kube: Kube, operators: dict | tuple | list = ()):
    """Stand-in pods for the KAI system pods the cluster lacks, and stand-in Deployments for the
    operators the lab runs (`operators`: its record's) where a suite looks for one, for the length of
    the block. Yields what it made: {"pods": [name, ...], "deployments": ["namespace/name", ...]}."""
    made: dict[str, list[str]] = {"pods": [], "deployments": []}
    undo: list[tuple[str, str, str, str | None]] = []  # (apiVersion, kind, name, namespace), made here
    node = None
    try:
        for op in operators:
            if op not in OPERATOR_DEPLOYMENTS:
                continue
            ns, name = OPERATOR_DEPLOYMENTS[op]
            if kube.get("apps/v1", "Deployment", name, ns):
                continue  # the operator's own (a cluster that installed it from its chart)
            if not kube.get("v1", "Namespace", ns):
                kube.apply({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": ns, "labels": {STAND_IN_LABEL: "true"}}})
                undo.append(("v1", "Namespace", ns, None))
            kube.apply(_stand_in_deployment(ns, name))
            undo.append(("apps/v1", "Deployment", name, ns))
            made["deployments"].append(f"{ns}/{name}")
        for app in SYSTEM_APPS:
            running = [p for p in kube.core.list_namespaced_pod(KAI_NAMESPACE, label_selector=f"app={app}").items
                       if not (p.metadata.labels or {}).get(STAND_IN_LABEL)]
            if running:
                continue
            node = node or _stand_in_node(kube)
            name = f"{app}-stand-in"
            kube.apply({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "namespace": KAI_NAMESPACE,
                                     "labels": {"app": app, STAND_IN_LABEL: "true"}},
                        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                                 "containers": [{"name": "stand-in", "image": "kailab/stand-in"}]}})
            undo.append(("v1", "Pod", name, KAI_NAMESPACE))
            made["pods"].append(name)
        if made["pods"]:
            wait_until("the stand-in pods Running", lambda: all(
                p.status.phase == "Running" for p in kube.core.list_namespaced_pod(
                    KAI_NAMESPACE, label_selector=STAND_IN_LABEL).items), timeout=READY_TIMEOUT_S,
                hint="KWOK runs a lab's pods: is it alive? `kailab status`")
        yield made
    finally:
        for api, kind, name, ns in reversed(undo):
            kube.delete(api, kind, name, ns, grace=0 if kind == "Pod" else None)


NRT_MODULE = "github.com/k8stopologyawareschedwg/noderesourcetopology-api"
NRT_API = "topology.node.k8s.io/v1alpha2"
NRT_CRD = "noderesourcetopologies.topology.node.k8s.io"
NUMA_POLICIES = ("single-numa-node", "single-numa-node", "restricted", "best-effort")  # KAI's numa-full layout
ZONE_CPU, ZONE_MEMORY = "1", "2Gi"


def nrt_version(tree: Path) -> str:
    """The NodeResourceTopology API module KAI's go.mod pins."""
    m = re.search(rf"^\s*{re.escape(NRT_MODULE)} (v\S+)", (tree / "go.mod").read_text(), re.M)
    if not m:
        raise KailabError(f"{tree}/go.mod pins no {NRT_MODULE}: this KAI version has no numa suite to feed")
    return m.group(1)


def topology_objects(nodes: list[tuple[str, int]]) -> list[dict]:
    """One NodeResourceTopology per GPU node (name, GPUs), in KAI's numa-full layout."""
    out = []
    for i, (name, gpus) in enumerate(sorted(nodes)):
        policy = NUMA_POLICIES[i] if i < len(NUMA_POLICIES) else "restricted"
        half = gpus // 2
        zones = [{"name": f"node-{z}", "type": "Node",
                  "costs": [{"name": f"node-{o}", "value": 10 if o == z else 21} for o in (0, 1)],
                  "resources": [{"name": r, "capacity": q, "allocatable": q, "available": q}
                                for r, q in (("nvidia.com/gpu", str(half)), ("cpu", ZONE_CPU), ("memory", ZONE_MEMORY))]}
                 for z in (0, 1)]
        out.append({"apiVersion": NRT_API, "kind": "NodeResourceTopology",
                    "metadata": {"name": name, "labels": {STAND_IN_LABEL: "true"}},
                    "topologyPolicies": [policy], "attributes": [{"name": "topologyManagerPolicy", "value": policy}],
                    "zones": zones})
    return out


@contextmanager
def node_topology(kube: Kube, tree: Path, needed: bool):
    """The NodeResourceTopology CRD and one object per GPU node, for the length of the block (when
    `needed`). Yields the names of the objects made."""
    if not needed:
        yield []
        return
    made_crd = False
    made: list[str] = []
    try:
        if not kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", NRT_CRD):
            crd = yaml.safe_load((module_dir(NRT_MODULE, nrt_version(tree)) / "manifests" / "crd.yaml").read_text())
            kube.apply(crd)
            made_crd = True
            wait_until("the NodeResourceTopology CRD served", lambda: _crd_established(kube), timeout=READY_TIMEOUT_S)
            kube.dynamic.resources.invalidate_cache()  # the client's discovery knew no such kind
        gpu_nodes = [(n.metadata.name, _gpus(n)) for n in kube.core.list_node().items
                     if _gpus(n) >= 2 and DRA_PLUGIN_LABEL not in (n.metadata.labels or {})]
        for obj in topology_objects(gpu_nodes):
            if kube.get(NRT_API, "NodeResourceTopology", obj["metadata"]["name"]):
                continue  # the cluster's own (a real exporter's): left as it is
            kube.apply(obj)
            made.append(obj["metadata"]["name"])
        yield made
    finally:
        for name in made:
            kube.delete(NRT_API, "NodeResourceTopology", name)
        if made_crd:
            kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", NRT_CRD)


def _crd_established(kube: Kube) -> bool:
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", NRT_CRD) or {}
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or [])
