"""The kind runtime: a one-node kind cluster on a Docker host, with KWOK, fake-gpu-operator and the
lab's scheduler (its Addon's steps) installed the way their projects ship them (release manifests
and OCI helm charts).

The lab is the same as the binary runtime's where an exercise can tell: the same fleet nodes
(fleet.node_manifests(), applied the same way), the same KWOK stages, the same probe pod. What
differs is how the pieces run: real containers, the scheduler from its helm chart with its operator.

`build_plan` is pure: it turns a spec into the kind config, the files and the commands, in
order, so `--dry-run` prints exactly what `up` runs and tests can check it without Docker.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from .. import versions
from ..errors import KailabError, LabError
from ..images import ImageSet, cached_tool, image_set
from ..fleet import FLEET_LABEL, SIMULATED_POOL_LABEL, Fleet, load_fleet
from ..kube import FIELD_MANAGER, Kube
from ..paths import lab_dir
from . import clusterinfo, kind_metrics, metrics
from .addon import Addon
from .base import LabRecord, LabSpec, Runtime, status_report, docker_answers
from .labkit import PROBE_NAMESPACE, kwok_config_text, lab_lock, refuse_other_lab
from .processes import free_port
from .shell import last_line, progress, run_logged

# Where tools come from: these variables first, then PATH
TOOL_ENV = {"kind": "KAILAB_KIND", "kubectl": "KAILAB_KUBECTL", "helm": "KAILAB_HELM"}
# Infrastructure pods (KWOK, the scheduler) stay on kind's real node: the default scheduler would otherwise
# happily put them on fake KWOK nodes, where their containers never run. kubeadm labels the
# control-plane node with this, and kind untaints it when the cluster has no workers.
CONTROL_PLANE_SELECTOR = {"node-role.kubernetes.io/control-plane": ""}
KWOK_CONFIG_MAP = "kailab-kwok-config"
KWOK_CONFIG_DIR = "/etc/kailab-kwok"
STAGE_CRD = "stages.kwok.x-k8s.io"
LAB_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")


@lru_cache(maxsize=1)
def pins() -> dict:
    """The pinned versions and names in kailab/data/kind.yaml."""
    return yaml.safe_load(resources.files("kailab").joinpath("data/kind.yaml").read_text())


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


@dataclass(frozen=True)
class HostFacts:
    """What the kind node needs to know about the host it runs on (read by `detect`)."""

    cgroup_v1: bool = False          # kubelet >= 1.35 refuses cgroup v1 unless failCgroupV1: false
    cap_sys_resource: bool = True    # without it containerd cannot lower a sandbox's oom_score_adj

    @classmethod
    def detect(cls) -> "HostFacts":
        v1 = not Path("/sys/fs/cgroup/cgroup.controllers").exists()
        try:
            bnd = next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                       if line.startswith("CapBnd:"))
            has = bool(int(bnd, 16) >> 24 & 1)  # CAP_SYS_RESOURCE is capability 24
        except (OSError, StopIteration, ValueError):
            has = True
        return cls(cgroup_v1=v1, cap_sys_resource=has)

    def adaptations(self) -> list[str]:
        out = []
        if self.cgroup_v1:
            out.append("cgroup v1 host: kubelet gets failCgroupV1: false (kubelet >= 1.35 refuses cgroup v1 otherwise)")
        if not self.cap_sys_resource:
            out.append("host lacks CAP_SYS_RESOURCE: containerd gets restrict_oom_score_adj = true "
                       "(sandboxes fail to lower their oom_score_adj otherwise)")
        return out


def kind_config(spec: LabSpec, kubernetes: str, host: HostFacts | None = None,
                local: ImageSet | None = None, metrics_port: int | None = None) -> dict:
    host = host or HostFacts()
    image = local.node_image if local else node_image(kubernetes)
    node: dict = {"role": "control-plane", "image": image}
    if metrics_port:  # the lab's Prometheus (a NodePort) on the host's loopback only
        node["extraPortMappings"] = [{"containerPort": kind_metrics.NODE_PORT, "hostPort": metrics_port,
                                      "listenAddress": "127.0.0.1", "protocol": "TCP"}]
    cfg: dict = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
                 "name": cluster_name(spec.name), "nodes": [node]}
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


def kwok_stages_text() -> str:
    """kailab's KWOK stages, verbatim: the same file the binary runtime's kwok reads."""
    return resources.files("kailab").joinpath("data/kwok-stages.yaml").read_text()


@lru_cache(maxsize=1)
def kwok_release_config() -> dict:
    """The KwokConfiguration KWOK's release manifest ships (kustomize/kwok/kwok.yaml of its module):
    Stage CRs enabled, nodes managed by the kwok.x-k8s.io/node=fake annotation."""
    from ..images.gomod import module_dir

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


def fake_gpu_operator_values(fleet: Fleet, reservation_namespace: str | None = None) -> dict:
    """One topology node pool per fleet pool; nodes join a pool by SIMULATED_POOL_LABEL."""
    pools = {p.name: {"gpuProduct": p.product, "gpuCount": p.gpus, "gpuMemory": p.gpu_memory_mib}
             for p in fleet.pools}
    # the chart pulls every image `Always`: a preloaded (or locally built) image would be ignored
    pull = {"image": {"pullPolicy": "IfNotPresent"}}
    values = {c: dict(pull) for c in ("devicePlugin", "topologyServer", "statusExporter", "migFaker")}
    values.update({
        "topology": {"nodePoolLabelKey": SIMULATED_POOL_LABEL, "migStrategy": "none",
                     "nodePools": pools},
        **({"environment": {"resourceReservationNamespace": reservation_namespace}} if reservation_namespace else {}),
        # the fleet manifests already carry the nvidia.com/gpu.* labels, exactly as in the binary
        # runtime: the operator must not rewrite them
        "statusUpdater": {"disableNodeLabeling": True, **pull},
        # GPUs on KWOK nodes come from node capacity; KAI would count DRA slices a second time
        "kwokGpuDevicePlugin": {"enabled": True, **pull},
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


def build_plan(spec: LabSpec, fleet: Fleet, kai_version: str, host: HostFacts | None = None,
               local: ImageSet | None = None, kwok_release: dict | None = None,
               metrics_port: int | None = None) -> KindPlan:
    """Everything `up` does, in order, as data. Pure given its inputs: the host's facts (`host`,
    default: none to adapt to), the images built here (`local`; None: the published ones),
    KWOK's release options (default: read from its Go module) and the host port of the lab's
    Prometheus (`metrics_port`; used when spec.metrics)."""
    release = versions.kai_release(kai_version)
    addon = _addon(spec)
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
        "kwok-stages.yaml": kwok_stages_text(),
        "fake-gpu-operator-values.yaml": dump(fake_gpu_operator_values(fleet, addon.reservation_namespace)),
        "fleet-nodes.yaml": dump_all(nodes),
    }
    steps: list[tuple[str, list[str]]] = []
    add = lambda what, argv: steps.append((what, argv))  # noqa: E731

    add(f"Create the kind cluster {cluster} (one control-plane node, {config['nodes'][0]['image']})",
        ["kind", "create", "cluster", "--name", cluster, "--config", path("kind-config.yaml"),
         "--kubeconfig", kubeconfig, "--wait", t["kind_create"]])

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

    if local:
        images = list(local.images)
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
    lines = [
        f"# kailab kind runtime plan for lab {spec.name!r} (nothing has been run)",
        f"# fleet {fleet.name}: {fleet.nodes_total} nodes, {fleet.gpus_total} GPUs; "
        f"scheduler: {'; '.join(_addon(spec).plan_lines()) or '(none installed)'}",
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
        lines += [f"# {step}. the lab's metrics (kailab/runtimes/kind_metrics.py): namespace {kind_metrics.NAMESPACE}, "
                  f"kube-state-metrics and Prometheus ({', '.join(versions.metrics_images().values())}), Prometheus "
                  f"scraping every Service with a metrics port in the scheduler's namespaces, at http://127.0.0.1:{plan.metrics_port} "
                  f"(NodePort {kind_metrics.NODE_PORT}) and {kind_metrics.IN_CLUSTER_URL} in the cluster"]
        step += 1
    if _addon(spec).plan_lines():
        lines += [f"# {step}. kailab's probe, as the binary runtime: queues kailab-probe-root/"
                  f"kailab-probe and one 1-GPU pod in namespace {PROBE_NAMESPACE}; the lab is up once the "
                  "scheduler binds it"]
    lines.append("")
    for name, text in plan.files.items():
        lines += [f"# ---- {plan.lab_dir}/{name}", text.rstrip("\n"), ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ tools
def find_tool(name: str) -> str:
    """The tool's path: its KAILAB_* variable if set, else PATH; a one-line LabError if neither."""
    var = TOOL_ENV[name]
    hint = pins()[name]["install"]
    configured = os.environ.get(var)
    if configured:
        found = shutil.which(configured)
        if found:
            return found
        raise LabError(f"{name} not found at {configured} (from {var}): point {var} at the {name} "
                       "binary, or unset it to use PATH")
    found = shutil.which(name) or cached_tool(name)  # `kailab tools images` builds kind, helm, kubectl
    if not found:
        raise LabError(f"{name} not found: install it ({hint}), set {var}, or build it with `kailab tools images`")
    return str(found)


