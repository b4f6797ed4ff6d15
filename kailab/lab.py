"""A lab is a runtime (where it runs: kailab/runtimes) plus a stack (what schedules: kailab/stacks).

    with lab(LabSpec(name="x", fleet="tiny")) as rec:   # up on entry, down on exit
        ...

`get_runtime(name)` / `runtime_of(record)` give a `Lab`: the runtime's own operations (up, down,
status, faults) with the stack's addon handed to `up`, and the stack's operations (its scheduler's
configuration, logs, snapshot, metrics) for the lab's record. What the exercise runner, replay,
trials, the CLI and the tests hold; none of them asks which runtime or stack it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
from concurrent.futures import ThreadPoolExecutor

from .errors import KailabError
from .runtimes import LabRecord, LabSpec, resolve_runtime
from .runtimes import get_runtime as _bare_runtime
from .runtimes.base import AddsWorkers, ControlsProcesses, InstallsCharts, MakesLabs, Runtime, Unsupported, processes_of
from .stacks import Stack, get_stack, stack_name, stack_of
from .stacks.base import ConfiguresScheduler, ServesSnapshot, configurable, scheduler_config_on
from .runtimes.addon import InstallsFromCharts, RunsAsProcesses
from .stacks.combined import ChartsOfParts, CombinedAddon, ProcessesOfParts
from . import operators


def with_addon(spec: LabSpec) -> LabSpec:
    """The spec with what its stack runs handed in (the runtime refuses a spec that asks for a
    scheduler without one), and the workload operators it asks for beside it."""
    if spec.addon is not None:
        return spec
    addon = get_stack(stack_name(spec)).addon(spec)
    if spec.operators:
        ops = [operators.get(o) for o in operators.parse(spec.operators)]
        addon = _with_operators(addon, ops)
    return dataclasses.replace(spec, addon=addon)


def _with_operators(stack, ops: list):
    """The stack's addon with the operators, declaring what the stack declares of running as processes
    (binary) and installing from charts (kind): an operator does both."""
    kinds = {cap for cap in (RunsAsProcesses, InstallsFromCharts) if isinstance(stack, cap)}
    cls = {frozenset({RunsAsProcesses, InstallsFromCharts}): WithOperatorsOnKind,
           frozenset({InstallsFromCharts}): WithOperatorsChartsOnly}.get(frozenset(kinds), WithOperators)
    return cls(stack, ops)


class _OperatorsBeside(CombinedAddon):
    """The stack's addon, then each workload operator: the lab record still names the stack (its name,
    version, components) and lists the operators (and their Deployments on kind) beside it."""

    def __init__(self, stack, ops: list) -> None:
        super().__init__(stack, *ops, name=stack.name)
        self.stack, self.operators = stack, ops
        self.version = stack.version

    def record(self) -> dict:
        return {**self.stack.record(), "processes": self.processes(), "namespaces": self.namespaces(),
                "deployments": self.deployments(), "operators": {o.name: o.version for o in self.operators}}

    @property
    def image_stack(self) -> str | None:
        return getattr(self.stack, "image_stack", None)

    @property
    def image_operators(self) -> str:
        """What `kailab tools images --operators` names to build the operators' images."""
        return ",".join(o.name for o in self.operators)


class WithOperatorsChartsOnly(_OperatorsBeside, ChartsOfParts):
    """On kind only (the stack does not run as processes)."""


class WithOperators(_OperatorsBeside, ProcessesOfParts):
    """The stack's addon, then each workload operator (kailab/operators), as one addon (binary runtime)."""

    @property
    def start_title(self) -> str:
        return ", and ".join(p.start_title for p in self.parts if p.start_title)

    def start(self, host) -> None:
        """The stack and every operator at once: none needs another (each waits for the API server
        itself), and started in turn they added 10 s to a lab's `up`."""
        with ThreadPoolExecutor(max_workers=len(self.parts)) as pool:
            for done in [pool.submit(part.start, host) for part in self.parts]:
                done.result()


class WithOperatorsOnKind(WithOperators, ChartsOfParts):
    """Both: as processes on the binary runtime, as Deployments beside the stack's charts on kind."""


