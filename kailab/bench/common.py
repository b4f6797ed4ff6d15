"""What every benchmark shares: the machine it ran on, timing, recording results, sampling the machine."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import tempfile
import time
from pathlib import Path
import subprocess
import threading
import xml.etree.ElementTree as ET

from ..paths import PROJECT_ROOT, cache_dir, evidence_dir


def machine() -> dict:
    mem_kb = 0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cores": os.cpu_count(), "memory_gib": round(mem_kb / 1048576), "cpu": cpu,
            "python": platform.python_version(), "kernel": platform.release()}


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return round(time.perf_counter() - start, 2)


def portable(text: str) -> str:
    """`text` with no absolute path of this machine: the project's own paths relative to it
    (evidence/fill-…), kailab's evidence and cache folders elsewhere as $KAILAB_EVIDENCE/… and
    $KAILAB_CACHE/…, a temporary folder as $TMPDIR/<its prefix>-*, the home folder as ~. A record is
    committed, and read on machines where none of those paths exists."""
    tmp = re.escape(tempfile.gettempdir().rstrip("/"))
    text = re.sub(tmp + r"/(tmp|[A-Za-z][\w.-]*?-)?\w{8}(?=/|\b)",
                  lambda m: f"$TMPDIR/{m.group(1) or 'tmp'}*", text)  # mkdtemp's random names
    bases = {f"{PROJECT_ROOT}/": "", f"{cache_dir()}/": "$KAILAB_CACHE/", f"{Path.home()}/": "~/"}
    if not evidence_dir().resolve().is_relative_to(PROJECT_ROOT):  # inside the project: evidence/… as it is
        bases[f"{evidence_dir()}/"] = "$KAILAB_EVIDENCE/"
    for base in sorted(bases, key=len, reverse=True):  # the longest first: the evidence folder before the project
        if len(base) > 2:  # never "/" itself (a home or root of "/")
            text = text.replace(base, bases[base])
    return text


def _record(results: dict, suffix: str, text: str, out_dir: Path | None) -> dict:
    """Write a mode's results as bench/results/<date><suffix>.json and .md (paths in them `portable`);
    returns them, with where they went."""
    out_dir = out_dir or PROJECT_ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    results.setdefault("commit", _commit())  # what a figure rendered from it says it measured
    stem = dt.date.today().isoformat() + suffix
    n = 1
    while (out_dir / f"{stem}.json").exists() and not suffix.endswith("-quick"):  # never over a recorded result
        n += 1
        stem = f"{dt.date.today().isoformat()}{suffix}-{n}"
    (out_dir / f"{stem}.json").write_text(portable(json.dumps(results, indent=2)) + "\n")
    (out_dir / f"{stem}.md").write_text(portable(text))
    results["written"] = str(out_dir / f"{stem}.json")
    return results


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


class _MachineSampler:
    """The whole machine's CPU (busy cores, from /proc/stat) and memory in use (MemTotal -
    MemAvailable) sampled once a second (`every`) while a command runs: what labs side by side cost."""

    def __init__(self, every: float = 1.0):
        self.every = every
        self.stop = threading.Event()
        self.busy_cores: list[float] = []
        self.mem_mib: list[int] = []
        self.load: list[float] = []  # the kernel's 1-minute load average: runnable tasks, beyond the cores too
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _cpu() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields) - idle, sum(fields)

    @staticmethod
    def _mem() -> int:
        info = {}
        with open("/proc/meminfo") as f:
            for line in f:
                key, value = line.split(":", 1)
                info[key] = int(value.split()[0])
        return (info["MemTotal"] - info["MemAvailable"]) // 1024

    def _run(self) -> None:
        cores = os.cpu_count() or 1
        busy0, total0 = self._cpu()
        while not self.stop.wait(self.every):
            busy, total = self._cpu()
            if total > total0:
                self.busy_cores.append(round(cores * (busy - busy0) / (total - total0), 2))
            busy0, total0 = busy, total
            self.mem_mib.append(self._mem())
            with open("/proc/loadavg") as f:
                self.load.append(float(f.read().split()[0]))

    def __enter__(self):
        self.mem_before = self._mem()
        self.cpu_before = self._cpu()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        busy, total = self._cpu()
        ticks = os.sysconf("SC_CLK_TCK")
        self.cpu_seconds = round((busy - self.cpu_before[0]) / ticks, 1)
        return False

    def figures(self, wall: float) -> dict:
        return {"cpu_seconds": self.cpu_seconds, "busy_cores_mean": round(self.cpu_seconds / wall, 2) if wall else 0,
                "busy_cores_p90": round(sorted(self.busy_cores)[int(0.9 * (len(self.busy_cores) - 1))], 2)
                if self.busy_cores else 0,
                "memory_peak_mib": max(0, max(self.mem_mib, default=self.mem_before) - self.mem_before),
                # how oversubscribed the cores were (whatever ran: this benchmark's labs and anything beside them)
                "load_avg_mean": round(sum(self.load) / len(self.load), 1) if self.load else None,
                "load_avg_max": max(self.load, default=None)}


def _junit_items(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "failed" if case.find("failure") is not None or case.find("error") is not None else \
            "skipped" if case.find("skipped") is not None else "passed"
        out.append({"item": case.get("name"), "seconds": round(float(case.get("time") or 0), 1), "outcome": outcome})
    return out
