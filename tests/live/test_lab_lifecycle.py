"""Lab lifecycle on the binary runtime: down leaves nothing, interrupted/crashed ups are cleaned up,
bad environment input fails before anything starts, and two labs coexist."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from kailab.paths import evidence_dir, lab_dir
from kailab.runtimes import processes
from kailab.runtimes.base import LabRecord
from helpers import KAILAB

pytestmark = pytest.mark.lab


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*KAILAB, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def assert_nothing_left(name: str, ports: list[int] = ()) -> None:
    lab = lab_dir(name)
    assert not lab.exists(), f"{lab} still exists"
    assert processes.marked_pids(lab) == [], "lab processes still running"
    for port in ports:
        assert not listening(port), f"port {port} still listening"


def unique(stem: str) -> str:
    return f"{stem}-{os.getpid()}"


def test_down_stops_every_process_and_frees_every_port(infra_lab):
    """A second lab beside the session's: they must not touch each other."""
    name = unique("down")
    out = run("up", "--runtime", "binary", "--fleet", "tiny", "--without-kai", "--name", name)
    assert out.returncode == 0, out.stderr
    rec = LabRecord.load(name)
    assert rec.ports["kube-apiserver"] != infra_lab.ports["kube-apiserver"]
    pids = [r.pid for r in processes.records(rec.dir).values()]
    assert pids and all(r.alive() for r in processes.records(rec.dir).values())
    assert {"prometheus", "kube-state-metrics"} <= set(processes.records(rec.dir)), "metrics are on by default"
    ports = list(rec.ports.values())
    assert listening(rec.ports["kube-apiserver"])

    out = run("down", "--name", name)
    assert out.returncode == 0, out.stderr
    assert_nothing_left(name, ports)
    assert json.loads(run("status", "--json", "--name", name).stdout)["state"] == "absent"
    # the session's lab was not touched
    status = json.loads(run("status", "--json", "--name", infra_lab.name).stdout)
    assert status["state"] == "up"