def find_tools(names: list[str]) -> dict[str, str]:
    """Every tool's path; one LabError naming every missing tool at once."""
    found, missing = {}, []
    for name in names:
        try:
            found[name] = find_tool(name)
        except LabError as err:
            missing.append(str(err))
    if missing:
        raise LabError("; ".join(missing))
    return found


def check_kubectl(kubectl: str) -> None:
    out = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True,
                         timeout=30)
    try:
        have = json.loads(out.stdout)["clientVersion"]["gitVersion"]
        m = re.match(r"v(\d+)\.(\d+)", have)
        minimum = pins()["kubectl"]["min"]
        wanted = re.match(r"v(\d+)\.(\d+)", minimum)
        if m and wanted and tuple(map(int, m.groups())) < tuple(map(int, wanted.groups())):
            raise LabError(f"kubectl {have} is too old: the kind runtime needs {minimum} or newer "
                           f"({pins()['kubectl']['install']}); set KAILAB_KUBECTL to pick another")
    except (ValueError, KeyError, TypeError):
        pass  # an unusual build that does not say its version: let the commands speak


# ------------------------------------------------------------------ host checks and images
MIN_FREE_GIB = 5  # a kind lab's node image and images, unpacked in the node


def host_problems(host: HostFacts, docker_runtime: str, free_gib: float | None, docker_root: str) -> list[str]:
    """What stops a kind lab on this host, each with its fix (pure: the facts come in)."""
    out = []
    if not host.cap_sys_resource and docker_runtime == "runc":
        out.append("this host's capability bounding set lacks CAP_SYS_RESOURCE and Docker runs containers "
                   "with plain runc, so every privileged container (kind's node) fails with 'unable to apply "
                   "caps': run Docker through kailab/data/docker-host.sh (a runc wrapper drops that one "
                   "capability; docs/kind-runtime.md, Hosts) or give the host CAP_SYS_RESOURCE")
    if free_gib is not None and free_gib < MIN_FREE_GIB:
        out.append(f"only {free_gib:.1f} GiB free under Docker's root {docker_root}: a kind lab needs at least "
                   f"{MIN_FREE_GIB} GiB (free space there, or `docker image prune`)")
    return out


