"""Each stack declares where it installs (its addon's `installs`), and implements exactly the hooks
those capabilities need: a runtime refuses a stack that does not declare its way in one line
(Addon.require), so a declared capability without its hooks would fail late and a hook without its
capability would never run."""

from __future__ import annotations

import pytest

from kailab.errors import LabError
from kailab.runtimes.addon import Addon
from kailab.runtimes.base import LabSpec
from kailab.stacks import STACKS, get_stack
from kailab.stacks.combined import CombinedAddon

# capability -> the hooks a stack with it must implement (beyond Addon's "nothing schedules")
NEEDS = {
    "processes": ("recipes", "port_names", "health_url", "seed_objects", "start"),
    "charts": ("kind_files_and_steps", "local_images", "local_files", "plan_lines", "await_ready"),
    "adopted": ("adopt_problems", "adopted_version"),
}
DECLARED = {  # what each stack says it installs as, checked against its code below
    "kai": {"processes", "charts", "adopted"},
    "kueue": {"processes", "charts"},
    "kueue+kai": {"processes", "charts"},
    "volcano": {"processes", "charts"},
}


def _implements(addon: Addon, hook: str) -> bool:
    return getattr(type(addon), hook) is not getattr(Addon, hook)


def _addon(name: str) -> Addon:
    return get_stack(name).addon(LabSpec(name="caps", stack=name, kai_version="v0.17.0"))


def test_every_registered_stack_is_listed_here():
    assert set(STACKS) - {"none"} == set(DECLARED)


@pytest.mark.parametrize("name", sorted(DECLARED), ids=lambda n: f"stack={n}")  # an id "kai" would read as the mark
def test_a_stack_declares_what_it_installs_as_and_implements_those_hooks(name):
    addon = _addon(name)
    assert set(addon.installs) == DECLARED[name]
    parts = addon.parts if isinstance(addon, CombinedAddon) else (addon,)
    for part in parts:
        for capability, hooks in NEEDS.items():
            have = {h for h in hooks if _implements(part, h)}
            if capability in addon.installs:
                assert have == set(hooks), f"{name} ({part.name}) declares {capability} without {set(hooks) - have}"
            elif capability not in part.installs:
                assert not have, f"{name} ({part.name}) implements {have} for {capability}, which it does not declare"


def test_a_runtime_refuses_a_way_the_stack_does_not_declare_in_one_line():
    with pytest.raises(LabError, match=r"the kueue scheduler stack cannot run on the existing runtime yet"):
        _addon("kueue").require("adopted", "existing")
    _addon("kai").require("adopted", "existing")  # KAI is found in a cluster kailab adopts


def test_the_none_stack_runs_anywhere_and_starts_nothing():
    addon = _addon("none")
    assert type(addon) is Addon and addon.processes() == [] and addon.recipes() == []
