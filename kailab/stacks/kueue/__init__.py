"""The kueue stack: Kueue's controller manager (queueing, quota, admission) with kube-scheduler
placing the pods it admits — a stack added by this package and one registry entry.

  install.py   Kueue's CRDs, webhook registrations, Configuration and the two processes' flags
  probe.py     proof that the stack schedules: a Job admitted through a ClusterQueue, its pod bound

On the binary runtime only, for now: its processes run as local processes beside the control plane
(webhooks on 127.0.0.1, signed by the lab's CA). What an exercise's queue tree, gangs and priorities
become in Kueue's objects is the next step (issue #41); until then a Kueue lab runs what is written
in Kueue's own objects, and exercises written for KAI are refused by name.
"""

from __future__ import annotations

import base64

from ...errors import LabError
from ...runtimes.addon import Addon, ProcessHost
from ...runtimes.base import LabRecord, LabSpec, Runtime
from ..base import Stack
from . import install


class KueueAddon(Addon):
    name = "kueue"
    installs = frozenset({"processes"})
    start_title = "Kueue and kube-scheduler serving, probe Job admitted and bound"

    def __init__(self, kubernetes: str, version: str | None = None) -> None:
        self.version = version or install.pins()["version"]
        self.kubernetes = kubernetes
        self.kueue = install.kueue_recipe(self.version)


    def processes(self) -> list[str]:
        return ["kube-scheduler", "kueue"]

    def namespaces(self) -> list[str]:
        return [install.pins()["namespace"]]

    def recipes(self) -> list:
        return [self.kueue, install.scheduler_recipe(self.kubernetes)]

    def port_names(self) -> list[str]:
        return ["kube-scheduler.secure", "kueue.metrics", "kueue.probe", "kueue.webhook"]

    def health_url(self, name: str, ports: dict[str, int]) -> str:
        return install.health_url(name, ports)

    def seed_objects(self, built: dict) -> list[dict]:
        return install.crd_documents(install.tree(self.kueue)) + [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": install.pins()["namespace"]}}]

    def start(self, host: ProcessHost) -> None:
        import yaml

        from . import probe

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
        with host.timed("Kueue and kube-scheduler serving"):
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
            probe.run(host.kube, lab)

    # Kueue serves its metrics over TLS behind Kubernetes authentication (a token Prometheus would
    # need): not scraped yet, so a Kueue lab's Prometheus has the API server and kube-state-metrics


class KueueStack(Stack):
    name = "kueue"
    title = "Kueue"

    def addon(self, spec: LabSpec) -> Addon:
        return KueueAddon(install.kubernetes_of(spec.kai_version))

    def describe(self, runtime: Runtime, record: LabRecord) -> dict:
        out = super().describe(runtime, record)
        out["install"] = f"Kueue's controller manager and kube-scheduler {runtime.install_style}"
        return out

    def preflight(self, kube, record: LabRecord) -> None:
        raise LabError(f"lab {record.name!r} runs Kueue: exercises are written in KAI's vocabulary, which the "
                       "kueue stack does not translate yet (issue #41); run them on a KAI lab (`kailab up`)")
