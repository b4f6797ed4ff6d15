"""The existing runtime: adopt a cluster someone else runs (KAI already installed), never change it.

`up` checks the cluster can run kailab's exercises (KAI's CRDs, a KAI scheduler, GPUs on some
node) and records it; `down` forgets it. The one opt-in change: with
KAILAB_EXISTING_ADD_FLEET=1, `up` adds the fleet's KWOK nodes exactly as the binary runtime does
(the cluster then needs a KWOK controller managing nodes annotated kwok.x-k8s.io/node=fake).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from .. import versions
from ..errors import LabError
from ..fleet import FLEET_LABEL, KWOK_ANNOTATION, fleet_difference, load_fleet
from ..kube import Kube
from ..paths import lab_dir
from .waits import wait_until
from . import clusterinfo, restarts
from .addon import AdoptsCluster, addon_of, need
from .base import LabRecord, LabSpec, Runtime, status_report
from .labkit import create_fleet, lab_lock

ADD_FLEET_ENV = "KAILAB_EXISTING_ADD_FLEET"
ADOPTED = "existing"  # the fleet name recorded when kailab added no fleet of its own


class ExistingRuntime(Runtime):
    name = "existing"
    install_style = "as installed in an existing cluster (adopted)"

    # ---------------------------------------------------------------- up
    def up(self, spec: LabSpec) -> LabRecord:
        if not spec.kubeconfig:
            raise LabError("--runtime existing needs --kubeconfig PATH: the cluster to adopt")
        source = Path(spec.kubeconfig).expanduser()
        if not source.is_file():
            raise LabError(f"kubeconfig {source} not found")
        add_fleet = os.environ.get(ADD_FLEET_ENV) == "1"
        # validate before touching anything
        fleet = load_fleet(spec.fleet) if add_fleet or spec.fleet_prefix else None
        with lab_lock(spec.name):
            existing = LabRecord.load(spec.name)
            if existing and existing.runtime != self.name:
                raise LabError(f"lab {spec.name!r} is a {existing.runtime} lab: run `kailab down` first, "
                               "or use --name for another lab")
            lab = lab_dir(spec.name)
            lab.mkdir(parents=True, exist_ok=True)
            kubeconfig = lab / "kubeconfig"
            # a copy: later edits to the user's file (context switches) cannot move the lab
            shutil.copyfile(source, kubeconfig)
            kubeconfig.chmod(0o600)
            try:
                return self._adopt(spec, kubeconfig, fleet)
            except BaseException:
                if existing is None:
                    shutil.rmtree(lab, ignore_errors=True)  # no record of a cluster we did not adopt
                raise

    def _adopt(self, spec: LabSpec, kubeconfig: Path, fleet) -> LabRecord:
        server = clusterinfo.api_server(kubeconfig) or str(kubeconfig)
        try:
            kube = Kube(kubeconfig)
        except Exception as err:  # noqa: BLE001 - a malformed kubeconfig
            raise LabError(f"cannot use kubeconfig {spec.kubeconfig}: {str(err).splitlines()[0]}") from None
        try:
            if not kube.readyz():
                raise LabError(f"the API server at {server} does not answer /readyz: is the cluster running "
                               "and the kubeconfig's current context the right one?")
            addon = need(addon_of(spec), AdoptsCluster, self.name)
            missing = addon.adopt_problems(kube, server)
            if missing:
                raise LabError(f"cluster at {server} is not ready for kailab: {'; '.join(missing)}")
            if spec.fleet_prefix:  # a pool of the fleet someone else made: it must be that fleet
                differs = fleet_difference(fleet, kube.list("v1", "Node"), spec.fleet_prefix)
                if differs:
                    raise LabError(f"cluster at {server} does not run fleet {fleet.name} as nodes named "
                                   f"{spec.fleet_prefix}NAME: {differs}")
            elif fleet is not None:
                create_fleet(kube, fleet)
                selector = f"{FLEET_LABEL}={fleet.name}"
                wait_until(f"the fleet's {fleet.nodes_total} nodes to be Ready",
                           lambda: clusterinfo.ready_node_count(kube, selector) == fleet.nodes_total,
                           timeout="nodes-ready",
                           hint=f"the cluster needs a KWOK controller managing nodes annotated "
                                f"{KWOK_ANNOTATION}=fake")
            nodes, gpus = clusterinfo.ready_nodes_and_gpus(kube, f"{FLEET_LABEL}={fleet.name}" if fleet else None)
            if gpus == 0:
                raise LabError(f"cluster at {server} is not ready for kailab: no Ready node has allocatable "
                               f"nvidia.com/gpu (install fake-gpu-operator or a device plugin, or set "
                               f"{ADD_FLEET_ENV}=1 to add kailab's KWOK fleet)")
            version = addon.adopted_version(kube) or spec.kai_version or versions.DEFAULT_KAI
        finally:
            kube.close()
        rec = LabRecord(name=spec.name, runtime=self.name, kai_version=version,
                        fleet=fleet.name if fleet is not None else ADOPTED, nodes=nodes, gpus=gpus, kubeconfig=str(kubeconfig), state="up", stack=addon.record(),
                        ports=_ports(server), created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        fleet_prefix=spec.fleet_prefix, control_plane=dict(spec.control_plane))
        rec.save()
        return rec

    # ---------------------------------------------------------------- deaths
    # as on kind: a restart since the run began is a death — of the scheduler's Deployments in the
    # adopted cluster, and of what serves its control plane in its host (control_plane)
    def log_mark(self, record: LabRecord) -> dict:
        mark = super().log_mark(record)
        try:
            self._restarts = self._restart_counts(record)
        except Exception:  # noqa: BLE001 - no baseline: deaths are not reported for this run
            self._restarts = None
        return mark

    def dead_components(self, record: LabRecord, ignore: set[str]) -> list[tuple[str, str]]:
        baseline = getattr(self, "_restarts", None)
        if baseline is None:
            return []
        try:
            now = self._restart_counts(record)
        except Exception as err:  # noqa: BLE001 - the host no longer answers: what it serves is gone
            return [(name, f"its host's API server does not answer ({type(err).__name__})")
                    for name in (record.control_plane or {}).get("deployments", {})]
        dead = []
        for name, (count, kubeconfig, pods) in now.items():
            if count > baseline.get(name, (0,))[0] and name not in ignore:
                kube = Kube(kubeconfig)
                try:
                    dead.append((name, restarts.why_it_died(kube, pods)))
                finally:
                    kube.close()
        return dead

    @staticmethod
    def _restart_counts(record: LabRecord) -> dict[str, tuple[int, str, list]]:
        """Component -> (container restarts, the kubeconfig of its cluster, its pods): the adopted
        cluster's scheduler Deployments and, on its host, what serves its control plane (named as
        control_plane names it)."""
        groups = [(record.kubeconfig, (record.stack or {}).get("deployments", {}), {})]
        cp = record.control_plane or {}
        if cp:
            deps = cp.get("deployments", {})
            groups.append((cp["kubeconfig"], {cp["namespace"]: list(deps.values())}, {v: k for k, v in deps.items()}))
        out: dict[str, tuple[int, str, list]] = {}
        for kubeconfig, components, rename in groups:
            kube = Kube(kubeconfig)
            try:
                for name, (count, pods) in restarts.restart_counts(kube, components).items():
                    out[rename.get(name, name)] = (count, str(kubeconfig), pods)
            finally:
                kube.close()
        return out

    # ---------------------------------------------------------------- status / down
    def status(self, rec: LabRecord) -> dict:
        nodes = gpus = 0
        components: dict[str, dict] = {}
        api_ok = False
        try:
            kube = Kube(rec.kubeconfig)
        except Exception:  # noqa: BLE001 - the copied kubeconfig is gone or unreadable
            kube = None
        if kube is not None:
            try:
                api_ok = kube.readyz()
                if api_ok:
                    selector = f"{FLEET_LABEL}={rec.fleet}" if rec.fleet != ADOPTED else None
                    nodes, gpus = clusterinfo.ready_nodes_and_gpus(kube, selector)
                    for ns in (rec.stack or {}).get("namespaces", []):
                        components.update(clusterinfo.deployment_states(kube, ns))
            finally:
                kube.close()
        components.update(self._control_plane_states(rec))
        healthy = api_ok and gpus > 0 and all(c["state"] == "running" for c in components.values())
        return status_report(rec, healthy, nodes, gpus, components, clusterinfo.api_server(rec.kubeconfig))

    @staticmethod
    def _control_plane_states(rec: LabRecord) -> dict[str, dict]:
        """Rows for what serves the adopted cluster's control plane in its host (control_plane)."""
        cp = rec.control_plane or {}
        deps = cp.get("deployments", {})
        unreachable = {name: {"state": "host unreachable", "pid": None, "ports": {}, "log": None} for name in deps}
        if not deps:
            return {}
        try:
            host = Kube(cp["kubeconfig"])
        except Exception:  # noqa: BLE001 - the host's kubeconfig is gone: nothing of it can be read
            return unreachable
        try:
            if not host.readyz():
                return unreachable
            found = clusterinfo.deployment_states(host, cp["namespace"], list(deps.values()))
            return {name: found[workload] for name, workload in deps.items()}
        finally:
            host.close()

    def down(self, name: str) -> list[str]:
        """Forget the lab: remove kailab's record and kubeconfig copy. The cluster is not touched."""
        with lab_lock(name):
            if not lab_dir(name).exists():
                return []
            shutil.rmtree(lab_dir(name))
        return [f"kailab's record of lab {name!r} only (the cluster itself was not touched)"]


def _ports(server: str) -> dict[str, int]:
    m = re.search(r":(\d+)/?$", server)
    return {"kube-apiserver": int(m.group(1))} if m else {}

