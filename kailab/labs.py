"""A lab is its record, a runtime (where it runs: kailab/runtimes) and a stack (what schedules: kailab/stacks).

    with labs.running(LabSpec(name="x", fleet="tiny")) as lab:   # up, and down on leaving the block
        Kube(lab.kubeconfig) ...
    lab = labs.open("x")                                     # a lab that is up, by name
    lab.status(); lab.kill("binder"); lab.configure_scheduler(setting)

`Lab` is what the exercise runner, replay, trials, the CLI and the tests hold: the runtime's own
operations (status, down, faults) and the stack's (its scheduler's configuration, logs, snapshot,
metrics) for that one lab; none of them asks which runtime or stack it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator
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
    """A lab: its record (what `up` made), the runtime it runs on and the stack that schedules it.

    What callers hold (`labs.up(spec)`, `labs.open(name)`); its methods take no record, and none of
    its callers asks which runtime or stack it is: a capability is asked for (`can`, `processes`).
    Hold one Lab for a run: what `log_mark` marks (a kind lab's restart counts) its `dead_components` reads."""

    def __init__(self, record: LabRecord, runtime: Runtime | None = None, stack: Stack | None = None) -> None:
        self.record = record
        self.runtime = runtime or _bare_runtime(record.runtime)
        self.stack = stack or stack_of(record)

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def kubeconfig(self) -> str:
        return self.record.kubeconfig

    def __repr__(self) -> str:
        return f"Lab({self.name!r}, runtime={self.runtime.name}, stack={self.stack.name})"

    # ------------------------------------------------------------ the runtime's
    def can(self, capability: type) -> bool:
        """Whether its runtime declares `capability` (kailab/runtimes/base.py: MakesLabs, ControlsProcesses, ...)."""
        return isinstance(self.runtime, capability)

    def processes(self, what: str) -> ControlsProcesses:
        """Its runtime as one that controls the lab's processes; one line saying `what` needs that otherwise."""
        return processes_of(self.runtime, what)

    def status(self) -> dict:
        report = self.runtime.status(self.record)
        report["stack"] = {k: v for k, v in (self.record.stack or {}).items() if k in ("name", "version", "operators")}
        return report

    def down(self) -> list[str]:
        return self.runtime.down(self.name)

    def kill(self, component: str) -> None:
        self.processes(f"kill {component}").kill(self.record, component)

    def restart(self, component: str) -> None:
        self.processes(f"restart {component}").restart(self.record, component)

    def dead_components(self, ignore: set[str]) -> list[tuple[str, str]]:
        return self.runtime.dead_components(self.record, ignore)

    def log_mark(self) -> dict:
        return self.runtime.log_mark(self.record)

    def usage_db_url(self) -> str | None:
        """The lab's Prometheus as the scheduler reaches it (None: the lab runs none)."""
        return self.runtime.prometheus_in_lab(self.record)

    # ------------------------------------------------------------ the stack's, on this runtime
    def describe(self) -> dict:
        return self.stack.describe(self.runtime, self.record)

    def scheduler_config(self) -> dict | None:
        on = scheduler_config_on(self.stack, self.runtime)
        return on.current(self.runtime, self.record) if on is not None else None

    def configures_scheduler(self) -> bool:
        return scheduler_config_on(self.stack, self.runtime) is not None

    def scheduler_setting(self, value, usage_url: str | None, where: str):
        return configurable(self.stack, where).scheduler_setting(self.record, value, usage_url, where)

    def configure_scheduler(self, setting) -> None:
        on = scheduler_config_on(self.stack, self.runtime)
        if on is None:
            stack = self.stack
            has = ("has no scheduler configuration to change" if not isinstance(stack, ConfiguresScheduler) else
                   f"cannot change its scheduler's configuration on the {self.runtime.name} runtime (configure "
                   "it in the cluster yourself, or use the binary runtime)")
            raise Unsupported(f"lab {self.name!r}: the {stack.title or stack.name} stack {has} (step `scheduler:`)")
        on.apply(self.runtime, self.record, setting)

    def scheduler_components(self) -> set[str]:
        return self.stack.components(self.runtime, self.record)

    def scheduler_logs(self, mark: dict) -> dict[str, bytes]:
        return self.runtime.stack_logs(self.record, mark)

    def scheduler_snapshot_url(self) -> str | None:
        return self.stack.snapshot_url(self.runtime, self.record) if isinstance(self.stack, ServesSnapshot) else None


# ---------------------------------------------------------------- labs by spec or by name
def runtime(name: str) -> Runtime:
    """The runtime `name` (or "auto": the one this machine can run), bare: what `can` asks of."""
    return _bare_runtime(name)


def can(runtime_name: str, capability: type) -> bool:
    """Whether runtime `runtime_name` declares `capability` (before any lab of it exists)."""
    return isinstance(runtime(runtime_name), capability)


def refuse_operators(runtime_name: str, operators) -> None:
    """One line when the runtime cannot run workload operators (before anything starts)."""
    if operators and not can(runtime_name, MakesLabs):
        raise Unsupported(f"--operators: the {runtime_name} runtime runs no workload operators yet "
                          "(they run as local processes or Deployments kailab installs): use --runtime binary or kind")


def up(spec: LabSpec) -> Lab:
    """The lab `spec` asks for, up (a fast no-op when it is already up as asked). A start that fails
    leaves what it made for `kailab status` and `down` to see: `running` is the lab of a block."""
    rt = runtime(spec.runtime)
    refuse_operators(rt.name, spec.operators)
    return Lab(rt.up(with_addon(spec)), rt)


@contextlib.contextmanager
def running(spec: LabSpec) -> Iterator[Lab]:
    """A lab for the length of a `with` block: up on entry, down on leaving it — on errors and Ctrl-C
    too, and when `up` itself fails part-way (what it started goes; its kept logs stay)."""
    name = runtime(spec.runtime).name
    try:
        lab = up(spec)
        yield lab
    finally:
        down(spec.name, name)


def plan(spec: LabSpec) -> str:
    """What `up` would do, in words (`kailab up --dry-run`)."""
    return runtime(spec.runtime).plan(with_addon(spec))


def up_command(name: str, fleet: str | None = None) -> str:
    """The `kailab up` that makes the lab `name` (of `fleet`), as a refusal suggests it."""
    return " ".join(["kailab up", *(["--fleet", fleet] if fleet else []), *(["--name", name] if name != "default" else [])])


def absent(name: str) -> KailabError:
    return KailabError(f"no lab named {name!r}: bring one up with `{up_command(name)}`")


def open(lab: "str | LabRecord") -> Lab:  # noqa: A001 - labs.open(name), as files are opened
    """The lab named `lab` (or of that record), as its record says; one line when there is none."""
    record = lab if isinstance(lab, LabRecord) else LabRecord.load(lab)
    if record is None:
        raise absent(lab)
    return Lab(record)


def down(name: str, runtime_name: str = "binary") -> list[str]:
    """Down the lab `name` on the runtime its record names (or `runtime_name` when no record is left:
    a start that died before writing one); what it took down, in words."""
    record = LabRecord.load(name)
    return runtime(record.runtime if record else runtime_name).down(name)


def require_kai_lab(name: str, purpose: str, fleet: str | None = None, any_stack: bool = False,
                    up_fleet: str | None = None) -> LabRecord:
    """The running lab `name`, if it can run `purpose` (exercises, lessons): up, with KAI (or with
    any scheduler, `any_stack`: exercises, which each stack translates), and (when `fleet` is given)
    with that fleet's GPU count. Otherwise one clear error, whose `kailab up` names the lab and the
    fleet (`fleet`, or `up_fleet`: the one to suggest where its size is checked later)."""
    up_cmd = up_command(name, fleet or up_fleet)
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


__all__ = ["Lab", "with_addon", "AddsWorkers", "ControlsProcesses", "InstallsCharts", "MakesLabs", "LabRecord",
           "LabSpec", "can", "down", "open", "plan", "refuse_operators", "require_kai_lab", "resolve_runtime",
           "running", "runtime", "up"]
