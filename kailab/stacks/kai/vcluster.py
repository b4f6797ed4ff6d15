"""Version trials on kind hosts: one vCluster per KAI version on one shared kind host cluster.

The host is the kind runtime's cluster (kind.build_plan) without KAI and without the fleet: kind,
KWOK with kailab's stages, fake-gpu-operator. Each KAI version then gets

- its own vCluster (its own API server, so its own KAI CRDs and webhooks), with the virtual
  scheduler enabled: KAI *inside* the vCluster binds pods to nodes, and vCluster syncs only bound
  pods to the host, where KWOK runs them;
- its own KWOK node pool on the host: the fleet's nodes renamed `<slug>-<node>` and labelled
  `kailab.io/trial=<slug>`, the only label the vCluster's node sync selects. Pools are disjoint
  because a synced node's allocatable does not reliably reflect another trial's binds (two KAI
  schedulers binding to one shared node would double-book its GPUs);
- its own real kind worker node, labelled the same way plus `kailab.io/infra=true`: with the
  virtual scheduler, a pod inside the vCluster runs only on a node the vCluster syncs, so KAI's own
  pods (and the vCluster's control plane and CoreDNS) need a real node inside the selection. The
  fake KWOK nodes would accept them and never run their containers.

`trial_plan` is pure (reads only kailab's data files); `render` is the dry run; `run_versions` runs
the plan on a Docker host. Clean-up per version deletes the vCluster with its namespace, its
PVCs explicitly (the StatefulSet retains its data PVC, so a re-used name would otherwise come back
with the old CRDs and objects) and its KWOK nodes; it runs before each version's set-up as well,
so what an interrupted trial left behind never leaks into the next one.
"""

from __future__ import annotations

import copy
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ... import versions
from ...errors import KailabError, LabError
from ...fleet import FLEET_LABEL, Fleet, load_fleet
from ...kube import FIELD_MANAGER
from ...runtimes import kind
from . import kind as kai_kind
from ...runtimes.shell import COMMAND_TIMEOUT, last_line, progress, run_logged, short
from ...runtimes.base import LabSpec, docker_answers

TRIAL_LABEL = "kailab.io/trial"  # on a version's KWOK nodes and its kind worker; its node-sync selector
INFRA_LABEL = "kailab.io/infra"  # on the kind workers: where a vCluster's own pods (and KAI's) run
KWOK_NODE_LABEL = "type=kwok"  # every fleet node carries it (fleet._pool_nodes); real nodes do not
DEFAULT_EXERCISES = ("quota", "borrow", "reclaim", "gang")  # the `kailab trial` default
VCLUSTER_ENV = "KAILAB_VCLUSTER"


# ------------------------------------------------------------------ names
def slug(version: str) -> str:
    """A KAI version as a DNS label and label value: v0.16.8 -> v0-16-8."""
    return versions.normalise(version).replace(".", "-")


def vcluster_name(version_slug: str) -> str:
    return f"kai-{version_slug}"


def vcluster_namespace(version_slug: str) -> str:
    return f"vcluster-kai-{version_slug}"


def statefulset_selector(name: str) -> str:
    """The vCluster chart's StatefulSet selector; Kubernetes copies it onto the data PVC's labels."""
    return f"app=vcluster,release={name}"


def trial_node_selector(version_slug: str) -> str:
    """A version's KWOK nodes on the host (never its kind worker, which carries the trial label too)."""
    return f"{TRIAL_LABEL}={version_slug},{KWOK_NODE_LABEL}"


# ------------------------------------------------------------------ pure pieces
def trial_nodes(fleet: Fleet, version_slug: str) -> list[dict]:
    """fleet.node_manifests(), renamed `<slug>-<name>` and labelled kailab.io/trial=<slug>."""
    nodes = copy.deepcopy(fleet.node_manifests())
    for node in nodes:
        name = f"{version_slug}-{node['metadata']['name']}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        node["metadata"]["labels"][TRIAL_LABEL] = version_slug
    return nodes


def virtual_kubernetes_tag(kubernetes: str) -> str:
    """The pinned virtual control-plane image tag for a Kubernetes version's minor."""
    images = kind.pins()["vcluster"]["kubernetes_images"]
    return images[kind.pinned_minor(kubernetes, images, "vcluster.kubernetes_images")]


