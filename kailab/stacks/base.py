"""What a scheduler stack is: what schedules in a lab, across every runtime.

A stack says which components it adds to a lab (an `Addon` the runtime runs: processes with argv,
ports and health checks on the binary runtime; chart and manifests on kind), how an exercise's
scheduler vocabulary becomes its configuration (a `scheduler:` step), what it refuses by name,
and what a run's evidence collects from it (logs, its own metrics, a snapshot). A stack installs
itself *through* a runtime's primitives and never imports a runtime's internals; code above
(kailab/labs.py, the exercise runner, replay, the CLI) holds a stack and never asks which one.

A new stack is a package under kailab/stacks/ and one entry in kailab/stacks/__init__.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from ..errors import KailabError
from ..runtimes.addon import Addon
from ..runtimes.base import LabRecord, LabSpec, Runtime


@dataclass(frozen=True)
class QueueDecl:
    """One queue of an exercise's tree as the run names it in the cluster: `gpu` holds quota, limit,
    overQuotaWeight (and priority) as the exercise wrote them (-1: unlimited); `leaf` says whether
    workloads submit to it (a stack may make a parent something else than a leaf)."""

    name: str
    parent: str | None
    gpu: dict
    leaf: bool
    labels: dict = field(default_factory=dict)
    where: str = ""  # the file and queue, for a one-line refusal


@dataclass(frozen=True)
class Ref:
    """An object to delete: apiVersion, kind, name and namespace (None: cluster-scoped)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None


def held_by_a_closed_parent(q: QueueDecl, by_name: dict[str, QueueDecl]) -> bool:
    """An ancestor with limit 0 holds the queue (until a step opens it)."""
    parent = by_name.get(q.parent or "")
    while parent is not None:
        if parent.gpu.get("limit", -1) == 0:
            return True
        parent = by_name.get(parent.parent or "")
    return False


def gpus(x: float) -> str:
    """A GPU count as a Kubernetes quantity (12.0 -> "12")."""
    return str(int(x)) if float(x).is_integer() else str(x)


def count(q) -> float:
    """A Kubernetes quantity as a number ("12" -> 12.0, "500m" -> 0.5)."""
    from kubernetes.utils import parse_quantity

    return float(parse_quantity(str(q)))


def read_or_empty(read) -> list:
    """A snapshot read that a broken lab (a stack's kinds not served) turns into an empty list."""
    try:
        return read()
    except Exception:  # noqa: BLE001 - a broken lab's snapshot is still written
        return []


class Stack(ABC):
    """One scheduler stack: its addon, what a run's evidence says of it, and the exercise's vocabulary
    in its objects. What only some stacks can do is a capability below, which a stack declares by
    inheriting it; code above asks for it (`isinstance`, or the helpers that refuse in one line).
    Methods that take a runtime get the lab's, for its capabilities (kailab/runtimes/base.py:
    ControlsProcesses, InstallsCharts, ...) and primitives, never its name."""

    name: str = ""
    title: str = ""  # how messages name it
    kai_inside = False  # KAI runs in it (the lab records KAI's version: --kai-version is then KAI's too)

    @abstractmethod
    def addon(self, spec: LabSpec) -> Addon:
        """What the runtime runs for a lab of this spec."""

    # ------------------------------------------------------------ evidence
    def describe(self, runtime: Runtime, record: LabRecord) -> dict:
        """What ran, for a run's evidence: the stack, its version and how it was installed."""
        return {"name": self.name, "version": (record.stack or {}).get("version", "none"),
                "install": f"{self.title} {runtime.install_style}".strip()}

    def components(self, runtime: Runtime, record: LabRecord) -> set[str]:
        """The names under which the lab reports this stack's components (a death says whose)."""
        stack = record.stack or {}
        return set(stack.get("processes", [])) | {n for ns in stack.get("deployments", {}).values() for n in ns}

    # ------------------------------------------------------------ what a run needs of the lab
    def preflight(self, kube, record: LabRecord) -> None:
        """Refuse, in one line, a lab where this stack cannot run an exercise."""

    def side_namespaces(self) -> list[str]:
        """Namespaces where the stack makes pods of its own for a run's workloads (evidence, clean-up)."""
        return []

    # ------------------------------------------------------------ the exercise's vocabulary
    # An exercise speaks of queues (quota, limit, overQuotaWeight, priority, a parent), gangs,
    # priority classes, GPU shares and placement. Its workloads are built once, in the lab's form
    # (kailab/workloads.py: a pod names its queue and gang by label and annotation), and each stack
    # makes them its own here, refusing by name what it has no equivalent for. The exercise layer
    # writes only what these return; it names no stack's API.
    def queue_objects(self, queues: list[QueueDecl], namespace: str) -> list[dict]:
        """The objects that make these queues (a whole tree, or one queue patched), parents first."""
        raise KailabError(f"{queues[0].where if queues else 'queues'}: the {self.title or self.name} stack has no queues")

    def queue_leftovers(self, queues: list[QueueDecl], namespace: str) -> list[Ref]:
        """What to delete when a run ends, children before parents."""
        return []

    def queue_view(self, obj: dict) -> tuple[str, dict] | None:
        """A watched queue object as (name, {parent, quota, limit, status}) in GPUs, -1 unlimited;
        None for an object that is no queue of a run."""
        return None

    def watched(self) -> dict[str, tuple[str, str, bool]]:
        """The stack's own objects the observer follows, by role ("queue", "group", "decision"):
        (apiVersion, kind, namespaced). A role the stack lacks is simply not observed."""
        return {}

    def workload_objects(self, objs: list[dict], where: str) -> list[dict]:
        """Workloads in the lab's form, as this stack runs them (a stack's own objects added)."""
        raise KailabError(f"{where}: the {self.title or self.name} stack cannot run an exercise's workloads")

    def not_taken_in(self, pods: list) -> list[str]:
        """Of a workload's pending pods (the exercise's pod views), those the stack has not yet taken in
        for scheduling: a `stays` window after their submission lasts its length past the moment this
        is empty, or it could pass before the scheduler ever looked."""
        return []

    def workload_leftovers(self, workload: str, kind: str, namespace: str) -> list[Ref]:
        """Besides the workload's own pods or controller, what its deletion must remove."""
        return []

    def snapshot_objects(self, kube, namespace: str, queues: list[str]) -> dict[str, list]:
        """The stack's own objects for a step's snapshot, by evidence file name (queues.yaml, ...)."""
        return {}


