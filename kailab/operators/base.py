"""What every workload operator is to a lab: a pinned Go module built from the module proxy, its CRDs
and webhook registrations read from that module's own tree, one supervised process.

An operator is an `Addon` that runs as local processes (the binary runtime's capability), handed to
the runtime beside the scheduler stack's (kailab/labs.py joins them). What differs per operator (its
flags, its configuration file, how it finds its webhook certificate) is its own module's `argv` and
`prepare`; the rest is here.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import toolchain, yamlfast
from ..errors import BuildError, LabError
from ..runtimes.addon import Addon, ProcessHost, RunsAsProcesses
from ..runtimes.waits import wait_until
from . import MANAGED, pins
from .kind import OnKind, deployment



@dataclass(frozen=True)
class Pin:
    """One operator as data/operators.yaml pins it."""

    name: str
    title: str
    version: str
    component: str
    module: str
    process: str
    package: str
    namespace: str
    crds: str
    webhooks: str
    kinds: dict
    pod_label: str = ""
    role: str = ""   # the module's kubebuilder RBAC (kind labs)
    # the spec of a dry-run object of its first kind that its CRD's schema lets reach its webhooks (kind labs:
    # `up` waits until one is answered through its Service)
    webhook_probe: dict | None = None

    @classmethod
    def of(cls, name: str, version: str | None = None) -> "Pin":
        return cls(name=name, **{**pins()[name], **({"version": version} if version else {})})


@lru_cache(maxsize=None)
def module_tree(module: str, version: str) -> Path:
    """The module's own files as the proxy serves them (Go's module cache), for its CRDs and webhooks:
    read in place when the module cache has them, else downloaded (in a folder of this call's own: labs
    and builds side by side must not share one go.mod)."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOWORK": "off"}
    cache = subprocess.run([toolchain.go_binary(), "env", "GOMODCACHE"], capture_output=True, text=True, env=env).stdout.strip()
    escaped = "".join(f"!{c.lower()}" if c.isupper() else c for c in module)  # Go's case-encoding of paths
    there = Path(cache) / f"{escaped}@{version}"
    if cache and (there / "go.mod").is_file():
        return there
    with tempfile.TemporaryDirectory(prefix="kailab-module-") as probe:
        Path(probe, "go.mod").write_text("module kailab.local/probe\n\ngo 1.25\n")
        out = subprocess.run([toolchain.go_binary(), "mod", "download", "-json", f"{module}@{version}"], cwd=probe,
                             capture_output=True, text=True, env=env)
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Dir" not in info:
        raise BuildError(f"cannot fetch Go module {module}@{version}: "
                         f"{' '.join(str(info.get('Error') or out.stderr).split())} (the Go module proxy must serve it)")
    return Path(info["Dir"])


