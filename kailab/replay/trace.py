"""The replay trace: one job per row, in CSV or YAML, checked row by row.

Columns (CSV header or YAML keys; times in seconds of trace time):
  arrival_s    when the job is submitted, from the trace's start (>= 0; rows sorted by it)
  queue        the leaf queue it is submitted to (must be a leaf queue of every design replayed)
  pods         how many pods (>= 1)
  gpus         GPUs per pod: a whole number (0 allowed), or a fraction of one GPU in (0, 1)
  duration_s   how long each pod runs once started (> 0); an evicted pod that comes back starts over
optional:
  name         the job's name (default job-<row>); unique
  priority     KAI priority class (default train)
  min_members  gang size: KAI starts the job only with this many pods at once (default 1 = no gang)
  topology_required / topology_preferred   a topology level label (KAI's topology annotations; the
               lab's fleet must have a topology)
  cpu_milli    CPU each pod requests, in milli-CPU (default 100)
  memory_mib   memory each pod requests, in MiB (default 128)
  gpu_models   GPU products a pod may run on, '|'-separated (node affinity on the node's
               nvidia.com/gpu.product label; at least one must be a product of the lab's fleet)
  kind         what the team submits (default job): job (a Kubernetes Job), pytorchjob (a Kubeflow
               PyTorchJob: a master and pods-1 workers, gang-scheduled whole unless min_members says a
               smaller minimum), jobset (a JobSet of one replicated Job of `pods` pods), rayjob (a KubeRay
               RayJob whose RayCluster is a head and pods-1 workers, gang-scheduled whole unless
               min_members says less; kailab ends it by deleting it once its pods have run duration_s:
               KubeRay's own end needs Ray's dashboard, which no fake node runs), raycluster (that
               RayCluster alone, ended by kailab the same way: it serves until deleted), lws (a
               LeaderWorkerSet of one group of `pods` pods, a leader and pods-1 workers, ended by kailab
               the same way); the lab runs their operators (docs/operators.md)

A bad row is one line naming the file, the row and the field, and how to fix it.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import replace, asdict, dataclass
from pathlib import Path
import yaml

from ..errors import InputError
from ..inputs import is_file, one_line, read_yaml

REQUIRED = ("arrival_s", "queue", "pods", "gpus", "duration_s")
OPTIONAL = ("name", "priority", "min_members", "topology_required", "topology_preferred",
            "cpu_milli", "memory_mib", "gpu_models", "kind")
COLUMNS = REQUIRED + OPTIONAL
# what a row may submit, and the operator each needs (kailab/operators)
KINDS = {"job": None, "pytorchjob": "kubeflow", "jobset": "jobset", "rayjob": "ray", "raycluster": "ray", "lws": "lws"}
# kinds a replay cannot play on fake nodes, each with what was measured (bench/results/2026-11-29-operators.md)
NOT_REPLAYED: dict[str, str] = {}
# KAI's chart's priority classes (the lab creates them): the only ones a trace may name
PRIORITY_CLASSES = ("train", "build-preemptible", "build", "inference")
MAX_TRACE_BYTES = 64 << 20
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DEFAULT_CPU_MILLI, DEFAULT_MEMORY_MIB = 100, 128


@dataclass(frozen=True)
class TraceJob:
    name: str
    arrival_s: float
    queue: str
    pods: int
    gpus: float  # per pod; < 1 is a fraction of one GPU
    duration_s: float
    priority: str = "train"
    min_members: int = 1
    topology_required: str = ""
    topology_preferred: str = ""
    cpu_milli: int = DEFAULT_CPU_MILLI
    memory_mib: int = DEFAULT_MEMORY_MIB
    gpu_models: str = ""  # '|'-separated products; "" = any
    kind: str = "job"  # what is submitted (KINDS)
    row: int = 0  # the row in the file it came from (1 = first job), for messages

    @property
    def models(self) -> list[str]:
        """The GPU products it may run on, once each; [] = any."""
        return list(dict.fromkeys(m for m in self.gpu_models.split("|") if m))

    @property
    def fractional(self) -> bool:
        return 0 < self.gpus < 1

    @property
    def gpus_requested(self) -> float:
        return self.pods * self.gpus

    def as_row(self) -> dict:
        out = asdict(self)
        out.pop("row")
        return out


@dataclass(frozen=True)
class Trace:
    path: Path
    jobs: list[TraceJob]

    @property
    def span_s(self) -> float:
        """From the first arrival to the last job's planned end (were it started at once)."""
        if not self.jobs:
            return 0.0
        return max(j.arrival_s + j.duration_s for j in self.jobs) - self.jobs[0].arrival_s

    def queues(self) -> list[str]:
        return sorted({j.queue for j in self.jobs})

    def peak_gpus_at_once(self) -> tuple[float, float]:
        """The most GPUs the jobs ask at one time were each to start at its arrival and run its
        duration, and when (seconds from the first arrival): the load the trace's own times would put
        on a fleet, with no waiting. A job ending at a time another starts has left by then."""
        events = sorted([(j.arrival_s, 1, j.gpus_requested) for j in self.jobs]
                        + [(j.arrival_s + j.duration_s, 0, -j.gpus_requested) for j in self.jobs])
        now = peak = 0.0
        at = events[0][0] if events else 0.0
        for t, _, g in events:
            now += g
            if now > peak + 1e-9:
                peak, at = now, t
        first = min((j.arrival_s for j in self.jobs), default=0.0)
        return round(peak, 3), at - first


