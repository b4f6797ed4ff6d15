"""Where kailab keeps things: one binary cache (keyed by component and version) and lab state."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """Built binaries live here, one folder per component and version; never rebuilt once complete."""
    base = os.environ.get("KAILAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kailab"
    )
    return Path(base)


@contextlib.contextmanager
def cache_lock(name: str, on_wait=lambda: None):
    """Hold an exclusive lock on one thing kailab makes in its cache (a build, an export), so two
    kailab processes — labs side by side, pytest -n workers — never make it at once: the second
    waits, then finds it made."""
    path = cache_dir() / "build" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def state_dir() -> Path:
    """Every lab gets a directory under here: certs, kubeconfig, pids, logs, etcd data."""
    base = os.environ.get("KAILAB_STATE") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "kailab"
    )
    return Path(base) / "labs"


def lab_dir(name: str) -> Path:
    return state_dir() / name


def fleets_dir() -> Path:
    return Path(os.environ.get("KAILAB_FLEETS") or PROJECT_ROOT / "fleets")


def exercises_dir() -> Path:
    return Path(os.environ.get("KAILAB_EXERCISES") or PROJECT_ROOT / "exercises")


def evidence_dir() -> Path:
    """Where runs keep their evidence: $KAILAB_EVIDENCE, else evidence/ in the current folder — a team's
    own repository keeps its runs (`pytest my-exercises/ --kailab-lab X` there), and `make exercises`,
    run from kailab's root, kailab's evidence/."""
    return Path(os.environ.get("KAILAB_EVIDENCE") or Path.cwd() / "evidence")


def evidence_dir_why() -> str:
    """Which rule `evidence_dir` followed, in words for a summary line."""
    return "$KAILAB_EVIDENCE" if os.environ.get("KAILAB_EVIDENCE") else "evidence/ in the current folder"
