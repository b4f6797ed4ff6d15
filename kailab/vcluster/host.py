"""The host of a version trial: a kind lab the trial makes (`--runtime kind`: KWOK, fake-gpu-operator,
no scheduler of kailab's), or a cluster someone already runs (`--runtime existing --kubeconfig F`).

What the trial needs of it, checked before any vCluster is made: KWOK (its Stage kinds and a
kwok-controller), a Ready real node for the vClusters' own pods (the infra node: the first Ready node
KWOK does not manage, untainted), its address (the machine reaches the vClusters' API servers
there). Where its nodes are kind's (providerID kind://), images go in with `kind load`.

Three KWOK Stages live on the host for the trial's length, for the pods vCluster syncs there: KAI's
GPU reservation pods reach the host under vCluster's names (in the vCluster's namespace), where
kailab's own reservation Stage (kwok-stages.yaml, keyed on KAI's namespace) cannot see them, so a copy
keys on the namespace vCluster records on each synced pod (the annotation it writes syncs back to the
virtual pod); and a deleted pod ends Failed before it goes, as on a kubelet (TERMINATED says why).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from importlib import resources

import yaml

from ..errors import LabError
from ..kube import FIELD_MANAGER, Kube

KWOK_STAGE_CRD = "stages.kwok.x-k8s.io"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
RESERVATION_STAGE = "kailab-gpu-reservation"
TRIAL_STAGES = "kailab-vcluster-"  # the names of the Stages a trial adds
VCLUSTER_NAMESPACE_ANNOTATION = "vcluster.loft.sh/namespace"  # on every pod vCluster syncs to its host


@dataclass(frozen=True)
class HostFacts:
    infra_node: str
    infra_ip: str
    kind_cluster: str  # "" when its nodes are not kind's


def facts(kube: Kube, server: str) -> HostFacts:
    """What the trial needs of the host, or one line naming what it lacks."""
    if not kube.readyz():
        raise LabError(f"the host's API server at {server} does not answer /readyz: is the cluster running?")
    if kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", KWOK_STAGE_CRD) is None:
        raise LabError(f"the host at {server} has no KWOK (CRD {KWOK_STAGE_CRD} is missing): each version's "
                       "GPU nodes are KWOK nodes; install KWOK there, or use --runtime kind")
    real = []
    for n in kube.list("v1", "Node"):
        meta = n["metadata"]
        if (meta.get("annotations") or {}).get(KWOK_ANNOTATION) == "fake":
            continue
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or [])
        blocked = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in (n.get("spec") or {}).get("taints") or [])
        if ready and not blocked and not (n.get("spec") or {}).get("unschedulable"):
            real.append(n)
    if not real:
        raise LabError(f"the host at {server} has no Ready, untainted real node: each vCluster's control plane "
                       "and KAI's own pods need one (KWOK nodes never run containers)")
    node = sorted(real, key=lambda n: n["metadata"]["name"])[0]
    ip = next((a["address"] for a in (node.get("status") or {}).get("addresses") or [] if a.get("type") == "InternalIP"), "")
    m = re.match(r"^kind://[^/]+/([^/]+)/", (node.get("spec") or {}).get("providerID") or "")
    return HostFacts(infra_node=node["metadata"]["name"], infra_ip=ip, kind_cluster=m.group(1) if m else "")


def _stage(name: str, exprs: list[dict], nxt: dict, delay_ms: int = 0) -> dict:
    synced = {"key": f'.metadata.annotations["{VCLUSTER_NAMESPACE_ANNOTATION}"]', "operator": "Exists"}
    spec = {"resourceRef": {"apiGroup": "v1", "kind": "Pod"}, "selector": {"matchExpressions": [synced, *exprs]},
            "weight": 10, "next": nxt}  # weighted stages win over kailab's unweighted ones (KWOK's rule)
    if delay_ms:
        spec["delay"] = {"durationMilliseconds": delay_ms}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}}, "spec": spec}


# A deleted pod on a kubelet ends Failed before it goes; KWOK's own delete stage removes it at once. On
# the host that loses the end: vCluster copies a deleted host pod's status to its virtual pod, so a
# Job's pod (finalizer batch.kubernetes.io/job-tracking) stayed Terminating in the vCluster for good,
# its Job controller waiting for a terminal phase that never came (measured: gang's 20 pods held 20
# GPUs). So vCluster's pods on the host end Failed first and go a second later.
TERMINATED = """{{ $now := Now }}
phase: Failed
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated: {exitCode: 137, reason: Error, finishedAt: {{ $now | Quote }}}
{{ end }}
"""


def trial_stages() -> list[dict]:
    """The KWOK Stages a trial adds to its host for its length (see the module's and TERMINATED's why)."""
    stages = yaml.safe_load_all(resources.files("kailab").joinpath("data/kwok-stages.yaml").read_text())
    reservation = copy.deepcopy(next(s for s in stages if s and s["metadata"]["name"] == RESERVATION_STAGE))
    exprs = [e for e in reservation["spec"]["selector"]["matchExpressions"] if e["key"] != ".metadata.namespace"]
    exprs.insert(0, {"key": f'.metadata.annotations["{VCLUSTER_NAMESPACE_ANNOTATION}"]', "operator": "In",
                     "values": ["kai-resource-reservation"]})
    reservation["metadata"] = {"name": f"{TRIAL_STAGES}gpu-reservation", "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}}
    reservation["spec"]["selector"]["matchExpressions"] = exprs
    deleted = {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
    return [
        reservation,
        _stage(f"{TRIAL_STAGES}pod-ends", [deleted, {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]}],
               {"statusTemplate": TERMINATED}),
        _stage(f"{TRIAL_STAGES}pod-goes", [deleted, {"key": ".status.phase", "operator": "In", "values": ["Succeeded", "Failed"]}],
               {"finalizers": {"empty": True}, "delete": True}, delay_ms=1000),
    ]
