"""The binary runtime: a real control plane and the lab's scheduler as local processes, no Docker.

etcd, kube-apiserver, kube-controller-manager and kwok run from the binary cache, supervised by
kailab itself rather than kwokctl: the scheduler's processes (the lab's Addon, handed in by a
stack) need the same supervision (own ports, logs, pid records, clean-up), and one mechanism for
all of them keeps `down` and `status` simple. Everything listens on 127.0.0.1 only.

Over 500 lines: `up`, `down`, `status`, repair and faults all read and write one lab's process table
and record under one lock; split apart, each part would re-read what the others just changed.
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


from .. import kwok_stages, toolchain, versions
from ..errors import KailabError, LabError
from ..kube import Kube
from ..node_labels import FLEET_LABEL
from ..workloads import service_account
from ..evidence import made_alone
from ..paths import evidence_dir, lab_dir, state_dir
from .waits import wait_until, why_it_died
from . import clusterinfo, metrics, processes, seed
from .addon import ProcessHost, RunsAsProcesses, addon_of, need
from .hostlimits import require_inotify
from .base import ControlsProcesses, LabRecord, LabSpec, MakesLabs, Runtime, status_report
from .labkit import Phases, create_fleet, kwok_config_text, lab_lock, refuse_other_lab, run_together, user_stages
from ..fleet import load_fleet
from . import pki

if TYPE_CHECKING:
    from ..fleet import Fleet

KSM_STARTS = 3  # kube-state-metrics gives up at once when the API server is slow to answer it

CONTROL_PLANE = ["etcd", "kube-apiserver", "kube-controller-manager", "kwok"]
# KWOK renews every node's Lease each quarter of its duration: with 40 s leases a 1,000-node fleet is
# 100 writes/s, most of what an idle large lab's API server does (measured: 0.7 of a core). Larger
# fleets get longer leases (at most 2 renewals/s) and a node-monitor grace period to match, so a
# node is still seen NotReady, only later; fleets up to 20 nodes keep Kubernetes' 40 s. (At 10/s the
# 1,213-node fleet's renewals were a quarter of an idle lab's API server and KWOK's whole CPU.)
NODE_LEASE_S, LEASE_RENEWALS_PER_S = 40, 2


def node_lease_seconds(nodes: int) -> int:
    return max(NODE_LEASE_S, -(-4 * nodes // LEASE_RENEWALS_PER_S))
# stop order for `down`: consumers of the API first (the scheduler's processes with them), etcd last
STOP_ORDER = list(metrics.COMPONENTS) + ["kwok", "kube-controller-manager", "kube-apiserver", "etcd"]


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


class BinaryRuntime(Runtime, MakesLabs, ControlsProcesses):
    name = "binary"
    install_style = "as local processes (binaries built from source, chart objects applied)"

    # ---------------------------------------------------------------- up
    def up(self, spec: LabSpec) -> LabRecord:
        # the fleet's model (pydantic) and the PKI (cryptography) load here, not with the module:
        # `down` and `status` need neither

        fleet = load_fleet(spec.fleet)  # validate every input before anything starts
        stages = user_stages(spec)
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
            addon = need(addon_of(spec), RunsAsProcesses, self.name)
            require_inotify(self.name)
            # by cache key: an addon may need a build the control plane has too (kube-scheduler)
            recipes = list({r.key: r for r in toolchain.cluster_recipes(release.version) + addon.recipes()}.values())
            if spec.metrics:
                recipes += toolchain.metrics_recipes()
            built = toolchain.build_all(recipes)
            try:
                return self._start(spec, fleet, release, recipes, built, addon, stages)
            except BaseException as err:
                # no half-started lab: stop what started; a failed start (not an interrupted one)
                # keeps every component's whole log where no later up/down removes it
                failed = isinstance(err, LabError)
                kept = self._teardown(spec.name, keep_logs=failed)
                if failed:
                    raise LabError(f"{err}\n(lab stopped and removed; every component's whole log is kept in "
                                   f"{kept}, until you remove it)") from None
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
            # nodes whose Leases lapsed while kwok was dead are NotReady until it renews them: a repaired
            # lab is up when its whole fleet is Ready again, as a new one is
            kube = Kube(rec.kubeconfig)
            try:
                self._nodes_ready(rec.dir, kube, fleet)
            finally:
                kube.close()
            if rec.metrics:
                # Prometheus still holds the failed scrapes of what died until it scrapes them again (the
                # API server every 20 s): a repaired lab is up once each of those has been scraped since
                failed = {job for job, (_, seen) in metrics.last_scrapes(rec.ports).items() if seen != "up"}
                if failed:
                    metrics.wait_for_scrape(rec.ports, after=time.time(), timeout=60, jobs=failed)
        return rec

    def _start(self, spec: LabSpec, fleet: Fleet, release, recipes, built, addon: RunsAsProcesses,
               stages: list[dict]) -> LabRecord:
        lab = lab_dir(spec.name)
        lab.mkdir(parents=True, exist_ok=True)
        bins = {name: built[r.key] / name for r in recipes for name in r.binaries}
        port_names = ["etcd.client", "etcd.peer", "kube-apiserver", "kube-controller-manager", "kwok"]
        port_names += addon.port_names()
        if spec.metrics:
            port_names += metrics.port_names()
        fixed = {"kube-apiserver": spec.api_port} if spec.api_port else {}
        ports = processes.allocate_ports(port_names, fixed)
        kubeconfig = lab / "kubeconfig"
        rec = LabRecord(name=spec.name, runtime=self.name,
                        kai_version=addon_of(spec).kai_version(release.version),
                        fleet=fleet.name, nodes=fleet.nodes_total, gpus=fleet.gpus_total, kubeconfig=str(kubeconfig), ports=ports, metrics=spec.metrics,
                        termination_grace=spec.termination_grace, stages=[s["metadata"]["name"] for s in stages],
                        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        stack={**addon.record(), "health": {n: addon.health_url(n, ports) for n in addon.processes()}})
        rec.save()
        pki_dir = lab / "pki"
        pki.generate(pki_dir)
        pki.kubeconfig(kubeconfig, pki_dir, f"https://127.0.0.1:{ports['kube-apiserver']}", f"kailab-{spec.name}")

        # Every process starts at once (each retries the API server until it answers); then the
        # fleet, the control plane's health and the scheduler proceed in parallel. Ordering that
        # matters is kept inside each part: CRDs before the scheduler, the probe's queues before its pod.
        phases = Phases()
        with phases.timed("seeded etcd"):
            self._seed(lab, bins, addon.seed_objects(built))
        with phases.timed("processes started"):
            self._spawn_etcd(lab, bins["etcd"], ports)
            self._spawn_apiserver(lab, bins["kube-apiserver"], ports, pki_dir)
            self._spawn_kwok(lab, bins["kwok"], ports, kubeconfig, fleet.nodes_total, spec.termination_grace,
                             kwok_stages.text(stages))
        kube = Kube(kubeconfig)
        spawn_kcm = lambda: self._spawn_controller_manager(lab, bins["kube-controller-manager"], ports, pki_dir,  # noqa: E731
                                                           kubeconfig, fleet.nodes_total)
        parts = {"control plane healthy": lambda: self._control_plane_healthy(lab, kube, ports, phases, spawn_kcm),
                 "fleet Ready": lambda: self._fleet_ready(lab, kube, fleet)}
        if addon.processes():
            host = _Host(self, lab, kube, kubeconfig, ports, bins, phases, rec.stack["health"])
            parts[addon.start_title] = lambda: addon.start(host)
        if spec.metrics:
            parts["metrics serving"] = lambda: self._start_metrics(lab, kube, bins, ports, pki_dir,
                                                                   addon.scrape_jobs(ports))
        try:
            run_together(lab, parts, phases)
        finally:
            kube.close()
        rec.state = "up"
        rec.start_retries = processes.start_retries(lab)
        rec.up_phases = phases.spans
        rec.up_seconds = round(time.perf_counter() - phases.t0, 2)
        rec.save()
        return rec

    # ---------------------------------------------------------------- the seed (see seed.py)
    def _seed(self, lab: Path, bins: dict[str, Path], objects: list[dict]) -> None:
        """etcd starts from a seed: the API server's own bootstrap and the Addon's `objects` (its
        kinds, its chart's objects, the probe's namespace and queues)."""
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
                    processes.note_start_retry(lab, name, why_it_died(lab, name) + ", before the API server was ready")
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
        self._nodes_ready(lab, kube, fleet)

    def _nodes_ready(self, lab: Path, kube: Kube, fleet: Fleet) -> None:
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
            # one member on loopback: it elects itself a tick after a restart on a seed (etcd advances
            # its election ticks), 0.25 s at 100 ms ticks; 10 ms ticks saved 0.15 s of that and cost
            # 2.2 % of a core for the lab's whole life (0.6 % at 100 ms), measured here
            "--heartbeat-interval=100", "--election-timeout=1000",
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

    def _wait_healthy(self, lab: Path, name: str, ports: dict[str, int], health: dict[str, str] | None = None) -> None:
        """Wait for one component's health endpoint; the timeout error carries its log. `health`:
        the scheduler's processes' URLs (the lab record's)."""
        what, check, timeout = self._health(lab, name, ports, health or {})
        wait_until(what, check, timeout=timeout, lab=lab, component=name)

    def _health(self, lab: Path, name: str, ports: dict[str, int], health: dict[str, str]):
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
        url = health[name]
        return f"{name} to serve {url}", lambda: _http_ok(url, any_status=True), "scheduler-component-healthy"

    def restart(self, rec: LabRecord, name: str) -> None:
        """Restart one process of the lab (dead or alive) and wait until it is healthy."""
        old = processes.records(rec.dir)[name]
        processes.restart(rec.dir, old)
        self._wait_healthy(rec.dir, name, rec.ports, rec.stack.get("health"))

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

    def prometheus_in_lab(self, rec: LabRecord) -> str | None:
        return metrics.url(rec.ports) if rec.metrics else None

    def process_command(self, rec: LabRecord, component: str) -> list[str]:
        return list(processes.records(rec.dir)[component].argv)

    def rerun(self, rec: LabRecord, component: str, argv: list[str]) -> None:
        old = processes.records(rec.dir)[component]
        processes.stop(old)
        processes.start(rec.dir, component, argv, old.ports, old.env)
        self._wait_healthy(rec.dir, component, rec.ports, rec.stack.get("health"))

    def dead_components(self, rec: LabRecord, ignore: set[str]) -> list[tuple[str, str]]:
        recs = processes.records(rec.dir)
        watched = _stack_processes(rec) + (list(metrics.COMPONENTS) if rec.metrics else [])
        return [(c, f"{why_it_died(rec.dir, c)}; its last log lines: {processes.recent_log(rec.dir, c, 10)}")
                for c in watched if c in recs and not recs[c].alive() and c not in ignore]

    def log_mark(self, rec: LabRecord) -> dict:
        mark = super().log_mark(rec)
        for comp in _stack_processes(rec):
            path = processes.logs_dir(rec.dir) / f"{comp}.log"
            mark[comp] = path.stat().st_size if path.exists() else 0
        return mark

    def stack_logs(self, rec: LabRecord, mark: dict) -> dict[str, bytes]:
        out = {}
        for comp in _stack_processes(rec):
            path = processes.logs_dir(rec.dir) / f"{comp}.log"
            if path.exists() and comp in mark:
                with open(path, "rb") as f:
                    f.seek(mark[comp])
                    out[f"{comp}.log"] = f.read()
        return out

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
            # node-ipam/route/service-lb make no sense without a network; ttl sets an annotation only
            # kubelets read, and wrote it about 1,000 times as a 1,213-node fleet came up (into the
            # first minutes of a fill); the rest is real
            "--controllers=*,-nodeipam,-service-lb-controller,-route,-cloud-node-lifecycle,-ttl",
            "--kube-api-qps=200", "--kube-api-burst=400", "--v=1", *grace],
            {"secure": port})

    def _spawn_kwok(self, lab: Path, binary: Path, ports: dict[str, int], kubeconfig: Path, nodes: int,
                    termination_grace: float, stages: str = "") -> None:
        config = lab / "kwok.yaml"
        config.write_text(kwok_config_text(nodes, termination_grace, stages))
        port = ports["kwok"]
        processes.start(lab, "kwok", [
            str(binary), f"--kubeconfig={kubeconfig}", f"--config={config}",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--server-address=127.0.0.1:{port}", "--node-ip=127.0.0.1",
            f"--node-lease-duration-seconds={node_lease_seconds(nodes)}", "--cidr=10.244.0.0/16"],
            {"server": port})

    def _start_metrics(self, lab: Path, kube: Kube, bins: dict[str, Path], ports: dict[str, int],
                       pki_dir: Path, scrape_jobs: list[dict]) -> None:
        """Prometheus at once (it retries its targets); kube-state-metrics once the API server
        answers (it exits when it cannot reach it at start)."""
        start = lambda name: processes.start(lab, name, metrics.argv(name, bins[name], lab, ports, pki_dir, scrape_jobs),
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
            processes.note_start_retry(lab, metrics.KSM, f"{why_it_died(lab, metrics.KSM)} (attempt {attempt} of {KSM_STARTS})")
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
        if keep_logs and lab.exists():  # before stopping: how each died, while its exit status is ours to read
            causes = {c: why_it_died(lab, c) for c, r in processes.records(lab).items() if not r.alive()}
        stopped = processes.stop_all(lab, STOP_ORDER, kill_tail=not keep_logs) if lab.exists() else []
        kept = "nowhere: the lab had written no logs yet"
        if lab.exists():
            if keep_logs and processes.logs_dir(lab).exists():
                kept = failed_start_dir(name)
                shutil.copytree(processes.logs_dir(lab), kept, dirs_exist_ok=True)
                (kept / "deaths.txt").write_text("".join(f"{c}: {why}\n" for c, why in sorted(causes.items()))
                                                 or "no component had died: the start timed out\n")
            _rmtree(lab)
        return kept if keep_logs else stopped


def _expected(rec: LabRecord) -> list[str]:
    """The processes a healthy lab of this record runs, in start order."""
    return CONTROL_PLANE + _stack_processes(rec) + (list(metrics.COMPONENTS) if rec.metrics else [])


def _stack_processes(rec: LabRecord) -> list[str]:
    """The scheduler's processes (the Addon's, as the lab record keeps them)."""
    return list((rec.stack or {}).get("processes", []))



class _Host(ProcessHost):
    """This runtime's primitives, as an Addon's `start` hook uses them during `up`."""

    def __init__(self, runtime: "BinaryRuntime", lab: Path, kube: Kube, kubeconfig: Path, ports: dict[str, int],
                 bins: dict[str, Path], phases: Phases, health: dict[str, str]) -> None:
        self.runtime, self.lab, self.kube, self.kubeconfig = runtime, lab, kube, kubeconfig
        self.ports, self.bins, self.phases, self.health = ports, bins, phases, health

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        own = {k.split(".", 1)[1]: v for k, v in self.ports.items() if k.startswith(name + ".")}
        processes.start(self.lab, name, argv, own, env=env)

    def wait_healthy(self, name: str) -> None:
        self.runtime._wait_healthy(self.lab, name, self.ports, self.health)

    def install_crds(self, crds: list[dict]) -> None:
        _install_crds(self.kube, crds, self.lab)

    def timed(self, what: str):
        return self.phases.timed(what)


def failed_start_dir(name: str) -> Path:
    """Where a failed `up` keeps every component's whole log and how each died, made now: under evidence/
    (failed-starts/<UTC time>-<lab>, -2 after it when that second has one), which no later up or down removes."""
    return made_alone(evidence_dir() / "failed-starts", f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{name}")


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
    # Established is stored with the CRD (a seeded lab's are so from the start), and the API server
    # serves a kind only once it has read it: a component listing the server's APIs before then exits
    # ("no matches for <group>/<version>": a scheduler's controller did, with the operators' CRDs in the seed)
    for group_version, plurals in _served_by(crds).items():
        wait_until(f"the API server to serve {group_version}", lambda gv=group_version, p=plurals: _serves(kube, gv, p),
                   timeout="crd-established", lab=lab, component="kube-apiserver")


def _served_by(crds: list[dict]) -> dict[str, set[str]]:
    """Each served group/version of these CRDs, with the resources (plurals) it must list."""
    out: dict[str, set[str]] = {}
    for crd in crds:
        spec = crd["spec"]
        for version in spec.get("versions") or []:
            if version.get("served", True):
                out.setdefault(f"{spec['group']}/{version['name']}", set()).add(spec["names"]["plural"])
    return out


def _serves(kube: Kube, group_version: str, plurals: set[str]) -> bool:
    pool = kube.api_client.rest_client.pool_manager
    try:
        resp = pool.request("GET", f"{kube.api_client.configuration.host}/apis/{group_version}", timeout=10)
        found = json.loads(resp.data) if resp.status == 200 else {}
    except (OSError, ValueError):  # not answering yet
        return False
    return plurals <= {r.get("name") for r in found.get("resources") or []}


def _crd_established(kube: Kube, name: str) -> bool:
    crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    conds = (crd or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conds)