def vcluster_values(version_slug: str, kubernetes: str) -> dict:
    """The vcluster.yaml (v0.20+ schema) of one version's vCluster."""
    return {
        "controlPlane": {
            "distro": {"k8s": {"enabled": True, "image": {"tag": virtual_kubernetes_tag(kubernetes)}}},
            # KAI inside the vCluster schedules; vCluster syncs only pods that already have a node
            "advanced": {"virtualScheduler": {"enabled": True}},
            # the host's scheduler would happily put the control plane on a fake KWOK node
            "statefulSet": {"scheduling": {"nodeSelector": {TRIAL_LABEL: version_slug, INFRA_LABEL: "true"}}},
            # inside the vCluster, the version's own kind worker is the only node with this label
            "coredns": {"deployment": {"nodeSelector": {INFRA_LABEL: "true"}}},
        },
        "sync": {
            "toHost": {"pods": {"enabled": True}},
            "fromHost": {"nodes": {
                "enabled": True,
                # `all: true` would ignore the labels: this version's pool (and its worker) only
                "selector": {"all": False, "labels": {TRIAL_LABEL: version_slug}},
                "syncBackChanges": False,
            }},
        },
        # byIP makes one host Service per synced node: a thousand for the large fleet, never used
        "networking": {"advanced": {"proxyKubelets": {"byIP": False}}},
    }


def kai_values() -> dict:
    """kai_kind.kai_values() with the node selector KAI's pods need inside a vCluster (its kind worker)."""
    values = copy.deepcopy(kai_kind.kai_values())
    values["global"]["nodeSelector"] = {INFRA_LABEL: "true"}
    return values


# ------------------------------------------------------------------ the plan
@dataclass
class VersionPlan:
    version: str
    slug: str
    vcluster_name: str
    namespace: str
    lab_name: str  # the `existing`-runtime lab the exercises run against
    values: dict  # vcluster.yaml
    node_manifests: list[dict]
    commands: list[list[str]]
    cleanup: list[list[str]]
    kubeconfig: str
    kai_chart: str
    descriptions: list[str] = field(default_factory=list)  # one per command
    cleanup_descriptions: list[str] = field(default_factory=list)
    stdout_files: dict[int, str] = field(default_factory=dict)  # command index -> file its stdout goes to
    run_step: int = -1  # the `kailab run` command: exit 1 there means an exercise failed, not the lab
    files: dict[str, str] = field(default_factory=dict)  # name relative to the host's lab dir -> text
    worker: dict = field(default_factory=dict)  # this version's kind worker (kind config node)


@dataclass
class VClusterTrialPlan:
    host_name: str
    cluster: str
    lab_dir: str
    host_kubeconfig: str
    kind_config: dict
    host_commands: list[list[str]]
    host_descriptions: list[str]
    host_files: dict[str, str]
    host_cleanup: list[list[str]]
    preload_images: list[str]
    versions: list[VersionPlan]
    fleet: str
    exercises: list[str]
    evidence_root: str


def host_plan(version_list: list[str], fleet: Fleet, host_name: str, slugs: list[str]) -> kind.KindPlan:
    """kind.build_plan without KAI and without the fleet's nodes, plus one labelled worker per version.

    A wrapper over build_plan's output: its fleet steps and file are dropped, its kind config gets
    the workers, and one step untaints kind's control-plane node (kind keeps it tainted once the
    cluster has workers; KWOK's patch in kind.py pins the KWOK controller there).
    """
    newest = max(version_list, key=versions.parse)  # the host's Kubernetes: the newest KAI's
    spec = LabSpec(name=host_name, runtime="kind", fleet=fleet.name, kai_version=newest, with_kai=False)
    base = kind.build_plan(spec, fleet, newest)
    lab = Path(base.lab_dir)
    fleet_file, fleet_selector = str(lab / "fleet-nodes.yaml"), f"{FLEET_LABEL}={fleet.name}"
    steps = [(what, argv) for what, argv in zip(base.descriptions, base.commands)
             if fleet_file not in argv and fleet_selector not in argv]
    config = copy.deepcopy(base.kind_config)
    image = config["nodes"][0]["image"]
    config["nodes"] += [{"role": "worker", "image": image, "labels": {TRIAL_LABEL: s, INFRA_LABEL: "true"}}
                        for s in slugs]
    files = {name: text for name, text in base.files.items() if name != "fleet-nodes.yaml"}
    files["kind-config.yaml"] = kind.dump(config)
    kubectl = ["kubectl", "--kubeconfig", base.kubeconfig]
    cp = next(iter(kind.CONTROL_PLANE_SELECTOR))
    t = kind.pins()["timeouts"]
    steps[0] = (f"Create the kind cluster {base.cluster}: one control-plane node and {len(slugs)} workers, one "
                f"per KAI version ({image})", steps[0][1])
    steps[1:1] = [
        ("kind taints its control-plane node once there are workers: untaint it, as on a one-node lab",
         [*kubectl, "taint", "nodes", "-l", cp, f"{cp}:NoSchedule-"]),
        (f"Wait for the {len(slugs)} kind workers (one per KAI version) to be Ready",
         [*kubectl, "wait", "--for=condition=Ready", "node", "-l", f"{INFRA_LABEL}=true",
          f"--timeout={t['nodes_ready']}"]),
    ]
    images = list(base.preload_images)
    for v in version_list:
        images += kai_kind.kai_images(v)  # KAI's pods run on the host's workers
    return kind.KindPlan(kind_config=config, commands=[a for _, a in steps], files=files, node_manifests=[],
                         descriptions=[w for w, _ in steps], preload_images=images, cluster=base.cluster,
                         lab_dir=base.lab_dir, kubeconfig=base.kubeconfig)


