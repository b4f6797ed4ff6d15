"""The volcano stack: Volcano's scheduler, controller manager (PodGroups for plain pods, Jobs and
Deployments; queue state) and webhook manager (its admission of Queues, PodGroups and its Jobs) —
a stack added by this package and one registry entry.

  install.py     its CRDs, webhook registrations and scheduler configuration from its own tree at
                 the pinned release (kailab/data/volcano.yaml), the three processes' flags
  probe.py       proof that the stack schedules: a pod in a Queue, given a PodGroup and bound
  vocabulary.py  an exercise's queue tree and workloads as Volcano's objects; what has no
                 equivalent is refused by name
  config.py      the scheduler's configuration as a design input (`scheduler:` steps and designs)

  kind.py        Volcano's own chart on a kind cluster (its images and chart published, or built here)

On the binary runtime its processes run as local processes beside the control plane (webhooks on
127.0.0.1, signed by the lab's CA); on kind, its chart with the same scheduler configuration.
"""

from __future__ import annotations

import base64
import shutil

from ...errors import LabError
from ...runtimes import metrics
from ...runtimes.addon import Addon, InstallsFromCharts, ProcessHost, RunsAsProcesses
from ...runtimes.base import InstallsCharts, LabRecord, LabSpec, Runtime
from ...runtimes.waits import wait_until
from ..base import ConfiguresScheduler, Stack, read_or_empty, said_for
from . import install, vocabulary
from ...runtimes.shell import progress
from . import config, kind, probe

PROCESSES = [install.WEBHOOKS, install.CONTROLLERS, install.SCHEDULER]


class VolcanoAddon(Addon, RunsAsProcesses, InstallsFromCharts):
    name = "volcano"
    start_title = "Volcano serving, its webhooks answering, probe pod bound"

    def __init__(self, version: str | None = None) -> None:
        self.version = version or install.pins()["version"]
        self.recipe = install.recipe(self.version)

    def processes(self) -> list[str]:
        return list(PROCESSES)

    def namespaces(self) -> list[str]:
        return [install.pins()["namespace"]]

    def recipes(self) -> list:
        return [self.recipe]

    def port_names(self) -> list[str]:
        return [f"{p}.{port}" for p in PROCESSES for port in install.PORTS[p]]

    def health_url(self, name: str, ports: dict[str, int]) -> str:
        return install.health_url(name, ports)

    def seed_objects(self, built: dict) -> list[dict]:
        src = install.tree(self.recipe)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": install.pins()["namespace"]}}
        return install.crd_documents(src) + install.priority_classes() + [namespace] + install.chart_config_maps(src)

    def start(self, host: ProcessHost) -> None:
        lab, ports, src = host.lab, host.ports, install.tree(self.recipe)
        certs = lab / "webhooks" / "volcano"
        certs.mkdir(parents=True, exist_ok=True)
        # the lab CA's 127.0.0.1 serving certificate, and the CA the webhook manager writes into its registrations
        shutil.copyfile(lab / "pki" / "kai-webhooks.crt", certs / "tls.crt")
        shutil.copyfile(lab / "pki" / "kai-webhooks.key", certs / "tls.key")
        shutil.copyfile(lab / "pki" / "ca.crt", certs / "ca.crt")
        with host.timed("Volcano CRDs Established"):
            host.install_crds(install.crd_documents(src))
        config.write_default(lab)
        (lab / install.ADMISSION_CONF).write_text(install.admission_conf(src))
        with host.timed("Volcano's webhooks registered"):
            # before its webhook manager starts: it waits for them by name to set their CA
            ca = base64.b64encode((lab / "pki" / "ca.crt").read_bytes()).decode()
            for obj in install.webhook_configurations(src, ports[f"{install.WEBHOOKS}.webhook"], ca):
                host.kube.apply(obj)
        # the webhook manager first: the scheduler creates Volcano's root and default queues at start
        # and gives up (exits) when their admission has not answered within a minute
        def start(name: str) -> None:
            host.start(name, install.argv(name, host.bins[name], ports, lab, src), env=install.env(name, lab, host.kubeconfig))

        with host.timed(f"{install.WEBHOOKS} answering"):
            start(install.WEBHOOKS)
            host.wait_healthy(install.WEBHOOKS)
            wait_until("Volcano's queue validation webhook to answer", lambda: vocabulary.webhook_answers(host.kube),
                       timeout="scheduler-component-healthy", lab=lab, component=install.WEBHOOKS,
                       hint="the API server calls it on 127.0.0.1; see its log")
        with host.timed(f"{install.CONTROLLERS} and {install.SCHEDULER} serving"):
            for name in (install.CONTROLLERS, install.SCHEDULER):
                start(name)
            for name in (install.CONTROLLERS, install.SCHEDULER):
                host.wait_healthy(name)
        with host.timed("probe pod bound"):
            probe.run(host.kube, lab)

    def scrape_jobs(self, ports: dict[str, int]) -> list[dict]:
        return [metrics.scrape_job(name, ports[name + ".metrics"]) for name in (install.SCHEDULER, install.CONTROLLERS)]

    # ------------------------------------------------------------ clusters (kind)
    def deployments(self) -> dict[str, list[str]]:
        return {install.pins()["namespace"]: kind.deployments()}

    def kind_files_and_steps(self, kubeconfig: str, path, local, node_selector: dict | None = None):
        return kind.files_and_steps(self.version, kubeconfig, path, local,
                                    node_selector or {"node-role.kubernetes.io/control-plane": ""})

    def images(self, local) -> list[str]:
        return [] if local else kind.images(self.version)

    image_stack = "volcano"

    def local_images(self, local) -> list[str]:
        return kind.images(self.version)

    def local_files(self, local) -> list:
        return [kind.local_chart(self.version)]

    def build_local(self, local, console=None, phase=print) -> list[str]:
        return kind.build_local(self.recipe, console, phase)

    def plan_lines(self) -> list[str]:
        return [f"Volcano {self.version} (chart {kind.chart_ref()}), configuration "
                f"{install.pins()['default_configuration']}"]

    def probe_text(self) -> str:
        return (f"Volcano's queue webhook answers; Queue {probe.QUEUE} (1 GPU deserved) and one 1-GPU pod in "
                f"namespace {probe.NAMESPACE}; the lab is up once Volcano binds it")

    def await_ready(self, kube) -> None:
        """As on the binary runtime: its queue webhook answers, then it binds the probe pod."""
        progress("Volcano's webhooks must answer and its scheduler bind the probe pod")
        ns = install.pins()["namespace"]
        wait_until("Volcano's queue validation webhook to answer", lambda: vocabulary.webhook_answers(kube),
                   timeout="scheduler-component-healthy",
                   hint=f"kubectl -n {ns} get pods; kubectl -n {ns} logs deployment/volcano-admission")
        probe.run(kube, None)


