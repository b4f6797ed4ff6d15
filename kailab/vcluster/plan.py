"""Version trials in vClusters: one vCluster per KAI version on one host cluster, as a plan (pure).

The host is a cluster with KWOK and fake-gpu-operator and no KAI: a kind lab the trial makes
(`--runtime kind`), or a cluster the user already has (`--runtime existing --kubeconfig F`), which
may run its own scheduler and workloads. Each KAI version then gets

- its own vCluster (its own API server, so its own KAI CRDs and webhooks) with its own scheduler on
  (controlPlane.distro.k8s.scheduler): KAI *inside* the vCluster binds pods to nodes, and vCluster
  syncs bound pods to the host, where KWOK runs them;
- its own KWOK node pool on the host: the fleet's nodes named `<slug>-<node>` and labelled
  `trial.kailab.io/<slug>=true`, the label its vCluster's node sync selects. Pools are disjoint: a
  synced node's allocatable does not show another vCluster's pods, so two KAIs binding into one
  node would double-book its GPUs;
- one real host node (the infra node) labelled `trial.kailab.io/<slug>=true` and
  `infra.kailab.io/<slug>=true`: with its own scheduler, a vCluster runs pods only on nodes it syncs,
  so KAI's own pods, CoreDNS and the vCluster's control plane need a real node in the selection
  (a KWOK node would accept them and never run their containers). Labels per version: both
  versions share the one real node, each selecting it by a key of its own.

Its API server is reached at the infra node's address on a NodePort chosen from the version
(`node_port`), which its certificate names. Everything is built here (kailab/images/vcluster.py):
the CLI, the chart, the syncer's and the virtual control plane's images, KAI's chart and images.

`version_plan` is data: every command, in order, and its clean-up, which also runs first (so what an
interrupted trial left under these names never leaks into the next one). The trial driver
(kailab/vcluster/) runs it; `render` is the dry run.
"""

from __future__ import annotations

import copy
import shlex
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import versions
from ..errors import KailabError
from ..fleet import Fleet
from ..images import image_set
from ..images import vcluster as vc_images
from ..kube import FIELD_MANAGER
from ..stacks.kai import kind as kai_kind

SYNC_PREFIX = "trial.kailab.io"   # trial.kailab.io/<slug>=true: what a version's vCluster syncs from the host
INFRA_PREFIX = "infra.kailab.io"  # infra.kailab.io/<slug>=true: the real node its own pods run on
OWNER_LABEL = "kailab.io/trial"   # on each vCluster's namespace: the trial that made it
KWOK_NODE_LABEL = "type=kwok"     # every fleet node carries it (fleet._pool_nodes); real nodes do not
DEFAULT_EXERCISES = ("quota", "borrow", "reclaim", "gang")  # the `kailab trial` default
VCLUSTER_ENV = "KAILAB_VCLUSTER"
NODE_PORTS = (30000, 32767)  # Kubernetes' default NodePort range


# ------------------------------------------------------------------ names
def slug(version: str) -> str:
    """A KAI version as a DNS label: v0.16.8 -> v0-16-8."""
    return versions.normalise(version).replace(".", "-")


def vcluster_name(version_slug: str) -> str:
    return f"kai-{version_slug}"


def vcluster_namespace(version_slug: str) -> str:
    return f"vcluster-kai-{version_slug}"


def sync_label(version_slug: str) -> str:
    return f"{SYNC_PREFIX}/{version_slug}"


def infra_label(version_slug: str) -> str:
    return f"{INFRA_PREFIX}/{version_slug}"


def pool_selector(version_slug: str) -> str:
    """A version's KWOK nodes on the host (never the infra node, which carries its sync label too)."""
    return f"{sync_label(version_slug)}=true,{KWOK_NODE_LABEL}"


def node_port(version_slug: str) -> int:
    """The NodePort of a version's vCluster API server: fixed by the version, so the plan is data."""
    low, high = NODE_PORTS
    return low + 500 + zlib.crc32(version_slug.encode()) % (high - low - 1000)