# ---------------------------------------------------------------- what only some stacks can do
class SchedulerConfig(ABC):
    """How a stack's scheduler configuration is read and changed on the runtimes that have one capability
    (`runtime`: ControlsProcesses, InstallsCharts): one object per such capability, which the stack lists."""

    runtime: type

    @abstractmethod
    def current(self, runtime: Runtime, record: LabRecord) -> dict | None:
        """The configuration the scheduler runs now (None: nothing to tell)."""

    @abstractmethod
    def apply(self, runtime: Runtime, record: LabRecord, setting) -> None:
        """Run the scheduler with `setting` (None: the lab's default)."""


class ConfiguresScheduler(ABC):
    """Capability: an exercise's `scheduler:` step (placement, usage, shard) changes its scheduler's
    configuration, and a run's evidence keeps the configuration it ran; on the runtimes its
    `scheduler_configs` name (a runtime with none of their capabilities refuses the step in one line)."""

    scheduler_configs: tuple[SchedulerConfig, ...] = ()

    @abstractmethod
    def scheduler_setting(self, record: LabRecord, value, usage_url: str | None, where: str):
        """An exercise's scheduler step as this stack's setting; `where` names the file and step for
        the one-line refusal."""


def scheduler_config_on(stack: Stack, runtime: Runtime) -> SchedulerConfig | None:
    """How `stack`'s scheduler is configured on `runtime`; None when it cannot be there."""
    if not isinstance(stack, ConfiguresScheduler):
        return None
    return next((c for c in stack.scheduler_configs if isinstance(runtime, c.runtime)), None)


def said_for(runtime: Runtime, words: dict[type, str], otherwise: str) -> str:
    """The words for the first runtime capability in `words` that `runtime` has (how a stack describes
    its install on it), `otherwise` when it has none of them."""
    return next((w for cap, w in words.items() if isinstance(runtime, cap)), otherwise)


class ServesSnapshot(ABC):
    """Capability: its scheduler serves a snapshot of what it schedules from (KAI's /get-snapshot)."""

    @abstractmethod
    def snapshot_url(self, runtime: Runtime, record: LabRecord) -> str | None: ...


class HasMetricPanels(ABC):
    """Capability: its own series for a run's window (its dashboards' queries)."""

    @abstractmethod
    def metric_panels(self, record: LabRecord, prometheus: str, start: float, end: float) -> list[dict]: ...

    @abstractmethod
    def evictions_by_action(self, prometheus: str, start: float, end: float,
                            namespace: str | None = None) -> dict: ...


class PlacesByTopology(ABC):
    """Capability: topology-aware placement (an exercise's `topology:`)."""

    @abstractmethod
    def topology_objects(self, name: str, levels: list[str], where: str) -> list[dict]: ...

    @abstractmethod
    def topology_leftovers(self, name: str) -> list[Ref]: ...


STACK_CAPABILITIES = (ConfiguresScheduler, ServesSnapshot, HasMetricPanels, PlacesByTopology)


def configurable(stack: Stack, where: str) -> ConfiguresScheduler:
    """The stack as one whose scheduler an exercise configures, or one line saying it has none."""
    if isinstance(stack, ConfiguresScheduler):
        return stack
    raise KailabError(f"{where}: the {stack.title or stack.name} stack has no scheduler configuration to change")


def topology_aware(stack: Stack, where: str) -> PlacesByTopology:
    if isinstance(stack, PlacesByTopology):
        return stack
    raise KailabError(f"{where} topology: the {stack.title or stack.name} stack has no topology-aware placement")