def docker_facts(docker: str) -> tuple[str, float | None, str]:
    """(default runtime, GiB free under Docker's root or None when not on this filesystem, root)."""
    out = subprocess.run([docker, "info", "--format", "{{json .}}"], capture_output=True, text=True, timeout=60)
    try:
        info = json.loads(out.stdout)
    except ValueError:
        return "", None, ""
    root = info.get("DockerRootDir") or ""
    free = shutil.disk_usage(root).free / 2**30 if root and os.path.isdir(root) else None
    return info.get("DefaultRuntime") or "", free, root


IMAGES = ("auto", "local", "published")


def missing_local(s: ImageSet) -> list[str]:
    """What of the locally built image set is not here (images in Docker, charts, KWOK's manifest)."""
    from ..images import docker as images_docker

    files = [str(p) for p in (s.kai_chart, s.fgo_chart, s.kwok_manifest) if not p.is_file()]
    return [ref for ref in s.built_images if not images_docker.has(ref)] + files


def choose_images(requested: str, kai_version: str, missing: list[str]) -> tuple[ImageSet | None, str]:
    """Which images a kind lab uses, and the one line that says so. `local` needs every one of the
    set built here; `auto` takes them when all are there (the network is never probed)."""
    s = image_set(kai_version)
    build = f"`kailab tools images --kai-version {s.kai_version}`"
    if requested == "published":
        return None, "images: the published ones (registries), as asked"
    if requested == "local":
        if missing:
            raise LabError(f"--images local: {len(missing)} of the kind lab's images built here are missing "
                           f"({missing[0]}{', …' if len(missing) > 1 else ''}): build them with {build}")
        return s, f"images: built here by {build} ({len(s.built_images)} images), as asked"
    if not missing:
        return s, (f"images: built here by {build} (all {len(s.built_images)} present); "
                   "--images published pulls the released ones")
    return None, (f"images: the published ones ({len(missing)} of the set built here are missing; {build} "
                  "makes them for hosts without a registry)")


