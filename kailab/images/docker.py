"""The few Docker operations the image builder needs, through the `docker` client (DOCKER_HOST as
the user set it)."""

from __future__ import annotations

import json
import shutil
import subprocess

from ..errors import BuildError

INPUTS_LABEL = "io.kailab.inputs"  # what an image was made from: equal label, nothing to rebuild


def client() -> str:
    docker = shutil.which("docker")
    if not docker:
        raise BuildError("docker (the client) not found: `kailab tools images` builds into a Docker engine "
                         "(Debian: apt-get install docker.io; kailab/data/docker-host.sh starts one)")
    return docker


def run(*args: str, stdin=None, check: bool = True, timeout: float = 900) -> str:
    out = subprocess.run([client(), *args], stdin=stdin, capture_output=True, text=stdin is None,
                         timeout=timeout)
    if check and out.returncode != 0:
        err = out.stderr if isinstance(out.stderr, str) else out.stderr.decode(errors="replace")
        raise BuildError(f"`docker {' '.join(args[:3])}` failed: {err.strip().splitlines()[-1:] or ['no output']}")
    return out.stdout if isinstance(out.stdout, str) else out.stdout.decode(errors="replace")


def answers() -> bool:
    return subprocess.run([client(), "info", "--format", "{{.ID}}"], capture_output=True,
                          timeout=30).returncode == 0


def inputs_of(ref: str, env: dict | None = None) -> str | None:
    """The inputs label of a local image, or None when Docker has no such image (`env`: another engine's)."""
    out = subprocess.run([client(), "image", "inspect", "--format", "{{json .Config.Labels}}", ref],
                         capture_output=True, text=True, timeout=60, env=env)
    if out.returncode != 0:
        return None
    labels = json.loads(out.stdout.strip() or "null") or {}
    return labels.get(INPUTS_LABEL, "")


def has(ref: str, env: dict | None = None) -> bool:
    return inputs_of(ref, env) is not None


def import_tar(tar_path: str, ref: str, changes: list[str]) -> None:
    """`docker import` a root filesystem tarball as `ref`, with Dockerfile-like changes."""
    args = ["import"]
    for change in changes:
        args += ["--change", change]
    with open(tar_path, "rb") as f:
        run(*args, "-", ref, stdin=f)


def image_id(ref: str) -> str | None:
    """The local image's ID, or None when Docker has no such image."""
    out = subprocess.run([client(), "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True,
                         text=True, timeout=60)
    return out.stdout.strip() or None if out.returncode == 0 else None


def remove_unused(image: str) -> bool:
    """Remove an image no container uses (Docker refuses one in use: it stays); True when removed."""
    return subprocess.run([client(), "image", "rm", image], capture_output=True, timeout=120).returncode == 0
