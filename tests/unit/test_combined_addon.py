"""A combination of stacks' addons forwards every hook to its parts generically, in install order."""

from __future__ import annotations

import pytest

from kailab.runtimes.addon import Addon, AdoptsCluster, InstallsFromCharts, RunsAsProcesses, capabilities
from kailab.stacks.combined import ChartsOfParts, CombinedAddon, ProcessesOfParts
from kailab.stacks.kueue_kai import KueueKaiAddon


class Part(Addon, RunsAsProcesses, InstallsFromCharts):
    def __init__(self, name: str, started: list[str]) -> None:
        self.name, self.version, self.started = name, f"{name}-1", started

    def processes(self):
        return [f"{self.name}-a", f"{self.name}-b"]

    def port_names(self):
        return [f"{p}.metrics" for p in self.processes()]

    def health_url(self, name, ports):
        return f"{self.name}:{ports[name + '.metrics']}"

    def deployments(self):
        return {f"{self.name}-ns": [self.name]}

    def kind_files_and_steps(self, kubeconfig, path, local, node_selector=None):
        return {f"{self.name}.yaml": "x"}, [(f"install {self.name}", ["helm"])]

    def start(self, host):
        self.started.append(self.name)

    recipes = seed_objects = images = local_images = local_files = plan_lines = lambda self, *a: []
    probe_text = lambda self: ""  # noqa: E731
    await_ready = lambda self, kube: None  # noqa: E731


class Adopted(Part, AdoptsCluster):
    adopt_problems = lambda self, kube, server: []  # noqa: E731
    adopted_version = lambda self, kube: None  # noqa: E731


class Both(CombinedAddon, ProcessesOfParts, ChartsOfParts):
    pass


def test_every_list_is_each_parts_in_order_and_each_process_answers_to_its_own_part():
    started: list[str] = []
    both = Both(Adopted("one", started), Part("two", started), name="one+two")
    assert both.processes() == ["one-a", "one-b", "two-a", "two-b"]
    ports = {n: i for i, n in enumerate(both.port_names())}
    assert both.health_url("two-b", ports) == "two:3" and both.health_url("one-a", ports) == "one:0"
    assert capabilities(both) == {RunsAsProcesses, InstallsFromCharts}  # what it declares
    assert both.deployments() == {"one-ns": ["one"], "two-ns": ["two"]}
    files, steps = both.kind_files_and_steps("k", str, None)
    assert set(files) == {"one.yaml", "two.yaml"} and [s[0] for s in steps] == ["install one", "install two"]
    both.start(host=None)
    assert started == ["one", "two"]
    assert both.record()["parts"] == {"one": "one-1", "two": "two-1"} and both.record()["name"] == "one+two"


def test_kueue_and_kai_combine_without_a_hand_written_forward():
    addon = KueueKaiAddon("v0.17.0")
    assert addon.processes() == addon.kai.processes() + addon.kueue.processes()
    assert addon.port_names() == addon.kai.port_names() + addon.kueue.port_names()
    assert addon.record()["parts"] == {"kai": "v0.17.0", "kueue": addon.kueue.version}
    assert capabilities(addon) == {RunsAsProcesses, InstallsFromCharts}  # Kueue is not found in an adopted cluster yet
    assert addon.kueue.probe_pod is not None  # Kueue's probe pod names KAI's scheduler and queue
    ports = {n: 30000 + i for i, n in enumerate(addon.port_names())}
    assert addon.health_url("kueue", ports) == addon.kueue.health_url("kueue", ports)
    assert addon.health_url("binder", ports) == addon.kai.health_url("binder", ports)


def test_a_combination_cannot_declare_what_one_of_its_parts_lacks():
    class ProcessesOnly(Addon, RunsAsProcesses):
        name, version = "two", "two-1"
        recipes = port_names = seed_objects = lambda self, *a: []
        health_url = start = lambda self, *a: None

    with pytest.raises(TypeError, match="InstallsFromCharts.*two"):
        Both(Adopted("one", []), ProcessesOnly(), name="one+two")
