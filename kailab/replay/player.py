"""One replay of a trace on one lab: the design's queues applied, every job submitted at its
(compressed) arrival time, every pod watched, every job's times recorded.

Whole-GPU jobs are Kubernetes Jobs (parallelism = completions = pods; min_members > 1 is KAI's gang
annotation), so a pod KAI evicts comes back as a new pod that starts its run over, as an unsaved
training step would. Jobs of GPU fractions are bare pods (KAI's GPU sharing; see workloads.pods):
an evicted one does not come back. KWOK ends each pod `duration_s / compress` seconds after it
started running (kailab's run-duration stage).

All times are this process's monotonic clock (the submitter and the watch share it); figures
convert them to trace time by multiplying by the compression factor.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .. import workloads
from ..kube import Kube, watch_pods
from .trace import Trace, TraceJob

SUBMIT_THREADS = 16
SETTLED_QUIET_S = 10.0  # nothing pending or running this long: what is left cannot finish
DESIGN_LABEL = "kailab.io/replay-design"


@dataclass
class PodRecord:
    job: str
    seen: float
    bound: float | None = None
    node: str = ""
    succeeded: float | None = None
    gone: float | None = None  # deleted (or being deleted) before it succeeded
    bound_by_us: bool = True
    scheduler: str = ""  # the pod's schedulerName: which scheduler a stack has place it
    head: bool = False  # a Ray cluster's head pod (ray.io/node-type: head)


@dataclass
class Ledger:
    """What the watch saw, per pod; and the submitter's times, per job."""

    pods: dict[str, PodRecord] = field(default_factory=dict)
    planned: dict[str, float] = field(default_factory=dict)
    submitted: dict[str, float] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    # jobs kailab ended (ENDED_BY_KAILAB kinds): when it deleted the object; and why it could not
    ended: dict[str, float] = field(default_factory=dict)
    end_errors: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class PodWatch(threading.Thread):
    """Every pod of one namespace: first seen, bound (and where), succeeded, deleted."""

    def __init__(self, kube: Kube, namespace: str, ledger: Ledger):
        super().__init__(daemon=True, name=f"kailab-replay-watch-{namespace}")
        self.kube, self.namespace, self.ledger = kube, namespace, ledger
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.errors: list[str] = []

    def _see(self, kind: str, pod: dict) -> None:
        meta = pod["metadata"]
        # by uid: a pod an operator makes again under the same name (an LWS's StatefulSet) is a new pod
        key = meta.get("uid") or meta["name"]
        now = time.monotonic()
        job = (meta.get("labels") or {}).get(workloads.OWNER_LABEL, "")
        with self.ledger.lock:
            rec = self.ledger.pods.get(key)
            if rec is None:
                rec = self.ledger.pods[key] = PodRecord(job=job, seen=now,
                                                         scheduler=(pod.get("spec") or {}).get("schedulerName", ""),
                                                         head=(meta.get("labels") or {}).get(RAY_NODE_TYPE) == "head")
            node = (pod.get("spec") or {}).get("nodeName")
            if node and rec.bound is None:
                rec.bound, rec.node = now, node
            if (pod.get("status") or {}).get("phase") == "Succeeded" and rec.succeeded is None:
                rec.succeeded = now
            if rec.succeeded is None and rec.gone is None and (kind == "DELETED" or meta.get("deletionTimestamp")):
                rec.gone = now

    def run(self) -> None:
        watch_pods(self.kube, self.namespace, self._see, self.stopping, self.errors, ready=self.ready)


# a trace job's Job retries the pods it loses: a pod KAI evicts ends Failed (exit 143, KAI's default
# writes no DisruptionTarget for the podFailurePolicy to ignore), and with backoffLimit 0 one reclaim
# would end the job; a trace says nothing of its jobs' retries, so an eviction costs a job its run, not its life
REPLAY_BACKOFF_LIMIT = 1000