# ------------------------------------------------------------------ the host, as the plan needs it
@dataclass(frozen=True)
class TrialHost:
    """What a plan needs of its host (read from it by the driver, or stand-ins for the dry run)."""

    kubeconfig: str
    infra_node: str
    infra_ip: str
    lab_dir: str                 # where the trial's files go
    kind_cluster: str = ""       # its nodes are kind's: images go in with `kind load`
    kubernetes: str = ""         # the virtual control plane's (default: the lab's)


# ------------------------------------------------------------------ pure pieces
def pool_nodes(fleet: Fleet, version_slug: str) -> list[dict]:
    """The fleet's nodes as this version's pool: named `<slug>-<name>`, with its sync label."""
    return fleet.node_manifests(f"{version_slug}-", {sync_label(version_slug): "true"})


def vcluster_values(version_slug: str, host: TrialHost, coredns_image: str) -> dict:
    """The vcluster.yaml (v0.20+ schema) of one version's vCluster, every image built here."""
    vs = vc_images.vcluster_set(host.kubernetes or None)
    repo = lambda ref: ref.rsplit(":", 1)[0].split("/", 1)  # noqa: E731 - registry, repository
    (k8s_registry, k8s_repo), (syncer_registry, syncer_repo) = repo(vs.kubernetes_image), repo(vs.syncer_image)
    infra = {infra_label(version_slug): "true"}
    return {
        "controlPlane": {
            "distro": {"k8s": {
                "enabled": True,
                "image": {"registry": k8s_registry, "repository": k8s_repo, "tag": vs.kubernetes},
                "imagePullPolicy": "IfNotPresent",
                # KAI inside the vCluster schedules; vCluster syncs only pods that already have a node
                "scheduler": {"enabled": True, "extraArgs": ["--leader-elect=false"]},
                # one replica each: nothing to elect, and a lease renewal that misses its deadline on
                # busy cores (kine over sqlite) makes kube-controller-manager exit, and the syncer with it
                "controllerManager": {"extraArgs": ["--leader-elect=false"]}}},
            "statefulSet": {
                "image": {"registry": syncer_registry, "repository": syncer_repo, "tag": vs.chart_version},
                "imagePullPolicy": "IfNotPresent",
                # the host's scheduler would happily put the control plane on a fake KWOK node
                "scheduling": {"nodeSelector": infra},
                # its CPU weight when the node's cores are all busy (cgroup cpu.shares come from the
                # request): at 10m the virtual API server and kine got ~1/180 of the node beside the
                # host's own control plane and KAI, the watch cache trailed kine by over the 3 s a
                # watch waits for it, and KAI's binder, which gives up a bind on one watch error,
                # failed a fractional bind (CI, 2026-11-26). Room for it: CONTROL_PLANE_CPU
                "resources": {"requests": {"cpu": CONTROL_PLANE_CPU}},
                # no PVC: nothing outlives the vCluster (and a lab host may have no storage class)
                "persistence": {"volumeClaim": {"enabled": False}}},
            "coredns": {"deployment": {"nodeSelector": infra, "image": coredns_image,
                                       "resources": {"requests": {"cpu": "5m"}}}},
            # the machine reaches the API server at the infra node's address; its certificate names it
            "service": {"spec": {"type": "NodePort"}, "httpsNodePort": node_port(version_slug)},
            "proxy": {"extraSANs": [host.infra_ip]},
        },
        "sync": {
            "toHost": {"pods": {"enabled": True}},
            "fromHost": {
                "nodes": {
                    "enabled": True,
                    # `all: true` would ignore the labels: this version's pool and the infra node only
                    "selector": {"all": False, "labels": {sync_label(version_slug): "true"}},
                    "syncBackChanges": False,
                },
                # KAI's admission gives fractional pods the RuntimeClass `nvidia`, which the host's GPU
                # operator makes: without it in the vCluster such pods are refused
                "runtimeClasses": {"enabled": True},
            },
        },
        # byIP makes one host Service per synced node: a thousand for the large fleet, never used
        "networking": {"advanced": {"proxyKubelets": {"byIP": False}}},
        # No owner reference (the vCluster's Service) on the pods it syncs: a host running its own
        # KAI would group them. Its podgrouper skips a pod that names a PodGroup and has no owner,
        # but groups one owned by the Service under a host PodGroup and writes that name into the
        # pod's `pod-group-name` annotation — which vCluster syncs back into the virtual pod, where
        # no such PodGroup exists and the version's KAI loses count of the pod's queue (measured:
        # a non-preemptible queue bound 12 pods over its quota of 8). Deleting the namespace still
        # takes every synced pod with it.
        "experimental": {"syncSettings": {"setOwner": False}},
        "telemetry": {"enabled": False},  # air-gapped: nothing to report to
    }


