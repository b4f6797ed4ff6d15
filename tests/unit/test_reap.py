"""Labs left by a test session that died are taken down by the next session's first lab use; under
pytest -n every worker does that at once, and a lab another worker is already taking down is passed
by, not an error (a CI run once failed 94 tests on that race)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kailab.runtimes.labkit import lab_lock
from kailab.testing.labs import LAB_PREFIX, reap_dead_sessions


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path))
    return tmp_path / "labs"


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_dead_sessions_lab_is_taken_down(state):
    lab = state / f"{LAB_PREFIX}{dead_pid()}-tiny"
    (lab / "logs").mkdir(parents=True)
    assert reap_dead_sessions() == [lab.name]
    assert not lab.exists()
    assert not list(state.glob(".*.lock"))  # down leaves no lock file behind either


def test_a_lab_another_process_is_taking_down_is_passed_by(state):
    held = state / f"{LAB_PREFIX}{dead_pid()}-dra"
    free = state / f"{LAB_PREFIX}{dead_pid()}-racks"
    for lab in (held, free):
        (lab / "logs").mkdir(parents=True)
    with lab_lock(held.name):  # as another worker's down holds it
        assert reap_dead_sessions() == [free.name]
    assert held.exists() and not free.exists()


def test_a_live_sessions_lab_is_left_alone(state):
    lab = state / f"{LAB_PREFIX}{os.getpid()}-tiny"
    (lab / "logs").mkdir(parents=True)
    assert reap_dead_sessions() == []
    assert lab.exists()
