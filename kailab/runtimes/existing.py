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
from ..fleet import FLEET_LABEL, KWOK_ANNOTATION, load_fleet
from ..kube import Kube
from ..paths import lab_dir
from .waits import wait_until
from . import clusterinfo
from .addon import addon_of
from .base import LabRecord, LabSpec, Runtime, status_report
from .labkit import create_fleet, lab_lock

ADD_FLEET_ENV = "KAILAB_EXISTING_ADD_FLEET"
ADOPTED = "existing"  # the fleet name recorded when kailab added no fleet of its own


class ExistingRuntime(Runtime):
    name = "existing"
    makes_labs = False
    install_style = "as installed in an existing cluster (adopted)"

    # ---------------------------------------------------------------- up
    def up(self, spec: LabSpec) -> LabRecord:
        if not spec.kubeconfig:
            raise LabError("--runtime existing needs --kubeconfig PATH: the cluster to adopt")
        source = Path(spec.kubeconfig).expanduser()
        if not source.is_file():
            raise LabError(f"kubeconfig {source} not found")
        add_fleet = os.environ.get(ADD_FLEET_ENV) == "1"
        fleet = load_fleet(spec.fleet) if add_fleet else None  # validate before touching anything
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
            addon = addon_of(spec)
            addon.require("adopted", self.name)
            missing = addon.adopt_problems(kube, server)
            if missing:
                raise LabError(f"cluster at {server} is not ready for kailab: {'; '.join(missing)}")
            if fleet is not None:
                create_fleet(kube, fleet)
                selector = f"{FLEET_LABEL}={fleet.name}"
                wait_until(f"the fleet's {fleet.nodes_total} nodes to be Ready",
                           lambda: clusterinfo.ready_node_count(kube, selector) == fleet.nodes_total,
                           timeout="nodes-ready",
                           hint=f"the cluster needs a KWOK controller managing nodes annotated "
                                f"{KWOK_ANNOTATION}=fake")
            nodes, gpus = clusterinfo.ready_nodes_and_gpus(kube)
            if gpus == 0:
                raise LabError(f"cluster at {server} is not ready for kailab: no Ready node has allocatable "
                               f"nvidia.com/gpu (install fake-gpu-operator or a device plugin, or set "
                               f"{ADD_FLEET_ENV}=1 to add kailab's KWOK fleet)")
            version = addon.adopted_version(kube) or spec.kai_version or versions.DEFAULT_KAI
        finally:
            kube.close()
        rec = LabRecord(name=spec.name, runtime=self.name, kai_version=version,
                        fleet=fleet.name if fleet is not None else ADOPTED, nodes=nodes, gpus=gpus,
                        with_kai=spec.with_kai, kubeconfig=str(kubeconfig), state="up", stack=addon.record(),
                        ports=_ports(server), created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        rec.save()
        return rec

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
        healthy = api_ok and gpus > 0 and all(c["state"] == "running" for c in components.values())
        return status_report(rec, healthy, nodes, gpus, components, clusterinfo.api_server(rec.kubeconfig))

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

