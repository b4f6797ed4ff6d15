"""Each stack's addon declares where it installs by the capabilities it inherits (RunsAsProcesses,
InstallsFromCharts, AdoptsCluster) and implements exactly their hooks: a runtime asks for the one it
needs (`need`) and refuses an addon without it in one line, so a hook without its capability would
never run, and a capability without its hooks could not be made (its hooks are abstract)."""

from __future__ import annotations

import inspect

import pytest

from kailab.errors import KailabError, LabError
from kailab.runtimes.addon import (CAPABILITIES, Addon, AdoptsCluster, InstallsFromCharts, NoScheduler,
                                   RunsAsProcesses, capabilities, need)
from kailab.labs import Lab
from kailab.runtimes import RUNTIMES
from kailab.runtimes import get_runtime as bare_runtime
from kailab.runtimes.base import (RUNTIME_CAPABILITIES, AddsWorkers, ControlsProcesses, InstallsCharts, LabRecord,
                                  LabSpec, MakesLabs, Runtime, Unsupported)
from kailab.stacks import STACKS, get_stack
from kailab.stacks.base import (STACK_CAPABILITIES, ConfiguresScheduler, HasMetricPanels, PlacesByTopology,
                                ServesSnapshot, Stack, configurable, scheduler_config_on, topology_aware)

DECLARED = {  # what each stack says it installs as, checked against its code below
    "kai": {RunsAsProcesses, InstallsFromCharts, AdoptsCluster},
    "kueue": {RunsAsProcesses, InstallsFromCharts},
    "kueue+kai": {RunsAsProcesses, InstallsFromCharts},
    "volcano": {RunsAsProcesses, InstallsFromCharts},
}


def _hooks(capability: type) -> set[str]:
    return {n for n, v in vars(capability).items() if inspect.isfunction(v) or isinstance(v, property)} - {"__init__"}


def _defined_by(cls: type, hook: str) -> type | None:
    return next((c for c in cls.__mro__ if hook in vars(c)), None)


def _addon(name: str) -> Addon:
    return get_stack(name).addon(LabSpec(name="caps", stack=name, kai_version="v0.17.0"))


def test_every_registered_stack_is_listed_here():
    assert set(STACKS) - {"none"} == set(DECLARED)


@pytest.mark.parametrize("name", sorted(DECLARED), ids=lambda n: f"stack={n}")  # an id "kai" would read as the mark
def test_a_stack_declares_what_it_installs_as_and_implements_those_hooks(name):
    addon = _addon(name)
    assert capabilities(addon) == DECLARED[name]
    for capability in CAPABILITIES:
        for hook in _hooks(capability):
            owner = _defined_by(type(addon), hook)
            if capability in DECLARED[name]:
                # every abstract hook is the stack's own (or its combination's forwarder), never left abstract
                assert not getattr(getattr(type(addon), hook), "__isabstractmethod__", False), (name, hook)
            else:  # a hook of a capability it does not declare would never be called
                assert owner is None, f"{name} defines {hook} without {capability.__name__}"


def test_the_base_addon_carries_no_runtime_hook():
    """What a runtime calls lives in the capability it asks for, never as a no-op on every addon."""
    assert not {h for cap in CAPABILITIES for h in _hooks(cap)} & set(vars(Addon))


def test_a_runtime_refuses_a_way_the_stack_does_not_declare_in_one_line():
    with pytest.raises(LabError, match=r"^the kueue scheduler stack cannot run on the existing runtime yet "
                                       r"\(it runs as local processes / installs from its charts on kind\): "
                                       r"use --runtime binary$"):
        need(_addon("kueue"), AdoptsCluster, "existing")
    assert need(_addon("kai"), AdoptsCluster, "existing") is not None  # KAI is found in a cluster kailab adopts


def test_the_none_stack_runs_anywhere_and_starts_nothing():
    addon = _addon("none")
    assert type(addon) is NoScheduler and capabilities(addon) == set(CAPABILITIES)
    assert addon.processes() == [] and addon.recipes() == [] and addon.kind_files_and_steps("k", str, None) == ({}, [])


STACK_DECLARED = {  # what only some stacks can do, checked against their code
    "kai": {ConfiguresScheduler, ServesSnapshot, HasMetricPanels, PlacesByTopology},
    "kueue+kai": {ConfiguresScheduler, ServesSnapshot, HasMetricPanels, PlacesByTopology},  # KAI places: KAI's
    "volcano": {ConfiguresScheduler},
    "kueue": set(),
    "none": set(),
}


