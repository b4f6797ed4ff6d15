"""What schedules in a lab, as a runtime sees it: an `Addon` handed in with the lab's spec.

A runtime knows where a lab runs (processes, a kind cluster, a cluster it adopts) and nothing about
any scheduler. The lab (kailab/labs.py) hands it an Addon — data (build recipes, port names, objects
to seed, images, component names) and hooks that install through the runtime's primitives (start a
process, apply objects, run a command). The runtime calls the hooks; it never names what is behind
them (a scheduler stack, kailab/stacks/). `NoScheduler()` is "nothing schedules".

What the runtime needs after `up` (status, down, deaths, logs) is written into the lab record
(`Addon.record()`), so a runtime reading an old lab needs no Addon at all.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..errors import LabError

if TYPE_CHECKING:
    from ..kube import Kube


class ProcessHost(ABC):
    """The binary runtime's primitives, as an Addon's `start` hook gets them."""

    lab: Path
    kube: "Kube"
    kubeconfig: Path
    ports: dict[str, int]
    bins: dict[str, Path]   # binary name -> path, for every recipe built (the Addon's included)

    @abstractmethod
    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        """Start a supervised process; its ports are those named `<name>.<port>`."""

    @abstractmethod
    def wait_healthy(self, name: str) -> None:
        """Until the component serves its health URL (the record's); the error carries its log."""

    @abstractmethod
    def install_crds(self, crds: list[dict]) -> None: ...

    @abstractmethod
    def timed(self, what: str) -> contextlib.AbstractContextManager: ...


class Addon:
    """What schedules, as every runtime needs it: a name, a version and the components the lab record
    keeps. Where it can be installed is declared by the capabilities below, each a class of its own
    that an addon inherits and implements: a runtime asks for the one it needs (`need`) and refuses an
    addon without it in one line; it never calls a hook that might be a no-op."""

    name = "none"
    version = "none"

    def kai_version(self, release: str) -> str:
        """The version of `--kai-version` the lab record keeps: `release` when the release it names runs
        in the lab, "none" otherwise."""
        return "none"

    def record(self) -> dict:
        """What the lab record keeps: name, version, its processes (binary) and Deployments by
        namespace (clusters), and the namespaces its components run in."""
        return {"name": self.name, "version": self.version, "processes": self.processes(),
                "deployments": self.deployments(), "namespaces": self.namespaces()}

    def processes(self) -> list[str]:
        return []

    def deployments(self) -> dict[str, list[str]]:
        return {}

    def namespaces(self) -> list[str]:
        """The namespaces its components run in (their pods' logs, their metrics Services)."""
        return []


class RunsAsProcesses(ABC):
    """Capability: runs as local processes (the binary runtime)."""

    start_title = ""  # the part of `up` that `start` is, in the lab's phases

    @abstractmethod
    def recipes(self) -> list:
        """toolchain.Recipe objects to build before the lab starts."""

    @abstractmethod
    def port_names(self) -> list[str]: ...

    @abstractmethod
    def health_url(self, name: str, ports: dict[str, int]) -> str: ...

    @abstractmethod
    def seed_objects(self, built: dict) -> list[dict]:
        """Objects the lab's etcd starts with (kinds, namespaces, default objects); `built` maps
        recipe keys to their cache folders."""

    @abstractmethod
    def start(self, host: ProcessHost) -> None:
        """Start the processes and make what they need; return once they serve."""

    def scrape_jobs(self, ports: dict[str, int]) -> list[dict]:
        """Prometheus scrape jobs for the processes (none: the lab's Prometheus does not scrape them)."""
        return []


class InstallsFromCharts(ABC):
    """Capability: installs from its charts into a cluster kailab makes (kind)."""

    # where the scheduler keeps pods that hold GPUs for shared (fractional) ones; fake-gpu-operator's
    # status updater must see them there
    reservation_namespace: str | None = None
    # images and charts built here (`kailab tools images`), for hosts that reach no registry
    image_stack: str | None = None  # what `kailab tools images --stack` names to build them (None: the base set)

    @abstractmethod
    def kind_files_and_steps(self, kubeconfig: str, path, local, node_selector: dict | None = None
                             ) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
        """Files to write into the lab dir (`path(name)` is where), and (description, argv) steps that
        install it; `local`: the images built here (None: published ones); its pods on `node_selector`."""

    @abstractmethod
    def images(self, local) -> list[str]:
        """Images to preload into the kind node (the published ones; `local` adds nothing here)."""

    @abstractmethod
    def local_images(self, local) -> list[str]:
        """The images built here its kind install runs, under their upstream names (`local`: the
        lab's ImageSet); preloaded into the node, and a kind lab with `--images local` needs them."""

    @abstractmethod
    def local_files(self, local) -> list[Path]:
        """The charts (or manifests) built here its kind install reads."""

    def build_local(self, local, console=None, phase=print) -> list[str]:
        """Make what local_images and local_files name, from source, unless made from the same inputs
        already; returns the images made now (none: the base set `kailab tools images` builds has them)."""
        return []

    @abstractmethod
    def plan_lines(self) -> list[str]:
        """What the printed plan says is installed (`kailab up --dry-run`)."""

    @abstractmethod
    def probe_text(self) -> str:
        """What the printed plan says `await_ready` proves the scheduler with."""

    @abstractmethod
    def await_ready(self, kube: "Kube") -> None:
        """Until the installed scheduler works (binds a probe pod)."""


class AdoptsCluster(ABC):
    """Capability: found in a cluster kailab adopts (the existing runtime)."""

    @abstractmethod
    def adopt_problems(self, kube: "Kube", server: str) -> list[str]:
        """What the adopted cluster lacks for this scheduler, one phrase each."""

    @abstractmethod
    def adopted_version(self, kube: "Kube") -> str | None: ...


# how messages name each capability (a runtime's refusal, `kailab up --help`)
CAPABILITIES: dict[type, str] = {RunsAsProcesses: "runs as local processes",
                                 InstallsFromCharts: "installs from its charts on kind",
                                 AdoptsCluster: "is found in a cluster kailab adopts"}

C = TypeVar("C")


def need(addon: Addon, capability: type[C], runtime: str) -> C:
    """The addon as the capability a runtime needs, or one line saying what it declares instead."""
    if isinstance(addon, capability):
        return addon
    has = [says for cap, says in CAPABILITIES.items() if isinstance(addon, cap)] or ["nothing"]
    raise LabError(f"the {addon.name} scheduler stack cannot run on the {runtime} runtime yet "
                   f"(it {' / '.join(has)}): use --runtime binary")


def capabilities(addon: Addon) -> set[type]:
    """The capabilities an addon declares."""
    return {cap for cap in CAPABILITIES if isinstance(addon, cap)}


class NoScheduler(Addon, RunsAsProcesses, InstallsFromCharts, AdoptsCluster):
    """Nothing schedules: every runtime can run nothing, so each hook says "nothing"."""

    def recipes(self) -> list:
        return []

    def port_names(self) -> list[str]:
        return []

    def health_url(self, name: str, ports: dict[str, int]) -> str:
        raise KeyError(name)

    def seed_objects(self, built: dict) -> list[dict]:
        return []

    def start(self, host: ProcessHost) -> None:
        pass

    def kind_files_and_steps(self, kubeconfig: str, path, local, node_selector: dict | None = None):
        return {}, []

    def images(self, local) -> list[str]:
        return []

    def local_images(self, local) -> list[str]:
        return []

    def local_files(self, local) -> list[Path]:
        return []

    def plan_lines(self) -> list[str]:
        return []

    def probe_text(self) -> str:
        return ""

    def await_ready(self, kube: "Kube") -> None:
        pass

    def adopt_problems(self, kube: "Kube", server: str) -> list[str]:
        return []

    def adopted_version(self, kube: "Kube") -> str | None:
        return None


def addon_of(spec) -> "Addon":
    """The Addon a LabSpec hands its runtime (an empty one for a lab without a scheduler)."""
    if spec.addon is not None:
        return spec.addon
    if spec.stack != "none":  # a caller that skipped kailab.labs would silently get a lab without its scheduler
        raise LabError(f"lab {spec.name!r}: a scheduler was asked for but none was handed to the runtime; "
                       "bring labs up through kailab.labs (labs.up)")
    return NoScheduler()