class VolcanoStack(Stack, ConfiguresScheduler):
    name = "volcano"
    title = "Volcano"

    def addon(self, spec: LabSpec) -> Addon:
        return VolcanoAddon()

    scheduler_configs = (config.OnProcesses(),)  # its configuration file, which its scheduler watches

    def describe(self, runtime: Runtime, record: LabRecord) -> dict:
        out = super().describe(runtime, record)
        out["install"] = said_for(runtime, {
            InstallsCharts: "Volcano's helm chart (scheduler, controller manager, webhook manager) on a kind cluster"},
            f"Volcano's scheduler, controller manager and webhook manager {runtime.install_style}")
        return out

    def preflight(self, kube, record: LabRecord) -> None:
        if kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "queues.scheduling.volcano.sh") is None:
            raise LabError(f"lab {record.name!r} has no Volcano (CRD queues.scheduling.volcano.sh is missing): "
                           "bring one up with `kailab up --scheduler volcano`")

    # ------------------------------------------------------------ the `scheduler:` step
    def scheduler_setting(self, record: LabRecord, value, usage_url: str | None, where: str):
        return config.setting(value, where)

    # ------------------------------------------------------------ the exercise's vocabulary (vocabulary.py)
    queue_objects = staticmethod(vocabulary.queue_objects)
    queue_leftovers = staticmethod(vocabulary.queue_leftovers)
    queue_view = staticmethod(vocabulary.queue_view)
    workload_objects = staticmethod(vocabulary.workload_objects)
    workload_leftovers = staticmethod(vocabulary.workload_leftovers)

    def watched(self) -> dict[str, tuple[str, str, bool]]:
        return dict(vocabulary.WATCHED)

    def snapshot_objects(self, kube, namespace: str, queues: list[str]) -> dict[str, list]:
        """Volcano's Queues (deserved, capability, state, allocated) and PodGroups (minMember, phase,
        and the conditions saying why a group waits)."""
        qs = read_or_empty(lambda: [kube.get(install.API, "Queue", q) for q in queues])
        pgs = read_or_empty(lambda: kube.list(install.API, "PodGroup", namespace))
        return {"queues.yaml": [q for q in qs if q],
                "podgroups.yaml": [{"name": p["metadata"]["name"], "annotations": p["metadata"].get("annotations"),
                                    "owner": (p["metadata"].get("ownerReferences") or [{}])[0].get("name"),
                                    "spec": p.get("spec"), "status": p.get("status")} for p in pgs]}