def job_objects(job: TraceJob, namespace: str, compress: float) -> list[dict]:
    """The objects one trace job is made of."""
    run = f"{max(job.duration_s / compress, 0.001):.3f}s"
    size = {"cpu_milli": job.cpu_milli, "memory_mib": job.memory_mib,
            "gpu_models": job.models or None}
    if job.fractional:
        return workloads.pods(job.name, namespace, job.queue, job.pods, gpus=0, priority_class=job.priority,
                              run_duration=run, share={workloads.GPU_FRACTION: f"{job.gpus:g}"}, size=size)
    obj = workloads.job(job.name, namespace, job.queue, job.pods, gpus=int(job.gpus),
                        gang=job.min_members if job.min_members > 1 else None,
                        priority_class=job.priority, run_duration=run, size=size, backoff_limit=REPLAY_BACKOFF_LIMIT)
    if job.kind != "job":
        obj = _of_kind(job, obj)
    annotations = {}
    if job.topology_required:
        annotations[workloads.TOPOLOGY_REQUIRED] = job.topology_required
    if job.topology_preferred:
        annotations[workloads.TOPOLOGY_PREFERRED] = job.topology_preferred
    if annotations:
        obj["metadata"].setdefault("annotations", {}).update(annotations)
    return [obj]


def _of_kind(job: TraceJob, batch_job: dict) -> dict:
    """The trace job as the kind its row names, from the Job kailab builds (its pod template, labels,
    queue and priority are the same): a PyTorchJob of a master and pods-1 workers (KAI gangs every
    replica unless min_members says less: schedulingPolicy.minAvailable), or a JobSet of one
    replicated Job. A pod lost to an eviction is made again by the kind's controller."""
    meta = {k: v for k, v in batch_job["metadata"].items() if k != "annotations"}
    notes = {k: v for k, v in (batch_job["metadata"].get("annotations") or {}).items() if k != workloads.GANG_ANNOTATION}
    if notes:
        meta["annotations"] = notes
    template = batch_job["spec"]["template"]
    if job.kind == "pytorchjob":
        template["spec"]["containers"][0]["name"] = "pytorch"  # the training-operator's required container name
        replica = lambda n: {"replicas": n, "restartPolicy": "OnFailure", "template": template}  # noqa: E731
        specs = {"Master": replica(1), **({"Worker": replica(job.pods - 1)} if job.pods > 1 else {})}
        spec: dict = {"pytorchReplicaSpecs": specs}
        if job.min_members > 1:
            spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": job.min_members}}
        return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta, "spec": spec}
    if job.kind in ("rayjob", "raycluster"):
        return _ray(job, meta, _running_until_deleted(template))
    if job.kind == "lws":
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
                "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": job.pods,
                                                                  "workerTemplate": _running_until_deleted(template)}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta,
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": batch_job["spec"]}}]}}


