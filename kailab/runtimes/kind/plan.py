"""The kind runtime's plan, as data: the kind config, KWOK's and fake-gpu-operator's settings, the
scheduler's install steps (its Addon's) and the fleet, in order (`build_plan`), and its printed
form (`render_plan`, `kailab up --dry-run`). Pure given its inputs; kind.py runs it."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache

import yaml

from ... import versions
from ...errors import KailabError
from ...images import ImageSet
from ...fleet import FLEET_LABEL, SIMULATED_POOL_LABEL, Fleet
from ...kube import FIELD_MANAGER
from ...paths import lab_dir
from . import metrics as kind_metrics, workers as kind_workers
from ..base import LabSpec
from ... import kwok_stages
from ..labkit import kwok_config_text, kwok_stages_text, user_stages
from ...errors import LabError
from ..addon import InstallsFromCharts, addon_of, need
from .host import TOOL_ENV, HostFacts
from .pins import pins
from ...images.gomod import module_dir

# Infrastructure pods (KWOK, the scheduler) stay on kind's real node: the default scheduler would otherwise
# happily put them on fake KWOK nodes, where their containers never run. kubeadm labels the
# control-plane node with this, and kind untaints it when the cluster has no workers.
CONTROL_PLANE_SELECTOR = {"node-role.kubernetes.io/control-plane": ""}
KWOK_CONFIG_MAP = "kailab-kwok-config"
KWOK_CONFIG_DIR = "/etc/kailab-kwok"
STAGE_CRD = "stages.kwok.x-k8s.io"
LAB_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")


# ------------------------------------------------------------------ pure pieces of the plan
def cluster_name(lab: str) -> str:
    if not LAB_NAME.match(lab):
        raise KailabError(f"lab name {lab!r} cannot name a kind cluster: use lower-case letters, "
                          "digits and '-' (at most 42 characters)")
    return f"kailab-{lab}"


def pinned_minor(kubernetes: str, table: dict, where: str) -> str:
    """The table's key for a Kubernetes version: its own minor, else the newest pinned minor
    at most one below it (the binary runtime may run a newer Kubernetes than kind has images for;
    one minor of skew is within what KAI's clients support)."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(\.\d+)?", kubernetes.strip())
    if not m:
        raise KailabError(f"Kubernetes version {kubernetes!r} is not of the form vX.Y.Z")
    major, minor = int(m.group(1)), int(m.group(2))
    for candidate in (f"{major}.{minor}", f"{major}.{minor - 1}"):
        if candidate in table:
            return candidate
    raise KailabError(f"nothing pinned for Kubernetes {major}.{minor} in kailab/data/kind.yaml ({where}; "
                      f"known: {', '.join(table)}): add it")


def node_image(kubernetes: str) -> str:
    """The pinned kindest/node image for a Kubernetes version's minor (e.g. v1.35.4 -> 1.35)."""
    images = pins()["kind"]["node_images"]
    return images[pinned_minor(kubernetes, images, "kind.node_images")]


def kind_config(spec: LabSpec, kubernetes: str, host: HostFacts | None = None,
                local: ImageSet | None = None, metrics_port: int | None = None) -> dict:
    host = host or HostFacts()
    image = local.node_image if local else node_image(kubernetes)
    node: dict = {"role": "control-plane", "image": image}
    if metrics_port:  # the lab's Prometheus (a NodePort) on the host's loopback only
        node["extraPortMappings"] = [{"containerPort": kind_metrics.NODE_PORT, "hostPort": metrics_port,
                                      "listenAddress": "127.0.0.1", "protocol": "TCP"}]
    workers = [{"role": "worker", "image": image} for _ in range(spec.workers)]
    cfg: dict = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
                 "name": cluster_name(spec.name), "nodes": [node, *workers]}
    networking: dict = {}
    if local:  # no kindnetd image here: the local node image carries a static CNI config
        networking.update({"disableDefaultCNI": True, "apiServerAddress": "127.0.0.1"})
    if spec.api_port:
        networking.update({"apiServerAddress": "127.0.0.1", "apiServerPort": spec.api_port})
    if networking:
        cfg["networking"] = networking
    if host.cgroup_v1:
        cfg["kubeadmConfigPatches"] = ["kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"
                                       "failCgroupV1: false\n"]
    if not host.cap_sys_resource:
        cfg["containerdConfigPatches"] = ['[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true']
    return cfg