def _implements_exactly(cls: type, declared: set, capabilities, base: type) -> None:
    """`cls` inherits exactly the `declared` capabilities and implements their hooks; it defines no hook
    of another (a refusing stand-in for "cannot"), nor does `base`."""
    assert {c for c in capabilities if issubclass(cls, c)} == declared
    for capability in capabilities:
        for hook in _hooks(capability):
            if capability in declared:
                assert not getattr(getattr(cls, hook), "__isabstractmethod__", False), (cls, hook)
            else:
                assert _defined_by(cls, hook) is None, f"{cls.__name__} defines {hook} without {capability.__name__}"
    assert not {h for cap in capabilities for h in _hooks(cap)} & set(vars(base))


def test_a_stack_without_a_capability_is_refused_in_one_line_naming_the_file():
    with pytest.raises(KailabError, match=r"^x.yaml: step 2: the Kueue stack has no scheduler configuration to change$"):
        configurable(get_stack("kueue"), "x.yaml: step 2")
    with pytest.raises(KailabError, match=r"^x.yaml: topology: the Volcano stack has no topology-aware placement$"):
        topology_aware(get_stack("volcano"), "x.yaml:")


RUNTIME_DECLARED = {  # what only some runtimes can do, checked against their code
    "binary": {MakesLabs, ControlsProcesses},
    "kind": {MakesLabs, InstallsCharts, AddsWorkers},
    "existing": set(),
}


# each axis: its registry, what each of it declares here, its class, its capabilities and its base
AXES = {"stack": (STACKS, STACK_DECLARED, lambda n: type(get_stack(n)), STACK_CAPABILITIES, Stack),
        "runtime": (RUNTIMES, RUNTIME_DECLARED, lambda n: type(bare_runtime(n)), RUNTIME_CAPABILITIES, Runtime)}


@pytest.mark.parametrize("axis", sorted(AXES))
def test_every_registered_stack_and_runtime_declares_its_capabilities_here(axis):
    registry, declared, *_ = AXES[axis]
    assert set(registry) == set(declared)


@pytest.mark.parametrize("axis, name", [(a, n) for a in sorted(AXES) for n in sorted(AXES[a][1])],
                         ids=lambda v: str(v))
def test_each_implements_exactly_the_capabilities_it_declares(axis, name):
    _, declared, cls, capabilities, base = AXES[axis]
    _implements_exactly(cls(name), declared[name], capabilities, base)


# where each stack's `scheduler:` step can change its scheduler (its scheduler_configs, by runtime capability)
RECONFIGURES_ON = {"kai": {"binary", "kind"}, "kueue+kai": {"binary", "kind"}, "volcano": {"binary"},
                   "kueue": set(), "none": set()}


@pytest.mark.parametrize("name", sorted(RECONFIGURES_ON), ids=lambda n: f"stack={n}")
def test_a_stack_configures_its_scheduler_on_the_runtimes_its_configs_pair_with(name):
    stack = get_stack(name)
    assert {r for r in RUNTIMES if scheduler_config_on(stack, bare_runtime(r)) is not None} == RECONFIGURES_ON[name]
    for config in getattr(stack, "scheduler_configs", ()):
        assert config.runtime in RUNTIME_CAPABILITIES, config


def test_a_process_fault_on_a_runtime_without_processes_is_refused_in_one_line():
    with pytest.raises(Unsupported, match=r"^the existing runtime runs no processes of its own, so it cannot kill "
                                          r"scheduler: use the binary runtime$"):
        Lab(_record("kai", runtime="existing")).kill("scheduler")
    with pytest.raises(Unsupported, match=r"has no scheduler configuration to change \(step `scheduler:`\)$"):
        Lab(_record("kueue")).configure_scheduler(None)


def _record(stack: str, runtime: str = "binary") -> LabRecord:
    return LabRecord(name="x", runtime=runtime, kai_version="", fleet="tiny", nodes=1, gpus=1,
                     kubeconfig="", stack={"name": stack})


@pytest.mark.parametrize("key", ["kill", "restart"])
def test_a_process_fault_is_refused_before_the_run_where_the_runtime_runs_no_processes(key):
    from types import SimpleNamespace

    from kailab.exercise.faults import FAULTS

    with pytest.raises(Unsupported, match=rf"^the kind runtime runs no processes of its own, so it cannot run the "
                                          rf"fault `{key}: binder`: use the binary runtime$"):
        FAULTS[key].preflight(SimpleNamespace(lab=Lab(_record("kai", runtime="kind"))), "binder")
    FAULTS[key].preflight(SimpleNamespace(lab=Lab(_record("kai"))), "binder")  # no refusal there
