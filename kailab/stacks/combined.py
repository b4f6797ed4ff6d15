"""Two (or more) stacks' addons in one lab, installed in order: one hook each, forwarded generically.

A combination is data: its parts, in the order they install and prove themselves. Every hook that
lists something (processes, recipes, ports, objects, images, files, steps) lists every part's, in
order; a process's health URL is its own part's. It declares a capability by inheriting that
capability's forwarder below, and only one every part declares (checked when it is made). A part that
needs to know its partner (Kueue's probe pod naming KAI's scheduler) is told so when it is made, so
the combination never special-cases a hook. kueue+kai is one (kailab/stacks/kueue_kai).
"""

from __future__ import annotations

from ..runtimes.addon import Addon, InstallsFromCharts, ProcessHost, RunsAsProcesses, capabilities


class CombinedAddon(Addon):
    def __init__(self, *parts: Addon, name: str) -> None:
        lacking = {cap.__name__: [p.name for p in parts if not isinstance(p, cap)] for cap in capabilities(self)}
        if any(lacking.values()):  # a programming error: the combination declares what a part cannot do
            raise TypeError(f"{name}: declared capabilities its parts lack: {lacking}")
        self.parts = parts
        self.name = name
        self.version = " + ".join(f"{p.name} {p.version}" for p in parts)

    def kai_version(self, release: str) -> str:
        return next((v for p in self.parts if (v := p.kai_version(release)) != "none"), "none")

    def _each(self, hook: str, *args) -> list:
        return [x for p in self.parts for x in getattr(p, hook)(*args)]

    def record(self) -> dict:
        return {**super().record(), "parts": {p.name: p.version for p in self.parts}}

    def processes(self) -> list[str]:
        return self._each("processes")

    def deployments(self) -> dict[str, list[str]]:
        return {ns: names for p in self.parts for ns, names in p.deployments().items()}

    def namespaces(self) -> list[str]:
        return self._each("namespaces")


class ProcessesOfParts(RunsAsProcesses):
    """Every part's processes, each part started (and proving itself) before the next."""

    parts: tuple

    @property
    def start_title(self) -> str:
        return ", then ".join(p.start_title for p in self.parts if p.start_title)

    def _part_running(self, process: str) -> RunsAsProcesses:
        return next((p for p in self.parts if process in p.processes()), self.parts[-1])

    def recipes(self) -> list:
        return self._each("recipes")

    def port_names(self) -> list[str]:
        return self._each("port_names")

    def health_url(self, name: str, ports: dict[str, int]) -> str:
        return self._part_running(name).health_url(name, ports)

    def seed_objects(self, built: dict) -> list[dict]:
        return self._each("seed_objects", built)

    def start(self, host: ProcessHost) -> None:
        for part in self.parts:  # each proves itself (its probe) before the next starts
            part.start(host)

    def scrape_jobs(self, ports: dict[str, int]) -> list[dict]:
        return self._each("scrape_jobs", ports)


class ChartsOfParts(InstallsFromCharts):
    """Every part's charts, installed in order; each part's probe in turn."""

    parts: tuple

    @property
    def reservation_namespace(self) -> str | None:
        return next((p.reservation_namespace for p in self.parts if p.reservation_namespace), None)

    def kind_files_and_steps(self, kubeconfig: str, path, local, node_selector: dict | None = None):
        files: dict[str, str] = {}
        steps: list = []
        for part in self.parts:
            more_files, more_steps = part.kind_files_and_steps(kubeconfig, path, local, node_selector)
            files.update(more_files)
            steps += more_steps
        return files, steps

    def images(self, local) -> list[str]:
        return self._each("images", local)

    def local_images(self, local) -> list[str]:
        return self._each("local_images", local)

    def local_files(self, local) -> list:
        return self._each("local_files", local)

    def build_local(self, local, console=None, phase=print) -> list[str]:
        return self._each("build_local", local, console, phase)

    def plan_lines(self) -> list[str]:
        return self._each("plan_lines")

    def probe_text(self) -> str:
        return "; then ".join(p.probe_text() for p in self.parts if p.probe_text())

    def await_ready(self, kube) -> None:
        for part in self.parts:
            part.await_ready(kube)