class Operator(Addon, RunsAsProcesses, OnKind):
    """One workload operator as local processes, or as a Deployment on kind (kailab/operators/kind.py). Subclasses give `argv` (and `prepare` for what the
    process reads before it starts); ports are `<process>.metrics`, `.probe` and `.webhook`."""

    def __init__(self, name: str, version: str | None = None) -> None:
        self.pin = Pin.of(name, version)
        self.name, self.version = name, self.pin.version
        self.start_title = f"{self.pin.title} serving"

    # ------------------------------------------------------------ what the lab record keeps
    def processes(self) -> list[str]:
        return [self.pin.process]

    def namespaces(self) -> list[str]:
        return [self.pin.namespace]

    def deployments(self) -> dict[str, list[str]]:
        """On kind, its Deployment (the lab record's, which `status` reads)."""
        return {self.pin.namespace: [deployment(self)]}

    # ------------------------------------------------------------ the build and its tree
    def recipe(self) -> toolchain.Recipe:
        pkg = f"{self.pin.module}/{self.pin.package}".rstrip("/")
        return toolchain.Recipe(self.pin.component, self.version, self.pin.module, {self.pin.process: pkg})

    def recipes(self) -> list:
        return [self.recipe()]

    def tree(self) -> Path:
        return module_tree(self.pin.module, self.version)

    def crd_documents(self) -> list[dict]:
        return _crds(self.tree() / self.pin.crds, f"{self.pin.title} {self.version}")

    # ------------------------------------------------------------ as local processes
    def port_names(self) -> list[str]:
        p = self.pin.process
        return [f"{p}.metrics", f"{p}.probe"] + ([f"{p}.webhook"] if self.pin.webhooks else [])

    def health_url(self, name: str, ports: dict[str, int]) -> str:
        return f"http://127.0.0.1:{ports[f'{self.pin.process}.probe']}/readyz"

    def seed_objects(self, built: dict) -> list[dict]:
        """Its CRDs and namespace are in the lab's etcd from the start (the seed is baked once)."""
        return self.crd_documents() + [{"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": self.pin.namespace}}]

    def prepare(self, host: ProcessHost) -> None:
        """What the process reads before it starts (configuration, certificates, objects)."""

    def argv(self, host: ProcessHost) -> list[str]:
        raise NotImplementedError

    def env(self, host: ProcessHost) -> dict[str, str]:
        return {"KUBECONFIG": str(host.kubeconfig)}

    def start(self, host: ProcessHost) -> None:
        # its CRDs are in the lab's seed (seed_objects), Established there: its readiness below proves them
        # served (its informers have synced on them); applying them again took up to 5 s (KubeRay's: 2 MB)
        _api_answers(host)
        with host.timed(f"{self.pin.title}'s webhooks registered"):
            self.prepare(host)
            for obj in self.webhook_configurations(host):
                host.kube.apply(obj)
        with host.timed(f"{self.pin.process} serving"):
            host.start(self.pin.process, self.argv(host), env=self.env(host))
            host.wait_healthy(self.pin.process)
            # listening is not ready: the training-operator sets its controllers up only once its
            # certificates are in place, and a kind created before that waits unreconciled
            wait_ready(self.health_url(self.pin.process, host.ports), host, self.pin.process)

    # ------------------------------------------------------------ webhooks on loopback
    def webhook_configurations(self, host: ProcessHost) -> list[dict]:
        """Its own webhook registrations reaching the lab's process by `url` on 127.0.0.1 with `ca` (the
        lab's CA unless the operator makes its own)."""
        if not self.pin.webhooks:
            return []
        port = host.ports[f"{self.pin.process}.webhook"]
        ca = base64.b64encode(self.webhook_ca(host)).decode()
        return self.registrations(lambda path: {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca},
                                  self.webhook_configuration_name)

    def registrations(self, client, name) -> list[dict]:
        """The module's webhook registrations, each hook reaching `client(path)` (a url on a binary lab, the
        operator's Service on kind), each configuration named `name(doc)`; its pod webhooks see only its
        own pods, as its kustomize patch has them."""
        out = []
        for doc in yamlfast.load_all((self.tree() / self.pin.webhooks).read_text()):
            if not doc:
                continue
            for hook in doc.get("webhooks") or []:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = client(path)
                if path.endswith("--v1-pod") and self.pin.pod_label:
                    hook["objectSelector"] = {"matchExpressions": [{"key": self.pin.pod_label, "operator": "Exists"}]}
            doc["metadata"] = {"name": name(doc), "labels": dict(MANAGED)}
            out.append(doc)
        return out

    def webhook_configuration_name(self, doc: dict) -> str:
        return f"kailab-{self.name}-{doc['metadata']['name']}"

    def webhook_ca(self, host: ProcessHost) -> bytes:
        return (host.lab / "pki" / "ca.crt").read_bytes()

    def webhook_cert_dir(self, host: ProcessHost) -> Path:
        """The lab CA's 127.0.0.1 serving certificate as controller-runtime reads it (tls.crt, tls.key)."""
        certs = host.lab / "webhooks" / self.name
        certs.mkdir(parents=True, exist_ok=True)
        for ext in ("crt", "key"):
            (certs / f"tls.{ext}").write_bytes((host.lab / "pki" / f"kai-webhooks.{ext}").read_bytes())
        return certs


def wait_ready(url: str, host: ProcessHost, process: str) -> None:
    """Until `url` answers 200, as a named wait: its death or timeout names the process, with its log."""
    def answers() -> bool:
        with urllib.request.urlopen(url, timeout=3) as resp:  # noqa: S310 - the lab's loopback probe
            return resp.status == 200

    wait_until(f"{process} to answer {url}", answers, timeout="operator-ready", lab=host.lab, component=process)


def _api_answers(host: ProcessHost) -> None:
    # the same wait, and budget, as the lab's own start: a 2-core machine under load answered /readyz
    # slowly for over 60 s (etcd's health check timing out) while it served requests
    wait_until("the lab's API server /readyz", host.kube.readyz, timeout="apiserver-ready",
               lab=host.lab, component="kube-apiserver")


@lru_cache(maxsize=None)
def _crds(folder: Path, what: str) -> list[dict]:
    """The CRDs in a module's folder, read once per process (KubeRay's are 2 MB of YAML); not to be changed."""
    docs = [d for f in sorted(folder.glob("*.yaml")) if f.name != "kustomization.yaml"
            for d in yamlfast.load_all(f.read_text()) if d and d.get("kind") == "CustomResourceDefinition"]
    if not docs:
        raise BuildError(f"no CRDs in {folder}: is this {what}'s module?")
    return docs