# how a RayJob row is submitted (KubeRay v1.5.1's spec.submissionMode). Measured on a binary lab with
# KAI v0.17.0 (docs/replay.md): in every mode KAI gangs the RayCluster's head and workers under the
# RayJob and binds them; K8sJobMode's submitter Job's pod (no schedulerName) stayed Pending, and in
# K8sJobMode, HTTPMode and SidecarMode KubeRay calls Ray's dashboard, which no fake node runs, failing
# every reconcile ("Failed to get job info"). InteractiveMode makes no submitter and calls no dashboard:
# the RayJob waits (`Waiting`) for a job id, its cluster up, until deleted.
RAYJOB_SUBMISSION_MODE = "InteractiveMode"
# kinds whose end kailab makes: it deletes the object once the row's pods have run its duration
ENDED_BY_KAILAB = {"rayjob": ("ray.io/v1", "RayJob"), "raycluster": ("ray.io/v1", "RayCluster"),
                   "lws": ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")}


def _running_until_deleted(template: dict) -> dict:
    """The pod template without its run time (its pods run until their object is deleted) or its
    restart policy (the operator's own)."""
    template = copy.deepcopy(template)
    notes = {k: v for k, v in (template["metadata"].get("annotations") or {}).items()
             if k != workloads.RUN_DURATION_ANNOTATION}
    template["metadata"].pop("annotations", None)
    if notes:
        template["metadata"]["annotations"] = notes
    template["spec"].pop("restartPolicy", None)
    return template


def _ray(job: TraceJob, meta: dict, template: dict) -> dict:
    """A RayCluster of a head and pods-1 workers, each asking the row's GPUs (KAI gangs head +
    workers whole unless min_members says less: the worker group's minReplicas), or a RayJob of that
    cluster. Its pods carry no run time: they run until kailab deletes the object `duration_s` after
    its gang started (ENDED_BY_KAILAB), as its job would end: KubeRay's own end of a RayJob needs
    Ray's dashboard, which no fake node runs, and a RayCluster serves until deleted."""

    def group_template(container: str) -> dict:
        out = copy.deepcopy(template)
        out["spec"]["containers"][0]["name"] = container
        return out

    cluster: dict = {"headGroupSpec": {"rayStartParams": {}, "template": group_template("ray-head")}}
    if job.pods > 1:
        workers = {"groupName": "workers", "replicas": job.pods - 1, "maxReplicas": job.pods - 1,
                   "rayStartParams": {}, "template": group_template("ray-worker")}
        if 1 < job.min_members < job.pods:
            workers["minReplicas"] = job.min_members - 1
        cluster["workerGroupSpecs"] = [workers]
    if job.kind == "raycluster":
        return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": cluster}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta,
            "spec": {"submissionMode": RAYJOB_SUBMISSION_MODE, "rayClusterSpec": cluster}}


_PATHS = {"Job": "apis/batch/v1/namespaces/{ns}/jobs", "Pod": "api/v1/namespaces/{ns}/pods",
          "ConfigMap": "api/v1/namespaces/{ns}/configmaps",
          "PyTorchJob": "apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs",
          "JobSet": "apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
          "RayJob": "apis/ray.io/v1/namespaces/{ns}/rayjobs",
          "RayCluster": "apis/ray.io/v1/namespaces/{ns}/rayclusters",
          "LeaderWorkerSet": "apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets"}


def _create(kube: Kube, obj: dict) -> str | None:
    """POST one object (and a fractional pod's GPU-sharing config maps right after it); None when
    created (or already there), else the server's words."""
    url = f"{kube.api_client.configuration.host}/" + _PATHS[obj["kind"]].format(ns=obj["metadata"]["namespace"])
    resp, refused = kube.post(url, obj, attempts=5)
    if not refused and obj["kind"] == "Pod" and resp.status != 409:
        for cm in workloads.sharing_config_maps(json.loads(resp.data)):
            _create(kube, cm)  # see workloads.SHARED_GPU_CONFIGMAP; the binder makes them if this fails
    return refused


def play(kube: Kube, trace: Trace, namespace: str, compress: float, deadline_s: float,
         on_progress=None, translate=None, cancel: threading.Event | None = None) -> tuple[Ledger, dict]:
    """Submit every job on schedule and watch until every job has finished or `deadline_s` (from
    the first arrival) has passed. `translate(objects, job name)` makes a job's objects the lab's
    stack's (a refusal is the job's `refused` reason). Returns the ledger and the run's clock facts.
    `cancel` set (Ctrl-C, a closed terminal): KeyboardInterrupt here within half a second."""
    cancel = cancel or threading.Event()
    ledger = Ledger()
    watch = PodWatch(kube, namespace, ledger)
    watch.start()
    try:
        return _play(kube, trace, namespace, compress, deadline_s, on_progress, translate, cancel, ledger, watch)
    finally:
        watch.stopping.set()


def _interrupted(cancel: threading.Event, seconds: float) -> None:
    if cancel.wait(seconds):
        raise KeyboardInterrupt("the replay was interrupted")


def wait_ending(ender: "Ender", cancel: threading.Event, until: float) -> None:
    """Wait until the monotonic time `until`, ending what falls due meanwhile (Ender.tick says when next)."""
    while (left := until - time.monotonic()) > 0:
        _interrupted(cancel, min(left, ender.tick()))


