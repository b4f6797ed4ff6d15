"""Start churn: many lab starts, a few at a time, optionally while a load runs beside them — how often
a start dies, of what, and which components `up` had to start again (#46: a KAI scheduler died at
start in CI once in hundreds of starts; this is where such a death is sought, and kept)."""

from __future__ import annotations

import datetime as dt
import re
import shlex
import statistics
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import KailabError
from .. import labs
from ..labs import LabSpec
from ..paths import PROJECT_ROOT, evidence_dir
from .common import _MachineSampler, _record, machine

_KEPT = re.compile(r"whole log is kept in (\S+?),")


class _Load:
    """`command` run again and again beside the starts (e.g. `make exercises`), until stopped."""

    def __init__(self, command: str | None, log: Path):
        self.command, self.log, self.runs = command, log, []
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        if self.command:
            self._thread.start()
        return self

    def _loop(self) -> None:
        with open(self.log, "ab") as log:
            while not self._stop.is_set():
                start = time.perf_counter()
                self._proc = subprocess.Popen(shlex.split(self.command), cwd=PROJECT_ROOT, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True)
                code = self._proc.wait()
                if not self._stop.is_set():
                    self.runs.append({"exit": code, "seconds": round(time.perf_counter() - start, 1)})

    def __exit__(self, *exc):
        self._stop.set()
        if self._proc and self._proc.poll() is None:
            import os
            import signal

            os.killpg(self._proc.pid, signal.SIGINT)  # pytest cleans its labs up on an interrupt
            try:
                self._proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
        if self.command:
            self._thread.join(timeout=200)


def _deaths_of(message: str) -> tuple[str | None, list[str]]:
    """The kept folder a failed start's error names, and its deaths.txt lines."""
    m = _KEPT.search(message.replace("\n", " "))
    if not m:
        return None, []
    kept = Path(m.group(1))
    try:
        return str(kept), [line for line in (kept / "deaths.txt").read_text().splitlines() if line.strip()]
    except OSError:
        return str(kept), []


def churn(starts: int, at_once: int = 2, fleet: str = "small", load: str | None = None,
          out_dir: Path | None = None, echo=print) -> dict:
    """`starts` KAI lab starts (with metrics, as `kailab up` makes them), `at_once` labs at a time,
    each brought down after it came up; with `load`, that command runs again and again beside them."""
    if starts < at_once:
        raise KailabError(f"bench churn {starts}: at least --at-once ({at_once}) starts")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rows: list[dict] = []
    lock = threading.Lock()
    counter = iter(range(1, starts + 1))
    stop = threading.Event()  # Ctrl-C: each slot ends after the start it is in, and its lab goes down

    def worker(slot: int) -> None:
        name = f"churn-{stamp.lower()}-{slot}"
        while not stop.is_set():
            with lock:
                i = next(counter, None)
            if i is None:
                return
            row = {"start": i, "slot": slot}
            t0 = time.perf_counter()
            try:
                rec = labs.up(LabSpec(name=name, runtime="binary", fleet=fleet)).record
                row.update(ok=True, retries=rec.start_retries)
            except KailabError as err:
                kept, deaths = _deaths_of(str(err))
                row.update(ok=False, error=str(err).splitlines()[0][:400], kept=kept, deaths=deaths, retries=[])
            row["up_s"] = round(time.perf_counter() - t0, 2)
            try:
                labs.down(name)
            except KailabError as err:
                row["down_error"] = str(err)[:300]
            with lock:
                rows.append(row)
                done = len(rows)
            what = "up" if row["ok"] else "DIED: " + ("; ".join(row["deaths"]) or row["error"])
            extra = f", retried {', '.join(r['component'] for r in row['retries'])}" if row["retries"] else ""
            echo(f"start {done}/{starts} (lab {slot}): {what} in {row['up_s']} s{extra}")

    out_dir = out_dir or PROJECT_ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    evidence_dir().mkdir(parents=True, exist_ok=True)
    load_log = evidence_dir() / f"churn-{stamp}-load.log"  # the load's own output: evidence, not a result
    t0 = time.perf_counter()
    sampler = _MachineSampler()
    interrupted = False
    with sampler, _Load(load, load_log) as beside:
        with ThreadPoolExecutor(max_workers=at_once) as pool:
            slots = [pool.submit(worker, slot) for slot in range(1, at_once + 1)]
            try:
                for f in slots:
                    f.result()
            except KeyboardInterrupt:
                interrupted = True
                stop.set()
                echo("interrupted: each lab slot stops after the start it is in")
                for f in slots:
                    f.result()
    wall = round(time.perf_counter() - t0, 1)
    rows.sort(key=lambda r: r["start"])
    died = [r for r in rows if not r["ok"]]
    causes = Counter(line for r in died for line in (r["deaths"] or [r["error"]]))
    retried = Counter(f"{x['component']}: {re.sub(r' [(]attempt .*', '', x['reason'])}" for r in rows for x in r["retries"])
    ups = [r["up_s"] for r in rows if r["ok"]]
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "fleet": fleet, "starts": len(rows), "starts_planned": starts, "interrupted": interrupted,
               "at_once": at_once, "load": load, "load_log": str(load_log) if load else None, "wall_s": wall,
               "load_runs": beside.runs, "machine_load": sampler.figures(wall),
               "ok": len(rows) - len(died), "died": len(died), "deaths_by_cause": dict(causes),
               "starts_with_retries": sum(1 for r in rows if r["retries"]), "retries_by_cause": dict(retried),
               "up_s_median": round(statistics.median(ups), 2) if ups else None,
               "up_s_max": max(ups) if ups else None, "rows": rows}
    return _record(results, "-churn", markdown(results), out_dir)


def markdown(r: dict) -> str:
    load = (f"while `{r['load']}` ran beside them ({len(r['load_runs'])} complete run(s), exit codes "
            f"{sorted(Counter(x['exit'] for x in r['load_runs']).items())})") if r["load"] else "with no load command of their own"
    ml = r["machine_load"]
    if ml.get("load_avg_mean") is not None:
        load += f"; the machine's load average {ml['load_avg_mean']} mean, {ml['load_avg_max']} at most"
    stopped = (f" (interrupted after {r['starts']} of {r['starts_planned']})"
               if r.get("interrupted") else "")
    lines = [f"# Start churn: {r['starts']} KAI lab starts{stopped} ({r['fleet']}, with metrics), {r['at_once']} at a time, "
             f"{r['date']}", "",
             f"{r['starts']} starts {load}, in {r['wall_s'] / 60:.1f} min on {r['machine']['cores']} cores "
             f"(busy cores: mean {r['machine_load']['busy_cores_mean']}, p90 {r['machine_load']['busy_cores_p90']}).", "",
             f"- **came up: {r['ok']} / {r['starts']}**; died at start: **{r['died']}**",
             f"- `up` median {r['up_s_median']} s, slowest {r['up_s_max']} s",
             f"- starts where `up` started a component again (recorded in the lab, never silent): "
             f"{r['starts_with_retries']}"]
    if r["deaths_by_cause"]:
        lines += ["", "| death at start (component: cause) | starts |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(r["deaths_by_cause"].items(), key=lambda kv: -kv[1])]
        lines += ["", "Every component's whole log of each died start is kept in:"]
        lines += [f"- start {x['start']}: {x['kept'] or 'none (it failed before any component started)'}"
                  for x in r["rows"] if not x["ok"]]
    if r["retries_by_cause"]:
        lines += ["", "| start retry (component: cause) | times |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(r["retries_by_cause"].items(), key=lambda kv: -kv[1])]
    return "\n".join(lines) + "\n"