# KAI's own pods ask for little CPU here. With its own scheduler, a vCluster sees a real node's
# allocatable less every other pod's requests there (the host's, the other vCluster's), and the
# kubelet admits no pod beyond it: the chart's requests (~0.5 CPU per KAI, the scheduler 250m) fit
# one KAI on a 2-core node, not two beside the host's own. The chart's limits stay, as installed.
SMALL_REQUESTS = {"requests": {"cpu": "5m", "memory": "64Mi"}}
# A vCluster's control plane (syncer, virtual API server, controller manager, kine in one container)
# is what every request of its KAI goes through, so it asks for real CPU: two versions' 150m fit a
# 2-core kind host beside the host's own pods now that fake-gpu-operator's idle helpers ask for 10m
# each (kailab/runtimes/kind/plan.py).
CONTROL_PLANE_CPU = "150m"
KAI_COMPONENTS = ("operator", "scheduler", "binder", "admission", "podgrouper", "podgroupcontroller", "queuecontroller")


def kai_values(version: str, version_slug: str) -> dict:
    """KAI's chart values on kind (kind.kai_values: GPU sharing, images built here) with its pods on
    the version's infra node, asking for little CPU (SMALL_REQUESTS)."""
    values = kai_kind.kai_values(image_set(version), {infra_label(version_slug): "true"})
    return {**values, **{c: {"resources": SMALL_REQUESTS} for c in KAI_COMPONENTS}}


# ------------------------------------------------------------------ the plan
@dataclass
class VersionPlan:
    version: str
    slug: str
    vcluster_name: str
    namespace: str
    lab_name: str                # the `existing`-runtime lab the exercises run against
    values: dict                 # vcluster.yaml
    node_manifests: list[dict]
    steps: list[tuple[str, list[str]]]
    cleanup: list[tuple[str, list[str]]]
    kubeconfig: str
    server: str                  # the vCluster's API server as the machine reaches it
    files: dict[str, str] = field(default_factory=dict)  # name relative to the trial's dir -> text
    stdout_files: dict[int, str] = field(default_factory=dict)  # step index -> file its stdout goes to

    @property
    def commands(self) -> list[list[str]]:
        return [argv for _, argv in self.steps]


def cleanup_steps(s: str, host_kubeconfig: str, pool: list[str] | None = None) -> list[tuple[str, list[str]]]:
    """A version's clean-up on the host, idempotent: what is not there is not an error. `pool`: its
    nodes' names, whose DaemonSet pods go with them."""
    name, ns = vcluster_name(s), vcluster_namespace(s)
    host_kubectl = ["kubectl", "--kubeconfig", host_kubeconfig]
    vcluster = ["env", f"KUBECONFIG={host_kubeconfig}", "vcluster"]  # the CLI has no --kubeconfig flag
    # the host's DaemonSets (kube-proxy, a GPU operator's) put a pod on every node, KWOK's too; with
    # the node gone, kube-controller-manager's pod GC would delete each only after 40 s of quarantine
    orphans = [(f"Delete the pods the host's DaemonSets put on {node} (as its pod GC would, without the 40 s wait)",
                [*host_kubectl, "delete", "pods", "-A", "--field-selector", f"spec.nodeName={node}", "--force",
                 "--grace-period=0", "--ignore-not-found"]) for node in pool or []]
    return [
        (f"Delete the vCluster {name} and its namespace {ns}",
         [*vcluster, "delete", name, "-n", ns, "--delete-namespace", "--ignore-not-found"]),
        ("Delete this version's KWOK nodes on the host (never a real node)",
         [*host_kubectl, "delete", "nodes", "-l", pool_selector(s), "--ignore-not-found", "--wait=false"]),
        *orphans,
        ("Take this version's labels off the host's real nodes",
         [*host_kubectl, "label", "nodes", "-l", f"{sync_label(s)}=true", f"{sync_label(s)}-", f"{infra_label(s)}-"]),
        (f"Make sure the namespace {ns} is gone",
         [*host_kubectl, "delete", "namespace", ns, "--ignore-not-found", "--timeout=300s"]),
    ]


