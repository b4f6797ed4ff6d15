"""Assertions shared by the test modules."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kailab import course
from kailab.errors import InputError
from kailab.paths import PROJECT_ROOT
from kailab.runtimes import processes

import cli_zygote


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


def lab_listeners(lab_dir: Path) -> set[tuple[str, int]]:
    """(address, port) of every TCP listener in the host's network namespace owned by the lab."""
    inodes: set[str] = set()
    for pid in processes.marked_pids(lab_dir):
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            addr, port = cols[1].split(":")
            if cols[3] == "0A" and cols[9] in inodes:  # 0A = LISTEN
                if len(addr) == 8:
                    ip = ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
                else:
                    ip = "::" if set(addr) == {"0"} else addr
                found.add((ip, int(port, 16)))
    return found


@contextlib.contextmanager
def stack_lab(stack: str, fleet: str = "tiny"):
    """A binary lab of its own running `stack` (no metrics), down again on exit."""
    from kailab import labs
    from kailab.labs import LabSpec
    from kailab.stacks import get_stack

    name = f"{stack.replace('+', '-')}-{fleet}-{os.getpid()}"
    try:
        yield labs.up(LabSpec(name=name, runtime="binary", fleet=fleet, stack=stack, metrics=False)).record
    finally:
        labs.down(name)


def bound_then_held(kube, namespace: str, count: int, name=lambda pod: pod["metadata"]["name"],
                    window: float = 10) -> list[str]:
    """Wait (60 s at most) until `count` pods of the namespace are bound, then assert that stays so
    for `window` seconds (held, not just at one moment); returns the bound pods' names (`name` of each)."""
    def bound() -> list[str]:
        return sorted(name(p) for p in kube.list("v1", "Pod", namespace) if (p.get("spec") or {}).get("nodeName"))

    deadline = time.monotonic() + 60
    while len(bound()) < count and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(bound()) == count, bound()
    until = time.monotonic() + window
    while time.monotonic() < until:
        assert len(bound()) == count, bound()
        time.sleep(0.5)
    return bound()


def refused_with_nothing_made(lab, path, queues: tuple[str, str], evidence: Path) -> str:
    """Run an exercise the lab's stack must refuse: its verdict is `error` in one line, and no
    namespace and no queue (`queues`: apiVersion and kind of the stack's) was made; returns the error."""
    from kailab.exercise.runner import run_exercise
    from kailab.kube import Kube

    kube = Kube(lab.kubeconfig)
    try:
        def made() -> set[tuple[str, str]]:
            return ({("Namespace", n["metadata"]["name"]) for n in kube.list("v1", "Namespace")}
                    | {(queues[1], q["metadata"]["name"]) for q in kube.list(*queues)})

        before = made()
        out = run_exercise(path, lab, evidence)
        assert out.verdict == "error" and "\n" not in out.error, out.error
        assert made() <= before
        return out.error
    finally:
        kube.close()


# the real entry point as the console script runs it: for a test that needs the process itself (Popen, a
# terminal, a tmux pane); kailab_cli below runs it to the end
KAILAB = [sys.executable, "-c", cli_zygote.ENTRY]


def kailab_cli(*args: str, env: dict | None = None, without: tuple[str, ...] = (), timeout: float | None = 120,
               **run) -> subprocess.CompletedProcess:
    """The real entry point, as the console script runs it: this process's environment without the lab
    overrides (and `without`), no colour, a wide terminal, then `env` over it; `run`: subprocess.run's
    own (cwd, input)."""
    full = {k: v for k, v in os.environ.items() if k not in ("KAILAB_LAB", "KAILAB_FLEETS", "KAILAB_EXERCISES", *without)}
    full.update({"NO_COLOR": "1", "COLUMNS": "200"})
    full.update(env or {})  # what the caller sets wins (a wider terminal, say)
    check = run.pop("check", False)
    done = cli_zygote.run(list(args), full, timeout=timeout, **run)
    if check:
        done.check_returncode()
    return done


# resources that exist only where KAI's CRDs are installed
KAI_RESOURCES = {"queue", "queues", "podgroup", "podgroups", "pg", "bindrequest", "bindrequests"}


def page_commands() -> list[tuple[str, str]]:
    """(page, kubectl command) from the ```bash lab blocks of every course page, first page that has it."""
    seen: dict[str, str] = {}
    for page in sorted((PROJECT_ROOT / "docs" / "course").glob("*.md")):
        for cmd in course.lab_commands(page.read_text()):
            if cmd.startswith("kubectl ") and cmd not in seen:
                seen[cmd] = page.name
    return [(page, cmd) for cmd, page in seen.items()]


def involves_kai(cmd: str) -> bool:
    args = shlex.split(cmd)
    if len(args) < 3 or args[1] not in ("get", "describe"):
        return True  # anything but a plain read is treated as needing KAI: never run without it
    return any(r.split(".")[0] in KAI_RESOURCES for r in args[2].split(","))


def assert_self_contained_page(page: str) -> None:
    """An HTML page that loads nothing from anywhere: no links, scripts, imports or URLs."""
    lower = page.lower()
    assert "http://" not in lower and "https://" not in lower  # allow-list: none
    assert "<script" not in lower
    assert "@import" not in lower and "url(" not in lower
    assert "<link" not in lower and "<img" not in lower and "<iframe" not in lower
    assert "file://" not in lower


def wait_for(what: str, probe, timeout: float = 60, every: float = 0.5, seen=lambda: ""):
    """`probe()`'s first truthy answer within `timeout` seconds; else the test fails naming `what` and
    what was `seen` last."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(every)
    pytest.fail(f"within {timeout:g} s: {what} (seen: {seen()})", pytrace=False)