def _play(kube, trace, namespace, compress, deadline_s, on_progress, translate, cancel, ledger, watch):
    watch.ready.wait(30)
    jobs = trace.jobs
    first = jobs[0].arrival_s
    t0 = time.monotonic() + 1.0  # a second to get going
    wall0 = time.time() + 1.0
    pool = ThreadPoolExecutor(max_workers=SUBMIT_THREADS)

    def submit(job: TraceJob) -> None:
        objs = job_objects(job, namespace, compress)
        try:
            objs = translate(objs, job.name) if translate else objs
        except Exception as exc:  # noqa: BLE001 - checked before the lab started; if it happens, say it
            with ledger.lock:
                ledger.refused[job.name] = str(exc)[:300]
            return
        for obj in objs:
            try:
                err = _create(kube, obj)
            except Exception as exc:  # noqa: BLE001 - the API server unreachable: the job is refused, said why
                err = f"{type(exc).__name__}: {exc}"[:300]
            if err:
                with ledger.lock:
                    ledger.refused[job.name] = err
                return
        with ledger.lock:
            ledger.submitted[job.name] = time.monotonic()

    # kailab ends its kinds' jobs while later rows are still to submit, not only after the last one
    ender = Ender(kube, namespace, compress, [j for j in jobs if j.kind in ENDED_BY_KAILAB], ledger)
    for job in jobs:
        planned = t0 + (job.arrival_s - first) / compress
        ledger.planned[job.name] = planned
        wait_ending(ender, cancel, planned)
        pool.submit(submit, job)
    pool.shutdown(wait=True)
    submitted_all = time.monotonic()
    end_by = t0 + deadline_s
    want = {j.name: j.pods for j in jobs}
    last_note = 0.0
    quiet_since = None
    while time.monotonic() < end_by:
        next_end = ender.tick()
        done = _finished(ledger, want)
        if on_progress and time.monotonic() - last_note > 15:
            on_progress(f"{len(done)}/{len(want)} jobs finished")
            last_note = time.monotonic()
        if len(done) + len(ledger.refused) >= len(want):
            break
        # what is left can no longer finish (evicted bare pods, a failed Job): nothing has been
        # pending or running for a while
        if _live(ledger, lost_jobs(ledger, ender.kinds)):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > SETTLED_QUIET_S:
            break
        _interrupted(cancel, min(0.5, next_end))
    end = time.monotonic()
    clock = {"t0": t0, "wall_t0": wall0, "end": end, "wall_end": wall0 + (end - t0),
             "submitted_all": submitted_all, "timed_out": time.monotonic() >= end_by,
             "watch_errors": watch.errors[:5]}
    return ledger, clock


def _finished(ledger: Ledger, want: dict[str, int]) -> set[str]:
    done: dict[str, int] = {}
    with ledger.lock:
        for rec in ledger.pods.values():
            if rec.succeeded is not None:
                done[rec.job] = done.get(rec.job, 0) + 1
        ended = set(ledger.ended)
    return {j for j, n in done.items() if n >= want.get(j, 1 << 30)} | ended