def whole_gpus(trace: Trace) -> Trace:
    """Each job of GPU fractions asking one whole GPU per pod instead (`kailab replay --whole-gpus`):
    for comparing with a stack that counts whole GPUs on the same jobs, at the same times."""
    return Trace(trace.path, [replace(j, gpus=1.0) if j.fractional else j for j in trace.jobs])


WINDOW = re.compile(r"^\s*(\d+(?:\.\d+)?)([smhd]?)\s*:\s*(\d+(?:\.\d+)?)([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_window(text: str) -> tuple[float, float]:
    """`FROM:TO` in trace time from its start, each a number with s, m, h or d (e.g. 148d:149d)."""
    m = WINDOW.match(text or "")
    start = float(m[1]) * _UNIT_S[m[2]] if m else 0.0
    end = float(m[3]) * _UNIT_S[m[4]] if m else 0.0
    if not m or end <= start:
        raise ValueError(f"--window {text!r}: write FROM:TO in trace time with TO after FROM, e.g. 148d:149d "
                         "(units s m h d)")
    return start, end


@dataclass(frozen=True)
class Window:
    trace: Trace  # the jobs that arrive in the window, from its start, each cut at its end
    start_s: float
    end_s: float
    cut: int  # jobs that would have run past the window's end
    running_before: int  # jobs that arrived before it and were still running at its start: left out
    running_before_gpus: float


def window(trace: Trace, start_s: float, end_s: float) -> Window:
    """A slice of a long trace to replay: the jobs arriving in [start, end), arrivals counted from the
    start and each cut at the end (as a trace's own end cuts what still runs). What was running at
    the start is left out and counted: the fleet starts empty."""
    first = trace.jobs[0].arrival_s if trace.jobs else 0.0
    lo, hi = first + start_s, first + end_s
    inside = [j for j in trace.jobs if lo <= j.arrival_s < hi]
    before = [j for j in trace.jobs if j.arrival_s < lo < j.arrival_s + j.duration_s]
    jobs = [replace(j, arrival_s=round(j.arrival_s - lo, 3), duration_s=round(min(j.duration_s, hi - j.arrival_s), 3))
            for j in inside]
    return Window(Trace(trace.path, jobs), start_s, end_s, cut=sum(1 for j in inside if j.arrival_s + j.duration_s > hi),
                  running_before=len(before), running_before_gpus=round(sum(j.gpus_requested for j in before), 3))


def load_trace(path: str | Path) -> Trace:
    path = Path(path)
    if not is_file(path):
        raise InputError(path, "", "file not found", "check the path")
    if path.stat().st_size > MAX_TRACE_BYTES:
        raise InputError(path, "", f"larger than {MAX_TRACE_BYTES >> 20} MiB", "split the trace")
    if path.suffix.lower() == ".csv":
        rows = _csv_rows(path)
    elif path.suffix.lower() in (".yaml", ".yml"):
        rows = _yaml_rows(path)
    else:
        raise InputError(path, "", f"unknown trace type {path.suffix or '(no suffix)'!r}", "name it .csv or .yaml")
    if not rows:
        raise InputError(path, "jobs", "the trace has no jobs", "add at least one row")
    jobs = [_job(path, i + 1, row) for i, row in enumerate(rows)]
    _check_whole(path, jobs)
    return Trace(path, jobs)


def _csv_rows(path: Path) -> list[dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "", "not UTF-8 text", "save it as UTF-8") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise InputError(path, "header", "no header row", f"start with: {','.join(REQUIRED)}")
    _check_columns(path, header, "column")
    rows = []
    for raw in reader:
        if None in raw:  # more cells than the header names
            raise InputError(path, f"row {len(rows) + 1}", f"{len(header) + len(raw[None])} cells for "
                             f"{len(header)} columns", "remove the extra cells or quote a comma")
        row = {k.strip(): (v or "").strip() for k, v in raw.items()}
        if not any(row.values()):
            continue
        rows.append({k: v for k, v in row.items() if v != ""})
    return rows


def _yaml_rows(path: Path) -> list[dict]:
    data = read_yaml(path)
    if isinstance(data, dict):
        extra = sorted(set(data) - {"jobs", "name", "description", "generated"})
        if extra:
            raise InputError(path, one_line(str(extra[0])), "unknown field", "a trace has jobs: [...] (and name, description)")
        data = data.get("jobs")
    if not isinstance(data, list):
        raise InputError(path, "jobs", "expected a list of jobs", "write jobs: [{arrival_s: 0, queue: ..., ...}]")
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise InputError(path, f"row {i + 1}", "expected a mapping", "write {arrival_s: ..., queue: ..., ...}")
        _check_columns(path, [str(k) for k in row], f"row {i + 1}: field", required=True)
    return data


def _check_columns(path: Path, names: list[str], what: str, required: bool = True) -> None:
    for n in names:
        if n not in COLUMNS:
            near = [c for c in COLUMNS if c.split("_")[0] == n.split("_")[0]]
            raise InputError(path, f"{what} {one_line(n)!r}", "unknown",
                             f"did you mean {near[0]}?" if near else f"columns are {', '.join(COLUMNS)}")
    if required:
        for n in REQUIRED:
            if n not in names:
                raise InputError(path, f"{what} {n}", "missing", f"every job needs {', '.join(REQUIRED)}")


def _number(path: Path, where: str, value, integer: bool = False) -> float:
    if isinstance(value, bool):
        raise InputError(path, where, f"{value!r} is not a number", "write a number")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InputError(path, where, f"{one_line(str(value))!r} is not a number", "write a number") from None
    if not math.isfinite(out):
        raise InputError(path, where, f"{value!r} is not a finite number", "write a number")
    if integer and out != int(out):
        raise InputError(path, where, f"{value!r} is not a whole number", "write a whole number")
    return out


def _job(path: Path, n: int, row: dict) -> TraceJob:
    where = f"row {n}, field"
    arrival = _number(path, f"{where} arrival_s", row["arrival_s"])
    if arrival < 0:
        raise InputError(path, f"{where} arrival_s", f"{arrival:g} is negative", "seconds from the trace's start, >= 0")
    pods = int(_number(path, f"{where} pods", row["pods"], integer=True))
    if pods < 1:
        raise InputError(path, f"{where} pods", f"{pods} pods", "a job has at least 1 pod")
    gpus = _number(path, f"{where} gpus", row["gpus"])
    if gpus < 0 or (gpus > 1 and gpus != int(gpus)):
        raise InputError(path, f"{where} gpus", f"{gpus:g} GPUs per pod", "a whole number >= 0, or a fraction in (0, 1)")
    duration = _number(path, f"{where} duration_s", row["duration_s"])
    if duration <= 0:
        raise InputError(path, f"{where} duration_s", f"{duration:g} is not positive", "seconds > 0")
    queue = str(row["queue"]).strip()
    if not NAME.match(queue):
        raise InputError(path, f"{where} queue", f"{one_line(queue)!r} is not a queue name", "lower-case letters, digits, '-'")
    name = str(row.get("name", f"job-{n}")).strip()
    if not NAME.match(name):
        raise InputError(path, f"{where} name", f"{one_line(name)!r} is not a valid name",
                         "lower-case letters, digits, '-'; at most 40")
    priority = str(row.get("priority", "train")).strip()
    if priority not in PRIORITY_CLASSES:
        raise InputError(path, f"{where} priority", f"unknown priority class {one_line(priority)!r}",
                         f"one of {', '.join(PRIORITY_CLASSES)}")
    min_members = int(_number(path, f"{where} min_members", row.get("min_members", 1), integer=True))
    if not 1 <= min_members <= pods:
        raise InputError(path, f"{where} min_members", f"{min_members} for a job of {pods} pods",
                         "between 1 and pods")
    if 0 < gpus < 1 and min_members > 1:
        raise InputError(path, f"{where} min_members", "a gang of GPU-fraction pods",
                         "fractional jobs run as separate pods: set min_members 1 or whole GPUs")
    topo = {k: str(row.get(k, "")).strip() for k in ("topology_required", "topology_preferred")}
    cpu = int(_number(path, f"{where} cpu_milli", row.get("cpu_milli", DEFAULT_CPU_MILLI), integer=True))
    memory = int(_number(path, f"{where} memory_mib", row.get("memory_mib", DEFAULT_MEMORY_MIB), integer=True))
    for key, v in (("cpu_milli", cpu), ("memory_mib", memory)):
        if v < 0:
            raise InputError(path, f"{where} {key}", f"{v} is negative", "a whole number >= 0")
    models = [m.strip() for m in str(row.get("gpu_models", "")).split("|") if m.strip()]
    for m in models:
        if not LABEL_VALUE.match(m):
            raise InputError(path, f"{where} gpu_models", f"{one_line(m)!r} is not a GPU product label value",
                             "letters, digits, '-', '_', '.'; several separated by '|'")
    kind = str(row.get("kind", "job") or "job").strip().lower()
    if kind in NOT_REPLAYED:
        raise InputError(path, f"{where} kind", f"{kind!r} is not replayed: {NOT_REPLAYED[kind]}",
                         f"one of {', '.join(KINDS)}")
    if kind not in KINDS:
        raise InputError(path, f"{where} kind", f"unknown kind {one_line(kind)!r}", f"one of {', '.join(KINDS)}")
    if kind == "lws" and min_members not in (1, pods):
        raise InputError(path, f"{where} min_members", f"{min_members} for an LWS group of {pods} pods",
                         "KAI gangs an LWS group whole (its LeaderCreated startup policy): leave min_members out")
    if kind != "job" and 0 < gpus < 1:
        raise InputError(path, f"{where} kind", f"a {kind} of GPU-fraction pods",
                         "fractional jobs run as separate pods: kind job, or whole GPUs")
    if models and gpus == 0:
        raise InputError(path, f"{where} gpu_models", "a GPU model for a pod with no GPU",
                         "remove gpu_models or ask for gpus")
    return TraceJob(name=name, arrival_s=arrival, queue=queue, pods=pods, gpus=gpus, duration_s=duration,
                    priority=priority, min_members=min_members, cpu_milli=cpu, memory_mib=memory,
                    gpu_models="|".join(models), kind=kind, row=n, **topo)


def _check_whole(path: Path, jobs: list[TraceJob]) -> None:
    seen: dict[str, int] = {}
    for prev, job in zip([None, *jobs], jobs):
        if prev is not None and job.arrival_s < prev.arrival_s:
            raise InputError(path, f"row {job.row}, field arrival_s",
                             f"{job.arrival_s:g} is before row {prev.row}'s {prev.arrival_s:g}",
                             "sort the trace by arrival_s")
        if job.name in seen:
            raise InputError(path, f"row {job.row}, field name", f"{job.name!r} is also row {seen[job.name]}'s name",
                             "names are unique")
        seen[job.name] = job.row


def check_against(trace: Trace, leaf_queues: set[str], source: str, fleet_gpus: int,
                  has_topology_levels: set[str] | None = None, products: set[str] | None = None) -> None:
    """What a trace needs of a design and a fleet: its queues are the design's leaf queues, no job
    asks for more GPUs than the fleet has, or for a GPU model the fleet does not have."""
    for job in trace.jobs:
        if products is not None and job.models and not set(job.models) & products:
            raise InputError(trace.path, f"row {job.row}, field gpu_models",
                             f"{job.gpu_models!r}: no GPU product of the fleet", f"its products: {', '.join(sorted(products))}")
        if job.queue not in leaf_queues:
            raise InputError(trace.path, f"row {job.row}, field queue",
                             f"{job.queue!r} is not a leaf queue of {source}",
                             f"its leaf queues: {', '.join(sorted(leaf_queues))}")
        if job.gpus_requested > fleet_gpus:
            raise InputError(trace.path, f"row {job.row}, field pods",
                             f"{job.pods} x {job.gpus:g} GPUs is more than the fleet's {fleet_gpus}",
                             "use a larger fleet or a smaller job")
        for key in ("topology_required", "topology_preferred"):
            level = getattr(job, key)
            if level and has_topology_levels is not None and level not in has_topology_levels:
                raise InputError(trace.path, f"row {job.row}, field {key}",
                                 f"{level!r} is not a topology level of the fleet",
                                 f"levels: {', '.join(sorted(has_topology_levels)) or 'none (use a racks fleet)'}")


def write_trace(path: Path, jobs: list[TraceJob], name: str = "", description: str = "") -> None:
    """A trace file, CSV or YAML by suffix, that load_trace reads back to the same jobs."""
    defaults = {"min_members": 1, "priority": "train", "cpu_milli": DEFAULT_CPU_MILLI, "memory_mib": DEFAULT_MEMORY_MIB,
                "kind": "job"}
    rows = [{k: v for k, v in j.as_row().items() if v not in ("", None) and defaults.get(k, object()) != v}
            for j in jobs]
    if path.suffix.lower() == ".csv":
        cols = [c for c in COLUMNS if any(c in r for r in rows)]
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: _plain(v) for k, v in r.items()})
        path.write_text(buf.getvalue())
        return

    doc = {"name": name or path.stem, "description": description, "jobs": [{k: _plain(v) for k, v in r.items()} for r in rows]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=140))


def _plain(v):
    return int(v) if isinstance(v, float) and v == int(v) else v


def operators_for(trace: Trace) -> tuple[str, ...]:
    """The workload operators the trace's kinds need, in registry order."""
    return tuple(dict.fromkeys(KINDS[j.kind] for j in trace.jobs if KINDS.get(j.kind)))