def _start_up(name: str) -> subprocess.Popen:
    return subprocess.Popen([*KAILAB, "up", "--runtime", "binary", "--fleet", "tiny", "--without-kai",
                             "--name", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_process(name: str, component: str, proc: subprocess.Popen) -> None:
    pidfile = lab_dir(name) / "pids" / f"{component}.json"
    deadline = time.time() + 120
    while time.time() < deadline and not pidfile.exists():
        assert proc.poll() is None, f"kailab up ended early: {proc.stderr.read()}"
        time.sleep(0.05)
    assert pidfile.exists(), f"{component} never started"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_up_leaves_nothing_behind(sig):
    name = unique(f"intr-{sig.name.lower()}")
    proc = _start_up(name)
    _wait_for_process(name, "kube-apiserver", proc)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0
        assert "interrupted" in err
        assert_nothing_left(name)
    finally:
        run("down", "--name", name)
    # an interrupted start is not a failed one: it keeps no logs
    assert not list(evidence_dir().glob(f"failed-starts/*-{name}"))


def test_down_after_a_crashed_up_reaps_its_processes():
    """kailab killed -9 half-way through `up`: the processes live on; `down` finds and stops them."""
    name = unique("crash")
    proc = _start_up(name)
    _wait_for_process(name, "kube-apiserver", proc)
    proc.kill()
    proc.wait(timeout=10)
    lab = lab_dir(name)
    assert processes.marked_pids(lab), "expected the half-started lab's processes to outlive kailab"
    out = run("down", "--name", name)
    assert out.returncode == 0, out.stderr
    assert_nothing_left(name)


def test_down_finds_strays_even_without_pid_records():
    name = unique("stray")
    lab = lab_dir(name)
    rec = processes.start(lab, "sleeper", ["sleep", "300"])
    (lab / "pids" / "sleeper.json").unlink()  # as if kailab died before writing its record
    assert rec.alive()
    out = run("down", "--name", name)
    assert out.returncode == 0, out.stderr
    assert not rec.alive()
    assert_nothing_left(name)


def test_port_already_taken_is_refused_before_anything_starts():
    name = unique("port")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = run("up", "--runtime", "binary", "--fleet", "tiny", "--without-kai", "--name", name,
                  "--api-port", str(port))
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert lines[-1] == (f"kailab: error: port {port} on 127.0.0.1 is already in use: choose another "
                         "with --api-port, or stop what listens there")
    assert_nothing_left(name)


def test_missing_go_toolchain_is_one_clear_line(tmp_path):
    name = unique("nogo")
    out = run("up", "--runtime", "binary", "--fleet", "tiny", "--without-kai", "--name", name,
              env={"KAILAB_CACHE": str(tmp_path / "empty-cache"), "KAILAB_GO": str(tmp_path / "no-go")})
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1].startswith("kailab: error: Go toolchain not found: install Go")
    assert_nothing_left(name)


def test_cached_binaries_are_never_rebuilt(tmp_path):
    """With every binary cached, `tools build` needs no Go toolchain at all."""
    out = run("tools", "build", "--without-kai", env={"KAILAB_GO": str(tmp_path / "no-go")})
    assert out.returncode == 0, out.stderr
    listing = run("tools", "list").stdout
    for component in ("etcd", "kubernetes", "kwok"):
        assert component in listing


def test_up_repairs_a_lab_whose_apiserver_and_kwok_died():
    name = unique("repair")
    assert run("up", "--runtime", "binary", "--fleet", "tiny", "--without-kai", "--name", name).returncode == 0
    try:
        recs = processes.records(lab_dir(name))
        for comp in ("kube-apiserver", "kwok"):
            os.kill(recs[comp].pid, signal.SIGKILL)
        deadline = time.time() + 10
        while time.time() < deadline and recs["kube-apiserver"].alive():
            time.sleep(0.1)
        status = run("status", "--json", "--name", name)
        assert status.returncode != 0
        info = json.loads(status.stdout)
        assert info["state"] == "broken"
        assert info["components"]["kube-apiserver"]["state"] == "exited"
        up = run("up", "--runtime", "binary", "--fleet", "tiny", "--without-kai", "--name", name)
        assert up.returncode == 0, up.stderr
        # what up restarted: the two killed, and any other that died meanwhile — never etcd. The controller
        # manager exits if the API server dies while it still builds its controllers ("failed to wait for
        # apiserver being healthy", seen by hand a few seconds after up)
        said = re.search(r"was broken: restarted ([\w\-, ]+)", up.stderr)
        assert said, up.stderr
        restarted = set(said.group(1).split(", "))
        assert {"kube-apiserver", "kwok"} <= restarted <= set(info["components"]) - {"etcd"}, up.stderr
        info = json.loads(run("status", "--json", "--name", name).stdout)
        assert info["state"] == "up" and info["nodes"] == 2 and info["gpus"] == 8  # etcd kept the fleet
    finally:
        run("down", "--name", name)
    assert_nothing_left(name)


@pytest.mark.kai
def test_a_component_that_dies_during_up_keeps_every_whole_log_past_down(tmp_path):
    """A KAI process dies while the lab starts (as the scheduler did in CI): the error says how, in one
    line above the log tail, and names a folder that still holds every component's whole log after
    the `down` a replay's clean-up runs (the CI run had lost them)."""
    name = unique("dies")
    env = {**os.environ, "KAILAB_EVIDENCE": str(tmp_path / "evidence")}
    proc = subprocess.Popen([*KAILAB, "up", "--runtime", "binary", "--fleet", "tiny", "--without-metrics",
                             "--name", name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _wait_for_process(name, "scheduler", proc)
        log = lab_dir(name) / "logs" / "scheduler.log"
        deadline = time.time() + 60
        while time.time() < deadline and not (log.exists() and log.stat().st_size):  # its Go runtime is up
            time.sleep(0.02)
        pid = processes.records(lab_dir(name))["scheduler"].pid
        os.kill(pid, signal.SIGQUIT)  # a Go process prints its goroutines and exits: a crash report
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "scheduler exited while waiting for" in err and "— signal: SIGQUIT: quit (exited with status 2)" in err, err
    kept = next((tmp_path / "evidence" / "failed-starts").glob(f"*-{name}"))
    assert f"every component's whole log is kept in {kept}" in err.replace("\n", " ")
    assert run("down", "--name", name, env={"KAILAB_EVIDENCE": str(tmp_path / "evidence")}).returncode == 0
    assert_nothing_left(name)
    log = (kept / "scheduler.log").read_text()
    assert "SIGQUIT: quit" in log and len(log.splitlines()) > 15  # the whole log, not the error's tail
    assert {"etcd.log", "kube-apiserver.log", "binder.log"} <= {p.name for p in kept.iterdir()}
    assert "scheduler: signal: SIGQUIT: quit" in (kept / "deaths.txt").read_text()


@pytest.mark.kai
def test_a_start_retry_is_recorded_and_counted_in_the_run(tmp_path):
    """kube-state-metrics is started again when it dies at start (it gives up on a slow API server):
    that retry is never silent — the lab's record and status name it with its cause, and a run on the
    lab writes it into its evidence and counts it in its summary."""
    name = unique("retry")
    env = {**os.environ, "KAILAB_EVIDENCE": str(tmp_path / "evidence")}
    proc = subprocess.Popen([*KAILAB, "up", "--runtime", "binary", "--fleet", "small", "--name", name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _wait_for_process(name, "kube-state-metrics", proc)
        os.kill(processes.records(lab_dir(name))["kube-state-metrics"].pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        retries = json.loads(run("status", "--json", "--name", name).stdout)["start_retries"]
        # the one this test caused; under CI's load another component may need a retry of its own
        # (kube-controller-manager exiting before the API server answered, seen there): recorded too
        ours = [r for r in retries if r["component"] == "kube-state-metrics"]
        assert len(ours) == 1, retries
        assert "killed by SIGKILL" in ours[0]["reason"] and "attempt 1 of" in ours[0]["reason"], retries
        assert all(r["reason"] and r["at"] for r in retries), retries
        # borrow: any run on the lab shows it; gang's 5 s gang check is the run's own subject, tested elsewhere
        out = run("run", "borrow", "--name", name, "--evidence", str(tmp_path / "runs"))
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"lab start retries: {len(retries)}" in out.stdout, out.stdout
        assert "kube-state-metrics: signal: killed by SIGKILL" in out.stdout, out.stdout
        evidence = next((tmp_path / "runs").glob("*borrow*"))
        verdict = json.loads((evidence / "verdict.json").read_text())
        assert verdict["lab_start_retries"] == retries
        assert out.stdout.count(str(evidence)) == 1, out.stdout  # once, in the summary
    finally:
        if proc.poll() is None:
            proc.kill()
        run("down", "--name", name)
    assert_nothing_left(name)


def test_a_lab_held_as_the_object_answers_for_itself_and_is_down_when_its_block_ends():
    """`labs.up` gives the Lab callers hold (its record, runtime and stack; no record passed back in);
    `labs.open` finds the same lab by name; leaving the block takes it down, leaving nothing."""
    from kailab import labs
    from kailab.labs import ControlsProcesses, LabSpec

    name = f"object-{os.getpid()}"
    with labs.running(LabSpec(name=name, runtime="binary", fleet="tiny", stack="none", metrics=False)) as lab:
        pids = {n: r.pid for n, r in processes.records(lab.record.dir).items()}
        report = lab.status()
        assert report["state"] == "up" and report["stack"]["name"] == "none" and lab.record.kai_version == "none"
        assert lab.can(ControlsProcesses) and lab.scheduler_components() == set()
        assert labs.open(name).record == lab.record
        lab.kill("kwok")
        assert labs.open(name).status()["components"]["kwok"]["state"] != "running"
        lab.restart("kwok")
        assert lab.status()["components"]["kwok"]["state"] == "running"
        pids["kwok-again"] = processes.records(lab.record.dir)["kwok"].pid
    assert LabRecord.load(name) is None and not lab_dir(name).exists()
    assert all(not processes.pid_alive(pid) for pid in pids.values()), pids
