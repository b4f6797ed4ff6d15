"""The binary runtime: a real control plane and KAI as local processes, with no Docker.

etcd, kube-apiserver, kube-controller-manager and kwok run from the binary cache, supervised by
kailab itself rather than kwokctl: KAI's five processes need the same supervision (own ports,
logs, pid records, clean-up), and one mechanism for all of them keeps `down` and `status` simple.
Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from .. import kai, toolchain, versions
from ..errors import KailabError, LabError
from ..kube import Kube
from ..node_labels import FLEET_LABEL
from ..workloads import service_account
from ..paths import lab_dir, state_dir
from .waits import wait_until
from . import clusterinfo, metrics, processes, seed
from .base import LabRecord, LabSpec, Runtime, status_report
from .labkit import (PROBE_NAMESPACE, Phases, await_probe, create_fleet, kwok_config_text, lab_lock, refuse_other_lab,
                     run_together, submit_probe)

if TYPE_CHECKING:
    from ..fleet import Fleet

# the scheduler's configuration in the lab dir: what it runs now, and the lab's default
SCHEDULER_CONF, DEFAULT_SCHEDULER_CONF = "scheduler-conf.yaml", "scheduler-conf.default.yaml"
SCHEDULER_ARGS = "scheduler-args.json"  # the flags a SchedulingShard's `args` added to the scheduler
KSM_STARTS = 3  # kube-state-metrics gives up at once when the API server is slow to answer it

CONTROL_PLANE = ["etcd", "kube-apiserver", "kube-controller-manager", "kwok"]
# KWOK renews every node's Lease each quarter of its duration: with 40 s leases a 1,000-node fleet is
# 100 writes/s, most of what an idle large lab's API server does (measured: 0.7 of a core). Larger
# fleets get longer leases (at most 10 renewals/s) and a node-monitor grace period to match, so a
# node is still seen NotReady, only later; fleets up to 100 nodes keep Kubernetes' 40 s.
NODE_LEASE_S, LEASE_RENEWALS_PER_S = 40, 10


def node_lease_seconds(nodes: int) -> int:
    return max(NODE_LEASE_S, -(-4 * nodes // LEASE_RENEWALS_PER_S))
# stop order for `down`: consumers of the API first, etcd last
STOP_ORDER = list(metrics.COMPONENTS) + list(versions.KAI_COMPONENTS) + ["kwok", "kube-controller-manager", "kube-apiserver", "etcd"]


def _http_ok(url: str, any_status: bool = False) -> bool:
    """200 from url; with any_status, any HTTP answer at all (the server is listening)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # loopback health probe only
    try:
        with urllib.request.urlopen(url, timeout=3, context=ctx) as resp:  # noqa: S310
            return resp.status == 200
    except urllib.error.HTTPError:
        return any_status
    except Exception:  # noqa: BLE001 - any failure means 'not healthy (yet)'
        return False