@lru_cache(maxsize=1)
def kwok_release_config() -> dict:
    """The KwokConfiguration KWOK's release manifest ships (kustomize/kwok/kwok.yaml of its module):
    Stage CRs enabled, nodes managed by the kwok.x-k8s.io/node=fake annotation."""
    path = module_dir("sigs.k8s.io/kwok", versions.KWOK_VERSION) / "kustomize" / "kwok" / "kwok.yaml"
    return yaml.safe_load(path.read_text())


def kwok_config_map(release: dict | None = None) -> dict:
    """KWOK's options in the cluster: the release's, with the binary runtime's options
    (kwok_config_text) over them. Merged, not replaced: kwok reads only the first KwokConfiguration,
    and without the release's `enableCRDs: [Stage]` it finds no stages and exits.

    Only the options: in a cluster, kwok reads its stages from Stage CRs.
    """
    release = release if release is not None else kwok_release_config()
    ours = next(d for d in yaml.safe_load_all(kwok_config_text()) if d and d.get("kind") == "KwokConfiguration")
    options = {**release, "options": {**(release.get("options") or {}), **ours["options"]}}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": KWOK_CONFIG_MAP, "namespace": pins()["kwok"]["namespace"],
                         "labels": {"app.kubernetes.io/managed-by": "kailab"}},
            "data": {"kwok.yaml": yaml.safe_dump(options, sort_keys=False)}}