class Ender:
    """Ends each job of an ENDED_BY_KAILAB kind as its job would end: once its gang (every pod, or
    min_members when it says fewer) has been running `duration_s` (compressed), kailab deletes the
    object and its operator's pods go with it. A pod lost before then (an eviction) stops the clock:
    it starts over when the gang runs whole again, as a job's unsaved run would."""

    def __init__(self, kube: Kube, namespace: str, compress: float, jobs: list[TraceJob], ledger: Ledger):
        self.kube, self.namespace, self.ledger = kube, namespace, ledger
        self.jobs = {j.name: j for j in jobs}
        self.kinds = {j.name: j.kind for j in jobs}  # every job it ends, ended or not
        self.run_s = {j.name: j.duration_s / compress for j in jobs}

    def tick(self) -> float:
        """End what is due; the seconds until the next end falls due (0.5 when none is in sight)."""
        due = 0.5
        if not self.jobs:
            return due
        now = time.monotonic()
        with self.ledger.lock:
            running: dict[str, list[float]] = {}
            for rec in self.ledger.pods.values():
                if rec.job in self.jobs and rec.bound is not None and rec.gone is None and rec.succeeded is None:
                    running.setdefault(rec.job, []).append(rec.bound)
        for name, job in list(self.jobs.items()):
            gang = job.min_members if job.min_members > 1 else job.pods
            bound = sorted(running.get(name, []))
            if len(bound) < gang:
                continue
            if now - bound[gang - 1] < self.run_s[name]:
                due = min(due, bound[gang - 1] + self.run_s[name] - now)
                continue
            api_version, kind = ENDED_BY_KAILAB[job.kind]
            # the end is when kailab asked: its pods may be going (the watch sees them) before the call returns
            asked = time.monotonic()
            try:
                self.kube.delete(api_version, kind, name, self.namespace)
            except Exception as exc:  # noqa: BLE001 - the job then runs on; its record says why
                with self.ledger.lock:
                    self.ledger.end_errors[name] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            with self.ledger.lock:
                self.ledger.ended[name] = asked
            del self.jobs[name]
        return max(due, 0.02)


ENDED = "ended_by_kailab"  # a pod interval kailab ended by deleting its job's object (Ender)


def _ended(rec: PodRecord, ended_at: float | None) -> bool:
    """A pod that ran until kailab ended its job (it went with the object, not before)."""
    return ended_at is not None and rec.succeeded is None and (rec.gone is None or rec.gone >= ended_at)


RAY_NODE_TYPE = "ray.io/node-type"
LOST = "evicted, and its operator made none of its pods again"
# KubeRay v1.5.1 makes no new head for a RayJob's cluster once provisioned ("skipping head creation to
# let RayJob controller handle the failure"), and no worker without one; a worker it made again between
# KAI's evictions of the gang's pods stays Pending for good (measured: tests/live/test_replay_kinds_live.py)
HEAD_LOST = "its head evicted: KubeRay makes no new head for a RayJob's cluster once provisioned"


def _running(rec: PodRecord) -> bool:
    """Pending or running: neither succeeded nor gone."""
    return rec.succeeded is None and rec.gone is None


def _head_lost(pods: list[PodRecord]) -> bool:
    """A RayJob's head was evicted (bound, then gone) and no head is there again."""
    heads = [r for r in pods if r.head]
    return any(r.bound is not None and r.gone is not None for r in heads) and not any(_running(r) for r in heads)


def lost_jobs(ledger: Ledger, kinds: dict[str, str]) -> set[str]:
    """The RayJobs kailab ends that can no longer run: their head evicted and not made again."""
    if "rayjob" not in kinds.values():
        return set()  # most traces: no scan of every pod twice a second
    with ledger.lock:
        by_job: dict[str, list[PodRecord]] = {}
        for r in ledger.pods.values():
            if kinds.get(r.job) == "rayjob" and r.job not in ledger.ended:
                by_job.setdefault(r.job, []).append(r)
    return {name for name, pods in by_job.items() if _head_lost(pods)}


def _live(ledger: Ledger, lost: set[str] = frozenset()) -> bool:
    """A pod pending or running, but those of a lost job (nothing will bind them)."""
    with ledger.lock:
        return any(_running(r) for r in ledger.pods.values() if r.job not in lost)


