"""`kailab bench scale`: KAI's scheduling throughput on a large fleet, in the shape of KAI's own
scale test (single-GPU Jobs, or bare single-GPU pods), with what each party spent in CPU.

The submitter and the watcher are lean on purpose (JSON over the client's connection pool, no
typed models, creates from a thread pool): the harness must not be what limits a run, and the
figures include its own CPU next to KAI's and the API server's so a reader can check that.
Figures are recorded, never asserted.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import workloads
from .kube import Kube, watch_pods
from .runtimes import LabRecord, processes

SHAPES = ("jobs", "pods")
SUBMIT_THREADS = 16
BUCKET_S = 10  # binds/s is reported per bucket of this many seconds


class BindWatch(threading.Thread):
    """Records, for every pod of one namespace, when it was first seen bound to a node."""

    def __init__(self, kube: Kube, namespace: str):
        super().__init__(daemon=True, name="kailab-bind-watch")
        self.kube, self.namespace = kube, namespace
        self.bound: dict[str, float] = {}  # pod name -> monotonic time first seen bound
        self.owner: dict[str, str] = {}  # pod name -> Job name (jobs shape)
        self.cond = threading.Condition()
        self.stopping = threading.Event()
        self.errors: list[str] = []

    def _see(self, pod: dict) -> None:
        name = pod["metadata"]["name"]
        if (pod.get("spec") or {}).get("nodeName") and name not in self.bound:
            with self.cond:
                self.bound[name] = time.monotonic()
                job = (pod["metadata"].get("labels") or {}).get("job-name")
                if job:
                    self.owner[name] = job
                self.cond.notify_all()

    def run(self) -> None:
        watch_pods(self.kube, self.namespace, lambda kind, pod: kind != "DELETED" and self._see(pod),
                   self.stopping, self.errors, timeout_s=300)

    def wait_for(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.bound) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 5))
        return True


def cpu_seconds(lab: Path) -> dict[str, float]:
    """CPU seconds (user + system, all threads) each of the lab's processes has used so far, and
    this process's own."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, rec in processes.records(lab).items():
        try:
            fields = Path(f"/proc/{rec.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    out["kailab (harness)"] = time.process_time()
    return out


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy since boot (all but idle and iowait): beside a
    lab's own CPU, what else ran meanwhile on a shared machine."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)) / os.sysconf("SC_CLK_TCK")


def peak_memory_mib(lab: Path) -> dict[str, float]:
    """Each lab process's peak resident memory so far (VmHWM), MiB: what a fleet's size costs."""
    out = {}
    for name, rec in processes.records(lab).items():
        try:
            for line in Path(f"/proc/{rec.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out[name] = round(int(line.split()[1]) / 1024, 1)
        except (OSError, IndexError, ValueError):
            continue
    return out


def submit(kube: Kube, objects: list[dict]) -> dict[str, float]:
    """Create `objects` from a thread pool; returns name -> monotonic time its create returned."""
    pool = kube.api_client.rest_client.pool_manager
    host = kube.api_client.configuration.host
    done: dict[str, float] = {}

    def url(obj: dict) -> str:
        ns = obj["metadata"]["namespace"]
        if obj["kind"] == "Pod":
            return f"{host}/api/v1/namespaces/{ns}/pods"
        return f"{host}/apis/batch/v1/namespaces/{ns}/jobs"

    def one(obj: dict) -> None:
        body = json.dumps(obj).encode()
        for attempt in range(5):
            resp = pool.request("POST", url(obj), body=body, headers={"Content-Type": "application/json"},
                                timeout=60)
            if resp.status in (200, 201, 409):
                done[obj["metadata"]["name"]] = time.monotonic()
                return
            time.sleep(0.2 * (attempt + 1))
        raise RuntimeError(f"create {obj['kind']} {obj['metadata']['name']}: HTTP {resp.status} "
                           f"{resp.data[:200]!r}")

    with ThreadPoolExecutor(max_workers=SUBMIT_THREADS) as ex:
        list(ex.map(one, objects))
    return done


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else 0.0


def run(rec: LabRecord, shape: str, count: int, echo=print, timeout: float = 3600,
        reclaim: bool = True) -> dict:
    """One scale run on lab `rec` (its fleet must have at least `count` free GPUs)."""
    if shape not in SHAPES:
        raise ValueError(f"shape {shape!r}: choose {', '.join(SHAPES)}")
    kube = Kube(rec.kubeconfig)
    ns = f"kailab-scale-{shape}-{int(time.time())}"
    half = rec.gpus // 2
    owner, borrower = f"{ns}-owner", f"{ns}-borrower"
    setup = [workloads.namespace(ns), workloads.service_account("default", ns),
             # the borrower's quota is half the fleet and the owner's the other half: the run's
             # pods borrow the owner's idle half, which the reclaim step takes back
             workloads.queue(owner, {"quota": half, "limit": -1}),
             workloads.queue(borrower, {"quota": rec.gpus - half, "limit": -1})]
    for obj in setup:
        kube.apply(obj)
    if shape == "jobs":
        objects = [workloads.job(f"j-{i}", ns, borrower, 1, gpus=1) for i in range(count)]
    else:
        objects = [p for i in range(count) for p in workloads.pods(f"p-{i}", ns, borrower, 1, gpus=1)]
    watch = BindWatch(kube, ns)
    watch.start()
    cpu0 = cpu_seconds(rec.dir)
    echo(f"scale run: {count} single-GPU {shape} on {rec.nodes} nodes / {rec.gpus} GPUs (lab {rec.name!r})")
    t0 = time.monotonic()
    created = submit(kube, objects)
    submitted_s = time.monotonic() - t0
    echo(f"  submitted {len(created)} in {submitted_s:.1f} s; waiting for all to be bound")
    all_bound = watch.wait_for(count, timeout)
    t_end = max(watch.bound.values()) if watch.bound else time.monotonic()
    cpu1 = cpu_seconds(rec.dir)
    result = _figures(shape, count, created, watch, t0, t_end, submitted_s, cpu0, cpu1, all_bound)
    echo(f"  all bound: {all_bound}; {result['seconds_to_all_bound']} s, "
         f"{result['binds_per_s']} binds/s, p50 {result['time_to_bind_s']['p50']} s, "
         f"p99 {result['time_to_bind_s']['p99']} s")
    if reclaim and all_bound and count > rec.gpus - half:  # only then is the owner's half lent out
        result["reclaim"] = _reclaim(kube, ns, owner, min(100, half - 1), watch, echo)
    watch.stopping.set()
    kube.close()
    return result


def _figures(shape, count, created, watch, t0, t_end, submitted_s, cpu0, cpu1, all_bound) -> dict:
    bound = dict(watch.bound)
    if shape == "jobs":  # a pod is named <job>-<suffix>; its Job's create time starts its clock
        waits = [t - created[watch.owner[p]] for p, t in bound.items() if watch.owner.get(p) in created]
    else:
        waits = [t - created[p] for p, t in bound.items() if p in created]
    buckets: dict[int, int] = {}
    for t in bound.values():
        buckets[int((t - t0) // BUCKET_S)] = buckets.get(int((t - t0) // BUCKET_S), 0) + 1
    cpu = {k: round(cpu1.get(k, 0) - cpu0.get(k, 0), 1) for k in cpu1}
    kai_cpu = sum(v for k, v in cpu.items() if k in ("scheduler", "binder", "podgrouper", "queuecontroller",
                                                    "podgroupcontroller"))
    total = round(t_end - t0, 1)
    return {
        "shape": shape, "count": count, "all_bound": all_bound, "bound": len(bound),
        "submit_seconds": round(submitted_s, 1), "creates_per_s": round(len(created) / max(submitted_s, 1e-9), 1),
        "seconds_to_all_bound": total, "binds_per_s": round(len(bound) / max(total, 1e-9), 1),
        "time_to_bind_s": {"p50": _percentile(waits, 0.5), "p99": _percentile(waits, 0.99),
                           "max": round(max(waits), 2) if waits else 0.0},
        "binds_per_s_by_bucket": [round(buckets.get(i, 0) / BUCKET_S, 1)
                                  for i in range(int(total // BUCKET_S) + 1)],
        "cpu_seconds": cpu, "kai_cpu_seconds": round(kai_cpu, 1),
        "harness_cpu_share_of_kai": round(cpu.get("kailab (harness)", 0) / kai_cpu, 3) if kai_cpu else None,
        "watch_errors": watch.errors[:5],
        "limit": _limit(cpu, total),
    }


def _limit(cpu: dict, wall: float) -> str:
    """Which party had the machine: the largest CPU user, with its share of the run's core-seconds."""
    cores = os.cpu_count() or 1
    busiest = max(cpu.items(), key=lambda kv: kv[1])
    used = sum(cpu.values())
    return (f"{busiest[0]} used {busiest[1]:.0f} of {used:.0f} CPU seconds spent "
            f"({cores} cores x {wall:.0f} s = {cores * wall:.0f} available)")


def _reclaim(kube: Kube, ns: str, owner_queue: str, many: int, watch: BindWatch, echo) -> dict:
    """The owner returns: one single-GPU pod in its queue, then `many` more (100, within its
    quota). Its GPUs are all lent out, so each pod waits for KAI to reclaim a borrowed GPU (evict
    a borrower's pod)."""
    out = {"many": many}
    for label, n in (("first_gpu_s", 1), ("many_gpus_s", many)):
        pods = [p for i in range(n) for p in workloads.pods(f"o{n}-{i}", ns, owner_queue, 1, gpus=1)]
        start = time.monotonic()
        submit(kube, pods)
        names = {p["metadata"]["name"] for p in pods}
        deadline = start + 900
        while time.monotonic() < deadline and not names <= set(watch.bound):
            time.sleep(0.2)
        done = names <= set(watch.bound)
        out[label] = round(max(watch.bound[p] for p in names) - start, 1) if done else None
        echo(f"  reclaim: {n} owner pod(s) bound {out[label]} s after submit" if done
             else f"  reclaim: {n} owner pod(s) not all bound in 900 s")
    return out


def markdown(results: list[dict], machine: dict, kai_version: str) -> str:
    lines = [f"# KAI at scale, {machine.get('date', '')}", "",
             f"KAI {kai_version}; {machine['cores']} cores, {machine['memory_gib']} GiB. Recorded, not asserted.", "",
             "| shape | count | submit (creates/s) | all bound (s) | binds/s | time-to-bind p50 / p99 (s) "
             "| reclaim 1 GPU / N GPUs (s) | CPU s: apiserver / KAI / harness | harness ÷ KAI |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        rc = r.get("reclaim") or {}
        cpu = r["cpu_seconds"]
        lines.append(
            f"| {r['shape']} | {r['count']} | {r['submit_seconds']} s ({r['creates_per_s']}) | "
            f"{r['seconds_to_all_bound']}{'' if r['all_bound'] else ' (not all)'} | {r['binds_per_s']} | "
            f"{r['time_to_bind_s']['p50']} / {r['time_to_bind_s']['p99']} | "
            f"{rc.get('first_gpu_s')} / {rc.get('many_gpus_s')} (N={rc.get('many')}) | "
            f"{cpu.get('kube-apiserver')} / {r['kai_cpu_seconds']} / {cpu.get('kailab (harness)')} | "
            f"{r['harness_cpu_share_of_kai']} |")
    lines += ["", "Binds per second, per 10 s from the first create:", ""]
    lines += [f"- {r['shape']}: {' '.join(str(x) for x in r['binds_per_s_by_bucket'])}" for r in results]
    lines += ["", "What had the machine:", ""] + [f"- {r['shape']}: {r['limit']}" for r in results]
    lines += ["", "CPU seconds per process during each run:", ""]
    lines += [f"- {r['shape']}: " + ", ".join(f"{k} {v}" for k, v in sorted(r["cpu_seconds"].items(),
                                                                         key=lambda kv: -kv[1]))
              for r in results]
    return "\n".join(lines) + "\n"