def _cleanup_steps(lab_name: str, name: str, ns: str, s: str, n_nodes: int, vcluster: list[str],
                   host_kubectl: list[str], t: dict) -> list[tuple[str, list[str]]]:
    return [
        (f"Forget the exercise lab {lab_name} (the existing runtime never touches the cluster)",
         ["kailab", "down", "--name", lab_name]),
        (f"Delete the vCluster {name} and its namespace {ns}",
         [*vcluster, "delete", name, "-n", ns, "--delete-namespace", "--ignore-not-found"]),
        ("Delete its data PVC explicitly (retained by the StatefulSet; a re-used name would bring back "
         "the old CRDs and objects)",
         [*host_kubectl, "-n", ns, "delete", "pvc", "-l", statefulset_selector(name), "--ignore-not-found"]),
        (f"Delete this version's {n_nodes} KWOK nodes on the host (never its kind worker)",
         [*host_kubectl, "delete", "nodes", "-l", trial_node_selector(s), "--ignore-not-found"]),
        (f"Make sure the namespace {ns} is gone",
         [*host_kubectl, "delete", "namespace", ns, "--ignore-not-found", f"--timeout={t['rollout']}"]),
    ]


def _node_steps(host_kubectl: list[str], nodes_file: str, s: str, n_nodes: int, gpus: int,
                t: dict) -> list[tuple[str, list[str]]]:
    return [
        (f"Create this version's {n_nodes} KWOK nodes ({gpus} GPUs), named {s}-*, labelled {TRIAL_LABEL}={s}",
         [*host_kubectl, "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
          "-f", nodes_file]),
        ("Set their capacity through the status subresource, as the binary runtime",
         [*host_kubectl, "apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}-status",
          "--subresource=status", "-f", nodes_file]),
        ("Wait for KWOK to mark them Ready",
         [*host_kubectl, "wait", "--for=condition=Ready", "node", "-l", trial_node_selector(s),
          f"--timeout={t['nodes_ready']}"]),
    ]


