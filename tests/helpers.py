"""Assertions shared by the test modules."""

from __future__ import annotations

import pytest

from kailab.errors import InputError


def assert_one_line_input_error(load, path, *fragments: str) -> str:
    """`load(path)` must raise an InputError of one line naming the file and every fragment."""
    with pytest.raises(InputError) as info:
        load(path)
    msg = str(info.value)
    assert len(msg.splitlines()) == 1 and "\n" not in msg, msg
    assert str(path) in msg, msg
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    return msg


def place_pod(kube, namespace: str, name: str, node: str | None, queue: str, workload: str = "w",
              gpus: int = 1) -> None:
    """A GPU pod the *test* places (spec.nodeName), standing in for a scheduler: nobody else
    schedules it (its schedulerName is no real scheduler's)."""
    from kailab import workloads

    pod = workloads.pods(name, namespace, queue, 1, gpus=gpus, priority_class=None)[0]
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"][workloads.OWNER_LABEL] = workload
    pod["spec"]["schedulerName"] = "kailab-test-placer"
    if node:
        pod["spec"]["nodeName"] = node
    kube.apply(pod)