class Lab:
    """One runtime with whatever stack each lab of it runs."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    # ------------------------------------------------------------ the runtime's, with the addon handed in
    @property
    def name(self) -> str:
        return self.runtime.name

    @property
    def repaired(self) -> list[str]:
        return self.runtime.repaired

    def can(self, capability: type) -> bool:
        """Whether the runtime declares `capability` (kailab/runtimes/base.py: MakesLabs, ControlsProcesses, ...)."""
        return isinstance(self.runtime, capability)

    def up(self, spec: LabSpec) -> LabRecord:
        self.refuse_operators(spec.operators)
        return self.runtime.up(with_addon(spec))

    def refuse_operators(self, operators) -> None:
        """One line when the runtime cannot run workload operators (before anything starts)."""
        if operators and not self.can(MakesLabs):
            raise Unsupported(f"--operators: the {self.runtime.name} runtime runs no workload operators yet "
                              "(they run as local processes or Deployments kailab installs): use --runtime binary or kind")

    def plan(self, spec: LabSpec) -> str:
        return self.runtime.plan(with_addon(spec))

    def down(self, name: str) -> list[str]:
        return self.runtime.down(name)

    def status(self, record: LabRecord) -> dict:
        report = self.runtime.status(record)
        report["stack"] = {k: v for k, v in (record.stack or {}).items() if k in ("name", "version", "operators")}
        return report

    def processes(self, what: str) -> ControlsProcesses:
        """The runtime as one that controls the lab's processes; one line saying `what` needs that otherwise."""
        return processes_of(self.runtime, what)

    def kill(self, record: LabRecord, component: str) -> None:
        self.processes(f"kill {component}").kill(record, component)

    def restart(self, record: LabRecord, component: str) -> None:
        self.processes(f"restart {component}").restart(record, component)

    def dead_components(self, record: LabRecord, ignore: set[str]) -> list[tuple[str, str]]:
        return self.runtime.dead_components(record, ignore)

    def log_mark(self, record: LabRecord) -> dict:
        return self.runtime.log_mark(record)

    # ------------------------------------------------------------ the stack's
    @staticmethod
    def stack(record: LabRecord) -> Stack:
        return stack_of(record)

    def describe(self, record: LabRecord) -> dict:
        return stack_of(record).describe(self.runtime, record)

    def scheduler_config(self, record: LabRecord) -> dict | None:
        on = scheduler_config_on(stack_of(record), self.runtime)
        return on.current(self.runtime, record) if on is not None else None

    def configures_scheduler(self, record: LabRecord) -> bool:
        return scheduler_config_on(stack_of(record), self.runtime) is not None

    def scheduler_setting(self, record: LabRecord, value, usage_url: str | None, where: str):
        return configurable(stack_of(record), where).scheduler_setting(record, value, usage_url, where)

    def configure_scheduler(self, record: LabRecord, setting) -> None:
        stack = stack_of(record)
        on = scheduler_config_on(stack, self.runtime)
        if on is None:
            has = ("has no scheduler configuration to change" if not isinstance(stack, ConfiguresScheduler) else
                   f"cannot change its scheduler's configuration on the {self.runtime.name} runtime (configure "
                   "it in the cluster yourself, or use the binary runtime)")
            raise Unsupported(f"lab {record.name!r}: the {stack.title or stack.name} stack {has} (step `scheduler:`)")
        on.apply(self.runtime, record, setting)

    def scheduler_components(self, record: LabRecord) -> set[str]:
        return stack_of(record).components(self.runtime, record)

    def scheduler_logs(self, record: LabRecord, mark: dict) -> dict[str, bytes]:
        return self.runtime.stack_logs(record, mark)

    def scheduler_snapshot_url(self, record: LabRecord) -> str | None:
        stack = stack_of(record)
        return stack.snapshot_url(self.runtime, record) if isinstance(stack, ServesSnapshot) else None

    def usage_db_url(self, record: LabRecord) -> str | None:
        """The lab's Prometheus as the scheduler reaches it (None: the lab runs none)."""
        return self.runtime.prometheus_in_lab(record)


def get_runtime(name: str) -> Lab:
    return Lab(_bare_runtime(name))


def runtime_of(record: LabRecord) -> Lab:
    return get_runtime(record.runtime)


@contextlib.contextmanager
def lab(spec: LabSpec):
    """A lab for the length of a `with` block: up on entry, down on exit (also on errors and Ctrl-C)."""
    runtime = get_runtime(spec.runtime)
    try:
        yield runtime.up(spec)
    finally:
        runtime.down(spec.name)


def require_kai_lab(name: str, purpose: str, fleet: str | None = None, any_stack: bool = False) -> LabRecord:
    """The running lab `name`, if it can run `purpose` (exercises, lessons): up, with KAI (or with
    any scheduler, `any_stack`: exercises, which each stack translates), and (when `fleet` is given)
    with that fleet's GPU count. Otherwise one clear error."""
    up_cmd = f"kailab up --fleet {fleet}" if fleet else "kailab up"
    rec = LabRecord.load(name)
    if rec is None or rec.state != "up":
        raise KailabError(f"no lab named {name!r} is up: bring one up with `{up_cmd}`")
    stack = stack_of(rec)
    if stack.name != "kai" and not (any_stack and stack.name != "none"):  # lessons and e2e suites are KAI's
        runs = "without KAI (--without-kai)" if stack.name == "none" else f"{stack.title}, not KAI"
        raise KailabError(f"lab {name!r} runs {runs}: {purpose} need KAI "
                          f"(`kailab down --name {name}` then `kailab up --fleet {fleet or '...'}`)")
    if fleet is not None:
        from .fleet import load_fleet

        need = load_fleet(fleet).gpus_total
        if rec.gpus != need:
            raise KailabError(f"this lesson is sized for fleet {fleet} ({need} GPUs) but lab {name!r} has "
                              f"{rec.gpus} GPUs (fleet {rec.fleet}): use a `{up_cmd}` lab")
    return rec


__all__ = ["Lab", "with_addon", "AddsWorkers", "ControlsProcesses", "InstallsCharts", "MakesLabs", "LabRecord", "LabSpec", "get_runtime", "lab", "require_kai_lab", "resolve_runtime", "runtime_of"]