# ------------------------------------------------------------------ the runtime
class KindRuntime(Runtime):
    name = "kind"

    installs_charts = True
    install_style = "from its helm chart (operator, admission webhook) on a kind cluster"

    def prometheus_in_lab(self, record: LabRecord) -> str | None:
        return kind_metrics.IN_CLUSTER_URL if record.metrics else None

    def plan(self, spec: LabSpec) -> str:
        _addon(spec).require("charts", self.name)
        fleet, version = self._inputs(spec)
        local, said = self._images(spec, version)
        plan = build_plan(spec, fleet, version, HostFacts.detect(), local, metrics_port=free_port())
        return render_plan(plan, spec, fleet, version) + f"\n# {said}\n"

    @staticmethod
    def _images(spec: LabSpec, version: str) -> tuple[ImageSet | None, str]:
        if spec.images not in IMAGES:
            raise KailabError(f"--images {spec.images}: choose one of {', '.join(IMAGES)}")
        missing = [] if spec.images == "published" else missing_local(image_set(version))
        return choose_images(spec.images, version, missing)

    @staticmethod
    def _inputs(spec: LabSpec) -> tuple[Fleet, str]:
        fleet = load_fleet(spec.fleet)
        version = versions.kai_release(spec.kai_version or versions.DEFAULT_KAI).version
        cluster_name(spec.name)  # validate the name before anything runs
        return fleet, version

    # ---------------------------------------------------------------- up
    def up(self, spec: LabSpec) -> LabRecord:
        _addon(spec).require("charts", self.name)
        fleet, version = self._inputs(spec)
        tools = find_tools(["kind", "kubectl", "helm"])
        check_kubectl(tools["kubectl"])
        if not docker_answers():
            raise LabError("no Docker engine answers (DOCKER_HOST or /var/run/docker.sock): the kind "
                           "runtime needs one; use --runtime binary on hosts without Docker, or start one "
                           "with kailab/data/docker-host.sh")
        host = HostFacts.detect()
        problems = host_problems(host, *docker_facts(shutil.which("docker") or "docker"))
        if problems:
            raise LabError(problems[0])
        with lab_lock(spec.name):
            existing = LabRecord.load(spec.name)
            if existing and existing.state == "up":
                return self._reuse(existing, spec, fleet, version)
            if lab_dir(spec.name).exists():  # a failed or half-made lab: start clean
                self._teardown(spec.name, tools["kind"])
            local, said = self._images(spec, version)
            progress(said)
            plan = build_plan(spec, fleet, version, host, local, metrics_port=free_port())
            for note in plan.notes:
                progress(f"host: {note}")
            return self._run(plan, spec, fleet, version, tools)

    def _reuse(self, rec: LabRecord, spec: LabSpec, fleet: Fleet, version: str) -> LabRecord:
        refuse_other_lab(rec, spec, self.name, fleet.name, version)
        info = self.status(rec)
        if info["state"] != "up":
            broken = [f"{n} {c['state']}" for n, c in info["components"].items() if c["state"] != "running"]
            raise LabError(f"lab {rec.name!r} is broken ({'; '.join(broken) or 'API server unreachable'}): "
                           "run `kailab down` then `kailab up` to rebuild it")
        return rec

    def _run(self, plan: KindPlan, spec: LabSpec, fleet: Fleet, version: str,
             tools: dict[str, str]) -> LabRecord:
        lab = Path(plan.lab_dir)
        (lab / "logs").mkdir(parents=True, exist_ok=True)
        for name, text in plan.files.items():
            (lab / name).write_text(text)
        rec = LabRecord(name=spec.name, runtime=self.name, kai_version=version if spec.with_kai else "none",
                        fleet=fleet.name, nodes=fleet.nodes_total, gpus=fleet.gpus_total,
                        with_kai=spec.with_kai, kubeconfig=plan.kubeconfig,
                        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), stack=_addon(spec).record())
        rec.save()
        log = lab / "logs" / "kind-runtime.log"
        try:
            for i, (what, argv) in enumerate(zip(plan.descriptions, plan.commands), 1):
                progress(f"[{i}/{len(plan.commands)}] {what}")
                run_logged([tools.get(argv[0], argv[0]), *argv[1:]], log, shown=argv, what=what)
                if i == 1:
                    self._preload(plan, tools["kind"], log)
                    port = _port(clusterinfo.api_server(plan.kubeconfig))
                    if port:
                        rec.ports = {"kube-apiserver": port}
                        rec.save()
            if plan.metrics_port:
                progress(f"the lab's metrics: {kind_metrics.KSM} and {kind_metrics.PROMETHEUS} "
                         f"(namespace {kind_metrics.NAMESPACE})")
                kube = Kube(plan.kubeconfig)
                try:
                    kind_metrics.install(kube, CONTROL_PLANE_SELECTOR,
                                         next(iter(rec.stack["namespaces"]), None), lab)
                finally:
                    kube.close()
                rec.metrics = True
                rec.ports = {**rec.ports, f"{kind_metrics.PROMETHEUS}.web": plan.metrics_port}
                rec.save()
            kube = Kube(plan.kubeconfig)
            try:
                _addon(spec).await_ready(kube)
            finally:
                kube.close()
        except BaseException:
            # keep the cluster to look at (kubectl --kubeconfig ...); the next `up` starts clean
            rec.state = "failed"
            rec.save()
            raise
        rec.state = "up"
        rec.save()
        return rec

    def _preload(self, plan: KindPlan, kind: str, log: Path) -> None:
        """Load images the local Docker has into the node (all of them when they were built here),
        in one `kind load` so the node's containerd imports one archive."""
        docker = shutil.which("docker")
        if not docker:
            return
        present = [image for image in plan.preload_images
                   if subprocess.run([docker, "image", "inspect", image], capture_output=True, timeout=60).returncode == 0]
        if present:
            progress(f"loading {len(present)} images into the node")
            argv = ["kind", "load", "docker-image", *present, "--name", plan.cluster]
            run_logged([kind, *argv[1:]], log, shown=argv, what="kind load docker-image")

    # ---------------------------------------------------------------- deaths
    # A cluster restarts a crashed container itself, so a death shows as a restart: a component whose
    # containers restarted since the run began (log_mark) died during it.
    def log_mark(self, record: LabRecord) -> dict:
        mark = super().log_mark(record)
        kube = Kube(record.kubeconfig)
        try:
            self._restarts = _restart_counts(kube, _components(record))
        except Exception:  # noqa: BLE001 - no baseline: deaths are not reported for this run
            self._restarts = None
        finally:
            kube.close()
        return mark

    def dead_components(self, record: LabRecord, ignore: set[str]) -> list[tuple[str, str]]:
        baseline = getattr(self, "_restarts", None)
        if baseline is None:
            return []
        kube = Kube(record.kubeconfig)
        try:
            now = _restart_counts(kube, _components(record))
            return [(name, _why_it_died(kube, pods)) for name, (count, pods) in now.items()
                    if count > baseline.get(name, (0, []))[0] and name not in ignore]
        finally:
            kube.close()

    # ---------------------------------------------------------------- status / down
    def status(self, rec: LabRecord) -> dict:
        expected = [n for ns in _components(rec).values() for n in ns]
        components = {n: {"state": "missing", "pid": None, "ports": {}, "log": None} for n in expected}
        nodes = gpus = 0
        api_ok = False
        self._refresh_kubeconfig(rec)
        try:
            kube = Kube(rec.kubeconfig)
        except Exception:  # noqa: BLE001 - no kubeconfig: the cluster is gone or never came up
            kube = None
        if kube is not None:
            try:
                api_ok = kube.readyz()
                if api_ok:
                    for ns, names in _components(rec).items():
                        components.update(clusterinfo.deployment_states(kube, ns, names))
                    nodes, gpus = clusterinfo.ready_nodes_and_gpus(kube, f"{FLEET_LABEL}={rec.fleet}")
            finally:
                kube.close()
        healthy = api_ok and all(c["state"] == "running" for c in components.values())
        report = status_report(rec, healthy, nodes, gpus, components, clusterinfo.api_server(rec.kubeconfig))
        if rec.metrics:
            report["prometheus"] = metrics.url(rec.ports)
        return report

    @staticmethod
    def _refresh_kubeconfig(rec: LabRecord) -> None:
        """kind may move the API server's host port when Docker restarts: re-export it."""
        try:
            kind = find_tool("kind")
        except LabError:
            return
        subprocess.run([kind, "export", "kubeconfig", "--name", cluster_name(rec.name),
                        "--kubeconfig", rec.kubeconfig], capture_output=True, timeout=60)

    def down(self, name: str) -> list[str]:
        with lab_lock(name):
            if not lab_dir(name).exists():
                return []
            return self._teardown(name, find_tool("kind"))

    def _teardown(self, name: str, kind: str) -> list[str]:
        cluster = cluster_name(name)
        out = subprocess.run([kind, "delete", "cluster", "--name", cluster], capture_output=True, text=True,
                             timeout=300)
        if out.returncode != 0:
            raise LabError(f"`kind delete cluster --name {cluster}` failed: {last_line(out.stderr)}")
        shutil.rmtree(lab_dir(name), ignore_errors=True)
        stopped = [f"kind cluster {cluster}"]
        # kind leaves its shared `kind` network behind; it goes with the engine's last kind cluster
        docker = shutil.which("docker")
        if docker:
            left = subprocess.run([docker, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster"],
                                  capture_output=True, text=True, timeout=60).stdout.strip()
            if not left and subprocess.run([docker, "network", "rm", "kind"], capture_output=True,
                                           timeout=60).returncode == 0:
                stopped.append("docker network kind")
        return stopped


# ------------------------------------------------------------------ helpers
def _components(rec: LabRecord) -> dict[str, list[str]]:
    """The lab's named components: Deployments by namespace."""
    kw, fgo = pins()["kwok"], pins()["fake_gpu_operator"]
    out = {kw["namespace"]: [kw["deployment"]]}
    out.update({ns: list(names) for ns, names in (rec.stack or {}).get("deployments", {}).items()})
    out[fgo["namespace"]] = list(fgo["deployments"])
    if rec.metrics:
        out[kind_metrics.NAMESPACE] = list(kind_metrics.DEPLOYMENTS)
    return out


def _restart_counts(kube: Kube, components: dict[str, list[str]]) -> dict[str, tuple[int, list]]:
    """Component -> (container restarts over its pods, [pod]), from the pods' owners."""
    out: dict[str, tuple[int, list]] = {}
    for ns, names in components.items():
        for pod in kube.list("v1", "Pod", ns):
            owner = next((o["name"] for o in pod["metadata"].get("ownerReferences") or []
                          if o["kind"] == "ReplicaSet"), "")
            name = owner.rsplit("-", 1)[0]
            if name not in names:
                continue
            restarts = sum(c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])
            count, pods = out.get(name, (0, []))
            out[name] = (count + restarts, pods + [pod])
    return out


