"""The provider interface every runtime implements, and the lab record they share."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import LabError
from ..paths import lab_dir
from .addon import Addon
from ..kube import Kube

# a deleted pod's grace period is cut to at most this (a lab setting, `up --termination-grace`): a real
# kubelet gives a pod its terminationGracePeriodSeconds (30 s by default), which would make every
# eviction in an exercise 30 s long; the pod still ends as a kubelet ends it, only sooner
TERMINATION_GRACE_S = 1.0


@dataclass
class LabSpec:
    """What the user asked for."""

    name: str = "default"
    runtime: str = "auto"
    fleet: str = "small"
    kai_version: str = ""
    stack: str = "kai"  # what schedules, by stack name (kailab/stacks; "none": nothing); read by kailab.labs
    metrics: bool = True  # Prometheus and kube-state-metrics (runtimes that run processes)
    api_port: int | None = None
    kubeconfig: str | None = None  # only for the 'existing' runtime
    dry_run: bool = False
    images: str = "auto"  # kind: auto | local (built here by `kailab tools images`) | published
    # existing: the fleet's nodes are named `<fleet_prefix><name>` (a pool of the fleet on a shared
    # host), and what serves the adopted cluster's control plane from another cluster (LabRecord)
    fleet_prefix: str = ""
    control_plane: dict = field(default_factory=dict)
    termination_grace: float = TERMINATION_GRACE_S  # seconds
    # real worker nodes beside the lab's own (a runtime that `AddsWorkers`): where pods that need a real
    # kubelet run, e.g. a fan-out's units with this lab as their host; the lab's own pods stay off them
    workers: int = 0
    # workload operators beside the scheduler ("name@version", kailab/operators), run as the lab's components
    operators: tuple[str, ...] = ()
    stages: str = ""  # a file or folder of the user's own KWOK Stages, beside kailab's (kailab/kwok_stages.py)
    # what schedules, handed in by the lab (kailab/labs.py) from the stack it names;
    # a runtime calls its hooks and never asks what it is
    addon: Addon | None = None


@dataclass
class LabRecord:
    """What a runtime made; written to <lab dir>/lab.json and read by status/down/run."""

    name: str
    runtime: str
    kai_version: str
    fleet: str
    nodes: int
    gpus: int
    kubeconfig: str
    state: str = "starting"  # starting | up | failed
    ports: dict[str, int] = field(default_factory=dict)
    created: str = ""
    up_seconds: float | None = None  # how long `up` took, and its parts (labkit.Phases)
    up_phases: dict[str, list[float]] = field(default_factory=dict)
    metrics: bool = False  # runs Prometheus and kube-state-metrics (runtimes/metrics.py)
    stack: dict = field(default_factory=dict)  # what schedules (Addon.record()): name, version, components
    # components `up` had to start again, and why (processes.note_start_retry): never a silent retry
    start_retries: list[dict] = field(default_factory=list)
    fleet_prefix: str = ""  # its fleet's nodes are named <fleet_prefix><name> (fleet.node_manifests)
    # an adopted cluster whose control plane runs as workloads of another cluster (its host):
    # {"kubeconfig": the host's, "namespace": where they run, "deployments": {component: name}};
    # those are the lab's components too (status, deaths)
    control_plane: dict = field(default_factory=dict)
    # the most a deleted pod's grace period lasts on the fleet's KWOK nodes (seconds); None where kailab
    # did not set KWOK's stages (an adopted cluster's own KWOK)
    termination_grace: float | None = None
    workers: int = 0  # real worker nodes beside the lab's own (LabSpec.workers)
    stages: list[str] = field(default_factory=list)  # the user's own KWOK Stages the fleet plays, by name
    # the Docker engine a kind lab's nodes run in (DOCKER_HOST at its `up`): a private engine's socket is
    # set in the shell that started it, not in the next one, where `down` must still find the lab
    docker_host: str = ""

    @property
    def dir(self) -> Path:
        return lab_dir(self.name)

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "lab.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, self.dir / "lab.json")

    @classmethod
    def load(cls, name: str) -> "LabRecord | None":
        path = lab_dir(name) / "lab.json"
        try:
            data = json.loads(path.read_text())
            if "with_kai" in data:  # a record from before the stack was its one word for what schedules
                with_kai = data.pop("with_kai")
                data["stack"] = {"name": "kai" if with_kai else "none", **(data.get("stack") or {})}
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


def status_report(rec: LabRecord, healthy: bool, nodes: int, gpus: int, components: dict,
                  api_server: str) -> dict:
    """The one shape `kailab status --json` has, whatever the runtime."""
    return {"name": rec.name, "runtime": rec.runtime, "state": rec.state if healthy else "broken",
            "kai_version": rec.kai_version, "fleet": rec.fleet, "nodes": nodes, "gpus": gpus,
            "expected_nodes": rec.nodes, "expected_gpus": rec.gpus, "components": components,
            "kubeconfig": rec.kubeconfig, "api_server": api_server, "start_retries": rec.start_retries,
            "termination_grace_s": rec.termination_grace}


class Unsupported(LabError):
    """The lab's runtime cannot do what was asked (one line naming what would): refused before
    anything ran, so exit 2 as a bad flag is, not 3 (a lab that cannot come up)."""

    exit_code = 2


class Runtime(ABC):
    """One way of running a lab: everything a caller may ask of a lab, whatever runs it.

    `up` returns only when the lab is usable. What only some runtimes can do is a capability below,
    which a runtime declares by inheriting it and code above asks for (`isinstance`, or `processes_of`,
    which refuses in one line); callers never ask which runtime a lab has.
    """

    name: str = ""
    install_style = ""  # how components are installed, in words ("as local processes"), for the evidence

    def __init__(self) -> None:
        self.repaired: list[str] = []  # what the last `up` restarted on a broken lab

    def plan(self, spec: "LabSpec") -> str:
        """Every command and file `up` would run and write (`kailab up --dry-run`)."""
        raise Unsupported(f"--dry-run is not supported by the {self.name} runtime (it runs no commands "
                          "worth printing); use --runtime kind for a printed plan")

    @abstractmethod
    def up(self, spec: "LabSpec") -> "LabRecord": ...

    @abstractmethod
    def down(self, name: str) -> list[str]:
        """Stop and remove everything of lab `name`; returns what it stopped."""

    @abstractmethod
    def status(self, record: "LabRecord") -> dict: ...

    # ------------------------------------------------------------ what exercises ask of any lab
    def prometheus_in_lab(self, record: "LabRecord") -> str | None:
        """The lab's Prometheus as the lab's own components reach it, None without one."""
        return None

    def dead_components(self, record: "LabRecord", ignore: set[str]) -> list[tuple[str, str]]:
        """Components that died unasked, each with how it ended (what is known: exit, last log lines).
        A cluster restarts pods itself, so by default nothing is reported dead."""
        return []

    def log_mark(self, record: "LabRecord") -> dict:
        """Where the scheduler's logs stand now, so stack_logs can return a run's window."""
        return {"wall": time.time()}

    def stack_logs(self, record: "LabRecord", mark: dict) -> dict[str, bytes]:
        """The scheduler's log lines since `mark`, by file name; by default from the pods of the
        namespaces the lab record names."""
        since = max(1, int(time.time() - mark["wall"]) + 5)
        out: dict[str, bytes] = {}
        kube = Kube(record.kubeconfig)
        try:
            for ns in (record.stack or {}).get("namespaces", []):
                for pod in kube.core.list_namespaced_pod(ns).items:
                    for c in pod.spec.containers:
                        text = kube.core.read_namespaced_pod_log(pod.metadata.name, ns,
                                                                 container=c.name, since_seconds=since)
                        out[f"{pod.metadata.name}.{c.name}.log"] = (text or "").encode()
        finally:
            kube.close()
        return out


# ---------------------------------------------------------------- what only some runtimes can do
class MakesLabs(ABC):
    """Capability: brings up a lab of any fleet (not so a runtime that adopts a cluster)."""


class ControlsProcesses(ABC):
    """Capability: runs the lab's components as its own processes, so it can kill, restart and rerun them."""

    @abstractmethod
    def kill(self, record: "LabRecord", component: str) -> None: ...

    @abstractmethod
    def restart(self, record: "LabRecord", component: str) -> None:
        """Start a lab process again (dead or alive) and wait until it is healthy."""

    @abstractmethod
    def process_command(self, record: "LabRecord", component: str) -> list[str]:
        """The command line a lab process runs now."""

    @abstractmethod
    def rerun(self, record: "LabRecord", component: str, argv: list[str]) -> None:
        """Stop a lab process and start it with `argv`, keeping its ports and environment; wait until
        it is healthy. The new command line is its record, so a repair restarts it the same way."""


class InstallsCharts(ABC):
    """Capability: installs components from their charts and operators into a cluster it made."""


class AddsWorkers(ABC):
    """Capability: adds real worker nodes beside the lab's own (LabSpec.workers)."""


RUNTIME_CAPABILITIES = (MakesLabs, ControlsProcesses, InstallsCharts, AddsWorkers)


def processes_of(runtime: Runtime, what: str) -> ControlsProcesses:
    """The runtime as one that controls the lab's processes, or one line saying `what` needs that."""
    if isinstance(runtime, ControlsProcesses):
        return runtime
    raise Unsupported(f"the {runtime.name} runtime runs no processes of its own, so it cannot {what}: "
                      "use the binary runtime")


def docker_answers() -> bool:
    """True when a Docker engine answers on its socket (the client alone is not enough)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return shutil.which("docker") is not None
    path = host[len("unix://"):]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(path)
            s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b"OK" in s.recv(256)
    except OSError:
        return False