class BinaryRuntime(Runtime):
    name = "binary"
    controls_processes = True
    configures_scheduler = True
    install_shape = "KAI's components as local processes (binaries built from its source, chart objects applied)"

    # ---------------------------------------------------------------- up
    def up(self, spec: LabSpec) -> LabRecord:
        # the fleet's model (pydantic) and the PKI (cryptography) load here, not with the module:
        # `down` and `status` need neither
        from ..fleet import load_fleet

        fleet = load_fleet(spec.fleet)  # validate every input before anything starts
        release = versions.kai_release(spec.kai_version or versions.DEFAULT_KAI)
        if spec.api_port is not None:
            if not 1024 <= spec.api_port <= 65535:
                raise KailabError(f"--api-port {spec.api_port}: choose a port from 1024 to 65535")
            if processes.port_in_use(spec.api_port):
                raise KailabError(f"port {spec.api_port} on 127.0.0.1 is already in use: choose another "
                                  "with --api-port, or stop what listens there")
        with lab_lock(spec.name):
            existing = LabRecord.load(spec.name)
            if existing and existing.state == "up":
                return self._reuse(existing, spec, fleet, release.version)
            if lab_dir(spec.name).exists():  # a failed or half-made lab: start clean
                self._teardown(spec.name)
            recipes = toolchain.recipes_for(release.version)
            if not spec.with_kai:
                recipes = [r for r in recipes if r.component != "kai"]
            if spec.metrics:
                recipes += toolchain.metrics_recipes()
            built = toolchain.build_all(recipes)
            try:
                return self._start(spec, fleet, release, recipes, built)
            except BaseException as err:
                # no half-started lab: stop what started, keep the logs for the error report
                kept = self._teardown(spec.name, keep_logs=True)
                if isinstance(err, LabError):
                    raise LabError(f"{err}\n(lab stopped and removed; its logs are kept in {kept})") from None
                raise

    def _reuse(self, rec: LabRecord, spec: LabSpec, fleet: Fleet, kai_version: str) -> LabRecord:
        refuse_other_lab(rec, spec, self.name, fleet.name, kai_version)
        broken = self.problems(rec)
        if broken:
            try:
                self.repaired = self.repair(rec)
            except LabError as err:
                raise LabError(f"lab {rec.name!r} is broken ({'; '.join(broken)}) and could not be repaired: "
                               f"{err}. Run `kailab down` then `kailab up` to rebuild it") from None
            still = self.problems(rec)
            if still:
                raise LabError(f"lab {rec.name!r} is still broken after restarting {', '.join(self.repaired)}: "
                               f"{'; '.join(still)}. Run `kailab down` then `kailab up` to rebuild it")
        return rec

    def _start(self, spec: LabSpec, fleet: Fleet, release, recipes, built) -> LabRecord:
        from . import pki

        lab = lab_dir(spec.name)
        lab.mkdir(parents=True, exist_ok=True)
        bins = {name: built[r.key] / name for r in recipes for name in r.binaries}
        port_names = ["etcd.client", "etcd.peer", "kube-apiserver", "kube-controller-manager", "kwok"]
        if spec.with_kai:
            port_names += [f"{c}.{p}" for c, ps in kai.component_ports().items() for p in ps]
        if spec.metrics:
            port_names += metrics.port_names()
        fixed = {"kube-apiserver": spec.api_port} if spec.api_port else {}
        ports = processes.allocate_ports(port_names, fixed)
        kubeconfig = lab / "kubeconfig"
        rec = LabRecord(name=spec.name, runtime=self.name,
                        kai_version=release.version if spec.with_kai else "none",
                        fleet=fleet.name, nodes=fleet.nodes_total, gpus=fleet.gpus_total,
                        with_kai=spec.with_kai, kubeconfig=str(kubeconfig), ports=ports, metrics=spec.metrics,
                        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        rec.save()
        pki_dir = lab / "pki"
        pki.generate(pki_dir)
        pki.kubeconfig(kubeconfig, pki_dir, f"https://127.0.0.1:{ports['kube-apiserver']}", f"kailab-{spec.name}")

        # Every process starts at once (each retries the API server until it answers); then the
        # fleet, the control plane's health and KAI proceed in parallel. Ordering that matters is
        # kept inside each part: CRDs before KAI, the probe's queues before its pod.
        phases = Phases()
        tree = kai.source_dir(next(r for r in recipes if r.component == "kai")) if spec.with_kai else None
        with phases.timed("seeded etcd"):
            self._seed(lab, bins, tree)
        with phases.timed("processes started"):
            self._spawn_etcd(lab, bins["etcd"], ports)
            self._spawn_apiserver(lab, bins["kube-apiserver"], ports, pki_dir)
            self._spawn_kwok(lab, bins["kwok"], ports, kubeconfig, fleet.nodes_total)
        kube = Kube(kubeconfig)
        spawn_kcm = lambda: self._spawn_controller_manager(lab, bins["kube-controller-manager"], ports, pki_dir,  # noqa: E731
                                                           kubeconfig, fleet.nodes_total)
        parts = {"control plane healthy": lambda: self._control_plane_healthy(lab, kube, ports, phases, spawn_kcm),
                 "fleet Ready": lambda: self._fleet_ready(lab, kube, fleet)}
        if tree is not None:
            kai_recipe = next(r for r in recipes if r.component == "kai")
            parts["KAI serving, probe bound"] = lambda: self._install_kai(lab, kube, kai_recipe, tree, bins, ports,
                                                                          kubeconfig, phases)
        if spec.metrics:
            parts["metrics serving"] = lambda: self._start_metrics(lab, kube, bins, ports, pki_dir, spec.with_kai)
        try:
            run_together(lab, parts, phases)
        finally:
            kube.close()
        rec.state = "up"
        rec.up_phases = phases.spans
        rec.up_seconds = round(time.perf_counter() - phases.t0, 2)
        rec.save()
        return rec

    # ---------------------------------------------------------------- the seed (see seed.py)
    @staticmethod
    def _seed_objects(tree: Path | None) -> list[dict]:
        """What a lab's etcd starts with besides the API server's own bootstrap: KAI's kinds,
        its chart's objects and the probe's namespace and queues (never the probe pod)."""
        if tree is None:
            return []
        from ..workloads import probe_objects

        return (kai.crd_documents(tree) + kai.base_objects() + kai.chart_objects(tree) + kai.fake_node_objects()
                + [o for o in probe_objects(PROBE_NAMESPACE) if o["kind"] != "Pod"])

    def _seed(self, lab: Path, bins: dict[str, Path], tree: Path | None) -> None:
        objects = self._seed_objects(tree)
        key = seed.key([bins["etcd"], bins["kube-apiserver"]], objects)
        if seed.restore(key, lab / "etcd"):
            return
        with seed.baking(key):
            if not seed.restore(key, lab / "etcd"):  # unless another `up` baked it meanwhile
                self._bake(key, bins, objects)
                if not seed.restore(key, lab / "etcd"):
                    raise LabError(f"could not seed the lab's etcd from {seed.seeds_dir() / key}")

    def _bake(self, key: str, bins: dict[str, Path], objects: list[dict]) -> None:
        """Start etcd and an API server on scratch state, let it bootstrap, install `objects`,
        stop both cleanly and keep etcd's data as seed `key` (about 5 s, once per key)."""
        from . import pki

        work = state_dir() / f".bake-{key}-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            ports = processes.allocate_ports(["etcd.client", "etcd.peer", "kube-apiserver"])
            pki.generate(work / "pki")
            pki.kubeconfig(work / "kubeconfig", work / "pki", f"https://127.0.0.1:{ports['kube-apiserver']}",
                           "kailab-bake")
            self._spawn_etcd(work, bins["etcd"], ports)
            self._spawn_apiserver(work, bins["kube-apiserver"], ports, work / "pki")
            for name in ("etcd", "kube-apiserver"):
                self._wait_healthy(work, name, ports)
            kube = Kube(work / "kubeconfig")
            try:
                _install_crds(kube, [o for o in objects if o["kind"] == "CustomResourceDefinition"], work)
                for obj in objects:
                    if obj["kind"] != "CustomResourceDefinition":
                        kube.apply(obj)
            finally:
                kube.close()
            processes.stop_all(work, ["kube-apiserver", "etcd"])  # cleanly: etcd flushes its data
            seed.save(key, work / "etcd")
        finally:
            processes.stop_all(work, ["kube-apiserver", "etcd"])
            shutil.rmtree(work, ignore_errors=True)

    def _control_plane_healthy(self, lab: Path, kube: Kube, ports: dict[str, int], phases: Phases,
                               spawn_kcm) -> None:
        # kube-controller-manager starts once the API server listens: with nothing there it exits at
        # once ("connection refused" loading the request-header CA), seen when a loaded machine was
        # slower to open the port than kube-controller-manager to ask
        wait_until("kube-apiserver to listen", lambda: processes.port_in_use(ports["kube-apiserver"]),
                   timeout="apiserver-ready", lab=lab, component="kube-apiserver")
        spawn_kcm()
        for name in CONTROL_PLANE:
            if name == "kube-controller-manager":
                # the API server is ready now; kube-controller-manager gives up (exits) when it was
                # not within about 10 s, which a loaded machine with a 1000-node fleet can exceed
                rec = processes.records(lab)[name]
                if not rec.alive():
                    processes.restart(lab, rec)
            with phases.timed(f"{name} healthy"):
                self._wait_healthy(lab, name, ports)
        # made here rather than awaited from kube-controller-manager (which would make it within
        # a second): `kubectl run` in the default namespace needs it the moment `up` returns
        kube.apply(service_account("default", "default"))

    def _fleet_ready(self, lab: Path, kube: Kube, fleet: Fleet) -> None:
        # retried: the API server may not be answering yet
        wait_until("the API server to accept the fleet's nodes", lambda: create_fleet(kube, fleet) or True,
                   timeout="apiserver-ready", lab=lab, component="kube-apiserver")
        wait_until(f"the fleet's {fleet.nodes_total} nodes to be Ready",
                   lambda: clusterinfo.ready_node_count(kube, f"{FLEET_LABEL}={fleet.name}")
                   == fleet.nodes_total,
                   timeout="nodes-ready", lab=lab, component="kwok",
                   hint="kwok marks nodes Ready through its stages; see its log")

    def _spawn_etcd(self, lab: Path, binary: Path, ports: dict[str, int]) -> None:
        client = f"http://127.0.0.1:{ports['etcd.client']}"
        processes.start(lab, "etcd", [
            str(binary), "--name=kailab", f"--data-dir={lab / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls=http://127.0.0.1:{ports['etcd.peer']}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ports['etcd.peer']}",
            f"--initial-cluster=kailab=http://127.0.0.1:{ports['etcd.peer']}",
            "--unsafe-no-fsync=true",  # a lab's state is disposable; fsync dominates its latency
            # one member on loopback: elect itself at once when it restarts on a seed
            "--heartbeat-interval=10", "--election-timeout=100",
            "--quota-backend-bytes=4294967296", "--log-level=warn"],
            {"client": ports["etcd.client"], "peer": ports["etcd.peer"]})

    def _spawn_apiserver(self, lab: Path, binary: Path, ports: dict[str, int], pki_dir: Path) -> None:
        port = ports["kube-apiserver"]
        processes.start(lab, "kube-apiserver", [
            str(binary), "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={port}", f"--etcd-servers=http://127.0.0.1:{ports['etcd.client']}",
            f"--cert-dir={lab / 'apiserver-certs'}",
            f"--tls-cert-file={pki_dir / 'apiserver.crt'}", f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
            f"--client-ca-file={pki_dir / 'ca.crt'}",
            f"--service-account-key-file={pki_dir / 'sa.pub'}",
            f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
            "--allow-privileged=true", "--profiling=false", "--endpoint-reconciler-type=none",
            # lab API traffic is bursty (hundreds of pods at once); don't throttle it
            "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
            "--enable-priority-and-fairness=false", "--v=1"],
            {"secure": port})

    def _wait_healthy(self, lab: Path, name: str, ports: dict[str, int]) -> None:
        """Wait for one component's health endpoint; the timeout error carries its log."""
        what, check, timeout = self._health(lab, name, ports)
        wait_until(what, check, timeout=timeout, lab=lab, component=name)

    def _health(self, lab: Path, name: str, ports: dict[str, int]):
        """(description, check, named timeout) for each process the lab runs."""
        if name == "etcd":
            url = f"http://127.0.0.1:{ports['etcd.client']}/health"
            return "etcd to report healthy", lambda: _http_ok(url), "etcd-healthy"
        if name == "kube-apiserver":
            return "kube-apiserver /readyz", lambda: self._readyz(lab), "apiserver-ready"
        if name == "kube-controller-manager":
            url = f"https://127.0.0.1:{ports['kube-controller-manager']}/healthz"
            return "kube-controller-manager /healthz", lambda: _http_ok(url), "controller-healthy"
        if name == "kwok":
            url = f"http://127.0.0.1:{ports['kwok']}/healthz"
            return "kwok /healthz", lambda: _http_ok(url), "kwok-healthy"
        if name in metrics.COMPONENTS:
            url = metrics.health_url(name, ports)
            return f"{name} to serve {url}", lambda: _http_ok(url, any_status=True), "metrics-healthy"
        url = kai.health_url(name, ports)
        return f"KAI {name} to serve {url}", lambda: _http_ok(url, any_status=True), "kai-component-healthy"

    def restart(self, rec: LabRecord, name: str) -> None:
        """Restart one process of the lab (dead or alive) and wait until it is healthy."""
        old = processes.records(rec.dir)[name]
        processes.restart(rec.dir, old)
        self._wait_healthy(rec.dir, name, rec.ports)

    def repair(self, rec: LabRecord) -> list[str]:
        """Restart the lab's dead processes in start order, each from its recorded command line."""
        recs = processes.records(rec.dir)
        restarted = []
        for name in _expected(rec):
            old = recs.get(name)
            if old is None:
                raise LabError(f"lab {rec.name!r} has no record of {name}: run `kailab down` then `kailab up`")
            if old.alive():
                continue
            self.restart(rec, name)
            restarted.append(name)
        return restarted

    # ---------------------------------------------------------------- what exercises ask of a lab
    def kill(self, rec: LabRecord, component: str) -> None:
        processes.kill(processes.records(rec.dir)[component])

    def scheduler_config(self, rec: LabRecord) -> dict | None:
        path = rec.dir / SCHEDULER_CONF
        return yaml.safe_load(path.read_text()) if path.is_file() else None

    def usage_db_url(self, rec: LabRecord) -> str | None:
        return metrics.url(rec.ports) if rec.metrics else None

    def configure_scheduler(self, rec: LabRecord, setting) -> None:
        """Restart the scheduler with the setting's whole configuration as --scheduler-conf and its
        shard's `args` as flags, as the operator passes them (None: the lab's default, the operator's
        rendering of the chart's shard); the new command line is its record, so a repair restarts
        it the same way."""
        conf = getattr(setting, "conf", setting)
        args = list(getattr(setting, "args", ()))
        old = processes.records(rec.dir)["scheduler"]
        given = rec.dir / SCHEDULER_ARGS  # the flags the last change added, taken off again
        before = set(json.loads(given.read_text())) if given.is_file() else set()
        argv = [a for a in old.argv if not a.startswith("--scheduler-conf=") and a not in before]
        path = rec.dir / SCHEDULER_CONF
        default = rec.dir / DEFAULT_SCHEDULER_CONF
        if conf is not None:
            path.write_text(yaml.safe_dump(conf, sort_keys=False))
            argv.append(f"--scheduler-conf={path}")
        elif default.is_file():
            shutil.copyfile(default, path)
            argv.append(f"--scheduler-conf={path}")
        argv += args  # after kailab's own: the last of a repeated flag wins, as in a Deployment's args
        given.write_text(json.dumps(args))
        processes.stop(old)
        processes.start(rec.dir, "scheduler", argv, old.ports, old.env)
        self._wait_healthy(rec.dir, "scheduler", rec.ports)

    def dead_components(self, rec: LabRecord, ignore: set[str]) -> list[tuple[str, str]]:
        recs = processes.records(rec.dir)
        watched = list(versions.KAI_COMPONENTS) + (list(metrics.COMPONENTS) if rec.metrics else [])
        return [(c, f"its last log lines: {processes.recent_log(rec.dir, c, 10)}") for c in watched
                if c in recs and not recs[c].alive() and c not in ignore]

    def log_mark(self, rec: LabRecord) -> dict:
        mark = super().log_mark(rec)
        for comp in versions.KAI_COMPONENTS:
            path = processes.logs_dir(rec.dir) / f"{comp}.log"
            mark[comp] = path.stat().st_size if path.exists() else 0
        return mark

    def kai_logs(self, rec: LabRecord, mark: dict) -> dict[str, bytes]:
        out = {}
        for comp in versions.KAI_COMPONENTS:
            path = processes.logs_dir(rec.dir) / f"{comp}.log"
            if path.exists() and comp in mark:
                with open(path, "rb") as f:
                    f.seek(mark[comp])
                    out[f"{comp}.log"] = f.read()
        return out

    def scheduler_snapshot_url(self, rec: LabRecord) -> str | None:
        return kai.snapshot_url(rec.ports) if "scheduler.plugins" in rec.ports else None

    @staticmethod
    def _readyz(lab: Path) -> bool:
        kube = Kube(lab / "kubeconfig")
        try:
            return kube.readyz()
        finally:
            kube.close()

    def _spawn_controller_manager(self, lab: Path, binary: Path, ports: dict[str, int],
                                  pki_dir: Path, kubeconfig: Path, nodes: int) -> None:
        port = ports["kube-controller-manager"]
        lease = node_lease_seconds(nodes)
        grace = [f"--node-monitor-grace-period={lease}s"] if lease > NODE_LEASE_S else []
        processes.start(lab, "kube-controller-manager", [
            str(binary), f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={lab / 'kcm-certs'}",
            "--leader-elect=false", "--use-service-account-credentials=false",
            f"--service-account-private-key-file={pki_dir / 'sa.key'}",
            f"--root-ca-file={pki_dir / 'ca.crt'}",
            # node-ipam/route/service-lb make no sense without a network; the rest is real
            "--controllers=*,-nodeipam,-service-lb-controller,-route,-cloud-node-lifecycle",
            "--kube-api-qps=200", "--kube-api-burst=400", "--v=1", *grace],
            {"secure": port})

    def _spawn_kwok(self, lab: Path, binary: Path, ports: dict[str, int], kubeconfig: Path, nodes: int) -> None:
        config = lab / "kwok.yaml"
        config.write_text(kwok_config_text())
        port = ports["kwok"]
        processes.start(lab, "kwok", [
            str(binary), f"--kubeconfig={kubeconfig}", f"--config={config}",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--server-address=127.0.0.1:{port}", "--node-ip=127.0.0.1",
            f"--node-lease-duration-seconds={node_lease_seconds(nodes)}", "--cidr=10.244.0.0/16"],
            {"server": port})

    def _install_kai(self, lab: Path, kube: Kube, recipe, tree: Path, bins: dict[str, Path],
                     ports: dict[str, int], kubeconfig: Path, phases: Phases) -> None:
        with phases.timed("KAI's scheduler configuration rendered"):
            # what KAI's operator would write for the chart's SchedulingShard: the lab's default
            (lab / DEFAULT_SCHEDULER_CONF).write_text(yaml.safe_dump(kai.installed_default(recipe, tree), sort_keys=False))
            shutil.copyfile(lab / DEFAULT_SCHEDULER_CONF, lab / SCHEDULER_CONF)
        with phases.timed("KAI CRDs Established"):
            _install_crds(kube, kai.crd_documents(tree), lab)
        # KAI starts as soon as its kinds are served, and what it watches for (the chart's objects,
        # the probe) is created while it starts. For 2 s after a CRD is Established the API server
        # holds every create of its kind (an HA safeguard in apiextensions-apiserver), so the
        # probe's queues and PodGroup wait that out whatever we do; nothing else should.
        with phases.timed("KAI serving"):
            for comp in versions.KAI_COMPONENTS:
                env = {"KUBECONFIG": str(kubeconfig)}
                if comp in kai.WEBHOOK_SERVERS:
                    env["TMPDIR"] = str(_webhook_tmpdir(lab, comp))
                processes.start(lab, comp, kai.component_argv(comp, bins[comp], ports, lab / SCHEDULER_CONF),
                                {k.split(".", 1)[1]: v for k, v in ports.items() if k.startswith(comp + ".")},
                                env=env)
            with ThreadPoolExecutor(max_workers=1) as pool:
                objects = pool.submit(lambda: [kube.apply(o) for o in kai.base_objects() + kai.chart_objects(tree)])
                pod = submit_probe(kube, lab)
                for comp in versions.KAI_COMPONENTS:
                    self._wait_healthy(lab, comp, ports)
                objects.result()
        with phases.timed("KAI's webhooks registered"):
            _register_webhooks(lab, kube, ports, kai.admission_validates_topologies(tree))
        with phases.timed("probe pod bound"):
            await_probe(kube, pod, lab)

    def _start_metrics(self, lab: Path, kube: Kube, bins: dict[str, Path], ports: dict[str, int],
                       pki_dir: Path, with_kai: bool) -> None:
        """Prometheus at once (it retries its targets); kube-state-metrics once the API server
        answers (it exits when it cannot reach it at start)."""
        start = lambda name: processes.start(lab, name, metrics.argv(name, bins[name], lab, ports, pki_dir, with_kai),
                                             metrics.own_ports(name, ports))
        start(metrics.PROMETHEUS)
        wait_until("the API server to answer kube-state-metrics", kube.readyz, timeout="apiserver-ready",
                   lab=lab, component="kube-apiserver")
        # it also exits, without a line of log, when its first requests are slow (an API server just up
        # on a loaded machine, e.g. labs side by side): started again, a few times, as a Deployment would be
        for attempt in range(1, KSM_STARTS + 1):
            rec = start(metrics.KSM)
            wait_until("kube-state-metrics to serve, or to exit",
                       lambda: _http_ok(metrics.health_url(metrics.KSM, ports)) or not rec.alive(),
                       timeout="metrics-healthy", lab=lab)
            if rec.alive():
                break
            with open(processes.logs_dir(lab) / f"{metrics.KSM}.log", "a") as log:
                log.write(f"----- kailab: {metrics.KSM} {processes.how_it_ended(rec.pid)} at start "
                          f"(attempt {attempt} of {KSM_STARTS}) -----\n")
        for name in metrics.COMPONENTS:
            self._wait_healthy(lab, name, ports)

    # ---------------------------------------------------------------- status / down
    def problems(self, rec: LabRecord) -> list[str]:
        recs = processes.records(rec.dir)
        out = [f"{n} is not running (log: {processes.logs_dir(rec.dir) / (n + '.log')})"
               for n in _expected(rec) if n not in recs or not recs[n].alive()]
        if not out and not self._readyz(rec.dir):
            out.append("kube-apiserver does not answer /readyz")
        return out

    def status(self, rec: LabRecord) -> dict:
        recs = processes.records(rec.dir)
        components = {}
        for name in _expected(rec):
            r = recs.get(name)
            components[name] = {"state": "running" if r and r.alive() else ("exited" if r else "missing"),
                                "pid": r.pid if r else None, "ports": r.ports if r else {},
                                "log": r.log if r else None}
        nodes = gpus = 0
        api_ok = self._readyz(rec.dir)
        if api_ok:
            kube = Kube(rec.kubeconfig)
            try:
                nodes, gpus = clusterinfo.ready_nodes_and_gpus(kube, f"{FLEET_LABEL}={rec.fleet}")
            finally:
                kube.close()
        healthy = api_ok and all(c["state"] == "running" for c in components.values())
        if rec.metrics and components[metrics.PROMETHEUS]["state"] == "running":
            # a Prometheus that cannot scrape is broken, not a source of silently empty plots
            try:
                down = metrics.targets_down(rec.ports)
            except OSError as err:
                down = [f"its API does not answer ({err})"]
            components[metrics.PROMETHEUS]["scrape_failures"] = down
            healthy = healthy and not down
        report = status_report(rec, healthy, nodes, gpus, components,
                               f"https://127.0.0.1:{rec.ports.get('kube-apiserver')}")
        if rec.metrics:
            report["prometheus"] = metrics.url(rec.ports)
        return report

    def down(self, name: str) -> list[str]:
        with lab_lock(name):
            return self._teardown(name)

    def _teardown(self, name: str, keep_logs: bool = False):
        """Stop and remove lab `name`. With keep_logs, returns where its logs were saved."""
        lab = lab_dir(name)
        failed = failed_logs_dir(name)
        _rmtree(failed)
        stopped = processes.stop_all(lab, STOP_ORDER, kill_tail=not keep_logs) if lab.exists() else []
        if lab.exists():
            if keep_logs and processes.logs_dir(lab).exists():
                shutil.copytree(processes.logs_dir(lab), failed)
            _rmtree(lab)
        return failed if keep_logs else stopped


def _webhook_tmpdir(lab: Path, comp: str) -> Path:
    """The TMPDIR of a KAI webhook server, holding the serving certificate where controller-runtime
    looks for it (the lab CA signs it for 127.0.0.1)."""
    tmp = lab / "webhooks" / comp
    certs = kai.webhook_cert_dir(tmp)
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(lab / "pki" / "kai-webhooks.crt", certs / "tls.crt")
    shutil.copyfile(lab / "pki" / "kai-webhooks.key", certs / "tls.key")
    return tmp


# what proves each webhook answers: a dry run (admission runs, nothing is stored) of an object it acts on
_FRACTION_PROBE = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "kailab-webhook-probe", "namespace": PROBE_NAMESPACE,
                                "annotations": {"gpu-fraction": "0.5"}},
                   "spec": {"schedulerName": kai.SCHEDULER_NAME,
                            "containers": [{"name": "c", "image": "kailab.io/never-pulled"}]}}