def version_plan(version: str, fleet: Fleet, host: kind.KindPlan, host_name: str,
                 exercises: list[str], evidence_root: str) -> VersionPlan:
    release = versions.kai_release(version)
    s = slug(release.version)
    name, ns = vcluster_name(s), vcluster_namespace(s)
    lab_name = f"{host_name}-{s}"
    p = kind.pins()
    t, vc = p["timeouts"], p["vcluster"]
    lab = Path(host.lab_dir)
    path = lambda rel: str(lab / s / rel)  # noqa: E731
    kubeconfig = path("kubeconfig")
    host_kubectl = ["kubectl", "--kubeconfig", host.kubeconfig]
    v_kubectl = ["kubectl", "--kubeconfig", kubeconfig]
    vcluster = ["env", f"KUBECONFIG={host.kubeconfig}", "vcluster"]  # the CLI has no --kubeconfig flag
    kailab = ["kailab"]
    values = vcluster_values(s, release.kubernetes)
    nodes = trial_nodes(fleet, s)
    gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes)
    files = {f"{s}/vcluster.yaml": kind.dump(values), f"{s}/kai-values.yaml": kind.dump(kai_values()),
             f"{s}/fleet-nodes.yaml": kind.dump_all(nodes)}

    cleanup_steps = _cleanup_steps(lab_name, name, ns, s, len(nodes), vcluster, host_kubectl, t)

    # the clean-up first as well (idempotent), so nothing an interrupted trial left under these names
    # survives; not `kailab down`, which could stop a lab of another runtime that happens to share the name
    steps: list[tuple[str, list[str]]] = [(f"Before: {what[0].lower()}{what[1:]}", argv)
                                          for what, argv in cleanup_steps if argv[0] != "kailab"]
    stdout_files: dict[int, str] = {}
    add = lambda what, argv: steps.append((what, argv))  # noqa: E731
    steps += _node_steps(host_kubectl, path("fleet-nodes.yaml"), s, len(nodes), gpus, t)
    add(f"Create the vCluster {name} (chart {vc['chart_version']}, virtual scheduler on, node sync "
        f"{TRIAL_LABEL}={s} only)",
        [*vcluster, "create", name, "-n", ns, "--values", path("vcluster.yaml"),
         "--chart-version", str(vc["chart_version"]), "--connect=false"])
    add("Wait for its control plane",
        [*host_kubectl, "-n", ns, "rollout", "status", f"statefulset/{name}",
         f"--timeout={vc['timeouts']['statefulset']}"])
    stdout_files[len(steps)] = kubeconfig
    add("Its kubeconfig (stdout to a file; on Linux the CLI serves it through a background proxy container)",
        [*vcluster, "connect", name, "-n", ns, "--print"])
    for what, argv in kai_kind.kai_install_steps(release.version, kubeconfig, path("kai-values.yaml"),
                                             where=" INTO the vCluster"):
        add(what, argv)
    add("The vCluster sees this version's nodes, Ready",
        [*v_kubectl, "wait", "--for=condition=Ready", "node", "-l", trial_node_selector(s),
         f"--timeout={t['nodes_ready']}"])
    add(f"Adopt the vCluster as lab {lab_name} (existing runtime: checks KAI's CRDs, scheduler, GPUs)",
        [*kailab, "up", "--runtime", "existing", "--kubeconfig", kubeconfig, "--name", lab_name])
    run_step = len(steps)
    add(f"Run the exercises against it; evidence under {evidence_root}/{release.version}",
        [*kailab, "run", *exercises, "--name", lab_name, "--evidence", f"{evidence_root}/{release.version}"])

    worker = next(n for n in host.kind_config["nodes"] if n.get("labels", {}).get(TRIAL_LABEL) == s)
    return VersionPlan(
        version=release.version, slug=s, vcluster_name=name, namespace=ns, lab_name=lab_name, values=values,
        node_manifests=nodes, commands=[a for _, a in steps], cleanup=[a for _, a in cleanup_steps],
        kubeconfig=kubeconfig, kai_chart=kai_kind.kai_chart_ref(release.version),
        descriptions=[w for w, _ in steps], cleanup_descriptions=[w for w, _ in cleanup_steps],
        stdout_files=stdout_files, run_step=run_step, files=files, worker=worker)


def trial_plan(version_list: list[str], fleet: Fleet, host_name: str,
               exercises: list[str] | tuple[str, ...] = DEFAULT_EXERCISES,
               evidence_root: str | None = None) -> VClusterTrialPlan:
    """Everything a kind-host trial does, in order, as data. Pure: reads only kailab's data files."""
    releases = [versions.kai_release(v).version for v in version_list]
    if len(set(releases)) != len(releases):
        raise KailabError("a version is listed twice: each version gets one vCluster")
    slugs = [slug(v) for v in releases]
    host = host_plan(releases, fleet, host_name, slugs)
    root = evidence_root or str(Path(host.lab_dir) / "evidence")
    plans = [version_plan(v, fleet, host, host_name, list(exercises), root) for v in releases]
    return VClusterTrialPlan(
        host_name=host_name, cluster=host.cluster, lab_dir=host.lab_dir, host_kubeconfig=host.kubeconfig,
        kind_config=host.kind_config, host_commands=host.commands, host_descriptions=host.descriptions,
        host_files=host.files, host_cleanup=[["kind", "delete", "cluster", "--name", host.cluster]],
        preload_images=host.preload_images, versions=plans, fleet=fleet.name, exercises=list(exercises),
        evidence_root=root)


