"""What schedules in a lab, as a runtime sees it: an `Addon` handed in with the lab's spec.

A runtime knows where a lab runs (processes, a kind cluster, a cluster it adopts) and nothing about
any scheduler. The lab (kailab/lab.py) hands it an Addon — data (build recipes, port names, objects
to seed, images, component names) and hooks that install through the runtime's primitives (start a
process, apply objects, run a command). The runtime calls the hooks; it never names what is behind
them (a scheduler stack, kailab/stacks/). `Addon()` itself is "nothing schedules".

What the runtime needs after `up` (status, down, deaths, logs) is written into the lab record
(`Addon.record()`), so a runtime reading an old lab needs no Addon at all.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

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
    """Nothing schedules: the default, and the interface a scheduler stack implements."""

    name = "none"
    version = "none"
    # where the scheduler keeps pods that hold GPUs for shared (fractional) ones; fake-gpu-operator's
    # status updater must see them there (kind)
    reservation_namespace: str | None = None
    # how it can be installed: as local processes, from its charts into a cluster kailab made, or
    # found in a cluster kailab adopts; a runtime refuses, in one line, an addon it cannot run
    installs = frozenset({"processes", "charts", "adopted"})

    def require(self, how: str, runtime: str) -> None:
        from ..errors import LabError

        if how not in self.installs:
            raise LabError(f"the {self.name} scheduler stack cannot run on the {runtime} runtime yet "
                           f"(it installs {' / '.join(sorted(self.installs))}): use --runtime binary")

    # ------------------------------------------------------------ every runtime
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

    # ------------------------------------------------------------ the binary runtime
    def recipes(self) -> list:
        """toolchain.Recipe objects to build before the lab starts."""
        return []

    def port_names(self) -> list[str]:
        return []

    def health_url(self, name: str, ports: dict[str, int]) -> str:
        raise KeyError(name)

    def seed_objects(self, built: dict) -> list[dict]:
        """Objects the lab's etcd starts with (kinds, namespaces, default objects); `built` maps
        recipe keys to their cache folders."""
        return []

    start_title = ""  # the part of `up` that `start` is, in the lab's phases

    def start(self, host: ProcessHost) -> None:
        """Start the processes and make what they need; return once they serve."""

    def scrape_jobs(self, ports: dict[str, int]) -> list[dict]:
        """Prometheus scrape jobs for the processes."""
        return []

    # ------------------------------------------------------------ a cluster adopted (existing)
    def adopt_problems(self, kube: "Kube", server: str) -> list[str]:
        """What the adopted cluster lacks for this scheduler, one phrase each."""
        return []

    def adopted_version(self, kube: "Kube") -> str | None:
        return None

    # ------------------------------------------------------------ clusters (kind)
    def kind_files_and_steps(self, kubeconfig: str, path, local, node_selector: dict | None = None
                             ) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
        """Files to write into the lab dir (`path(name)` is where), and (description, argv) steps that
        install it; `local`: the images built here (None: published ones); its pods on `node_selector`."""
        return {}, []

    def images(self, local) -> list[str]:
        """Images to preload into the kind node (the published ones; `local` adds nothing here)."""
        return []

    # images and charts built here (`kailab tools images`), for hosts that reach no registry
    image_stack: str | None = None  # what `kailab tools images --stack` names to build them (None: the base set)

    def local_images(self, local) -> list[str]:
        """The images built here its kind install runs, under their upstream names (`local`: the
        lab's ImageSet); preloaded into the node, and a kind lab with `--images local` needs them."""
        return []

    def local_files(self, local) -> list[Path]:
        """The charts (or manifests) built here its kind install reads."""
        return []

    def build_local(self, local, console=None, phase=print) -> list[str]:
        """Make what local_images and local_files name, from source, unless made from the same inputs
        already; returns the images made now."""
        return []

    def plan_lines(self) -> list[str]:
        """What the printed plan says is installed (`kailab up --dry-run`)."""
        return []

    def probe_text(self) -> str:
        """What the printed plan says `await_ready` proves the scheduler with."""
        return ""

    def await_ready(self, kube: "Kube") -> None:
        """Until the installed scheduler works (binds a probe pod)."""


def addon_of(spec) -> "Addon":
    """The Addon a LabSpec hands its runtime (an empty one for a lab without a scheduler)."""
    if spec.addon is not None:
        return spec.addon
    if spec.with_kai:  # a caller that skipped kailab.lab would silently get a lab without its scheduler
        from ..errors import LabError

        raise LabError(f"lab {spec.name!r}: a scheduler was asked for but none was handed to the runtime; "
                       "bring labs up through kailab.lab (lab(), get_runtime())")
    return Addon()