_INVALID_PODGROUP = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                     "metadata": {"name": "kailab-webhook-probe", "namespace": PROBE_NAMESPACE},
                     "spec": {"minMember": 1, "minSubGroup": 1, "queue": "kailab-probe"}}


def _register_webhooks(lab: Path, kube: Kube, ports: dict[str, int], topologies: bool) -> None:
    """KAI's webhook configurations, then wait until the API server calls both servers: a dry-run
    fractional pod comes back mutated by KAI's admission, a dry-run invalid PodGroup is denied by
    KAI's PodGroup validation."""
    import base64

    ca = base64.b64encode((lab / "pki" / "ca.crt").read_bytes()).decode()
    for obj in kai.webhook_configurations(ports, ca, topologies):
        kube.apply(obj)
    pods = kube.resource("v1", "Pod")
    groups = kube.resource("scheduling.run.ai/v2alpha2", "PodGroup")

    def admission_mutates() -> bool:
        out = pods.create(body=_FRACTION_PROBE, namespace=PROBE_NAMESPACE, dry_run="All").to_dict()
        return "runai/shared-gpu-configmap" in (out["metadata"].get("annotations") or {})

    def podgroups_validated() -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            groups.create(body=_INVALID_PODGROUP, namespace=PROBE_NAMESPACE, dry_run="All")
        except ApiException as err:
            return "podgroup-validation.kai.scheduler" in str(err.body)
        return False

    wait_until("KAI's admission webhook to mutate pods", _swallow(admission_mutates), timeout="kai-component-healthy",
               lab=lab, component="admission", hint="the API server calls it on 127.0.0.1; see its log")
    wait_until("KAI's PodGroup validation webhook to answer", _swallow(podgroups_validated),
               timeout="kai-component-healthy", lab=lab, component="podgroupcontroller")


