"""The KAI stack: NVIDIA's KAI scheduler, the first implementation of the stack interface.

  install.py   KAI's objects: CRDs, chart objects, webhook registrations, its processes' flags
  render.py    the scheduler configuration KAI's operator renders (its own Go code, compiled here)
  binary.py    KAI as local processes on the binary runtime
  kind.py      KAI's chart and operator on a cluster kailab made (kind, vCluster trials)
  metrics.py   KAI's own series (its dashboards' queries) from a lab's Prometheus
  e2e/         KAI's own e2e suites on a lab
  vcluster.py  KAI versions side by side in vClusters on one kind host (trial plans)

Where KAI's source comes from stays with the other registered sources (kailab/kai_source.py,
kailab/toolchain.py): building is below every stack.
"""

from __future__ import annotations

import yaml

from ... import toolchain, versions
from ...errors import KailabError
from ...node_labels import SIMULATED_POOL_LABEL
from ...runtimes import metrics as runtime_metrics
from ...runtimes.addon import Addon, AdoptsCluster, InstallsFromCharts, ProcessHost, RunsAsProcesses
from ...runtimes.base import ControlsProcesses, InstallsCharts, LabRecord, LabSpec, Runtime
from ...runtimes.labkit import PROBE_NAMESPACE
from ...runtimes.shell import progress
from ..base import (ConfiguresScheduler, HasMetricPanels, PlacesByTopology, QueueDecl, Ref, ServesSnapshot, Stack,
                    said_for)
from . import install, vocabulary
from ...errors import BuildError, LabError
from ...workloads import probe_objects, topology
from . import binary, existing, kind, metrics
from .probe import probe

# KAI's processes whose series a run's figures read (stacks/kai/metrics.py's panels, the UsageDB's
# allocation): scraped every 2 s; the others (Go's and controller-runtime's series only) every 10 s
FIGURE_COMPONENTS = ("scheduler", "queuecontroller")


class KaiAddon(Addon, RunsAsProcesses, InstallsFromCharts, AdoptsCluster):
    """KAI as a runtime runs it: five processes and its admission webhook server on the binary
    runtime, its chart on kind."""

    name = "kai"
    start_title = "KAI serving, probe bound"
    reservation_namespace = install.RESERVATION_NAMESPACE

    def kai_version(self, release: str) -> str:
        return release

    def __init__(self, version: str) -> None:
        self.version = version
        self.recipe = toolchain.kai_recipe(versions.kai_release(version))

    def processes(self) -> list[str]:
        return list(versions.KAI_COMPONENTS)

    def deployments(self) -> dict[str, list[str]]:
        return {kind.namespace(): kind.deployments()}

    def namespaces(self) -> list[str]:
        return [install.KAI_NAMESPACE]

    # ------------------------------------------------------------ binary
    def recipes(self) -> list:
        return [self.recipe]

    def port_names(self) -> list[str]:
        return [f"{c}.{p}" for c, ps in install.component_ports().items() for p in ps]

    def health_url(self, name: str, ports: dict[str, int]) -> str:
        return install.health_url(name, ports)

    def seed_objects(self, built: dict) -> list[dict]:
        """KAI's kinds, its chart's objects, the RuntimeClass fractional pods need and the probe's
        namespace and queues (never the probe pod)."""
        tree = toolchain.kai_tree(self.recipe)
        return (install.crd_documents(tree) + install.base_objects() + install.chart_objects(tree)
                + install.fake_node_objects() + [o for o in probe_objects(PROBE_NAMESPACE) if o["kind"] != "Pod"])

    def start(self, host: ProcessHost) -> None:
        binary.start(host, self.recipe, toolchain.kai_tree(self.recipe))

    def scrape_jobs(self, ports: dict[str, int]) -> list[dict]:
        return [runtime_metrics.scrape_job(comp, ports[comp + ".metrics"], figures=comp in FIGURE_COMPONENTS)
                for comp in versions.KAI_COMPONENTS]

    # ------------------------------------------------------------ a cluster adopted
    def adopt_problems(self, kube, server: str) -> list[str]:
        return existing.adopt_problems(kube, server)

    def adopted_version(self, kube) -> str | None:
        return existing.adopted_version(kube)

    # ------------------------------------------------------------ clusters
    def kind_files_and_steps(self, kubeconfig: str, path, local, node_selector: dict | None = None):
        files = {"kai-values.yaml": yaml.safe_dump(kind.kai_values(local, node_selector), sort_keys=False)}
        steps = kind.kai_install_steps(self.version, kubeconfig, path("kai-values.yaml"),
                                       chart=str(local.kai_chart) if local else None)
        return files, steps

    def images(self, local) -> list[str]:
        return [] if local else kind.kai_images(self.version)

    def local_images(self, local) -> list[str]:
        return list(local.kai_images)  # made by `kailab tools images` with the base set

    def local_files(self, local) -> list:
        return [local.kai_chart]

    def plan_lines(self) -> list[str]:
        return [f"KAI {self.version} (chart {kind.kai_chart_ref(self.version)})"]

    def probe_text(self) -> str:
        return (f"queues kailab-probe-root/kailab-probe and one 1-GPU pod in namespace {PROBE_NAMESPACE}; the lab "
                "is up once KAI binds it")

    def await_ready(self, kube) -> None:
        if kind.settle_on_fake_gpus(kube, SIMULATED_POOL_LABEL):
            progress(f"KAI's operator rendered its binder again, now with {kind.FAKE_GPU_FLAG}: the fleet's nodes "
                     f"were marked {kind.FAKE_GPU_LABEL} after KAI was installed")
        progress("KAI must bind the probe pod")
        probe(kube, hint=f"kubectl -n {kind.namespace()} logs deployment/{kind.SCHEDULER_DEPLOYMENT}; "
                         "kubectl get nodes -o custom-columns=NAME:.metadata.name,GPU:.status.allocatable")


