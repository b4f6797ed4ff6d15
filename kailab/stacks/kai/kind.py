"""KAI on a cluster kailab made (the kind runtime, and vCluster trials on a kind host): KAI's helm
chart with its operator, its images, and scheduler changes through its SchedulingShard — as a kind
user installs and configures KAI.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import yaml

from ... import versions
from ...errors import LabError
from ...kube import Kube
from ...runtimes.base import InstallsCharts, LabRecord
from ...runtimes.waits import wait_until
from ..base import SchedulerConfig
from . import install

# kind's control-plane node (kubeadm's label): KAI's own pods stay on the one real node
CONTROL_PLANE_SELECTOR = {"node-role.kubernetes.io/control-plane": ""}


@lru_cache(maxsize=1)
def _pins() -> dict:
    """The pins in kailab/data/kind.yaml (KAI's chart, images, Deployments and the timeouts)."""
    return yaml.safe_load(resources.files("kailab").joinpath("data/kind.yaml").read_text())


def namespace() -> str:
    return _pins()["kai"]["namespace"]


def deployments() -> list[str]:
    return list(_pins()["kai"]["deployments"])


def kai_chart_ref(kai_version: str) -> str:
    """KAI's OCI chart: its registry path moved with the GitHub organisation at v0.13.4."""
    moved = versions.parse(kai_version) >= versions.KAI_MODULE_MOVED_AT
    return _pins()["kai"]["chart" if moved else "chart_before_move"]


def kai_images(kai_version: str) -> list[str]:
    """KAI's images: the chart's registry path with each image name, tagged with the version."""
    registry = kai_chart_ref(kai_version).removeprefix("oci://").rsplit("/", 1)[0]
    return [f"{registry}/{name}:{versions.normalise(kai_version)}" for name in _pins()["kai"]["images"]]



def kai_values(local=None, node_selector: dict | None = None) -> dict:
    # gpuSharing: without it KAI's admission webhook refuses fractional pods ("GPU sharing is disabled")
    values: dict = {"global": {"nodeSelector": node_selector or CONTROL_PLANE_SELECTOR, "gpuSharing": True}}
    if local:  # images built here carry the upstream names: the chart's registry is KAI's own
        values["global"]["registry"] = local.kai_registry
    return values



def kai_install_steps(version: str, kubeconfig: str, values: str, where: str = "",
                      chart: str | None = None) -> list[tuple[str, list[str]]]:
    """helm-install KAI `version` into the cluster behind `kubeconfig`, then wait for its
    Deployments; `where` completes the step descriptions (e.g. " in the vCluster"); `chart` is a
    packaged chart built here (default: KAI's published OCI chart)."""
    p = _pins()
    kai, t = p["kai"], p["timeouts"]
    kubectl = ["kubectl", "--kubeconfig", kubeconfig]
    source = ([chart], "its chart, packaged here from its source") if chart else \
        ([kai_chart_ref(version), "--version", version], "its OCI chart")
    steps = [(f"Install KAI {version} from {source[1]}{where}",
              ["helm", "upgrade", "--install", kai["release"], *source[0],
               "--namespace", kai["namespace"], "--create-namespace", "--values", values, "--wait",
               "--timeout", t["helm"], "--kubeconfig", kubeconfig])]
    for dep in kai["deployments"]:
        # the operator creates most of these after helm returns: wait for them to exist first
        steps.append((f"Wait for KAI's {dep} Deployment to exist{where}",
                      [*kubectl, "-n", kai["namespace"], "wait", "--for=create", f"deployment/{dep}",
                       f"--timeout={t['rollout']}"]))
        steps.append((f"Wait for KAI's {dep} to roll out{where}",
                      [*kubectl, "-n", kai["namespace"], "rollout", "status", f"deployment/{dep}",
                       f"--timeout={t['rollout']}"]))
    return steps



# ------------------------------------------------------------------ the binder, once the fleet is known
FAKE_GPU_LABEL = "run.ai/fake.gpu"  # fake-gpu-operator's status-exporter marks the nodes it serves with it
FAKE_GPU_FLAG = "--fake-gpu-nodes"
CONFIG_API, CONFIG_KIND, CONFIG_NAME = "kai.scheduler/v1", "Config", "kai-config"  # the chart's one Config


def _fake_gpu_nodes(kube: Kube) -> list[str]:
    return [n["metadata"]["name"] for n in kube.list("v1", "Node", label_selector=f"{FAKE_GPU_LABEL}=true")]


def _binder_args(kube: Kube, ns: str) -> list[str] | None:
    dep = kube.get("apps/v1", "Deployment", "binder", ns)
    return None if dep is None else dep["spec"]["template"]["spec"]["containers"][0].get("args") or []


def settle_on_fake_gpus(kube: Kube, pool_label: str, timeout: float = 120) -> bool:
    """KAI's operator gives its binder --fake-gpu-nodes only if, when it renders it, some node carries
    run.ai/fake.gpu=true — which fake-gpu-operator's status-exporter writes some seconds after the
    fleet's nodes exist, and kailab installs KAI before them (its chart makes the namespace
    fake-gpu-operator's RBAC needs). Left alone, the binder ran without it until the operator's next
    reconcile: a restart of the operator rolled the binder out with a new template (a vCluster
    trial's host, 2026-11-27). Here the fleet's GPU nodes are awaited marked, and the operator is made
    to reconcile (a touch of its Config, which it watches) until the binder runs with the flag.
    True when the binder had to be rolled; False when there is no fake-gpu-operator pool or it had
    the flag already."""
    ns = namespace()
    pool = [n for n in kube.list("v1", "Node", label_selector=pool_label)
            if int(((n.get("status") or {}).get("capacity") or {}).get("nvidia.com/gpu", "0") or 0) > 0]
    if not pool:
        return False
    try:
        marked = wait_until(f"fake-gpu-operator to mark the fleet's GPU nodes {FAKE_GPU_LABEL}=true",
                            lambda: _fake_gpu_nodes(kube) or None, timeout=timeout)
    except LabError:  # never marked: the binder KAI rendered without the flag is what it would render now
        return False
    if FAKE_GPU_FLAG in (_binder_args(kube, ns) or [FAKE_GPU_FLAG]):
        return False
    kube.dynamic.patch(kube.resource(CONFIG_API, CONFIG_KIND), name=CONFIG_NAME,
                       body={"metadata": {"annotations": {"kailab.io/fleet-marked": marked[0]}}},
                       content_type="application/merge-patch+json")
    wait_until(f"KAI's operator to render its binder with {FAKE_GPU_FLAG}",
               lambda: FAKE_GPU_FLAG in (_binder_args(kube, ns) or []) or None, timeout=timeout,
               hint=f"kubectl -n {ns} logs deployment/kai-operator")
    wait_until("the binder to roll out", lambda: _rollouts_complete(kube, ns, ["binder"]), timeout=timeout,
               hint=f"kubectl -n {ns} get pods -l app=binder")
    return True


# ------------------------------------------------------------------ the scheduler, through KAI's operator
SHARD_API, SHARD_KIND, SHARD_NAME = "kai.scheduler/v1", "SchedulingShard", "default"  # the chart's default shard
SCHEDULER_DEPLOYMENT = "kai-scheduler-default"  # the operator's <schedulerName>-<shard>, and its ConfigMap


def _scheduler_rolled_out(kube: Kube, namespace: str, before: dict | None):
    """The operator has rendered a new scheduler ConfigMap and the scheduler runs it: the
    Deployment's pods carry the ConfigMap's resourceVersion (its `configMapVersion` annotation)
    and the rollout is complete."""
    cm = kube.get("v1", "ConfigMap", SCHEDULER_DEPLOYMENT, namespace)
    if cm is None or (before is not None and cm.get("data") == before.get("data")):
        return None
    dep = kube.get("apps/v1", "Deployment", SCHEDULER_DEPLOYMENT, namespace)
    if dep is None:
        return None
    annotations = dep["spec"]["template"]["metadata"].get("annotations") or {}
    st, want = dep.get("status") or {}, dep["spec"].get("replicas", 1)
    done = (annotations.get("configMapVersion") == cm["metadata"]["resourceVersion"]
            and st.get("observedGeneration", 0) >= dep["metadata"]["generation"]
            and st.get("updatedReplicas") == want == st.get("availableReplicas") == st.get("replicas"))
    return done or None


def _rollouts_complete(kube: Kube, namespace: str, names: list[str]):
    """Every named Deployment runs its newest template on all its replicas, and no old pod is left."""
    for name in names:
        dep = kube.get("apps/v1", "Deployment", name, namespace)
        if dep is None:
            continue
        st, want = dep.get("status") or {}, dep["spec"].get("replicas", 1)
        if not (st.get("observedGeneration", 0) >= dep["metadata"]["generation"]
                and st.get("updatedReplicas") == want == st.get("availableReplicas") == st.get("replicas")):
            return None
    return True


def configure_through_shard(rec: LabRecord, setting) -> None:
    """Change KAI's scheduler as a kind user would: patch the SchedulingShard and let KAI's operator
    render the configuration and roll the scheduler out. None puts the chart's default back."""
    ns = _pins()["kai"]["namespace"]
    fragment = None if setting is None else getattr(setting, "shard", None)
    if setting is not None and fragment is None:
        raise LabError("this scheduler configuration has no SchedulingShard field that says it, and on a kind "
                       "lab KAI's operator renders the scheduler's configuration from the SchedulingShard: "
                       "use a binary lab for it")
    kube = Kube(rec.kubeconfig)
    try:
        shard = kube.get(SHARD_API, SHARD_KIND, SHARD_NAME)
        if shard is None:
            raise LabError(f"no SchedulingShard {SHARD_NAME!r} in lab {rec.name!r}: KAI's chart creates it; "
                           "is KAI installed (`kailab status`)?")
        saved = rec.dir / "schedulingshard-default.json"
        if not saved.exists():  # the chart's spec, to put back after the run
            saved.write_text(json.dumps(shard["spec"]))
        default = json.loads(saved.read_text())
        spec = default if fragment is None else install.merged(default, fragment)
        if spec == shard["spec"]:
            return
        before = kube.get("v1", "ConfigMap", SCHEDULER_DEPLOYMENT, ns)
        shard["spec"] = spec
        kube.dynamic.replace(kube.resource(SHARD_API, SHARD_KIND), body=shard)
        wait_until("KAI's operator to roll the scheduler out with the new SchedulingShard",
                   lambda: _scheduler_rolled_out(kube, ns, before), timeout="scheduler-reconfigured",
                   hint=f"kubectl -n {ns} logs deployment/kai-operator; kubectl -n {ns} get configmap "
                        f"{SCHEDULER_DEPLOYMENT} -o yaml")
        # the operator rolls the binder too on a shard change: the next step starts on a settled KAI,
        # not while an old binder pod is stopping beside a new one
        wait_until("KAI's operator to finish rolling KAI's Deployments out",
                   lambda: _rollouts_complete(kube, ns, list(_pins()["kai"]["deployments"])),
                   timeout="scheduler-reconfigured", hint=f"kubectl -n {ns} get deployments,pods")
    finally:
        kube.close()


def scheduler_config(rec: LabRecord) -> dict | None:
    """The ConfigMap KAI's operator renders, which the scheduler's pods run."""
    kube = Kube(rec.kubeconfig)
    try:
        cm = kube.get("v1", "ConfigMap", SCHEDULER_DEPLOYMENT, namespace())
    finally:
        kube.close()
    return yaml.safe_load(cm["data"]["config.yaml"]) if cm else None


class OnCharts(SchedulerConfig):
    """KAI's scheduler as its chart installs it: the configuration its operator renders from the
    SchedulingShard, changed through the shard."""

    runtime = InstallsCharts

    def current(self, runtime, record: LabRecord) -> dict | None:
        return scheduler_config(record)

    def apply(self, runtime, record: LabRecord, setting) -> None:
        configure_through_shard(record, setting)