def version_plan(version: str, fleet: Fleet, host: TrialHost, trial: str, coredns_image: str) -> VersionPlan:
    release = versions.kai_release(version)
    s = slug(release.version)
    name, ns = vcluster_name(s), vcluster_namespace(s)
    vs = vc_images.vcluster_set(host.kubernetes or None)
    path = lambda rel: str(Path(host.lab_dir) / s / rel)  # noqa: E731
    kubeconfig = path("kubeconfig")
    host_kubectl = ["kubectl", "--kubeconfig", host.kubeconfig]
    v_kubectl = ["kubectl", "--kubeconfig", kubeconfig]
    vcluster = ["env", f"KUBECONFIG={host.kubeconfig}", "vcluster"]  # the CLI has no --kubeconfig flag
    values = vcluster_values(s, host, coredns_image)
    nodes = pool_nodes(fleet, s)
    gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes)
    server = f"https://{host.infra_ip}:{node_port(s)}"
    files = {f"{s}/vcluster.yaml": yaml.safe_dump(values, sort_keys=False),
             f"{s}/kai-values.yaml": yaml.safe_dump(kai_values(release.version, s), sort_keys=False),
             f"{s}/pool-nodes.yaml": yaml.safe_dump_all(nodes, sort_keys=False)}
    cleanup = cleanup_steps(s, host.kubeconfig, [n["metadata"]["name"] for n in nodes])
    steps: list[tuple[str, list[str]]] = [(f"Before: {what[0].lower()}{what[1:]}", argv) for what, argv in cleanup]
    add = lambda what, argv: steps.append((what, argv))  # noqa: E731
    add(f"Create this version's {len(nodes)} KWOK nodes ({gpus} GPUs), named {s}-*, labelled {sync_label(s)}=true",
        [*host_kubectl, "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
         "-f", path("pool-nodes.yaml")])
    add("Set their capacity through the status subresource, as the binary runtime",
        [*host_kubectl, "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}-status",
         "--subresource=status", "-f", path("pool-nodes.yaml")])
    add("Wait for KWOK to mark them Ready",
        [*host_kubectl, "wait", "--for=condition=Ready", "node", "-l", pool_selector(s), "--timeout=300s"])
    add(f"Label the host's real node {host.infra_node} into this version's selection (its own pods run there)",
        [*host_kubectl, "label", "node", host.infra_node, f"{sync_label(s)}=true", f"{infra_label(s)}=true",
         "--overwrite"])
    add(f"Create the vCluster {name} (vCluster {vs.version}, chart packaged here, its own scheduler, node "
        f"sync {sync_label(s)}=true only, API server on NodePort {node_port(s)})",
        [*vcluster, "create", name, "-n", ns, "--values", path("vcluster.yaml"), "--local-chart-dir",
         str(vs.chart), "--chart-version", vs.chart_version, "--connect=false", "--add=false"])
    add(f"Mark its namespace as this trial's ({OWNER_LABEL}={trial}): the next trial cleans up after a dead one",
        [*host_kubectl, "label", "namespace", ns, f"{OWNER_LABEL}={trial}", "--overwrite"])
    add("Wait for its control plane (a Deployment: without a PVC the chart makes no StatefulSet)",
        [*host_kubectl, "-n", ns, "rollout", "status", f"deployment/{name}", "--timeout=300s"])
    stdout_files = {len(steps): kubeconfig}
    add(f"Its kubeconfig, for its API server at {server} (stdout to a file); then, until it answers there "
        "(kube-proxy programs a new NodePort in its own time)",
        [*vcluster, "connect", name, "-n", ns, "--print", "--server", server])
    for what, argv in kai_kind.kai_install_steps(release.version, kubeconfig, path("kai-values.yaml"),
                                                 where=" INTO the vCluster",
                                                 chart=str(image_set(release.version).kai_chart)):
        add(what, argv)
    add("The vCluster sees this version's pool, Ready",
        [*v_kubectl, "wait", "--for=condition=Ready", "node", "-l", pool_selector(s), "--timeout=300s"])
    return VersionPlan(version=release.version, slug=s, vcluster_name=name, namespace=ns,
                       lab_name=f"{trial}-{s}", values=values, node_manifests=nodes, steps=steps, cleanup=cleanup,
                       kubeconfig=kubeconfig, server=server, files=files, stdout_files=stdout_files)