class KaiStack(Stack, ConfiguresScheduler, ServesSnapshot, HasMetricPanels, PlacesByTopology):
    name = "kai"
    title = "KAI"
    kai_inside = True

    def addon(self, spec: LabSpec) -> Addon:
        return KaiAddon(versions.kai_release(spec.kai_version or versions.DEFAULT_KAI).version)

    # a `scheduler:` step reruns its process (binary) or changes its SchedulingShard (kind); an adopted
    # cluster's KAI is the cluster's own to configure
    scheduler_configs = (binary.OnProcesses(), kind.OnCharts())

    def describe(self, runtime: Runtime, record: LabRecord) -> dict:
        out = super().describe(runtime, record)
        out["install"] = said_for(runtime, {
            ControlsProcesses: "KAI's components as local processes (binaries built from its source, chart objects applied)",
            InstallsCharts: "KAI's helm chart (operator, admission webhook, SchedulingShard) on a kind cluster"},
            "KAI as installed in an existing cluster (adopted)")
        out["version"] = record.kai_version
        return out

    # ------------------------------------------------------------ evidence
    def snapshot_url(self, runtime: Runtime, record: LabRecord) -> str | None:
        return install.snapshot_url(record.ports) if "scheduler.plugins" in record.ports else None

    def metric_panels(self, record: LabRecord, prometheus: str, start: float, end: float) -> list[dict]:
        tree = toolchain.kai_tree(toolchain.kai_recipe(versions.kai_release(record.kai_version)))
        return metrics.collect(prometheus, tree, start, end)

    def evictions_by_action(self, prometheus: str, start: float, end: float,
                            namespace: str | None = None) -> dict:
        return metrics.evictions_by_action(prometheus, start, end, namespace)

    def preflight(self, kube, record: LabRecord) -> None:
        if kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "queues.scheduling.run.ai") is None:
            raise LabError(f"lab {record.name!r} has no KAI (CRD queues.scheduling.run.ai is missing): "
                           "bring up a lab with KAI (`kailab up`)")

    def side_namespaces(self) -> list[str]:
        return [install.RESERVATION_NAMESPACE]  # the binder's GPU reservation pods (fractional GPUs)

    # ------------------------------------------------------------ the exercise's vocabulary
    def queue_objects(self, queues: list[QueueDecl], namespace: str) -> list[dict]:
        return vocabulary.queue_objects(queues)

    def queue_leftovers(self, queues: list[QueueDecl], namespace: str) -> list[Ref]:
        return vocabulary.queue_leftovers(queues)

    def queue_view(self, obj: dict) -> tuple[str, dict] | None:
        return vocabulary.queue_view(obj)

    def watched(self) -> dict[str, tuple[str, str, bool]]:
        return dict(vocabulary.WATCHED)

    def workload_objects(self, objs: list[dict], where: str) -> list[dict]:
        return objs  # the lab's form is KAI's

    def not_taken_in(self, pods: list) -> list[str]:
        return vocabulary.not_grouped(pods)

    def workload_leftovers(self, workload: str, kind: str, namespace: str) -> list[Ref]:
        return vocabulary.workload_leftovers(workload, kind, namespace)

    def topology_objects(self, name: str, levels: list[str], where: str) -> list[dict]:
        return [topology(name, levels)]

    def topology_leftovers(self, name: str) -> list[Ref]:
        return vocabulary.topology_leftovers(name)

    def snapshot_objects(self, kube, namespace: str, queues: list[str]) -> dict[str, list]:
        return vocabulary.snapshot_objects(kube, namespace, queues)

    # ------------------------------------------------------------ the `scheduler:` step
    def scheduler_setting(self, record: LabRecord, value, usage_url: str | None, where: str):
        """A `scheduler:` step as one SchedulingShard change — placement, usage (read from `usage_url`)
        and any shard fragment — rendered by the KAI operator code of the lab's KAI version; what it
        refuses is one line naming the file, the step and the field."""
        return rendered_setting(where, value, record.kai_version, usage_url)


def rendered_setting(where: str, value, kai_version: str, usage_url: str | None) -> install.SchedulerChange:
    """An exercise's or a design's scheduler setting, rendered by KAI `kai_version`'s operator code."""
    if getattr(value, "volcano", None) is not None:
        raise KailabError(f"{where} scheduler.volcano: not on the kai stack: Volcano's configuration is the volcano "
                          "stack's; give KAI's as `shard:` (a SchedulingShard fragment)")
    recipe = toolchain.kai_recipe(versions.kai_release(kai_version))
    fragment: dict = {"placementStrategy": {"gpu": value.placement, "cpu": value.placement}}
    if value.usage is not None:
        db, k_value = install.usage_db_config(usage_url or "", value.usage.model_dump(exclude_none=True))
        fragment.update(usageDBConfig=db, kValue=float(k_value))
    if value.shard:
        fragment = install.merged(fragment, value.shard)
    try:
        return install.scheduler_change(recipe, toolchain.kai_tree(recipe), fragment)
    except BuildError as err:
        raise KailabError(f"{where} scheduler{'.shard' if value.shard else ''}: {err}") from None
