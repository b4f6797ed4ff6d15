"""How `up` is put together: its seed, its parallel parts, and the scale bench's arithmetic.
Pure functions and real files and threads; the labs that use them are tested in test_lab_*.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kailab import scale
from kailab.errors import LabError
from kailab.runtimes import labkit, seed
from kailab.runtimes.waits import wait_until


@pytest.fixture
def cache(cache, tmp_path):
    return tmp_path  # this file's tests read the folder kailab's cache is in


def _binary(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_seed_key_follows_the_binaries_and_every_object(cache):
    etcd, api = _binary(cache / "etcd", "a"), _binary(cache / "api", "b")
    crd = {"kind": "CustomResourceDefinition", "metadata": {"name": "q"}, "spec": {"x": 1}}
    base = seed.key([etcd, api], [crd])
    assert seed.key([etcd, api], [crd]) == base
    assert seed.key([etcd, api], [{**crd, "spec": {"x": 2}}]) != base  # a changed object bakes anew
    assert seed.key([etcd, api], []) != base
    _binary(api, "bb")  # a rebuilt binary too
    assert seed.key([etcd, api], [crd]) != base


def test_a_seed_is_restored_only_once_complete(cache):
    assert seed.restore("k1", cache / "lab1" / "etcd") is False  # none baked yet
    data = cache / "baked"
    (data / "member" / "wal").mkdir(parents=True)
    (data / "member" / "wal" / "0.wal").write_text("wal")
    seed.save("k1", data)
    target = cache / "lab2" / "etcd"
    assert seed.restore("k1", target) is True
    assert (target / "member" / "wal" / "0.wal").read_text() == "wal"
    assert oct(target.stat().st_mode & 0o777) == "0o700"  # etcd refuses a readable data dir
    seed.save("k1", data)  # a second save of the same key keeps the first
    assert seed.remove_all() == 1 and seed.restore("k1", cache / "lab3" / "etcd") is False


def test_a_failing_part_abandons_the_others_waits_at_once(tmp_path):
    lab = tmp_path / "lab"
    lab.mkdir()

    def fails() -> None:
        time.sleep(0.2)
        raise LabError("kube-apiserver exited")

    def waits_long() -> None:
        wait_until("something that never comes", lambda: False, timeout=60, lab=lab)

    phases = labkit.Phases()
    start = time.monotonic()
    with pytest.raises(LabError, match="kube-apiserver exited"):
        labkit.run_together(lab, {"a": fails, "b": waits_long}, phases)
    assert time.monotonic() - start < 5  # not the 60 s the other part would have waited
    assert set(phases.spans) == {"a", "b"}
    # the lab's next `up` waits normally again
    assert wait_until("now", lambda: True, timeout=1, lab=lab) is True


def test_scale_figures_time_to_bind_and_binds_per_bucket():
    class Watch:
        bound = {f"p-{i}": 100.0 + i for i in range(20)}  # one bind a second from t0 + 0
        owner: dict = {}
        errors: list = []

    created = {f"p-{i}": 100.0 for i in range(20)}
    cpu0 = {"scheduler": 1.0, "binder": 1.0, "kube-apiserver": 5.0, "kailab (harness)": 2.0}
    cpu1 = {"scheduler": 11.0, "binder": 3.0, "kube-apiserver": 45.0, "kailab (harness)": 3.0}
    r = scale._figures("pods", 20, created, Watch, 100.0, 119.0, 2.0, cpu0, cpu1, True)
    assert r["bound"] == 20 and r["seconds_to_all_bound"] == 19.0
    assert r["time_to_bind_s"]["p50"] == 10.0 and r["time_to_bind_s"]["max"] == 19.0
    assert r["binds_per_s_by_bucket"] == [1.0, 1.0]
    assert r["kai_cpu_seconds"] == 12.0 and r["harness_cpu_share_of_kai"] == round(1 / 12, 3)
    assert r["limit"].startswith("kube-apiserver used 40")


def test_how_a_child_process_ended_is_told():
    """What `up` writes in a component's log when it ends at start (kube-state-metrics is started again)."""
    import signal
    import subprocess
    import time

    from kailab.runtimes.processes import how_it_ended

    killed = subprocess.Popen(["sleep", "30"])
    killed.send_signal(signal.SIGKILL)
    failed = subprocess.Popen(["sh", "-c", "exit 3"])
    time.sleep(0.5)
    assert how_it_ended(killed.pid) == "was killed by SIGKILL"
    assert how_it_ended(failed.pid) == "exited with status 3"
    assert how_it_ended(failed.pid) == "exited with status 3"  # reaped already: remembered, not lost
    assert how_it_ended(1) == "ended"  # not this process's child: not known


def test_a_started_process_keeps_its_exit_status_past_other_starts(tmp_path):
    """A dropped Popen is reaped by the next Popen (subprocess' clean-up) and its status lost; the
    lab's own starts keep theirs, so a death at start can say how it ended."""
    import subprocess
    import time

    from kailab.runtimes import processes

    rec = processes.start(tmp_path, "dies", ["sh", "-c", "exit 7"])
    time.sleep(0.3)
    for _ in range(3):
        subprocess.run(["true"])  # other children come and go
    processes.start(tmp_path, "other", ["sleep", "5"])
    assert processes.how_it_ended(rec.pid) == "exited with status 7"
    processes.stop_all(tmp_path)


def test_a_killed_child_is_told_as_killed_while_another_thread_holds_its_wait_lock(tmp_path):
    """CI: kube-state-metrics killed at start read "how is not known: not this process's child" — the
    Popen's poll said None while another thread's reap held its wait lock."""
    import signal
    import threading
    import time

    from kailab.runtimes import processes

    rec = processes.start(tmp_path, "sleeper", ["sleep", "30"])
    child = processes._CHILDREN[rec.pid]
    os.kill(rec.pid, signal.SIGKILL)
    time.sleep(0.2)
    held = threading.Event()

    def hold():
        with child._waitpid_lock:  # as a concurrent `start`'s reap holds it
            held.set()
            time.sleep(0.5)

    t = threading.Thread(target=hold)
    t.start()
    held.wait()
    try:
        assert processes.how_it_ended(rec.pid) == "was killed by SIGKILL"
    finally:
        t.join()