def _swallow(check):
    """A check that counts any API error (the webhook not answering yet: failurePolicy Fail) as not yet."""
    def run() -> bool:
        try:
            return check()
        except Exception:  # noqa: BLE001 - retried until the wait's timeout, which shows the log
            return False
    return run


def _expected(rec: LabRecord) -> list[str]:
    """The processes a healthy lab of this record runs, in start order."""
    return (CONTROL_PLANE + (list(versions.KAI_COMPONENTS) if rec.with_kai else [])
            + (list(metrics.COMPONENTS) if rec.metrics else []))


def failed_logs_dir(name: str) -> Path:
    """Where a failed `up` leaves the logs of what it started (removed by the next up/down)."""
    return state_dir() / f"{name}.failed-logs"


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        shutil.rmtree(path)  # raise now if something still holds it


def _install_crds(kube: Kube, crds: list[dict], lab: Path) -> None:
    """Apply CRDs side by side (retried until the API server takes them), then wait for each to
    be Established."""
    if not crds:
        return
    with ThreadPoolExecutor(max_workers=len(crds)) as pool:
        list(pool.map(lambda crd: wait_until(
            f"the API server to accept CRD {crd['metadata']['name']}", lambda: kube.apply(crd),
            timeout="apiserver-ready", lab=lab, component="kube-apiserver"), crds))
    for crd in crds:
        name = crd["metadata"]["name"]
        wait_until(f"CRD {name} to be Established", lambda n=name: _crd_established(kube, n),
                   timeout="crd-established", lab=lab, component="kube-apiserver")


def _crd_established(kube: Kube, name: str) -> bool:
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    conds = (crd or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conds)
