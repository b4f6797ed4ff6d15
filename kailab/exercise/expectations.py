"""Kinds of expectation, as a registry: how each is recognised in a file and how it is checked.

A kind is named by one marker key in its YAML item (`podgroupOf`, `eventReason`, `object`; an
item with none is a count). An item naming two markers is refused as ambiguous, never guessed. A new
kind is one class here, its model in spec.py and one row in docs/exercise-format.md.
"""

from __future__ import annotations

from typing import ClassVar

from .checks import (Names, Result, evaluate_condition, evaluate_count, evaluate_event, evaluate_object,
                     evaluate_wait)
from .spec import ConditionExpect, CountExpect, EventExpect, ObjectExpect, WaitExpect


class Kind:
    model: ClassVar[type]
    marker: ClassVar[str | None]  # the key that names this kind in a file (None: the default kind)
    reads_events: ClassVar[bool] = False  # checked against listed Events (polled), not the watch

    @staticmethod
    def evaluate(exp, state, names: Names, since: float, step: str, events=None, since_wall=None) -> list[Result]:
        raise NotImplementedError


class Count(Kind):
    model, marker = CountExpect, None

    @staticmethod
    def evaluate(exp, state, names, since, step, events=None, since_wall=None):
        return evaluate_count(state, exp, names, since, step)


class Condition(Kind):
    model, marker = ConditionExpect, "podgroupOf"

    @staticmethod
    def evaluate(exp, state, names, since, step, events=None, since_wall=None):
        return [evaluate_condition(state, exp, names, step)]


class Event(Kind):
    model, marker, reads_events = EventExpect, "eventReason", True

    @staticmethod
    def evaluate(exp, state, names, since, step, events=None, since_wall=None):
        return [evaluate_event(events or [], state, exp, names, since_wall or 0.0, step)]


class Object(Kind):
    model, marker = ObjectExpect, "object"

    @staticmethod
    def evaluate(exp, state, names, since, step, events=None, since_wall=None):
        return [evaluate_object(state, exp, names, step)]


class Wait(Kind):
    model, marker = WaitExpect, "waitOf"

    @staticmethod
    def evaluate(exp, state, names, since, step, events=None, since_wall=None):
        return evaluate_wait(state, exp, names, step)


KINDS: tuple[type[Kind], ...] = (Count, Condition, Event, Object, Wait)
BY_MODEL = {k.model: k for k in KINDS}


def state_kinds() -> set[type]:
    return {k.model for k in KINDS if not k.reads_events}


def event_kinds() -> set[type]:
    return {k.model for k in KINDS if k.reads_events}


def evaluate_all(items, state, names: Names, since: float, step: str, events=None, since_wall=None) -> list[Result]:
    out: list[Result] = []
    for exp in items:
        out += BY_MODEL[type(exp)].evaluate(exp, state, names, since, step, events, since_wall)
    return out
