"""Debian root filesystems for images, made with mmdebstrap from Debian's packages (the only OS
source a host without a registry has), cached as tarballs keyed by suite and package list."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from ..errors import BuildError
from . import artifacts_dir


def path_for(name: str, suite: str, packages: list[str]) -> Path:
    key = hashlib.sha256(f"{suite}\n{' '.join(sorted(packages))}".encode()).hexdigest()[:12]
    return artifacts_dir() / "rootfs" / f"{name}-{suite}-{key}.tar"


def ensure(name: str, suite: str, packages: list[str], log, on_phase) -> Path:
    """The rootfs tarball, made once (minbase + `packages`); one-line error naming the fix."""
    out = path_for(name, suite, packages)
    if out.is_file():
        return out
    tool = shutil.which("mmdebstrap")
    if not tool:
        raise BuildError("mmdebstrap not found: it makes the images' Debian root filesystems "
                         "(Debian: apt-get install mmdebstrap)")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.tar")
    on_phase(f"mmdebstrap {suite} ({len(packages)} packages)")
    proc = subprocess.run([tool, "--variant=minbase", f"--include={','.join(packages)}",
                           "--aptopt=Acquire::Retries \"3\"", suite, str(partial)],
                          stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BuildError(f"mmdebstrap {suite} failed (exit {proc.returncode}): see {log.name}")
    os.replace(partial, out)
    return out