def job_outcomes(kube: Kube, namespace: str) -> dict[str, str]:
    """Each Kubernetes Job's final condition (Complete / Failed, with the reason), read at the end."""
    out = {}
    for job in kube.list("batch/v1", "Job", namespace):
        for c in (job.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                out[job["metadata"]["name"]] = c["type"] + (f" ({c['reason']})" if c.get("reason") else "")
    return out


def records(trace: Trace, ledger: Ledger, clock: dict, compress: float, outcomes: dict[str, str] | None = None) -> dict:
    """The run as data: per job and per pod, in trace time (the first job's planned submit is its
    arrival_s; wall seconds after it count `compress` trace seconds each)."""
    t0, first = clock["t0"], trace.jobs[0].arrival_s

    def rel(t):
        return None if t is None else round(first + (t - t0) * compress, 3)

    by_job: dict[str, list[PodRecord]] = {}
    for rec in ledger.pods.values():
        by_job.setdefault(rec.job, []).append(rec)
    out_jobs = []
    for job in trace.jobs:
        pods = sorted(by_job.get(job.name, []), key=lambda r: r.bound or float("inf"))
        bound = [r.bound for r in pods if r.bound is not None]
        started = bound[job.min_members - 1] if len(bound) >= job.min_members else None
        succeeded = sorted(r.succeeded for r in pods if r.succeeded is not None)
        finished = succeeded[job.pods - 1] if len(succeeded) >= job.pods else None
        ended_at = ledger.ended.get(job.name)
        if job.kind in ENDED_BY_KAILAB:
            finished = ended_at
        evicted = [r for r in pods if r.gone is not None and r.bound is not None and not _ended(r, ended_at)]
        outcome = (outcomes or {}).get(job.name, "")
        if job.kind == "rayjob" and ended_at is None and _head_lost(pods):
            outcome = f"Failed ({HEAD_LOST})"
        elif job.kind in ENDED_BY_KAILAB and ended_at is None and evicted and not any(_running(r) for r in pods):
            outcome = f"Failed ({LOST})"  # evicted and never made again
        out_jobs.append({
            "name": job.name, "queue": job.queue, "pods": job.pods, "gpus": job.gpus,
            "min_members": job.min_members, "duration_s": job.duration_s, "priority": job.priority,
            "arrival_s": job.arrival_s, "planned": rel(ledger.planned.get(job.name)),
            "submitted": rel(ledger.submitted.get(job.name)), "started": rel(started),
            "finished": rel(finished), "evicted_pods": len(evicted),
            "refused": ledger.refused.get(job.name, ""), "outcome": outcome,
            **({"kind": job.kind} if job.kind != "job" else {}),
            **({"ended_by": "kailab" if ended_at is not None else "",
                "end_error": ledger.end_errors.get(job.name, "")} if job.kind in ENDED_BY_KAILAB else {}),
        })
    gpus = {j.name: j.gpus for j in trace.jobs}
    end = clock["end"]
    intervals = [{"job": r.job, "gpus": gpus.get(r.job, 0), "node": r.node, "scheduler": r.scheduler, "from": rel(r.bound),
                  "to": rel(r.succeeded or r.gone or end), "ended": "succeeded" if r.succeeded else
                  (ENDED if _ended(r, ledger.ended.get(r.job)) else "evicted" if r.gone else "running")}
                 for r in ledger.pods.values() if r.bound is not None]
    # pods deleted before they were ever bound (KAI evicting a pod whose bind was in flight, say):
    # a Job counts such a pod as failed and replaces it, a bare pod is simply gone
    unbound = [{"job": r.job, "seen": rel(r.seen), "gone": rel(r.gone)}
               for r in ledger.pods.values() if r.bound is None and r.gone is not None]
    # pods still waiting when the run ended (a lost RayJob's worker made again, a job that never fit)
    waiting = [{"job": r.job, "seen": rel(r.seen)} for r in ledger.pods.values() if r.bound is None and _running(r)]
    return {"compress": compress, "span": rel(end), "timed_out": clock["timed_out"],
            "deleted_before_bound": unbound, "pending_at_end": waiting,
            "submit_lag_wall_s": sorted(round(ledger.submitted[n] - ledger.planned[n], 4)
                                        for n in ledger.submitted),
            "jobs": out_jobs, "pod_intervals": intervals, "watch_errors": clock["watch_errors"],
            "wall": {"start": clock["wall_t0"], "end": clock["wall_end"]}}