def images_to_load(version_list: list[str], kubernetes: str = "") -> list[str]:
    """What a kind host's node needs beyond its own lab's images: every version's KAI images and
    vCluster's (all built here)."""
    out = list(vc_images.vcluster_set(kubernetes or None).images)
    for v in version_list:
        out += [ref for ref in image_set(v).images if "/kai-scheduler/" in ref]
    return out


def trial_plans(version_list: list[str], fleet: Fleet, host: TrialHost, trial: str,
                coredns_image: str) -> list[VersionPlan]:
    releases = [versions.kai_release(v).version for v in version_list]
    if len(set(releases)) != len(releases):
        raise KailabError("a version is listed twice: each version gets one vCluster")
    return [version_plan(v, fleet, host, trial, coredns_image) for v in releases]


# ------------------------------------------------------------------ the dry run
def shown(argv: list[str], stdout: str | None = None) -> str:
    return shlex.join(argv) + (f" > {shlex.quote(stdout)}" if stdout else "")


def render(plans: list[VersionPlan], host: TrialHost, host_lines: list[str], load: list[str],
           notes: list[str] | None = None) -> str:
    """The dry run: the host, every version's commands in order and its clean-up, then every file."""
    vs = vc_images.vcluster_set(host.kubernetes or None)
    lines = [f"# kailab version trial in vClusters (nothing has been run): {', '.join(p.version for p in plans)}",
             f"# vCluster {vs.version} (CLI, syncer {vs.syncer_image}, virtual control plane {vs.kubernetes_image}, "
             "chart: all built here by `kailab tools images --vcluster`)",
             *[f"# {n}" for n in notes or []], "", "## host", *host_lines]
    if load and host.kind_cluster:
        lines += ["# images the kind host's node needs (built here):",
                  shown(["kind", "load", "docker-image", *load, "--name", host.kind_cluster])]
    for p in plans:
        lines += ["", f"## KAI {p.version}: vCluster {p.vcluster_name} in namespace {p.namespace}, pool "
                      f"{sync_label(p.slug)}=true, API server {p.server}"]
        for i, (what, argv) in enumerate(p.steps):
            lines += [f"# {i + 1}. {what}", shown(argv, p.stdout_files.get(i))]
        lines += [f"# then: adopted as lab {p.lab_name} (existing runtime, fleet {p.node_manifests[0]['metadata']['labels'].get('kailab.io/fleet')} "
                  f"as {p.slug}-NAME), KAI's probe, the exercises"]
        lines.append(f"# clean-up (always, also when a step above failed; timed: the rollback), then {p.kubeconfig} is removed")
        for i, (what, argv) in enumerate(p.cleanup, 1):
            lines += [f"# c{i}. {what}", shown(argv)]
    for p in plans:
        for name, text in p.files.items():
            lines += [f"# ---- {host.lab_dir}/{name}", text.rstrip("\n"), ""]
    return "\n".join(lines) + "\n"
