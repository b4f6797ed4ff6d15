"""An `expect` past its step's timeout: waited on while pods keep changing (a slow lab), not when the lab
is at rest (a wrong one), and never past the stretch's ceiling. The observer's state is fed by hand here,
as its watch threads feed it; seconds are scaled down so the tier stays fast."""

from __future__ import annotations

import threading
import time

from kailab.exercise.checks import Names
from kailab.exercise.observer import Observer
from kailab.exercise.state import TimelineEntry


def _observer() -> Observer:
    return Observer(None, Names("x", "x-ns"), [])


def _binding(obs: Observer, every: float, until: float, done: threading.Event | None = None) -> threading.Thread:
    """Pods of the run 'bind' every `every` s until `until` s from now; `done` set after the last."""
    def feed():
        end = time.time() + until
        i = 0
        while time.time() < end:
            time.sleep(every)
            with obs.state.cond:
                obs.state.timeline.append(TimelineEntry(obs.state.now(), "bound", f"web-{i}", "web"))
                obs.state.cond.notify_all()
            i += 1
        if done is not None:
            with obs.state.cond:
                done.set()
                obs.state.cond.notify_all()
    t = threading.Thread(target=feed, daemon=True)
    t.start()
    return t


def test_a_lab_still_binding_past_the_timeout_is_waited_for():
    obs, done = _observer(), threading.Event()
    _binding(obs, every=0.1, until=1.2, done=done)  # the last pod binds at ~1.2 s: past the 0.5 s timeout
    assert obs.wait_for(lambda s: done.is_set(), timeout=0.5, stretch=4, moving=0.4)


def test_a_lab_at_rest_fails_at_the_timeout_and_a_lab_that_never_rests_at_the_ceiling():
    obs = _observer()
    began = time.time()
    assert not obs.wait_for(lambda s: False, timeout=0.5, stretch=4, moving=0.4)
    at_rest = time.time() - began
    assert 0.5 <= at_rest < 1.5, at_rest  # nothing moved: not one stretch (the ceiling is 2 s)

    _binding(obs, every=0.1, until=10)
    began = time.time()
    assert not obs.wait_for(lambda s: False, timeout=0.5, stretch=4, moving=0.4)
    churning = time.time() - began
    assert 1.9 <= churning < 3.0, churning  # pods changing all along: the ceiling, 4 x 0.5 s


def test_without_a_stretch_the_timeout_is_the_timeout():
    obs = _observer()
    _binding(obs, every=0.1, until=3)
    began = time.time()
    assert not obs.wait_for(lambda s: False, timeout=0.5)
    assert time.time() - began < 1.5
