"""The kind runtime: a one-node kind cluster on a Docker host, with KWOK, fake-gpu-operator and the
lab's scheduler (its Addon's steps) installed the way their projects ship them (release manifests
and OCI helm charts).

The lab is the same as the binary runtime's where an exercise can tell: the same fleet nodes
(fleet.node_manifests(), applied the same way), the same KWOK stages, the same probe pod. What
differs is how the pieces run: real containers, the scheduler from its helm chart with its operator.

`build_plan` (plan.py) is pure: it turns a spec into the kind config, the files and the commands, in
order, so `--dry-run` prints exactly what `up` runs and tests can check it without Docker. The
host and its tools: host.py; images built here or published: images.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

from ... import versions
from ...errors import KailabError, LabError
from ...images import ImageSet, image_set
from ...fleet import FLEET_LABEL, Fleet, load_fleet
from ...kube import Kube
from ...paths import lab_dir
from .. import clusterinfo, metrics
from . import metrics as kind_metrics, workers as kind_workers
from ..addon import addon_of
from ..base import AddsWorkers, InstallsCharts, LabRecord, LabSpec, MakesLabs, Runtime, docker_answers, status_report
from ..labkit import lab_lock, refuse_other_lab, user_stage_names
from ..processes import free_port, note_start_retry, start_retries
from ..hostlimits import require_inotify
from ..restarts import restart_counts, why_it_died
from ..shell import progress, telling_line, run_logged
# the kind runtime's parts, re-exported: what callers and tests name as kind.X
from .host import (TOOL_ENV, HostFacts, check_kubectl, current_docker_host, docker_facts, engine_env,  # noqa: F401
                   find_tool, find_tools, host_problems)
from .images import IMAGES, choose_images, missing_local, to_load  # noqa: F401
from .plan import (CONTROL_PLANE_SELECTOR, KWOK_CONFIG_DIR, KWOK_CONFIG_MAP, STAGE_CRD, KindPlan, build_plan, charts_of, cluster_name, dump, dump_all,  # noqa: F401
                        fake_gpu_operator_values, kind_config, kwok_config_map, kwok_deployment_patch,
                        kwok_release_config, kwok_stages_text, node_image, pinned_minor, render_plan)
from .pins import pins  # noqa: F401


# ------------------------------------------------------------------ the runtime
class KindRuntime(Runtime, MakesLabs, InstallsCharts, AddsWorkers):  # workers: kind/workers.py
    name = "kind"

    install_style = "from its helm chart (operator, admission webhook) on a kind cluster"

    def prometheus_in_lab(self, record: LabRecord) -> str | None:
        return kind_metrics.IN_CLUSTER_URL if record.metrics else None

    def plan(self, spec: LabSpec) -> str:
        charts_of(spec)  # refused in one line when it has none
        fleet, version = self._inputs(spec)
        local, said = self._images(spec, version)
        plan = build_plan(spec, fleet, version, HostFacts.detect(), local, metrics_port=free_port())
        return render_plan(plan, spec, fleet, version) + f"\n# {said}\n"

    @staticmethod
    def _images(spec: LabSpec, version: str) -> tuple[ImageSet | None, str]:
        if spec.images not in IMAGES:
            raise KailabError(f"--images {spec.images}: choose one of {', '.join(IMAGES)}")
        addon = charts_of(spec)  # the base set and its scheduler's images
        missing = [] if spec.images == "published" else missing_local(image_set(version), addon)
        return choose_images(spec.images, version, missing, addon)

    @staticmethod
    def _inputs(spec: LabSpec) -> tuple[Fleet, str]:
        fleet = load_fleet(spec.fleet)
        version = versions.kai_release(spec.kai_version or versions.DEFAULT_KAI).version
        cluster_name(spec.name)  # validate the name before anything runs
        return fleet, version

    # ---------------------------------------------------------------- up
    def up(self, spec: LabSpec) -> LabRecord:
        charts_of(spec)  # refused in one line when it has none
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
            require_inotify(self.name)
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
        rec = LabRecord(name=spec.name, runtime=self.name, kai_version=addon_of(spec).kai_version(version),
                        fleet=fleet.name, nodes=fleet.nodes_total, gpus=fleet.gpus_total, kubeconfig=plan.kubeconfig, termination_grace=spec.termination_grace,
                        workers=spec.workers, stages=user_stage_names(spec),
                        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), stack=charts_of(spec).record(),
                        docker_host=current_docker_host())
        rec.save()
        log = lab / "logs" / "kind-runtime.log"
        try:
            for i, (what, argv) in enumerate(zip(plan.descriptions, plan.commands), 1):
                progress(f"[{i}/{len(plan.commands)}] {what}")
                if i == 1:
                    create_cluster(rec, [tools.get(argv[0], argv[0]), *argv[1:]], log, shown=argv, what=what)
                else:
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
                charts_of(spec).await_ready(kube)
            finally:
                kube.close()
        except LabError as err:
            rec.state = "failed"
            rec.save()
            # the cluster as it was, in the error itself: a test's fixture (or the user) may remove the
            # lab, and its log with it (CI, 2026-11-27: one KWOK node not Ready after 300 s, no trace left)
            raise LabError(f"{err}\n{_diagnosis(plan.kubeconfig, tools, log)}") from None
        except BaseException:
            # keep the cluster to look at (kubectl --kubeconfig ...); the next `up` starts clean
            rec.state = "failed"
            rec.save()
            raise
        rec.state = "up"
        rec.save()
        return rec

    def _preload(self, plan: KindPlan, kind: str, log: Path) -> None:
        """Load images the local Docker has and the node lacks (with images built here: those of a KAI
        version other than the default), in one `kind load` so the node's containerd imports one archive."""
        if not shutil.which("docker"):
            return
        lacks, absent = to_load(plan.cluster, plan.preload_images)  # what Docker lacks is pulled
        held = len(plan.preload_images) - len(lacks) - len(absent)
        if held:
            progress(f"{held} images already in the node image")
        if lacks:
            progress(f"loading {len(lacks)} images into the node")
            argv = ["kind", "load", "docker-image", *lacks, "--name", plan.cluster]
            run_logged([kind, *argv[1:]], log, shown=argv, what="kind load docker-image")

    # ---------------------------------------------------------------- deaths
    # A cluster restarts a crashed container itself, so a death shows as a restart: a component whose
    # containers restarted since the run began (log_mark) died during it.
    def log_mark(self, record: LabRecord) -> dict:
        mark = super().log_mark(record)
        kube = Kube(record.kubeconfig)
        try:
            self._restarts = restart_counts(kube, _components(record))
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
            now = restart_counts(kube, _components(record))
            dead = [(name, why_it_died(kube, pods)) for name, (count, pods) in now.items()
                    if count > baseline.get(name, (0, []))[0] and name not in ignore]
            # a worker is a node, not a Deployment: dead while it is not Ready
            return dead + [(name, c["state"] + (f" ({c['reason']})" if c.get("reason") else ""))
                           for name, c in _worker_states(kube, record).items()
                           if c["state"] != "running" and name not in ignore]
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
                    components.update(_worker_states(kube, rec))
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
                        "--kubeconfig", rec.kubeconfig], capture_output=True, timeout=60,
                       env=engine_env(rec.docker_host))

    def down(self, name: str) -> list[str]:
        with lab_lock(name):
            if not lab_dir(name).exists():
                return []
            rec = LabRecord.load(name)
            return self._teardown(name, find_tool("kind"), rec.docker_host if rec else "")

    def _teardown(self, name: str, kind: str, docker_host: str = "") -> list[str]:
        """The lab's cluster deleted in the engine it was made in, whatever DOCKER_HOST says here: kind
        deletes a cluster an engine does not have without a word, and the lab's containers would stay."""
        cluster = cluster_name(name)
        env = engine_env(docker_host)
        out = subprocess.run([kind, "delete", "cluster", "--name", cluster], capture_output=True, text=True,
                             timeout=300, env=env)
        if out.returncode != 0:
            raise LabError(f"`kind delete cluster --name {cluster}` failed: {telling_line(out.stderr)}"
                           + (f" (its engine: {docker_host})" if docker_host else ""))
        shutil.rmtree(lab_dir(name), ignore_errors=True)
        stopped = [f"kind cluster {cluster}"]
        # kind leaves its shared `kind` network behind; it goes with the engine's last kind cluster
        docker = shutil.which("docker")
        if docker:
            left = subprocess.run([docker, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster"],
                                  capture_output=True, text=True, timeout=60, env=env).stdout.strip()
            if not left and subprocess.run([docker, "network", "rm", "kind"], capture_output=True,
                                           timeout=60, env=env).returncode == 0:
                stopped.append("docker network kind")
        return stopped


# ------------------------------------------------------------------ helpers
# `kind create cluster` failed once in a CI with the machine at load ~30 on 2 cores, and a whole group
# of tests with it; a second try is the right answer to a slow kubeadm, and it is never silent: the
# retry and the first failure's line are in the lab's record (`status`, every run's evidence)
CREATE_ATTEMPTS = 2


def create_cluster(rec: LabRecord, argv: list[str], log: Path, shown: list[str], what: str) -> None:
    """`kind create cluster`, once more after deleting what a failed first try left."""
    for attempt in range(1, CREATE_ATTEMPTS + 1):
        try:
            run_logged(argv, log, shown=shown, what=what)
            return
        except LabError as err:
            if attempt == CREATE_ATTEMPTS:
                raise
            reason = f"{str(err).splitlines()[0]} (attempt {attempt} of {CREATE_ATTEMPTS})"
            progress(f"{what} failed; deleting what it left and creating it once more: {reason}")
            run_logged([argv[0], "delete", "cluster", "--name", cluster_name(rec.name)], log,
                       shown=["kind", "delete", "cluster", "--name", cluster_name(rec.name)],
                       what="delete the half-made kind cluster")
            note_start_retry(lab_dir(rec.name), "kind cluster", reason)
            rec.start_retries = start_retries(lab_dir(rec.name))
            rec.save()


def _components(rec: LabRecord) -> dict[str, list[str]]:
    """The lab's named components: Deployments by namespace."""
    kw, fgo = pins()["kwok"], pins()["fake_gpu_operator"]
    out = {kw["namespace"]: [kw["deployment"]]}
    out.update({ns: list(names) for ns, names in (rec.stack or {}).get("deployments", {}).items()})
    out[fgo["namespace"]] = list(fgo["deployments"])
    if rec.metrics:
        out[kind_metrics.NAMESPACE] = list(kind_metrics.DEPLOYMENTS)
    return out


def _worker_states(kube: Kube, rec: LabRecord) -> dict[str, dict]:
    """The lab's worker nodes as components (none without --workers)."""
    if not rec.workers:
        return {}
    nodes = kube.list("v1", "Node", label_selector="type!=kwok")  # not the fleet's KWOK nodes
    return kind_workers.states(nodes, cluster_name(rec.name), rec.workers)


def _port(server: str) -> int | None:
    m = re.search(r":(\d+)/?$", server)
    return int(m.group(1)) if m else None



def _not_ready(nodes: dict) -> list[str]:
    """`name Ready=<status> <reason>: <message>` for each node whose Ready condition is not True."""
    out = []
    for node in nodes.get("items") or []:
        ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
        if ready.get("status") != "True":
            out.append(f"{node['metadata']['name']} Ready={ready.get('status', 'none')} "
                       f"{ready.get('reason', '')}: {ready.get('message', '')}".rstrip(": "))
    return out


def _diagnosis(kubeconfig: str, tools: dict[str, str], log: Path) -> str:
    """What a failed `up` left in the cluster, in a few lines: nodes that are not Ready (with their
    conditions' reasons), pods that are not Running, and the KWOK controller's last warnings."""
    kubectl = [tools.get("kubectl", "kubectl"), "--kubeconfig", kubeconfig, "--request-timeout=20s"]
    asks = [
        ("nodes not Ready", [*kubectl, "get", "nodes", "-o", "json"]),
        ("pods not Running", [*kubectl, "get", "pods", "-A", "--field-selector=status.phase!=Running", "--no-headers"]),
        ("kwok-controller's last warnings and errors", [*kubectl, "-n", pins()["kwok"]["namespace"], "logs",
                                                        f"deployment/{pins()['kwok']['deployment']}", "--tail=2000"]),
    ]
    out = ["--- the cluster when it failed ---"]
    for title, argv in asks:
        try:
            got = subprocess.run(argv, capture_output=True, text=True, timeout=40)
            text = (got.stdout or got.stderr).strip()
        except (OSError, subprocess.TimeoutExpired) as err:
            text = f"(could not ask: {err})"
        if title == "nodes not Ready" and text.startswith("{"):
            text = "\n".join(_not_ready(json.loads(text)))
        elif title.startswith("kwok"):  # its INFO lines are a lease renewal each 10 s per node
            text = "\n".join([line for line in text.splitlines() if '"level":"INFO"' not in line][-10:])
        out.append(f"{title}:\n{text or '(none)'}")
    text = "\n".join(out)
    with log.open("a") as f:
        f.write(text + "\n")
    return text