def _why_it_died(kube: Kube, pods: list, lines: int = 10) -> str:
    """How the restarted container ended (the kubelet's reason and exit code: OOMKilled, a probe,
    a crash) and its previous instance's last log lines."""
    for pod in pods:
        meta = pod["metadata"]
        for c in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = ((c.get("lastState") or {}).get("terminated")) or {}
            if not ended:
                continue
            how = (f"container {c['name']} of pod {meta['name']} ended {ended.get('reason') or 'without a reason'}"
                   f" (exit code {ended.get('exitCode')}) at {ended.get('finishedAt')}")
            try:
                tail = kube.core.read_namespaced_pod_log(meta["name"], meta["namespace"], container=c["name"],
                                                         previous=True, tail_lines=lines) or ""
            except Exception:  # noqa: BLE001 - the previous log is gone (kubelet GC): the reason still tells
                tail = ""
            tail = " | ".join(line[:300] for line in tail.strip().splitlines())
            return f"{how}; its last log lines: {tail or '(none)'}"
    return "no terminated container state recorded"


def _port(server: str) -> int | None:
    m = re.search(r":(\d+)/?$", server)
    return int(m.group(1)) if m else None


def _addon(spec: LabSpec) -> Addon:
    if spec.addon is not None:
        return spec.addon
    if spec.with_kai:  # a caller that skipped kailab.lab would silently get a lab without its scheduler
        raise LabError(f"lab {spec.name!r}: a scheduler was asked for but none was handed to the runtime; "
                       "bring labs up through kailab.lab (lab(), get_runtime())")
    return Addon()
