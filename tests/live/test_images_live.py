"""An image kailab makes again replaces the one it made before in Docker's store, which is removed
(nameless, it was 1.3 GB a lab image, until a kind node ran out of disk loading the next one); one a
container still uses stays. Against the kind tests' real Docker engine."""

from __future__ import annotations

import os
import subprocess

import pytest

from kailab.images import assemble, docker
from kailab.testing.labs import kind_docker

pytestmark = [pytest.mark.kind]


def _spec(ref: str, text: bytes) -> assemble.ImageSpec:
    return assemble.ImageSpec(ref=ref, files=(), generated=(("etc/kailab-test", text, 0o644),))


def test_an_image_made_again_removes_the_one_it_replaced_but_one_in_use(tmp_path):
    ref = f"kailab.local/test-replace:{os.getpid()}"
    made: list[str] = []
    with kind_docker():
        try:
            assert assemble.ensure(_spec(ref, b"one"), lambda _: None, tmp_path)
            first = docker.image_id(ref)
            assert not assemble.ensure(_spec(ref, b"one"), lambda _: None, tmp_path)  # same inputs: kept
            assert assemble.ensure(_spec(ref, b"two"), lambda _: None, tmp_path)
            second = docker.image_id(ref)
            made += [first, second]
            assert second != first and docker.image_id(first) is None  # the replaced one is gone
            # a container made from the current image keeps it when the next replaces it
            subprocess.run(["docker", "create", "--name", f"kailab-test-{os.getpid()}", ref, "x"], check=True,
                           capture_output=True)
            assert assemble.ensure(_spec(ref, b"three"), lambda _: None, tmp_path)
            made.append(docker.image_id(ref))
            assert docker.image_id(second) == second
        finally:
            subprocess.run(["docker", "rm", "-f", f"kailab-test-{os.getpid()}"], capture_output=True)
            for image in [ref, *made]:
                subprocess.run(["docker", "image", "rm", "-f", image], capture_output=True)