def kwok_deployment_patch() -> list[dict]:
    """JSON patch for KWOK's released Deployment: mount the options, widen the fake pod CIDR
    (the release's /24 runs out on large fleets) and keep the controller on the real node."""
    container = "/spec/template/spec/containers/0"
    return [
        {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": CONTROL_PLANE_SELECTOR},
        {"op": "add", "path": "/spec/template/spec/volumes",
         "value": [{"name": KWOK_CONFIG_MAP, "configMap": {"name": KWOK_CONFIG_MAP}}]},
        {"op": "add", "path": f"{container}/volumeMounts",
         "value": [{"name": KWOK_CONFIG_MAP, "mountPath": KWOK_CONFIG_DIR, "readOnly": True}]},
        {"op": "add", "path": f"{container}/args/-", "value": f"--config={KWOK_CONFIG_DIR}/kwok.yaml"},
        # a repeated flag: the last one wins
        {"op": "add", "path": f"{container}/args/-", "value": f"--cidr={pins()['kwok']['pod_cidr']}"},
    ]


# What fake-gpu-operator's helpers that sit idle once the fleet is up (the topology server, the
# KWOK device plugin, the KWOK metrics exporter) ask for: 10m each instead of the chart's 250m
# together. A 2-core kind node's allocatable is 2 CPUs; what else runs on the real node needs the
# room for CPU weight of its own (cgroup cpu.shares follow requests). Limits stay the chart's, and
# the status-updater, which labels every GPU reservation pod, keeps its 200m.
IDLE_HELPER = {"resources": {"requests": {"cpu": "10m"}}}


def fake_gpu_operator_values(fleet: Fleet, reservation_namespace: str | None = None) -> dict:
    """One topology node pool per fleet pool with GPUs; nodes join a pool by SIMULATED_POOL_LABEL (a
    CPU pool's nodes carry none: fake-gpu-operator would label them as GPU nodes with 0 GPUs)."""
    pools = {p.name: {"gpuProduct": p.product, "gpuCount": p.gpus, "gpuMemory": p.gpu_memory_mib}
             for p in fleet.pools if p.gpus}
    # the chart pulls every image `Always`: a preloaded (or locally built) image would be ignored
    pull = {"image": {"pullPolicy": "IfNotPresent"}}
    values = {c: dict(pull) for c in ("devicePlugin", "topologyServer", "statusExporter", "migFaker")}
    values["topologyServer"].update(IDLE_HELPER)
    values["statusExporter"]["kwok"] = dict(IDLE_HELPER)
    values.update({
        "topology": {"nodePoolLabelKey": SIMULATED_POOL_LABEL, "migStrategy": "none",
                     "nodePools": pools},
        **({"environment": {"resourceReservationNamespace": reservation_namespace}} if reservation_namespace else {}),
        # the fleet manifests already carry the nvidia.com/gpu.* labels, exactly as in the binary
        # runtime: the operator must not rewrite them
        "statusUpdater": {"disableNodeLabeling": True, **pull},
        # GPUs on KWOK nodes come from node capacity; KAI would count DRA slices a second time
        "kwokGpuDevicePlugin": {"enabled": True, **pull, **IDLE_HELPER},
        "draPlugin": {"enabled": False},
        "kwokDraPlugin": {"enabled": False},
    })
    return values


class _Dumper(yaml.SafeDumper):
    """Safe YAML that writes multi-line strings (an embedded config file) as readable | blocks."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar(
    "tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))


def dump(doc: dict) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False)


def dump_all(docs: list[dict]) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False)


@dataclass
class KindPlan:
    kind_config: dict
    commands: list[list[str]]
    files: dict[str, str]  # name relative to the lab dir -> text
    node_manifests: list[dict]
    descriptions: list[str] = field(default_factory=list)  # one per command
    preload_images: list[str] = field(default_factory=list)  # `kind load`ed when present locally
    cluster: str = ""
    lab_dir: str = ""
    kubeconfig: str = ""
    notes: list[str] = field(default_factory=list)  # host adaptations, said once by `up` and the dry run
    local: bool = False  # images built here (`kailab tools images`), all of them `kind load`ed
    metrics_port: int | None = None  # the lab's Prometheus on the host (None: a lab without metrics)


def charts_of(spec: LabSpec) -> InstallsFromCharts:
    """The lab's scheduler as a kind lab installs it: from its charts (refused in one line otherwise)."""
    return need(addon_of(spec), InstallsFromCharts, "kind")


# fake-gpu-operator's status-updater writes a reservation pod's GPU (run.ai/reserve_for_gpu_index) on a
# kind lab: kailab's stage writing it too raced it, and a fraction pod's config map could name the GPU
# one writer gave while its partner's named the other's (KAI's node-order "Schedule on same GPU" e2e spec
# failed so, 2 of 3 runs)
RESERVATION_STAGE = "kailab-gpu-reservation"


def build_plan(spec: LabSpec, fleet: Fleet, kai_version: str, host: HostFacts | None = None,
               local: ImageSet | None = None, kwok_release: dict | None = None,
               metrics_port: int | None = None) -> KindPlan:
    """Everything `up` does, in order, as data. Pure given its inputs: the host's facts (`host`,
    default: none to adapt to), the images built here (`local`; None: the published ones),
    KWOK's release options (default: read from its Go module) and the host port of the lab's
    Prometheus (`metrics_port`; used when spec.metrics)."""
    release = versions.kai_release(kai_version)
    addon = charts_of(spec)
    host = host or HostFacts()
    p = pins()
    lab = lab_dir(spec.name)
    cluster = cluster_name(spec.name)
    kubeconfig = str(lab / "kubeconfig")
    path = lambda name: str(lab / name)  # noqa: E731
    kubectl = ["kubectl", "--kubeconfig", kubeconfig]
    t = p["timeouts"]

    metrics_port = metrics_port if spec.metrics else None
    config = kind_config(spec, release.kubernetes, host, local, metrics_port)
    nodes = fleet.node_manifests()
    files = {
        "kind-config.yaml": dump(config),
        "kwok-config.yaml": dump(kwok_config_map(kwok_release)),
        # kailab's stages, then the user's own (`--stages`), applied as Stage objects
        "kwok-stages.yaml": kwok_stages_text(spec.termination_grace, kwok_stages.text(user_stages(spec)),
                                             without=(RESERVATION_STAGE,)),
        "fake-gpu-operator-values.yaml": dump(fake_gpu_operator_values(fleet, addon.reservation_namespace)),
        "fleet-nodes.yaml": dump_all(nodes),
    }
    steps: list[tuple[str, list[str]]] = []
    add = lambda what, argv: steps.append((what, argv))  # noqa: E731

    nodes_said = "one control-plane node" + (f" and {spec.workers} worker(s)" if spec.workers else "")
    add(f"Create the kind cluster {cluster} ({nodes_said}, {config['nodes'][0]['image']})",
        ["kind", "create", "cluster", "--name", cluster, "--config", path("kind-config.yaml"),
         "--kubeconfig", kubeconfig, "--wait", t["kind_create"]])
    steps += kind_workers.steps(cluster, spec.workers, kubectl, local is not None, t["nodes_ready"])

    steps += _kwok_steps(kubectl, path, t, str(local.kwok_manifest) if local else None)

    # the scheduler before fake-gpu-operator: KAI's chart creates the reservation namespace, and
    # fake-gpu-operator grants its status-updater access there only if it exists at install
    addon_files, addon_steps = addon.kind_files_and_steps(kubeconfig, path, local, CONTROL_PLANE_SELECTOR)
    files.update(addon_files)
    steps += addon_steps

    fgo = p["fake_gpu_operator"]
    chart = [str(local.fgo_chart)] if local else [fgo["chart"], "--version", str(fgo["version"])]
    add(f"Install fake-gpu-operator {fgo['version']}: one topology pool per fleet pool",
        ["helm", "upgrade", "--install", fgo["release"], *chart,
         "--namespace", fgo["namespace"], "--create-namespace",
         "--values", path("fake-gpu-operator-values.yaml"), "--wait", "--timeout", t["helm"],
         "--kubeconfig", kubeconfig])

    steps += _fleet_steps(kubectl, path, t, fleet)  # last: every infrastructure pod is on the real node

    if local:  # the base set every kind lab runs (the metrics' only with metrics), and its scheduler's
        unused = set() if metrics_port else set(versions.metrics_images().values())
        images = [ref for ref in local.base_images if ref not in unused] + addon.local_images(local)
    else:
        images = [p["kwok"]["image"].format(version=versions.KWOK_VERSION), *fgo["images"]]
        images += addon.images(local)
        if metrics_port:
            images += list(versions.metrics_images().values())
    return KindPlan(kind_config=config, commands=[argv for _, argv in steps], files=files,
                    node_manifests=nodes, descriptions=[what for what, _ in steps],
                    preload_images=images, cluster=cluster, lab_dir=str(lab), kubeconfig=kubeconfig,
                    notes=host.adaptations(), local=local is not None, metrics_port=metrics_port)


def _kwok_steps(kubectl: list[str], path, t: dict, manifest: str | None = None) -> list[tuple[str, list[str]]]:
    kw = pins()["kwok"]
    ns, dep = kw["namespace"], kw["deployment"]
    where = "rendered here from its Go module" if manifest else "release manifest"
    return [
        (f"Install the KWOK {versions.KWOK_VERSION} controller and its CRDs ({where})",
         [*kubectl, "apply", "-f", manifest or kw["manifest"].format(version=versions.KWOK_VERSION)]),
        ("Wait for KWOK's Stage CRD",
         [*kubectl, "wait", "--for=condition=Established", f"crd/{STAGE_CRD}", f"--timeout={t['crd']}"]),
        ("KWOK's options, as the binary runtime runs it (a ConfigMap)",
         [*kubectl, "apply", "-f", path("kwok-config.yaml")]),
        ("Point kwok-controller at them, widen its fake pod CIDR, keep it on the real node",
         [*kubectl, "-n", ns, "patch", "deployment", dep, "--type=json",
          "-p", json.dumps(kwok_deployment_patch(), separators=(",", ":"))]),
        ("kailab's KWOK stages as Stage CRs (the binary runtime's stages, verbatim)",
         [*kubectl, "apply", "-f", path("kwok-stages.yaml")]),
        ("Wait for kwok-controller to roll out",
         [*kubectl, "-n", ns, "rollout", "status", f"deployment/{dep}", f"--timeout={t['rollout']}"]),
    ]


def _fleet_steps(kubectl: list[str], path, t: dict, fleet: Fleet) -> list[tuple[str, list[str]]]:
    return [
        (f"Create the fleet's {fleet.nodes_total} KWOK nodes (fleet.node_manifests(), as the binary runtime)",
         [*kubectl, "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
          "-f", path("fleet-nodes.yaml")]),
        (f"Set their capacity ({fleet.gpus_total} GPUs) through the status subresource, as the binary runtime",
         [*kubectl, "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}-status",
          "--subresource=status", "-f", path("fleet-nodes.yaml")]),
        ("Wait for KWOK to mark them Ready",
         [*kubectl, "wait", "--for=condition=Ready", "node", "-l", f"{FLEET_LABEL}={fleet.name}",
          f"--timeout={t['nodes_ready']}"]),
    ]


def render_plan(plan: KindPlan, spec: LabSpec, fleet: Fleet, kai_version: str) -> str:
    """The dry run: every command in order, then every file `up` writes."""
    p = pins()
    addon = charts_of(spec)
    lines = [
        f"# kailab kind runtime plan for lab {spec.name!r} (nothing has been run)",
        f"# fleet {fleet.name}: {fleet.nodes_total} nodes, {fleet.gpus_total} GPUs; "
        f"scheduler: {'; '.join(addon.plan_lines()) or '(none installed)'}",
        f"# pinned: kind {p['kind']['version']}, node {plan.kind_config['nodes'][0]['image']}, "
        f"KWOK {versions.KWOK_VERSION}, fake-gpu-operator {p['fake_gpu_operator']['version']}",
        f"# tools: kind, kubectl (>= {p['kubectl']['min']}), helm (>= {p['helm']['min']}); "
        f"from {', '.join(TOOL_ENV.values())} or PATH; a Docker engine must answer",
        f"# files are written to {plan.lab_dir}/ (listed after the commands)",
        "",
    ]
    for i, (what, argv) in enumerate(zip(plan.descriptions, plan.commands), 1):
        lines += [f"# {i}. {what}", shlex.join(argv)]
        if i == 1:
            lines.append("# then, for each image already in the local Docker (`docker image inspect IMAGE` "
                         "succeeds), to save pulls:")
            lines += [f"#   kind load docker-image {img} --name {plan.cluster}" for img in plan.preload_images]
    step = len(plan.commands) + 1
    if plan.metrics_port:
        lines += [f"# {step}. the lab's metrics (kailab/runtimes/kind/metrics.py): namespace {kind_metrics.NAMESPACE}, "
                  f"kube-state-metrics and Prometheus ({', '.join(versions.metrics_images().values())}), Prometheus "
                  f"scraping every Service with a metrics port in the scheduler's namespaces, at http://127.0.0.1:{plan.metrics_port} "
                  f"(NodePort {kind_metrics.NODE_PORT}) and {kind_metrics.IN_CLUSTER_URL} in the cluster"]
        step += 1
    if addon.probe_text():
        lines += [f"# {step}. kailab's probe, as the binary runtime: {addon.probe_text()}"]
    lines.append("")
    for name, text in plan.files.items():
        lines += [f"# ---- {plan.lab_dir}/{name}", text.rstrip("\n"), ""]
    return "\n".join(lines)

