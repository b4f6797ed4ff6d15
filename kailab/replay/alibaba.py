"""Alibaba's GPU-sharing cluster trace (alibaba/clusterdata, cluster-trace-gpu-v2023) as a kailab
fleet, trace and designs.

The data is never copied into the project: `kailab trace import alibaba-gpu-2023 PATH` reads the
user's clone (or a bare mirror of it) and writes files for them. Its files:
  csv/openb_node_list_gpu_node.csv   sn,cpu_milli,memory_mib,gpu,model          (1,213 GPU nodes)
  csv/openb_pod_list_<tasks>.csv     name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,
                                     pod_phase,creation_time,deletion_time,scheduled_time
How a row becomes a trace job (one pod each):
  gpus        num_gpu, or gpu_milli/1000 of one GPU when num_gpu is 1 and gpu_milli < 1000 (a KAI fraction)
  gpu_models  gpu_spec ('V100M16|V100M32'): node affinity on the node's GPU product, which is the model
  priority    by QoS (QOS_PRIORITY below)
  arrival_s   creation_time - the first creation_time
  duration_s  deletion_time - scheduled_time; a pod never scheduled in the cluster (pod_phase Pending,
              no scheduled_time) runs from its creation, as demand that was there; a pod still running
              at the trace's end (deletion_time = the trace's last time) is cut there; 0 s becomes 1 s.
Every choice is counted in import.json, so a reader sees what the import did.

`kailab trace source alibaba-gpu-2023 PATH` registers the user's clone as KAI's source is: a bare
mirror in kailab's cache (it outlives the clone, and a CI run on a fresh clone of kailab keeps the
cache), after which the name alibaba-gpu-2023 stands for a PATH.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import time
from collections import Counter
from pathlib import Path

import yaml

from ..errors import InputError, KailabError
from ..inputs import one_line
from ..paths import cache_dir
from ..sources import copy_mirror, git
from .trace import TraceJob, load_trace, write_trace

FORMAT = "alibaba-gpu-2023"
REPOSITORY = "github.com/alibaba/clusterdata"
REGISTER = f"kailab trace source {FORMAT} PATH"
FOLDER = "cluster-trace-gpu-v2023"
NODE_FILE = "csv/openb_node_list_gpu_node.csv"
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
               "creation_time", "deletion_time", "scheduled_time")
# QoS -> KAI's chart's priority classes: latency-sensitive and guaranteed pods as KAI's non-preemptible
# inference class, burstable as preemptible build, best-effort as train (the lowest, preemptible)
QOS_PRIORITY = {"LS": "inference", "Guaranteed": "inference", "Burstable": "build-preemptible", "BE": "train"}
# memory per GPU for the fake devices (fractions are of a whole GPU, so this is only what nodes show);
# G1-G3 are Alibaba's undisclosed models: 16 GiB is assumed
PLACEMENTS = ("binpack", "spread")  # the designs an import writes, one queue owning the fleet each
GPU_MEMORY_MIB = {"P100": 16384, "T4": 15360, "V100M16": 16384, "V100M32": 32768, "A10": 23028}
DEFAULT_GPU_MEMORY_MIB = 16384


class Source:
    """The trace's folder in a clone, or the same files in a bare mirror (read with git show)."""

    def __init__(self, path: Path):
        self.path = path
        self.git_dir: Path | None = None
        self.folder: Path | None = None
        for cand in (path, path / FOLDER, path.parent):
            if (cand / NODE_FILE).is_file():
                self.folder = cand
                return
        if (path / "HEAD").is_file() and (path / "objects").is_dir() or (path / ".git").exists():
            git_dir = path if (path / "HEAD").is_file() else path / ".git"
            if self._git_show(git_dir, f"{FOLDER}/{NODE_FILE}") is not None:
                self.git_dir = git_dir
                return
        raise InputError(path, "", f"no {FOLDER}/{NODE_FILE} here",
                         "point at a clone of alibaba/clusterdata, its cluster-trace-gpu-v2023 folder, or a bare mirror")

    @staticmethod
    def _git_show(git_dir: Path, rel: str) -> str | None:
        return git(git_dir, "show", f"HEAD:{rel}", check=False) or None  # none of its files is empty

    def where(self, rel: str) -> Path:
        return (self.folder / rel) if self.folder else Path(f"{self.git_dir}:{FOLDER}/{rel}")

    def read(self, rel: str) -> str:
        if self.folder:
            p = self.folder / rel
            if not p.is_file():
                raise InputError(p, "", "file not found", f"task lists: {', '.join(self.task_lists()) or 'none'}")
            return p.read_text(encoding="utf-8")
        text = self._git_show(self.git_dir, f"{FOLDER}/{rel}")
        if text is None:
            raise InputError(self.where(rel), "", "not in the mirror's HEAD", f"task lists: {', '.join(self.task_lists())}")
        return text

    def task_lists(self) -> list[str]:
        if self.folder:
            names = [p.name for p in (self.folder / "csv").glob("openb_pod_list_*.csv")]
        else:
            names = git(self.git_dir, "ls-tree", "--name-only", f"HEAD:{FOLDER}/csv/", check=False).split()
        return sorted(n[len("openb_pod_list_"):-4] for n in names if n.startswith("openb_pod_list_") and n.endswith(".csv"))


