"""`make exercises` on labs side by side: wall, verdicts, CPU and memory per worker count."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from pathlib import Path
import subprocess
import sys
import tempfile

from .. import versions
from ..paths import evidence_dir
from .. import labs
from ..labs import LabSpec
from .common import _MachineSampler, _junit_items, _record, machine
from ..paths import exercises_dir


def exercises_side_by_side(workers: list[int], repeats: int = 1, fleet: str = "small",
                           out_dir: Path | None = None, echo=print) -> dict:
    """`make exercises` as it runs (`pytest exercises/ --kailab-lab NAME -n N --dist worksteal`: every
    exercise and replay, labs side by side) for each N in `workers` (0 = one lab, serially), on a
    lab brought up for it and down after: wall time, verdicts, each item's time, and what the whole
    machine spent (CPU seconds, busy cores, memory peak) — where the time goes, and what bounds it."""
    name = f"bench-{os.getpid()}-sbs"
    runs = []
    with tempfile.TemporaryDirectory(prefix="kailab-sbs-") as tmp:
        try:
            labs.up(LabSpec(name=name, runtime="binary", fleet=fleet))
            for n in workers:
                for r in range(repeats):
                    junit = Path(tmp) / f"junit-{n}-{r}.xml"
                    cmd = [sys.executable, "-m", "pytest", str(exercises_dir()), "--kailab-lab", name,
                           "-n", str(n), "--dist", "worksteal", "-p", "no:cacheprovider", "-q",
                           "--kailab-evidence", str(Path(tmp) / f"evidence-{n}-{r}"), f"--junitxml={junit}"]
                    echo(f"side by side: -n {n}, run {r + 1}/{repeats} ...")
                    start = time.monotonic()
                    with _MachineSampler() as sampler:
                        proc = subprocess.run(cmd, capture_output=True, text=True)
                    wall = round(time.monotonic() - start, 1)
                    items = _junit_items(junit)
                    run = {"workers": n, "run": r + 1, "wall_s": wall, "exit": proc.returncode,
                           "passed": sum(i["outcome"] == "passed" for i in items),
                           "failed": [i["item"] for i in items if i["outcome"] == "failed"],
                           "items": items, "sum_item_s": round(sum(i["seconds"] for i in items), 1),
                           **sampler.figures(wall)}
                    if proc.returncode != 0:  # a failure is investigated: its evidence outlives the bench
                        kept = evidence_dir() / f"bench-sbs-{os.getpid()}-n{n}-run{r + 1}"
                        if (Path(tmp) / f"evidence-{n}-{r}").is_dir():
                            shutil.copytree(Path(tmp) / f"evidence-{n}-{r}", kept, dirs_exist_ok=True)
                        kept.mkdir(parents=True, exist_ok=True)
                        (kept / "pytest-output.txt").write_text(proc.stdout + proc.stderr)
                        run["evidence"] = str(kept)
                        echo(f"  failed: {', '.join(run['failed']) or 'exit ' + str(proc.returncode)}; evidence kept in {kept}")
                    runs.append(run)
                    echo(f"  -n {n}: {wall} s, {run['passed']}/{len(items)} passed, "
                         f"{run['cpu_seconds']} CPU-s ({run['busy_cores_mean']} cores busy on average)")
        finally:
            labs.down(name)
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "fleet": fleet, "kai_version": versions.DEFAULT_KAI, "runs": runs}
    return _record(results, "-exercises-side-by-side", exercises_side_by_side_markdown(results), out_dir)


def exercises_side_by_side_markdown(r: dict) -> str:
    cores = r["machine"]["cores"]
    lines = [f"# `make exercises` on labs side by side, {r['date']}", "",
             f"`pytest exercises/ --kailab-lab <a {r['fleet']} lab> -n N --dist worksteal` (what `make exercises` runs), "
             f"KAI {r['kai_version']}, binary runtime; {cores} cores, {r['machine']['memory_gib']} GiB. CPU and memory "
             "are the whole machine's while the command ran (anything else running is in them). Recorded, not asserted.",
             "", "| -n | wall s | passed | failed | sum of item times s | CPU-s | busy cores mean / p90 | memory peak MiB |",
             "|---|---|---|---|---|---|---|---|"]
    for run in r["runs"]:
        lines.append(f"| {run['workers']} | {run['wall_s']} | {run['passed']}/{len(run['items'])} | "
                     f"{', '.join(run['failed']) or '-'} | {run['sum_item_s']} | {run['cpu_seconds']} | "
                     f"{run['busy_cores_mean']} / {run['busy_cores_p90']} | {run['memory_peak_mib']} |")
    if r["runs"]:
        counts = sorted({run["workers"] for run in r["runs"]})
        names = sorted({i["item"] for run in r["runs"] for i in run["items"]})
        lines += ["", "Passes per item over the runs (repeatability):", "",
                  "| item | " + " | ".join(f"-n {n}" for n in counts) + " |", "|---" * (len(counts) + 1) + "|"]
        for name in names:
            cells = []
            for n in counts:
                hits = [i for run in r["runs"] if run["workers"] == n for i in run["items"] if i["item"] == name]
                cells.append(f"{sum(i['outcome'] == 'passed' for i in hits)}/{len(hits)}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        kept = [run for run in r["runs"] if run.get("evidence")]
        if kept:
            lines += ["", "Evidence of the runs that failed: " + ", ".join(
                f"-n {run['workers']} #{run['run']}: `{run['evidence']}`" for run in kept)]
        floor = min(run["cpu_seconds"] for run in r["runs"]) / cores
        lines += ["", f"The CPU the run needs, spread over {cores} cores, is a floor no number of labs gets under: "
                      f"**{floor:.0f} s** (the least CPU-s of these runs / {cores})."]
        lines += ["", "Items (seconds; each run's own):", "", "| item | " + " | ".join(
            f"-n {run['workers']} #{run['run']}" for run in r["runs"]) + " |", "|---" * (len(r["runs"]) + 1) + "|"]
        for n in names:
            cells = []
            for run in r["runs"]:
                hit = next((i for i in run["items"] if i["item"] == n), None)
                cells.append("-" if hit is None else f"{hit['seconds']}" + ("" if hit["outcome"] == "passed" else f" ({hit['outcome']})"))
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
