"""The kueue stack: Kueue's controller manager (queueing, quota, admission) with kube-scheduler
placing the pods it admits — a stack added by this package and one registry entry.

  install.py   Kueue's CRDs, webhook registrations, Configuration and the two processes' flags
  probe.py     proof that the stack schedules: a Job admitted through a ClusterQueue, its pod bound

  vocabulary.py  an exercise's queue tree and workloads as Kueue's objects; what has no equivalent
               is refused by name

  kind.py      Kueue's own chart on a kind cluster (its image and chart published, or built here)

On the binary runtime its processes run as local processes beside the control plane (webhooks on
127.0.0.1, signed by the lab's CA); on kind, its chart, and kind's own kube-scheduler places.
"""

from __future__ import annotations

import base64
import yaml

from ...errors import LabError
from ...runtimes.addon import Addon, InstallsFromCharts, ProcessHost, RunsAsProcesses
from ...runtimes.base import InstallsCharts, LabRecord, LabSpec, Runtime
from ..base import QueueDecl, Ref, Stack, read_or_empty, said_for
from . import install, vocabulary
from ...runtimes.shell import progress
from . import kind, probe


class KueueAddon(Addon, RunsAsProcesses, InstallsFromCharts):
    """Kueue's controller manager and kube-scheduler, which places what Kueue admits (and, beside
    another scheduler, every pod that names no scheduler). `priorities=False`: a stack whose other
    part brings the priority classes exercises name (kueue+kai: KAI's chart)."""

    name = "kueue"
    start_title = "Kueue and kube-scheduler serving, probe Job admitted and bound"

    def __init__(self, kubernetes: str, version: str | None = None, priorities: bool = True,
                 probe_pod=None, probe_objects: tuple = ()) -> None:
        """`probe_pod(pod_spec, labels)`: how the probe Job's pod names the scheduler that places what
        Kueue admits, beside another stack (kueue+kai: KAI's), with `probe_objects` (its queue)."""
        self.version = version or install.pins()["version"]
        self.kubernetes = kubernetes
        self.kueue = install.kueue_recipe(self.version)
        self.priorities = priorities
        self.probe_pod, self.probe_objects = probe_pod, list(probe_objects)

    def processes(self) -> list[str]:
        return ["kube-scheduler", "kueue"]

    def deployments(self) -> dict[str, list[str]]:
        return {install.pins()["namespace"]: [kind.deployment()]}

    def namespaces(self) -> list[str]:
        return [install.pins()["namespace"]]

    def recipes(self) -> list:
        return [self.kueue, install.scheduler_recipe(self.kubernetes)]

    def port_names(self) -> list[str]:
        return [p for p in ["kube-scheduler.secure", "kueue.metrics", "kueue.probe", "kueue.webhook"]
                if p.split(".")[0] in self.processes()]

    def health_url(self, name: str, ports: dict[str, int]) -> str:
        return install.health_url(name, ports)

    def seed_objects(self, built: dict) -> list[dict]:
        own = install.priority_classes() if self.priorities else []
        return install.crd_documents(install.tree(self.kueue)) + own + [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": install.pins()["namespace"]}}]

    def start(self, host: ProcessHost) -> None:
        lab, ports = host.lab, host.ports
        certs = lab / "webhooks" / "kueue"
        certs.mkdir(parents=True, exist_ok=True)
        crt, key = lab / "pki" / "kai-webhooks.crt", lab / "pki" / "kai-webhooks.key"  # the lab CA's 127.0.0.1 serving cert
        (certs / "tls.crt").write_bytes(crt.read_bytes())
        (certs / "tls.key").write_bytes(key.read_bytes())
        install.prepare_etc(lab, crt, key)
        with host.timed("Kueue CRDs Established"):
            host.install_crds(install.crd_documents(install.tree(self.kueue)))
        (lab / "kueue-config.yaml").write_text(yaml.safe_dump(install.configuration(ports, certs), sort_keys=False))
        with host.timed(f"{' and '.join(self.processes())} serving"):
            for name in self.processes():
                host.start(name, install.argv(name, host.bins[name], ports, lab), env={"KUBECONFIG": str(host.kubeconfig)})
            for name in self.processes():
                host.wait_healthy(name)
        with host.timed("Kueue's webhooks registered"):
            ca = base64.b64encode((lab / "pki" / "ca.crt").read_bytes()).decode()
            for obj in install.webhook_configurations(install.tree(self.kueue), ports["kueue.webhook"], ca,
                                                      list(install.pins()["integrations"])):
                host.kube.apply(obj)
        with host.timed("probe Job admitted and bound"):
            probe.run(host.kube, lab, self.probe_pod, self.probe_objects)

    # Kueue serves its metrics over TLS behind Kubernetes authentication (a token Prometheus would
    # need): not scraped yet, so a Kueue lab's Prometheus has the API server and kube-state-metrics

    # ------------------------------------------------------------ clusters (kind)
    def kind_files_and_steps(self, kubeconfig: str, path, local, node_selector: dict | None = None):
        return kind.files_and_steps(self.version, kubeconfig, path, local,
                                    node_selector or {"node-role.kubernetes.io/control-plane": ""}, self.priorities)

    def images(self, local) -> list[str]:
        return [] if local else [kind.image(self.version)]

    image_stack = "kueue"

    def local_images(self, local) -> list[str]:
        return [kind.image(self.version)]

    def local_files(self, local) -> list:
        return [kind.local_chart(self.version)]

    def build_local(self, local, console=None, phase=print) -> list[str]:
        return kind.build_local(self.kueue, console, phase)

    def plan_lines(self) -> list[str]:
        return [f"Kueue {self.version} (chart {kind.chart_ref()}), kind's kube-scheduler placing what it admits"]

    def probe_text(self) -> str:
        return (f"a ResourceFlavor, ClusterQueue {probe.QUEUE} (1 GPU) and a suspended 1-GPU Job in namespace "
                f"{probe.NAMESPACE}; the lab is up once Kueue admits it and its pod is bound")

    def await_ready(self, kube) -> None:
        progress("Kueue must admit the probe Job and its pod be bound")
        probe.run(kube, None, self.probe_pod, self.probe_objects)


class KueueStack(Stack):
    name = "kueue"
    title = "Kueue"

    def addon(self, spec: LabSpec) -> Addon:
        return KueueAddon(install.kubernetes_of(spec.kai_version))

    def describe(self, runtime: Runtime, record: LabRecord) -> dict:
        out = super().describe(runtime, record)
        out["install"] = said_for(runtime, {
            InstallsCharts: "Kueue's helm chart (its controller manager) on a kind cluster, kind's kube-scheduler "
                            "placing what it admits"},
            f"Kueue's controller manager and kube-scheduler {runtime.install_style}")
        return out

    def preflight(self, kube, record: LabRecord) -> None:
        if kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "clusterqueues.kueue.x-k8s.io") is None:
            raise LabError(f"lab {record.name!r} has no Kueue (CRD clusterqueues.kueue.x-k8s.io is missing): "
                           "bring one up with `kailab up --scheduler kueue`")

    # ------------------------------------------------------------ the exercise's vocabulary
    def queue_objects(self, queues: list[QueueDecl], namespace: str) -> list[dict]:
        return vocabulary.queue_objects(queues, namespace)

    def queue_leftovers(self, queues: list[QueueDecl], namespace: str) -> list[Ref]:
        return vocabulary.queue_leftovers(queues, namespace)

    def queue_view(self, obj: dict) -> tuple[str, dict] | None:
        return vocabulary.queue_view(obj)

    def watched(self) -> dict[str, tuple[str, str, bool]]:
        return {"queue": (install.API, "ClusterQueue", False)}

    def workload_objects(self, objs: list[dict], where: str) -> list[dict]:
        return vocabulary.workload_objects(objs, where)

    def snapshot_objects(self, kube, namespace: str, queues: list[str]) -> dict[str, list]:
        """ClusterQueues (quota, usage, pending), and Kueue's Workloads: what it admitted, where, and
        why the rest waits (their conditions)."""
        cqs = read_or_empty(lambda: [kube.get(install.API, "ClusterQueue", q) for q in queues])
        wls = read_or_empty(lambda: kube.list(install.API, "Workload", namespace))
        return {"clusterqueues.yaml": [q for q in cqs if q],
                "workloads.yaml": [{"name": w["metadata"]["name"], "owner": (w["metadata"].get("ownerReferences") or [{}])[0].get("name"),
                                    "spec": {k: v for k, v in (w.get("spec") or {}).items() if k != "podSets"},
                                    "status": w.get("status")} for w in wls]}
