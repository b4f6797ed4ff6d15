"""What `kailab top` costs while it watches a busy lab (`kailab bench top`): a lab of the large
fleet (1,000 nodes) with KAI, half its GPUs held by pods of four queues, a queue over its limit
leaving pods pending (KAI's reason written each cycle), and pods ending and arriving every second;
`kailab top` redrawing every second on a pseudo-terminal. Measured: the CPU of top's own process
(as a share of one core) and the refreshes it drew, over a window after its first picture."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time

from .. import workloads
from ..kube import Kube
from .. import labs
from ..labs import LabSpec
from .common import _record, machine

QUEUES = ("train", "serve", "research", "batch")
HEADING = "kailab top ·".encode()
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: every thread of the process


def _load(kube: Kube, ns: str, gpus: int) -> int:
    """Queues and the standing load; returns the pods made."""
    kube.apply(workloads.namespace(ns))
    kube.apply(workloads.queue("bench-root", {"quota": -1, "limit": -1}))
    for q in QUEUES:
        kube.apply(workloads.queue(q, {"quota": gpus // 8, "limit": -1}, parent="bench-root"))
    kube.apply(workloads.queue("capped", {"quota": 0, "limit": 8}, parent="bench-root"))
    pods = []
    for q in QUEUES:  # half the fleet's GPUs, in pods of 4
        pods += workloads.pods(f"{q}-held", ns, q, gpus // 2 // len(QUEUES) // 4, gpus=4)
    pods += workloads.pods("capped", ns, "capped", 40, gpus=1)  # 8 bound, 32 pending: OverLimit
    kube.create_many(pods)
    return len(pods)


def _churn(kube: Kube, ns: str, per_second: int, stopping: threading.Event, made: list[int]) -> None:
    """`per_second` one-GPU pods a second, each running 20 s: arrivals, binds and endings all along."""
    n = 0
    while not stopping.wait(1.0):
        batch = workloads.pods(f"churn-{n}", ns, QUEUES[n % len(QUEUES)], per_second, gpus=1, run_duration="20s")
        kube.create_many(batch)
        made[0] += len(batch)
        n += 1


def top_cost(fleet: str = "large", seconds: int = 60, churn: int = 10, interval: float = 1.0, echo=print) -> dict:
    name = f"bench-top-{os.getpid()}"
    stopping = threading.Event()
    try:
        echo(f"bringing up lab {name} (fleet {fleet}, KAI)")
        rec = labs.up(LabSpec(name=name, runtime="binary", fleet=fleet)).record
        kube = Kube(rec.kubeconfig)
        standing = _load(kube, "bench-top", rec.gpus)
        made = [0]
        churner = threading.Thread(target=_churn, args=(kube, "bench-top", churn, stopping, made), daemon=True)
        churner.start()
        echo(f"{standing} pods made; {churn} more a second; starting kailab top on a 200x60 pseudo-terminal")
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
        top = subprocess.Popen([sys.executable, "-m", "kailab.cli", "top", "--name", name, "--interval", str(interval)],
                               stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                               env={**os.environ, "TERM": "xterm-256color"})
        os.close(slave)
        frames: list[float] = []
        tail = bytearray()
        reader = threading.Thread(target=_count_frames, args=(master, frames, tail), daemon=True)
        reader.start()
        deadline = time.time() + 120
        while not frames and time.time() < deadline and top.poll() is None:
            time.sleep(0.2)
        if not frames:
            raise RuntimeError(f"kailab top drew nothing within 120 s (exit {top.poll()}): {_words(tail)}")
        time.sleep(10)  # past its first lists and the load's first binds
        cpu0, t0, f0 = _cpu_seconds(top.pid), time.monotonic(), len(frames)
        time.sleep(seconds)
        cpu1, t1, f1 = _cpu_seconds(top.pid), time.monotonic(), len(frames)
        window = frames[f0:f1]
        gaps = [b - a for a, b in zip(window, window[1:])]
        if top.poll() is not None:  # a figure of a top that died is no figure
            raise RuntimeError(f"kailab top ended during the window (exit {top.returncode}): {_words(tail)}")
        os.write(master, b"q")
        top.wait(timeout=30)
        pods = len(kube.list("v1", "Pod", "bench-top"))
        results = {
            "machine": machine(), "fleet": fleet, "nodes": rec.nodes, "gpus": rec.gpus, "interval_s": interval,
            "pods_standing": standing, "pods_churned_per_s": churn, "pods_at_end": pods, "window_s": round(t1 - t0, 1),
            "refreshes": f1 - f0, "refresh_period_mean_s": round(sum(gaps) / len(gaps), 3) if gaps else None,
            "refresh_period_max_s": round(max(gaps), 3) if gaps else None,
            "top_cpu_s": round(cpu1 - cpu0, 2), "top_core_share": round((cpu1 - cpu0) / (t1 - t0), 4),
            "top_exit": top.returncode,
        }
    finally:
        stopping.set()
        labs.down(name)
    text = (f"# kailab top on the {fleet} fleet ({results['nodes']} nodes, {results['gpus']} GPUs)\n\n"
            f"{standing} pods standing (half the GPUs held in four queues, 32 pending over a queue's limit), "
            f"{churn} one-GPU pods arriving a second and each ending after 20 s; `kailab top --interval {interval:g}` "
            f"on a 200x60 pseudo-terminal, measured over {results['window_s']} s after its first picture.\n\n"
            f"| figure | value |\n|---|---|\n"
            f"| refreshes drawn | {results['refreshes']} |\n"
            f"| refresh period, mean / max | {results['refresh_period_mean_s']} s / {results['refresh_period_max_s']} s |\n"
            f"| top's CPU | {results['top_cpu_s']} CPU-s = {results['top_core_share']:.1%} of one core |\n"
            f"| pods in the namespace at the end | {pods} |\n\n"
            f"Machine: {results['machine']['cores']} cores, {results['machine']['cpu']}.\n")
    return _record(results, "-top", text, None)


def _words(screen: bytearray) -> str:
    """The end of what top wrote, without the terminal's escapes (its traceback, when it died)."""
    import re

    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode(errors="replace"))
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())[-1500:]


def _count_frames(fd: int, frames: list[float], last: bytearray) -> None:
    """The moment of every picture top draws (its heading line), read from the terminal's side;
    `last` keeps the end of the output."""
    tail = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        data = tail + chunk
        last[:] = (bytes(last) + chunk)[-8192:]
        frames.extend(time.monotonic() for _ in range(data.count(HEADING)))
        tail = data[-(len(HEADING) - 1):]  # a heading split across two reads, counted once
