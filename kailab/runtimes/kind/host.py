"""The host a kind lab runs on: its facts (cgroup v1, capabilities), the tools it needs (kind,
kubectl, helm) and what stops a kind lab on it (Docker's runtime, free space)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml


from ...errors import LabError
from ...images import cached_tool
from .pins import pins

# Where tools come from: these variables first, then PATH
TOOL_ENV = {"kind": "KAILAB_KIND", "kubectl": "KAILAB_KUBECTL", "helm": "KAILAB_HELM"}


@dataclass(frozen=True)
class HostFacts:
    """What the kind node needs to know about the host it runs on (read by `detect`)."""

    cgroup_v1: bool = False          # kubelet >= 1.35 refuses cgroup v1 unless failCgroupV1: false
    cap_sys_resource: bool = True    # without it containerd cannot lower a sandbox's oom_score_adj

    @classmethod
    def detect(cls) -> "HostFacts":
        v1 = not Path("/sys/fs/cgroup/cgroup.controllers").exists()
        try:
            bnd = next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                       if line.startswith("CapBnd:"))
            has = bool(int(bnd, 16) >> 24 & 1)  # CAP_SYS_RESOURCE is capability 24
        except (OSError, StopIteration, ValueError):
            has = True
        return cls(cgroup_v1=v1, cap_sys_resource=has)

    def adaptations(self) -> list[str]:
        out = []
        if self.cgroup_v1:
            out.append("cgroup v1 host: kubelet gets failCgroupV1: false (kubelet >= 1.35 refuses cgroup v1 otherwise)")
        if not self.cap_sys_resource:
            out.append("host lacks CAP_SYS_RESOURCE: containerd gets restrict_oom_score_adj = true "
                       "(sandboxes fail to lower their oom_score_adj otherwise)")
        return out


# ------------------------------------------------------------------ tools
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"


def current_docker_host() -> str:
    """The engine docker and kind talk to from here."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def engine_env(docker_host: str) -> dict[str, str] | None:
    """The environment for docker and kind on the engine a lab was made in (None: this one's, for a
    record from before kailab kept it)."""
    return {**os.environ, "DOCKER_HOST": docker_host} if docker_host else None


def find_tool(name: str) -> str:
    """The tool's path: its KAILAB_* variable if set, else PATH; a one-line LabError if neither."""
    var = TOOL_ENV[name]
    hint = pins()[name]["install"]
    configured = os.environ.get(var)
    if configured:
        found = shutil.which(configured)
        if found:
            return found
        raise LabError(f"{name} not found at {configured} (from {var}): point {var} at the {name} "
                       "binary, or unset it to use PATH")
    found = shutil.which(name) or cached_tool(name)  # `kailab tools images` builds kind, helm, kubectl
    if not found:
        raise LabError(f"{name} not found: install it ({hint}), set {var}, or build it with `kailab tools images`")
    return str(found)


def find_tools(names: list[str]) -> dict[str, str]:
    """Every tool's path; one LabError naming every missing tool at once."""
    found, missing = {}, []
    for name in names:
        try:
            found[name] = find_tool(name)
        except LabError as err:
            missing.append(str(err))
    if missing:
        raise LabError("; ".join(missing))
    return found


def check_kubectl(kubectl: str) -> None:
    out = subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True,
                         timeout=30)
    try:
        have = json.loads(out.stdout)["clientVersion"]["gitVersion"]
        m = re.match(r"v(\d+)\.(\d+)", have)
        minimum = pins()["kubectl"]["min"]
        wanted = re.match(r"v(\d+)\.(\d+)", minimum)
        if m and wanted and tuple(map(int, m.groups())) < tuple(map(int, wanted.groups())):
            raise LabError(f"kubectl {have} is too old: the kind runtime needs {minimum} or newer "
                           f"({pins()['kubectl']['install']}); set KAILAB_KUBECTL to pick another")
    except (ValueError, KeyError, TypeError):
        pass  # an unusual build that does not say its version: let the commands speak


# ------------------------------------------------------------------ host checks and images
MIN_FREE_GIB = 5  # a kind lab's node image and images, unpacked in the node


def host_problems(host: HostFacts, docker_runtime: str, free_gib: float | None, docker_root: str) -> list[str]:
    """What stops a kind lab on this host, each with its fix (pure: the facts come in)."""
    out = []
    if not host.cap_sys_resource and docker_runtime == "runc":
        out.append("this host's capability bounding set lacks CAP_SYS_RESOURCE and Docker runs containers "
                   "with plain runc, so every privileged container (kind's node) fails with 'unable to apply "
                   "caps': run Docker through kailab/data/docker-host.sh (a runc wrapper drops that one "
                   "capability; docs/kind-runtime.md, Hosts) or give the host CAP_SYS_RESOURCE")
    if free_gib is not None and free_gib < MIN_FREE_GIB:
        out.append(f"only {free_gib:.1f} GiB free under Docker's root {docker_root}: a kind lab needs at least "
                   f"{MIN_FREE_GIB} GiB (free space there: `docker image prune`, or `kailab tools clean-go-cache` "
                   "where kailab's cache shares that disk)")
    return out


def docker_facts(docker: str) -> tuple[str, float | None, str]:
    """(default runtime, GiB free under Docker's root or None when not on this filesystem, root)."""
    out = subprocess.run([docker, "info", "--format", "{{json .}}"], capture_output=True, text=True, timeout=60)
    try:
        info = json.loads(out.stdout)
    except ValueError:
        return "", None, ""
    root = info.get("DockerRootDir") or ""
    free = shutil.disk_usage(root).free / 2**30 if root and os.path.isdir(root) else None
    return info.get("DefaultRuntime") or "", free, root


# ------------------------------------------------------------------ host packages (kailab/data/kind-host.yaml)
def host_packages() -> list[dict]:
    return yaml.safe_load(resources.files("kailab").joinpath("data/kind-host.yaml").read_text())["packages"]


def _has_command(name: str) -> bool:
    # sbin too: iptables and dockerd live there, and a non-login PATH may lack it
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(["/usr/sbin", "/sbin"])
    return shutil.which(name, path=path) is not None


def _has_pkg_config(module: str) -> bool:
    tool = shutil.which("pkg-config")
    if not tool:
        return False
    return subprocess.run([tool, "--exists", module], capture_output=True, timeout=30).returncode == 0


def missing_host_packages() -> list[dict]:
    """The packages a kind lab built here needs and this host lacks (by the commands and the
    pkg-config module each provides, so a host that has them some other way passes)."""
    return [p for p in host_packages()
            if not all(_has_command(c) for c in p.get("commands", []))
            or (p.get("pkg_config") and not _has_pkg_config(p["pkg_config"]))]


def install_line(packages: list[dict]) -> str:
    return "apt-get install -y " + " ".join(p["name"] for p in packages)


def require_host_packages(what: str) -> None:
    """One LabError naming every missing package and the line that installs them all."""
    missing = missing_host_packages()
    if missing:
        named = "; ".join(f"{p['name']} ({p['why']})" for p in missing)
        raise LabError(f"{what} needs host packages this machine lacks: {named}. Install them with "
                       f"`{install_line(missing)}` (Debian), then run it again")
