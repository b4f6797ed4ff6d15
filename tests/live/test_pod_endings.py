"""Pods end as kubelets end them, on a binary lab (tests/live/pod_endings.py; the same checks run on a
kind lab in tests/live/test_kind_lab.py)."""

from __future__ import annotations

import pytest

from kailab.kube import Kube

import pod_endings as check

pytestmark = pytest.mark.lab
NODE = "a100-0"  # of the tiny fleet


@pytest.fixture
def kube(infra_lab):
    k = Kube(infra_lab.kubeconfig)
    yield k
    k.close()


def test_a_deleted_job_pod_ends_failed_and_fails_its_backoff_limit_0_job(kube):
    check.deleted_job_pod_fails_its_backoff_limit_0_job(kube, NODE)


def test_a_pod_that_exits_0_on_termination_ends_succeeded(kube):
    check.pod_exiting_0_on_termination_ends_succeeded(kube, NODE)


def test_a_condition_set_before_deletion_stays_until_the_pod_ends(kube):
    check.conditions_set_before_deletion_stay_until_the_end(kube, NODE)


def test_run_time_pods_end_by_themselves_and_complete_their_job(kube):
    check.run_time_pods_complete_their_job(kube, NODE)
