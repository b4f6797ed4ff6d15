"""A combination of stacks' addons forwards every hook to its parts generically, in install order."""

from __future__ import annotations

from kailab.runtimes.addon import Addon
from kailab.stacks.combined import CombinedAddon
from kailab.stacks.kueue_kai import KueueKaiAddon


class Part(Addon):
    def __init__(self, name: str, installs: set[str], started: list[str]) -> None:
        self.name, self.version, self.installs, self.started = name, f"{name}-1", frozenset(installs), started

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


def test_every_list_is_each_parts_in_order_and_each_process_answers_to_its_own_part():
    started: list[str] = []
    both = CombinedAddon(Part("one", {"processes", "charts", "adopted"}, started), Part("two", {"processes", "charts"}, started),
                         name="one+two")
    assert both.processes() == ["one-a", "one-b", "two-a", "two-b"]
    ports = {n: i for i, n in enumerate(both.port_names())}
    assert both.health_url("two-b", ports) == "two:3" and both.health_url("one-a", ports) == "one:0"
    assert both.installs == {"processes", "charts"}  # where every part installs
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
    assert addon.installs == {"processes", "charts"}  # Kueue is not found in an adopted cluster yet
    assert addon.kueue.probe_pod is not None  # Kueue's probe pod names KAI's scheduler and queue
    ports = {n: 30000 + i for i, n in enumerate(addon.port_names())}
    assert addon.health_url("kueue", ports) == addon.kueue.health_url("kueue", ports)
    assert addon.health_url("binder", ports) == addon.kai.health_url("binder", ports)
