"""Volcano's scheduler configuration as a design input: the lab's default (kailab/data/volcano.yaml,
written into the lab dir), and what an exercise's `scheduler:` step or a replay design changes —
which queue plugin (`volcano: capacity` or `proportion`, or a whole configuration of actions and
tiers) and binpack on or off (`placement: binpack | spread`).

Volcano's scheduler re-reads its configuration file when it changes (it watches its directory), and
a configuration it cannot parse is logged and ignored, the old one kept: so every setting is
checked here against the actions and plugins this Volcano release registers (read from its own
tree) before anything runs, and a change is applied only once the scheduler's log says it loaded it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from ...errors import KailabError, LabError
from ...runtimes.base import ControlsProcesses
from ..base import SchedulerConfig
from . import install
from ... import toolchain

DEFAULT = "volcano-scheduler.default.conf"
LOADED = re.compile(r"Finished loading scheduler config\. Final state: actions=\[([^\]]*)\], plugins=\[([^\]]*)\]")


@dataclass(frozen=True)
class Setting:
    """A whole scheduler configuration (`conf`, as data) and what it was made from (`source`)."""

    conf: dict
    source: str


def write_default(lab: Path) -> None:
    text = install.conf_text(install.scheduler_conf())
    (lab / DEFAULT).write_text(text)
    (lab / install.CONF).write_text(text)


def current(lab: Path) -> dict | None:
    path = lab / install.CONF
    if not path.is_file():
        return None
    conf = yaml.safe_load(path.read_text())
    if isinstance(conf.get("actions"), str):
        conf["actions"] = [a.strip() for a in conf["actions"].split(",") if a.strip()]
    return conf


def registered(src: Path) -> tuple[set[str], set[str]]:
    """The action and plugin names this Volcano release registers (its two factory.go files)."""
    base = src / "pkg" / "scheduler"
    return (_registered(base / "actions" / "factory.go", r"RegisterAction\((\w+)\.New\("),
            _registered(base / "plugins" / "factory.go", r"RegisterPluginBuilder\((\w+)\.PluginName"))


def _registered(factory: Path, call: str) -> set[str]:
    """Each registered package's name, read from its own source: `PluginName = "…"`, or the string
    its Name() returns (directly or through a constant)."""
    text = factory.read_text()
    dirs = {m.group(1) or m.group(2).rsplit("/", 1)[-1]: m.group(2)
            for m in re.finditer(r'^\s*(\w+\s+)?"volcano\.sh/volcano/([^"]+)"', text, re.M)}
    dirs = {k.strip(): v for k, v in dirs.items()}
    root = factory.parents[3]  # the tree: pkg/scheduler/<kind>/factory.go
    out = set()
    for alias in re.findall(call, text):
        code = " ".join(p.read_text() for p in (root / dirs[alias]).glob("*.go") if not p.name.endswith("_test.go"))
        m = (re.search(r'PluginName\s*=\s*"([^"]+)"', code)
             or re.search(r'Name\(\) string \{\s*return "([^"]+)"', code))
        if m is None and (const := re.search(r"Name\(\) string \{\s*return (\w+)", code)):
            m = re.search(rf'{const.group(1)}\s*=\s*"([^"]+)"', code)
        out.add(m.group(1) if m else alias)
    return out


def setting(value, where: str) -> Setting:
    """An exercise's or design's `scheduler:` as one whole configuration; what Volcano has no such
    thing for (KAI's usage or SchedulingShard) is refused by name."""
    if getattr(value, "usage", None) is not None:
        raise KailabError(f"{where} scheduler.usage: not on the volcano stack: Volcano has no time-based fair share "
                          "of KAI's kind (its usage plugin scores nodes by load); drop `usage`")
    if getattr(value, "shard", None):
        raise KailabError(f"{where} scheduler.shard: not on the volcano stack: a SchedulingShard is KAI's; "
                          "give Volcano's configuration as `volcano:` (a name or actions and tiers)")
    chosen = getattr(value, "volcano", None)
    if chosen is None or isinstance(chosen, str):
        names = install.pins()["configurations"]
        name = chosen or install.pins()["default_configuration"]
        if name not in names:
            raise KailabError(f"{where} scheduler.volcano: {name!r} is no configuration kailab ships: choose "
                              f"{' or '.join(names)}, or give actions and tiers")
        conf, source = install.scheduler_conf(name), name
    else:
        conf, source = _checked(dict(chosen), where), "given"
    binpack = value.placement == "binpack"
    return Setting(install.with_binpack(conf, binpack), f"{source}, binpack {'on' if binpack else 'off'}")


def _checked(conf: dict, where: str) -> dict:
    src = install.tree(install.recipe())
    if not toolchain.is_cached(install.recipe()):
        src = install.tree(install.recipe())  # the pinned tree: exported from the registered repository
    actions, plugins = registered(src)
    given = conf.get("actions")
    given = [a.strip() for a in given.split(",")] if isinstance(given, str) else list(given or [])
    if not given:
        raise KailabError(f"{where} scheduler.volcano.actions: give the actions in order, e.g. "
                          "[enqueue, allocate, preempt, reclaim, backfill]")
    for a in given:
        if a not in actions:
            raise KailabError(f"{where} scheduler.volcano.actions: {a!r} is no action of Volcano "
                              f"{install.pins()['version']}: choose from {', '.join(sorted(actions))}")
    tiers = conf.get("tiers")
    if not isinstance(tiers, list) or not tiers:
        raise KailabError(f"{where} scheduler.volcano.tiers: give at least one tier of plugins")
    for i, tier in enumerate(tiers):
        for p in (tier or {}).get("plugins") or []:
            if not isinstance(p, dict) or p.get("name") not in plugins:
                raise KailabError(f"{where} scheduler.volcano.tiers[{i}]: {p!r} is no plugin of Volcano "
                                  f"{install.pins()['version']}: choose from {', '.join(sorted(plugins))}")
    names = {p["name"] for t in tiers for p in t.get("plugins") or []}
    if {"capacity", "proportion"} <= names:
        raise KailabError(f"{where} scheduler.volcano.tiers: capacity and proportion together: Volcano's own guide "
                          "says the two conflict; keep one")
    unknown = set(conf) - {"actions", "tiers", "configurations", "metrics"}
    if unknown:
        raise KailabError(f"{where} scheduler.volcano: {sorted(unknown)[0]!r} is not part of a Volcano scheduler "
                          "configuration (actions, tiers, configurations, metrics)")
    return {**conf, "actions": given}


def apply(lab: Path, chosen: Setting | None) -> None:
    """Write the configuration (None: the lab's default) and wait until the scheduler's log says it
    loaded exactly these actions and plugins; one line naming what it kept otherwise."""
    conf = chosen.conf if chosen is not None else yaml.safe_load((lab / DEFAULT).read_text())
    log = lab / "logs" / f"{install.SCHEDULER}.log"
    start = log.stat().st_size if log.is_file() else 0
    text = install.conf_text(conf)
    (lab / install.CONF).write_text(text)
    actions = conf["actions"] if isinstance(conf["actions"], list) else [a.strip() for a in conf["actions"].split(",")]
    plugins = [p["name"] for t in conf["tiers"] for p in t.get("plugins") or []]
    want = (" ".join(actions), " ".join(plugins))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log, "rb") as f:
            f.seek(start)
            loaded = [(m.group(1), m.group(2)) for m in LOADED.finditer(f.read().decode(errors="replace"))]
        if want in loaded:
            return
        time.sleep(0.2)
    raise LabError(f"lab {lab.name!r}: vc-scheduler did not load its new configuration within 30 s "
                   f"({lab / install.CONF}; see {log})")


class OnProcesses(SchedulerConfig):
    """Volcano's scheduler as a process of the lab: the configuration file it watches."""

    runtime = ControlsProcesses

    def current(self, runtime, record) -> dict | None:
        return current(record.dir)

    def apply(self, runtime, record, setting) -> None:
        apply(record.dir, setting)
