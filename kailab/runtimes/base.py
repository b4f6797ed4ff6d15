"""The provider interface every runtime implements, and the lab record they share."""

from __future__ import annotations

import json
import os
import shutil
import socket
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import KailabError
from ..paths import lab_dir


@dataclass
class LabSpec:
    """What the user asked for."""

    name: str = "default"
    runtime: str = "auto"
    fleet: str = "small"
    kai_version: str = ""
    with_kai: bool = True
    api_port: int | None = None
    kubeconfig: str | None = None  # only for the 'existing' runtime
    dry_run: bool = False


@dataclass
class LabRecord:
    """What a runtime made; written to <lab dir>/lab.json and read by status/down/run."""

    name: str
    runtime: str
    kai_version: str
    fleet: str
    nodes: int
    gpus: int
    with_kai: bool
    kubeconfig: str
    state: str = "starting"  # starting | up | failed
    ports: dict[str, int] = field(default_factory=dict)
    created: str = ""

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
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


def status_report(rec: LabRecord, healthy: bool, nodes: int, gpus: int, components: dict,
                  api_server: str) -> dict:
    """The one shape `kailab status --json` has, whatever the runtime."""
    return {"name": rec.name, "runtime": rec.runtime, "state": rec.state if healthy else "broken",
            "kai_version": rec.kai_version, "fleet": rec.fleet, "nodes": nodes, "gpus": gpus,
            "expected_nodes": rec.nodes, "expected_gpus": rec.gpus, "components": components,
            "kubeconfig": rec.kubeconfig, "api_server": api_server}


def kai_lab(name: str, purpose: str, fleet: str | None = None) -> LabRecord:
    """The running lab `name`, if it can run `purpose` (exercises, lessons): up, with KAI, and
    (when `fleet` is given) with that fleet's GPU count. Otherwise one clear error."""
    from ..errors import KailabError

    up_cmd = f"kailab up --fleet {fleet}" if fleet else "kailab up"
    rec = LabRecord.load(name)
    if rec is None or rec.state != "up":
        raise KailabError(f"no lab named {name!r} is up: bring one up with `{up_cmd}`")
    if not rec.with_kai:
        raise KailabError(f"lab {name!r} runs without KAI (--without-kai): {purpose} need KAI "
                          f"(`kailab down --name {name}` then `kailab up --fleet {fleet or '...'}`)")
    if fleet is not None:
        from ..fleet import load_fleet

        need = load_fleet(fleet).gpus_total
        if rec.gpus != need:
            raise KailabError(f"this lesson is sized for fleet {fleet} ({need} GPUs) but lab {name!r} has "
                              f"{rec.gpus} GPUs (fleet {rec.fleet}): use a `{up_cmd}` lab")
    return rec


class Runtime(ABC):
    """One way of running a lab. `up` returns only when the lab is usable."""

    name: str = ""

    @abstractmethod
    def up(self, spec: LabSpec) -> LabRecord: ...

    @abstractmethod
    def down(self, name: str) -> list[str]:
        """Stop and remove everything of lab `name`; returns what it stopped."""

    @abstractmethod
    def status(self, record: LabRecord) -> dict: ...


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


def resolve_runtime(requested: str) -> str:
    if requested not in ("auto", "binary", "kind", "existing"):
        raise KailabError(f"unknown runtime {requested!r}: choose auto, binary, kind or existing")
    if requested == "auto":
        return "kind" if docker_answers() else "binary"
    return requested


def get_runtime(name: str) -> Runtime:
    if name == "binary":
        from .binary import BinaryRuntime

        return BinaryRuntime()
    if name == "kind":
        from .kind import KindRuntime

        return KindRuntime()
    if name == "existing":
        from .existing import ExistingRuntime

        return ExistingRuntime()
    raise KailabError(f"unknown runtime {name!r}: choose auto, binary, kind or existing")
