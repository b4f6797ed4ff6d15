"""KAI in a cluster kailab adopts (the existing runtime): is it there, and which version."""

from __future__ import annotations

import re

from ... import versions
from ...kube import Kube
from ...paths import state_dir
from ...runtimes import processes
from ...runtimes.base import LabRecord
from .install import KAI_NAMESPACE

REQUIRED_CRDS = ("queues.scheduling.run.ai", "podgroups.scheduling.run.ai")


def _is_scheduler_name(name: str) -> bool:
    """KAI's scheduler as its chart (kai-scheduler-<shard>) or a plain manifest (scheduler) names it."""
    return name.startswith("kai-scheduler") or name == "scheduler" or name.startswith("scheduler-")


def adopt_problems(kube: Kube, server: str) -> list[str]:
    """What the cluster lacks for KAI, one phrase each (empty when nothing)."""
    missing = [f"CRD {crd} is missing (install KAI)" for crd in REQUIRED_CRDS
               if kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd) is None]
    if not scheduler_present(kube, server):
        missing.append(f"no KAI scheduler: no Deployment named kai-scheduler*/scheduler in namespace "
                       f"{KAI_NAMESPACE}, no such pod, and no kailab binary lab serving this API server")
    return missing


def scheduler_present(kube: Kube, server: str) -> bool:
    """A KAI scheduler runs as a Deployment (helm), as pods, or as a kailab lab's process."""
    if any(_is_scheduler_name(d["metadata"]["name"])
           for d in kube.list("apps/v1", "Deployment", KAI_NAMESPACE)):
        return True
    if any(_is_scheduler_name(p.metadata.name) for p in kube.core.list_pod_for_all_namespaces().items):
        return True
    return _lab_scheduler_running(server)


def adopted_version(kube: Kube) -> str | None:
    """KAI's version from its scheduler image tag, when the image says it (vX.Y.Z)."""
    for dep in kube.list("apps/v1", "Deployment", KAI_NAMESPACE):
        if not _is_scheduler_name(dep["metadata"]["name"]):
            continue
        for c in dep["spec"]["template"]["spec"].get("containers", []):
            m = re.search(r":(v?\d+\.\d+\.\d+)$", c.get("image", ""))
            if m:
                return versions.normalise(m.group(1))
    return None


def _lab_scheduler_running(server: str) -> bool:
    """True when a kailab binary lab on this machine serves `server` and its scheduler process lives."""
    port = _port_of(server).get("kube-apiserver")
    if port is None or ("127.0.0.1" not in server and "localhost" not in server):
        return False
    if not state_dir().is_dir():
        return False
    for lab in state_dir().iterdir():
        rec = LabRecord.load(lab.name) if lab.is_dir() else None
        if rec and rec.runtime == "binary" and rec.ports.get("kube-apiserver") == port:
            proc = processes.records(lab).get("scheduler")
            if proc and proc.alive():
                return True
    return False


def _port_of(server: str) -> dict[str, int]:
    m = re.search(r":(\d+)/?$", server)
    return {"kube-apiserver": int(m.group(1))} if m else {}
