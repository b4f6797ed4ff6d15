"""A lab process's death in one line, from its whole last run's log and how it ended."""

from __future__ import annotations

import pytest

from kailab.runtimes.deaths import classify

GO_CRASH = """I1125 02:00:00 scheduler starting
fatal error: concurrent map writes

goroutine 412 [running]:
k8s.io/client-go/tools/cache.(*threadSafeMap).Add(...)
rax    0x0
rbx    0xc000123456
rip    0x47a1b2
"""


@pytest.mark.parametrize("log, ended, expected", [
    (GO_CRASH, "exited with status 2", "Go fatal error: concurrent map writes (exited with status 2)"),
    ("panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV]\ngoroutine 1\n",
     "exited with status 2", "panic: runtime error: invalid memory address or nil pointer dereference (exited with status 2)"),
    ("E1125 listen tcp 127.0.0.1:8080: bind: address already in use\n", "exited with status 1",
     "port in use (exited with status 1)"),
    ("flag provided but not defined: -leader-elect\nUsage of binder:\n", "exited with status 2",
     "bad flag (exited with status 2)"),
    ("fatal error: runtime: out of memory\n", "exited with status 2", "out of memory (exited with status 2)"),
    ("SIGSEGV: segmentation violation\nPC=0x0 m=0 sigcode=1\n", "exited with status 2",
     "signal: SIGSEGV: segmentation violation (exited with status 2)"),
    # KAI v0.17.0's podgroupcontroller in CI, when the host's inotify instances ran out
    ('2026-11-25T15:41:54.541Z\tERROR\tsetup\tproblem running manager\t{"error": "too many open files"}\n'
     "Error while running the app: too many open files\n", "exited with status 1",
     "too many open files (exited with status 1)"),
    ("", "was killed by SIGKILL", "signal: killed by SIGKILL (the kernel's OOM killer sends SIGKILL)"),
    ("", "exited with status 1", "exited with status 1 with an empty log"),
    ("all good\n", "ended", "ended (how is not known: not this process's child)"),
])
def test_each_kind_of_death_is_named(log, ended, expected):
    assert classify(log, ended) == expected


def test_only_the_last_run_counts():
    """A restarted process: the earlier run's crash is not this death's cause."""
    log = GO_CRASH + "\n----- kailab restarted scheduler at 02:01:00 -----\nflag provided but not defined: -x\n"
    assert classify(log, "exited with status 2").startswith("bad flag")


def test_the_cause_is_found_above_a_long_register_dump():
    """What the 15-line tail lost in CI: the fatal line is at the top of the crash report."""
    log = GO_CRASH + "\n".join(f"r{i}  0x{i:x}" for i in range(200))
    assert classify(log, "exited with status 2").startswith("Go fatal error: concurrent map writes")


def test_a_lab_that_would_not_fit_in_the_hosts_inotify_instances_is_refused_with_the_fix():
    from kailab.runtimes.hostlimits import RAISE, headroom_line

    line = headroom_line(limit=128, used=120, need=24)
    assert "fs.inotify.max_user_instances" in line and "120 are in use" in line and RAISE in line
    assert "\n" not in line
    assert headroom_line(limit=128, used=100, need=24) is None
    assert headroom_line(limit=None, used=10_000, need=24) is None  # no such limit here: nothing to refuse


def test_the_instances_a_process_opens_are_counted():
    """Counted from /proc as the kernel counts them (per user): three more instances are seen."""
    import ctypes

    import os

    from kailab.runtimes.hostlimits import instances_in_use, instances_of

    libc = ctypes.CDLL(None, use_errno=True)
    before = instances_of(os.getpid())
    fds = [libc.inotify_init1(0) for _ in range(3)]
    try:
        assert all(fd >= 0 for fd in fds)
        assert instances_of(os.getpid()) == before + 3
        assert instances_in_use() >= before + 3  # the user's count holds ours
    finally:
        for fd in fds:
            libc.close(fd)
