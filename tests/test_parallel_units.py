"""Exercises on labs side by side (pytest -n): the worker count and the outcome a worker's report carries."""

import json
from dataclasses import asdict
from types import SimpleNamespace

from kailab.exercise.checks import Result
from kailab.exercise.runner import Outcome
from kailab.testing.items import OUTCOME_PROPERTY, outcome_of
from kailab.testing.workers import LAB_MIB, LABS_PER_CORE, MAX_WORKERS, auto_workers


def test_auto_workers_is_bounded_by_cores_memory_and_the_cap():
    assert auto_workers(cores=2, memory_mib=100 * LAB_MIB) == 2 * LABS_PER_CORE
    assert auto_workers(cores=2, memory_mib=100 * LAB_MIB) == 2  # this project's 2-core machine: two labs
    assert auto_workers(cores=64, memory_mib=3 * LAB_MIB + 1) == 3  # memory holds three labs
    assert auto_workers(cores=64, memory_mib=100 * LAB_MIB) == MAX_WORKERS
    assert auto_workers(cores=1, memory_mib=LAB_MIB - 1) == 1  # never fewer than one


def test_an_outcome_survives_the_trip_from_a_worker():
    outcome = Outcome("quota", "failed", [Result("s1", "expect", "bound", "4", "3", False, ["p-0"], 2.5)],
                      "/ev/run", "", {"binds": 3}, {"expect": 1.0}, ["clean-up slow"])
    report = SimpleNamespace(user_properties=[("other", "x"), (OUTCOME_PROPERTY, json.dumps(asdict(outcome)))])
    back = outcome_of(report)
    assert back == outcome
    assert back.failures[0].line().startswith("[FAIL] s1: bound")
    assert outcome_of(SimpleNamespace(user_properties=[])) is None
