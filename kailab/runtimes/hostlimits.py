"""The host's kernel limits a lab runs into before its own: inotify instances.

Every controller-runtime process (a scheduler stack's controllers), every kube-apiserver and
kube-controller-manager, and a kind node's systemd, kubelet and containerd each open inotify
instances, and the kernel allows a user `fs.inotify.max_user_instances` of them (Debian: 128).
When they run out, the next process to start dies with "too many open files" — measured in CI
here: KAI's podgroupcontroller died so at start while other labs ran, and 30 tests failed. So
`up` counts what is in use and refuses, in one line with the fix, a lab that would not fit.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import KailabError

MAX_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
# measured here (inotify descriptors of a lab's processes, counted in /proc): a binary KAI lab
# with metrics holds 15; a kind node's systemd, kubelet, containerd and control plane ~25, and each
# virtual cluster in it more. With room for the processes a lab starts later (a restart opens anew).
NEEDED = {"binary": 24, "kind": 48}
RAISE = "sysctl -w fs.inotify.max_user_instances=1024"


def max_instances() -> int | None:
    try:
        return int(MAX_INSTANCES.read_text())
    except (OSError, ValueError):
        return None  # not Linux, or /proc hides it: nothing to check


def instances_of(pid: int) -> int:
    """inotify instances a process holds (its descriptors that are one)."""
    count = 0
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return 0  # the process ended, or its fds are not ours to read
    for fd in fds:
        try:
            count += os.readlink(fd) == "anon_inode:inotify"
        except OSError:
            continue  # closed while we looked
    return count


def instances_in_use(uid: int | None = None) -> int:
    """inotify instances held by this user's processes (the kernel's limit is per user)."""
    uid = os.getuid() if uid is None else uid
    total = 0
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid:
                total += instances_of(int(proc.name))
        except OSError:
            continue  # the process ended
    return total


def headroom_line(limit: int | None, used: int, need: int) -> str | None:
    """One line when `need` more instances do not fit under `limit` with `used` taken, else None."""
    if limit is None or limit - used >= need:
        return None
    return (f"this machine allows {limit} inotify instances per user (fs.inotify.max_user_instances) and {used} are "
            f"in use; a lab needs about {need} more, and its components would die at start with \"too many open "
            f"files\": raise the limit (as root: `{RAISE}`) or bring other labs down (`kailab down --name NAME`)")


def require_inotify(runtime: str) -> None:
    """Refuse a lab that would not fit in the user's inotify instances (before anything starts)."""
    line = headroom_line(max_instances(), instances_in_use(), NEEDED.get(runtime, NEEDED["binary"]))
    if line:
        raise KailabError(line)


def describe() -> str:
    """For a death's account: the instances in use and the limit, now."""
    limit = max_instances()
    return f"inotify instances in use {instances_in_use()} of fs.inotify.max_user_instances {limit}"