def mirror() -> Path:
    return cache_dir() / "traces" / FORMAT / "repo.git"


def _record_path() -> Path:
    return mirror().parent / "source.json"


def register(path: str | Path) -> dict:
    """Mirror the user's clone (or bare mirror) of alibaba/clusterdata into kailab's cache; it must
    hold the trace at its HEAD. Replaces an earlier registration only once the new copy is whole."""
    src = Path(path).expanduser()
    if not src.exists():
        raise KailabError(f"{path}: no such directory (give a clone or bare mirror of {REPOSITORY})")
    src = src.resolve()
    if (src / "HEAD").is_file() and (src / "objects").is_dir():
        git_dir = src
    elif (src / ".git").exists():
        git_dir = src / ".git"
    else:
        raise KailabError(f"{src}: not a git repository: register a clone or bare mirror of {REPOSITORY} "
                          f"(a plain folder is read where it is: `kailab trace import {FORMAT} FOLDER`)")
    if not holds_trace(git_dir):
        raise KailabError(f"{src}: its HEAD has no {FOLDER}/{NODE_FILE}: not a clone of {REPOSITORY}, or "
                          "one without the trace's files")
    copy_mirror(git_dir, mirror(), src)
    record = {"format": FORMAT, "origin": str(src), "commit": git(mirror(), "rev-parse", "HEAD").strip(),
              "registered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "task_lists": Source(mirror()).task_lists()}
    _record_path().write_text(json.dumps(record, indent=2))
    return record


def holds_trace(git_dir: Path) -> bool:
    """Whether a git directory's HEAD holds the trace (how `tools source --from` knows a clone of it)."""
    return Source._git_show(git_dir, f"{FOLDER}/{NODE_FILE}") is not None


def registered() -> dict | None:
    """The registration record, or None when no clone is registered (or its copy is gone)."""
    try:
        record = json.loads(_record_path().read_text())
    except (OSError, ValueError):
        return None
    return record if (mirror() / "HEAD").is_file() else None


def not_registered() -> str:
    return f"no {FORMAT} trace is registered: `{REGISTER}` (a clone or bare mirror of {REPOSITORY})"


def resolve(where: str | Path) -> Path:
    """A path to the trace: `where` itself when it exists, the registered mirror for the name
    alibaba-gpu-2023."""
    path = Path(where).expanduser()
    if path.exists() or str(where) != FORMAT:
        return path
    if registered() is None:
        raise KailabError(not_registered())
    return mirror()


def _rows(text: str, path: Path, columns: tuple[str, ...]) -> list[dict]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(path, f"header column {missing[0]}", "missing", f"the format's columns: {','.join(columns)}")
    rows = []
    for raw in reader:
        if None in raw:
            raise InputError(path, f"row {len(rows) + 1}", "more cells than columns", "quote a comma or remove the cell")
        rows.append({k.strip(): (v or "").strip() for k, v in raw.items()})
    if not rows:
        raise InputError(path, "rows", "no rows", "the file has only a header")
    return rows


def _int(path: Path, n: int, row: dict, key: str, low: int = 0, high: int | None = None,
         empty: int | None = None) -> int:
    v = row.get(key, "")
    if v == "" and empty is not None:
        return empty
    try:
        out = int(float(v))
        if out != float(v):
            raise ValueError
    except ValueError:
        raise InputError(path, f"row {n}, field {key}", f"{one_line(v)!r} is not a whole number",
                         "write a whole number") from None
    if out < low or (high is not None and out > high):
        raise InputError(path, f"row {n}, field {key}", f"{out} is out of range",
                         f"between {low} and {high}" if high is not None else f">= {low}")
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def fleet_from_nodes(text: str, path: Path, name: str, sample: int = 1) -> dict:
    """Pools of identical nodes (model, GPUs, CPU, memory); with `sample` N, 1/N of each pool's nodes
    (rounded; a model that would vanish keeps one node, so constrained tasks still have somewhere)."""
    pools: Counter = Counter()
    for n, row in enumerate(_rows(text, path, NODE_COLUMNS), 1):
        gpus = _int(path, n, row, "gpu", 0, 64)
        cpu, mem = _int(path, n, row, "cpu_milli", 1000), _int(path, n, row, "memory_mib", 1024)
        model = row["model"]
        if gpus and not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", model):
            raise InputError(path, f"row {n}, field model", f"{one_line(model)!r} cannot be a GPU product label",
                             "letters, digits, '-', '_', '.'")
        pools[(model if gpus else "cpu", gpus, cpu // 1000, mem // 1024)] += 1
    kept = {k: round(c / sample) for k, c in pools.items()}
    for model in {k[0] for k in pools}:
        if not any(kept[k] for k in kept if k[0] == model):
            biggest = max((k for k in pools if k[0] == model), key=lambda k: pools[k])
            kept[biggest] = 1
    out = []
    for (model, gpus, cpu, mem), count in sorted(kept.items(), key=lambda kv: (-kv[1], kv[0])):
        if not count:
            continue
        pool = {"name": _slug(f"{model}-{gpus}g-{cpu}c-{mem}g"), "count": count, "gpus": gpus,
                "cpu": cpu, "memoryGiB": mem}
        if gpus:
            pool |= {"product": model, "gpuMemoryMiB": GPU_MEMORY_MIB.get(model, DEFAULT_GPU_MEMORY_MIB)}
        out.append(pool)
    nodes, gpus = sum(p["count"] for p in out), sum(p["count"] * p["gpus"] for p in out)
    return {"name": name, "description": f"Alibaba cluster-trace-gpu-v2023's GPU nodes"
            + (f", 1/{sample} of each pool" if sample > 1 else "") + f": {nodes} nodes, {gpus} GPUs "
            "(written by kailab trace import; the data stays in the user's clone)", "pools": out}


def jobs_from_pods(text: str, path: Path, queue: str, sample: int = 1, seed: int = 1,
                   counts: Counter | None = None) -> list[TraceJob]:
    """One trace job per pod row, in arrival order; with `sample` N a seeded 1/N of the rows."""
    counts = counts if counts is not None else Counter()
    rows = _rows(text, path, POD_COLUMNS)
    parsed = []
    for n, row in enumerate(rows, 1):
        num_gpu = _int(path, n, row, "num_gpu", 0, 64)
        milli = _int(path, n, row, "gpu_milli", 0, 1000, empty=0)
        if num_gpu == 1 and 0 < milli < 1000:
            gpus = milli / 1000
        elif num_gpu >= 1 and milli not in (0, 1000):
            raise InputError(path, f"row {n}, field gpu_milli", f"{milli} for {num_gpu} GPUs",
                             "a part of a GPU only when num_gpu is 1")
        else:
            gpus = float(num_gpu)
        qos = row["qos"]
        if qos not in QOS_PRIORITY:
            raise InputError(path, f"row {n}, field qos", f"unknown QoS {one_line(qos)!r}",
                             f"one of {', '.join(QOS_PRIORITY)}")
        created = _int(path, n, row, "creation_time")
        deleted = _int(path, n, row, "deletion_time")
        scheduled = _int(path, n, row, "scheduled_time", empty=-1)
        if deleted < created:
            raise InputError(path, f"row {n}, field deletion_time", f"{deleted} is before creation_time {created}",
                             "a pod is deleted after it is created")
        spec = row.get("gpu_spec", "")
        name = row["name"].lower()
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?", name):
            raise InputError(path, f"row {n}, field name", f"{one_line(row['name'])!r} is not a valid name",
                             "lower-case letters, digits, '-'; at most 40")
        parsed.append((n, name, created, deleted, scheduled, gpus, qos, spec, row))
    last = max(p[3] for p in parsed)
    first = min(p[2] for p in parsed)
    if sample > 1:
        parsed = sorted(random.Random(seed).sample(parsed, max(1, round(len(parsed) / sample))), key=lambda p: p[0])
    jobs = []
    for n, name, created, deleted, scheduled, gpus, qos, spec, row in sorted(parsed, key=lambda p: (p[2], p[0])):
        start = scheduled if scheduled >= 0 else created
        if scheduled < 0:
            counts["never scheduled in the cluster: run from creation"] += 1
        if deleted == last:
            counts["still running at the trace's end: cut there"] += 1
        duration = deleted - start
        if duration <= 0:
            counts["0 s long: given 1 s"] += 1
            duration = 1
        if spec and not gpus:
            counts["GPU model on a pod without GPUs: dropped"] += 1
            spec = ""
        counts[f"qos {qos} -> {QOS_PRIORITY[qos]}"] += 1
        if 0 < gpus < 1:
            counts["a fraction of one GPU"] += 1
        jobs.append(TraceJob(name=name, arrival_s=float(created - first), queue=queue, pods=1, gpus=gpus,
                             duration_s=float(duration), priority=QOS_PRIORITY[qos],
                             cpu_milli=_int(path, n, row, "cpu_milli"), memory_mib=_int(path, n, row, "memory_mib"),
                             gpu_models=spec, row=n))
    counts["pods"] = len(jobs)
    return jobs


def design(name: str, queue: str, gpus: int, placement: str) -> dict:
    return {"design": name, "description": f"one queue owning the whole fleet; KAI places by {placement}",
            "queues": {queue: {"gpu": {"quota": gpus}}}, "scheduler": {"placement": placement}}


def import_trace(source: Path, out: Path, tasks: str = "default", sample: int = 1, seed: int = 1,
                 queue: str = "openb") -> dict:
    """Write fleet.yaml, trace.csv, design-binpack.yaml, design-spread.yaml and import.json under `out`;
    nothing is written when any row is refused."""
    if sample < 1:
        raise KailabError(f"--sample {sample}: give N >= 1 (1/N of the nodes and tasks)")
    src = Source(resolve(source))
    node_rel, pod_rel = NODE_FILE, f"csv/openb_pod_list_{tasks}.csv"
    if tasks not in src.task_lists():
        raise InputError(src.where(pod_rel), "", f"no task list {tasks!r}",
                         f"--tasks one of {', '.join(src.task_lists())}")
    suffix = f"-1of{sample}" if sample > 1 else ""
    fleet_name = f"alibaba-{_slug(tasks)}{suffix}"[:40].rstrip("-")
    fleet = fleet_from_nodes(src.read(node_rel), src.where(node_rel), fleet_name, sample)
    counts: Counter = Counter()
    jobs = jobs_from_pods(src.read(pod_rel), src.where(pod_rel), queue, sample, seed, counts)
    gpus = sum(p["count"] * p["gpus"] for p in fleet["pools"])
    products = {p["product"] for p in fleet["pools"] if p["gpus"]}
    for j in jobs:  # what the fleet cannot hold is refused here, not minutes into a replay
        if j.gpu_models and not set(j.gpu_models.split("|")) & products:
            raise InputError(src.where(pod_rel), f"row {j.row}, field gpu_spec", f"{j.gpu_models!r}: no node has "
                             "any of these models", f"the node list's models: {', '.join(sorted(products))}")
    out.mkdir(parents=True, exist_ok=True)
    written = {"fleet": out / "fleet.yaml", "trace": out / "trace.csv",
               "binpack": out / "design-binpack.yaml", "spread": out / "design-spread.yaml"}
    written["fleet"].write_text(yaml.safe_dump(fleet, sort_keys=False))
    write_trace(written["trace"], jobs)
    for placement in PLACEMENTS:
        written[placement].write_text(yaml.safe_dump(design(placement, queue, gpus, placement), sort_keys=False))
    peak, peak_at = load_trace(written["trace"]).peak_gpus_at_once()  # what was written reads back
    summary = {"format": FORMAT, "source": str(src.where(pod_rel)),
               **({"commit": git(src.git_dir, "rev-parse", "HEAD").strip()} if src.git_dir else {}), "tasks": tasks, "sample": sample, "seed": seed,
               "nodes": sum(p["count"] for p in fleet["pools"]), "gpus": gpus,
               "gpus_requested": round(sum(j.gpus_requested for j in jobs), 3),
               # with the trace's own times (a replay with departures): its load on the fleet
               "gpus_at_once_peak": peak, "gpus_at_once_peak_at_s": peak_at,
               "counts": dict(sorted(counts.items())), "files": {k: str(v) for k, v in written.items()}}
    (out / "import.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