# ------------------------------------------------------------------ the dry run
def _shown(argv: list[str], stdout: str | None = None) -> str:
    return shlex.join(argv) + (f" > {shlex.quote(stdout)}" if stdout else "")


def render(plan: VClusterTrialPlan, warnings: list[str] | None = None, notes: list[str] | None = None) -> str:
    """The dry run: every command in order, per version its clean-up, then every file written."""
    p = kind.pins()
    first = plan.versions[0]
    lines = [
        f"# kailab version trial on a kind host (nothing has been run): {', '.join(v.version for v in plan.versions)}",
        f"# fleet {plan.fleet}: {len(first.node_manifests)} KWOK nodes per version, each version its own pool",
        f"# host: kind cluster {plan.cluster} (control plane + one worker per version), KWOK "
        f"{versions.KWOK_VERSION}, fake-gpu-operator {p['fake_gpu_operator']['version']}, no KAI",
        f"# per version: vCluster {p['vcluster']['version']} (chart {p['vcluster']['chart_version']}) with "
        "the virtual scheduler, KAI from its chart inside it, the exercises through the existing runtime",
        f"# tools: kind {p['kind']['version']}, kubectl (>= {p['kubectl']['min']}), helm (>= {p['helm']['min']}), "
        f"vcluster {p['vcluster']['version']}; from {', '.join(kind.TOOL_ENV.values())}, {VCLUSTER_ENV} or "
        "PATH; a Docker engine must answer",
        f"# files are written to {plan.lab_dir}/ (listed at the end)",
        *[f"# {n}" for n in notes or []],
        *[f"# warning: {w}" for w in warnings or []],
        "",
        "## host",
    ]
    for i, (what, argv) in enumerate(zip(plan.host_descriptions, plan.host_commands), 1):
        lines += [f"# {i}. {what}", _shown(argv)]
        if i == 1:
            lines.append("# then, for each image already in the local Docker, to save pulls:")
            lines += [f"#   kind load docker-image {img} --name {plan.cluster}" for img in plan.preload_images]
    for vp in plan.versions:
        lines += ["", f"## KAI {vp.version}: vCluster {vp.vcluster_name} in namespace {vp.namespace}, "
                      f"nodes {TRIAL_LABEL}={vp.slug}, kind worker {vp.worker.get('labels')}"]
        for i, (what, argv) in enumerate(zip(vp.descriptions, vp.commands)):
            lines += [f"# {i + 1}. {what}", _shown(argv, vp.stdout_files.get(i))]
        lines.append(f"# clean-up (always, also when a step above failed); the kubeconfig {vp.kubeconfig} is removed")
        for i, (what, argv) in enumerate(zip(vp.cleanup_descriptions, vp.cleanup), 1):
            lines += [f"# c{i}. {what}", _shown(argv)]
    lines += ["", "## host clean-up (at the end of the trial)", *[_shown(a) for a in plan.host_cleanup], ""]
    files = dict(plan.host_files)
    for vp in plan.versions:
        files.update(vp.files)
    for name, text in files.items():
        lines += [f"# ---- {plan.lab_dir}/{name}", text.rstrip("\n"), ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ running it (Docker hosts)
DOCKER_NEEDED = ("a version trial with --runtime kind needs a Docker engine, and none answers "
                 "(DOCKER_HOST or /var/run/docker.sock): use --runtime binary, or --dry-run to print the plan")


def _find_vcluster() -> str:
    configured = os.environ.get(VCLUSTER_ENV)
    found = shutil.which(configured or "vcluster")
    if not found:
        where = f"at {configured} (from {VCLUSTER_ENV})" if configured else "on PATH"
        raise LabError(f"vcluster not found {where}: install it ({kind.pins()['vcluster']['install']})")
    return found


def _resolve(argv: list[str], tools: dict[str, str]) -> list[str]:
    """The argv with each tool replaced by its path (`kailab` by this interpreter's module)."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        head = i == 0 or (argv[0] == "env" and i == 2)
        if head and arg == "kailab":
            out += [sys.executable, "-m", "kailab.cli"]
        elif head and arg in tools:
            out.append(tools[arg])
        else:
            out.append(arg)
    return out


def _run(argv: list[str], tools: dict[str, str], log: Path, what: str, stdout: str | None = None,
         ok: tuple[int, ...] = (0,)) -> None:
    if stdout is None and ok == (0,):
        run_logged(_resolve(argv, tools), log, shown=argv, what=what)
        return
    with log.open("a") as f:
        f.write(f"$ {_shown(argv, stdout)}\n")
        try:
            out = subprocess.run(_resolve(argv, tools), capture_output=True, text=True,
                                 timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise LabError(f"{what}: `{short(argv)}` did not finish in {COMMAND_TIMEOUT}s; "
                           f"log: {log}") from None
        f.write((out.stdout if stdout is None else "") + out.stderr + f"(exit {out.returncode})\n")
    if out.returncode not in ok:
        raise LabError(f"{what}: `{short(argv)}` failed (exit {out.returncode}): "
                       f"{last_line(out.stderr or out.stdout)}; full output: {log}")
    if stdout is not None:
        target = Path(stdout)
        target.write_text(out.stdout)
        target.chmod(0o600)


def _best_effort(steps, tools: dict[str, str], log: Path) -> None:
    for what, argv in steps:
        try:
            _run(argv, tools, log, what)
        except KailabError as err:
            progress(f"clean-up step failed (continuing): {err}")


def host_tools() -> dict[str, str]:
    """Everything a kind-host trial needs, checked before anything is made: a Docker engine and the tools."""
    if not docker_answers():
        raise KailabError(DOCKER_NEEDED)
    tools = kind.find_tools(["kind", "kubectl", "helm"])
    tools["vcluster"] = _find_vcluster()
    kind.check_kubectl(tools["kubectl"])
    return tools


def run_versions(trial_dir: Path, stamp: str, the_plan: dict, tools: dict[str, str]) -> None:
    """Run every version's exercises on one kind host (one vCluster each); evidence lands in
    trial_dir/<version>/ as the binary trial's does. The trial driver (trial.py) does the rest."""
    plan = trial_plan(the_plan["versions"], load_fleet(the_plan["fleet"]), f"trial-{stamp.lower()}",
                      the_plan["exercises"], str(trial_dir))
    lab = Path(plan.lab_dir)
    (lab / "logs").mkdir(parents=True, exist_ok=True)
    files = dict(plan.host_files)
    for vp in plan.versions:
        files.update(vp.files)
    for name, text in files.items():
        (lab / name).parent.mkdir(parents=True, exist_ok=True)
        (lab / name).write_text(text)
    log = lab / "logs" / "trial.log"
    try:
        for i, (what, argv) in enumerate(zip(plan.host_descriptions, plan.host_commands), 1):
            progress(f"[host {i}/{len(plan.host_commands)}] {what}")
            _run(argv, tools, log, what)
        for vp in plan.versions:
            _run_version(vp, trial_dir / vp.version, tools, log)
    finally:
        _best_effort([("Delete the kind host", a) for a in plan.host_cleanup], tools, log)
        shutil.copyfile(log, trial_dir / "kind-host.log")  # every command and its output, kept with the evidence
        shutil.rmtree(lab, ignore_errors=True)


def _run_version(vp, vdir: Path, tools: dict[str, str], log: Path) -> None:
    vdir.mkdir(exist_ok=True)
    try:
        for i, (what, argv) in enumerate(zip(vp.descriptions, vp.commands)):
            progress(f"[{vp.version} {i + 1}/{len(vp.commands)}] {what}")
            _run(argv, tools, log, what, stdout=vp.stdout_files.get(i), ok=(0, 1) if i == vp.run_step else (0,))
    except KailabError as err:
        (vdir / "lab-error.txt").write_text(str(err) + "\n")
    finally:
        _best_effort(zip(vp.cleanup_descriptions, vp.cleanup), tools, log)
        Path(vp.kubeconfig).unlink(missing_ok=True)


def dry_run_text(version_list: list[str], fleet: str, names: list[str], warnings: list[str]) -> str:
    """`kailab trial --runtime kind --dry-run`: every command and file, nothing run."""
    loaded = load_fleet(fleet)
    notes = ["a real run names the host trial-<UTC timestamp> and writes evidence to evidence/trial-<timestamp>/"]
    return render(trial_plan(version_list, loaded, "trial", names), warnings, notes)
