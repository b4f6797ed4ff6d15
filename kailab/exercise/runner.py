"""Runs one exercise against a lab: its own namespace and queue names, steps in order, checks,
evidence after every step, clean-up always (also on failure, Ctrl-C or a dying KAI component)."""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import evidence, kai, workloads
from ..errors import KailabError, LabError
from ..evidence import EvidenceDir
from ..fleet import load_fleet
from ..kube import Kube
from ..paths import evidence_dir
from ..runtimes import processes
from ..runtimes.base import LabRecord
from ..versions import KAI_COMPONENTS
from .checks import Names, Result, evaluate_condition, evaluate_count, evaluate_event
from .observer import Observer
from .spec import ConditionExpect, CountExpect, EventExpect, Exercise, Step, load_exercise, seconds

CLEANUP_TIMEOUT = 120.0
EVENT_POLL = 1.0


@dataclass
class Outcome:
    exercise: str
    verdict: str  # passed | failed | error | interrupted
    results: list[Result] = field(default_factory=list)
    evidence: str = ""
    error: str = ""
    figures: dict = field(default_factory=dict)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if not r.passed]

    def report(self) -> str:
        lines = [f"{self.exercise}: {self.verdict.upper()}  (evidence: {self.evidence})"]
        if self.error:
            lines.append(f"  {self.error}")
        lines += [f"  {r.line()}" for r in self.results if not r.passed]
        return "\n".join(lines)


class ComponentDied(LabError):
    """A KAI process of the lab exited during the exercise: the verdict is not about KAI's policy."""


def _allure_step(title: str):
    try:
        import allure

        return allure.step(title)
    except ImportError:  # pragma: no cover - allure-pytest is a dependency
        return contextlib.nullcontext()


class ExerciseRun:
    """One run of an exercise. `before_step(index, step)` runs before a step acts and
    `after_step(index, step, results)` once its checks are decided and its evidence written
    (a lesson asks, then reveals, there; the lab keeps the step's state while they run)."""

    def __init__(self, ex: Exercise, source: Path, lab: LabRecord, evidence_root: Path | None = None,
                 before_step=None, after_step=None):
        self.ex, self.source, self.lab = ex, source, lab
        self.before_step = before_step or (lambda index, step: None)
        self.after_step = after_step or (lambda index, step, results: None)
        run_id = secrets.token_hex(2)
        self.names = Names(prefix=f"x{run_id}", namespace=f"kx-{ex.exercise}-{run_id}"[:63])
        self.kube = Kube(lab.kubeconfig)
        self.evidence = EvidenceDir(evidence_root or evidence_dir(), ex.exercise)
        self.outcome = Outcome(ex.exercise, "error", evidence=str(self.evidence.path))
        gangs = {a.job.name: a.job.gang for s in ex.steps for a in s.apply if a.job and a.job.gang}
        self.observer = Observer(self.kube, self.names, list(ex.invariants), gangs)
        self.log_offsets: dict[str, int] = {}
        self.applied: dict[str, str] = {}  # workload -> kind
        self.killed: set[str] = set()  # processes the exercise's faults stopped on purpose
        self.downed: set[str] = set()  # fleet nodes the exercise's faults took away

    # ------------------------------------------------------------------ top level
    def run(self) -> Outcome:
        self.evidence.write("exercise.yaml", self.source.read_text())
        self.evidence.write(evidence.RUN, {
            "exercise": self.ex.exercise, "lab": self.lab.name, "runtime": self.lab.runtime,
            "kai_version": self.lab.kai_version, "fleet": self.lab.fleet, "namespace": self.names.namespace,
            "queues": {n: self.names.queue(n) for n, _, _ in self.ex.queue_tree()},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        try:
            self._preflight()
            self._mark_logs()
            self.observer.start()
            self._setup()
            for index, step in enumerate(self.ex.steps):
                with _allure_step(f"step {index + 1}: {step.name}"):
                    self._run_step(index, step)
            self._finish_invariants()
            self.outcome.verdict = "passed" if not self.outcome.failures else "failed"
        except KeyboardInterrupt:
            self.outcome.verdict, self.outcome.error = "interrupted", "interrupted by the user (Ctrl-C / SIGTERM)"
            raise
        except ComponentDied as err:
            self.outcome.verdict, self.outcome.error = "error", str(err)
        except KailabError as err:
            self.outcome.verdict, self.outcome.error = "error", str(err)
        except Exception as err:  # noqa: BLE001 - the verdict must say what happened
            self.outcome.verdict, self.outcome.error = "error", f"{type(err).__name__}: {err}"
        finally:
            self._conclude()
        return self.outcome

    def _preflight(self) -> None:
        if self.kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "queues.scheduling.run.ai") is None:
            raise LabError(f"lab {self.lab.name!r} has no KAI (CRD queues.scheduling.run.ai is missing): "
                           "bring up a lab with KAI (`kailab up`)")
        fleet = load_fleet(self.ex.fleet)
        have = 0
        for node in self.kube.core.list_node().items:
            ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
            if ready:
                have += int((node.status.allocatable or {}).get("nvidia.com/gpu", "0"))
        if have != fleet.gpus_total:
            raise LabError(f"exercise {self.ex.exercise} is sized for fleet {fleet.name} ({fleet.gpus_total} GPUs) "
                           f"but lab {self.lab.name!r} has {have} Ready GPUs: run it on a `--fleet {fleet.name}` lab")

    def _setup(self) -> None:
        objs = [workloads.namespace(self.names.namespace, {"kailab.io/exercise": self.ex.exercise})]
        for name, parent, gpu in self.ex.queue_tree():
            objs.append(workloads.queue(self.names.queue(name), gpu.as_queue_gpu(),
                                        parent=self.names.queue(parent) if parent else None,
                                        labels={"kailab.io/exercise": self.ex.exercise}))
        self.evidence.manifests(0, "queues-and-namespace", objs)
        for obj in objs:
            self.kube.apply(obj)
        deadline = time.time() + 60
        while True:  # kube-controller-manager creates the default ServiceAccount pods need
            try:
                self.kube.core.read_namespaced_service_account("default", self.names.namespace)
                break
            except Exception:  # noqa: BLE001
                if time.time() > deadline:
                    raise LabError(f"namespace {self.names.namespace} got no default ServiceAccount in 60s: "
                                   "is kube-controller-manager running?") from None
                time.sleep(0.1)

    # ------------------------------------------------------------------ steps
    def _run_step(self, index: int, step: Step) -> None:
        self.before_step(index, step)
        first_result = len(self.outcome.results)
        since = self.observer.state.now()
        since_wall = time.time()
        objs = self._step_objects(step)
        self.evidence.manifests(index + 1, step.name, objs)
        self._delete(step)
        self._patch(step)
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(self.kube.apply, objs))
        self._faults(step)
        timeout = seconds(step.timeout)
        if step.settle:
            self.observer.wait_settled(seconds(step.settle), timeout)
        self._check_components()
        self._expect(step, since, since_wall, timeout)
        if step.stays:
            self._stays(step, since)
        self._check_components()
        self.evidence.snapshot(self.evidence.step_dir(index + 1, step.name), self.kube, self.names.namespace,
                               [self.names.queue(n) for n, _, _ in self.ex.queue_tree()], self.observer.state)
        self.after_step(index, step, self.outcome.results[first_result:])

    def _step_objects(self, step: Step) -> list[dict]:
        ns, objs = self.names.namespace, []
        for item in step.apply:
            w = item.workload
            q = self.names.queue(w.queue)
            if item.pods:
                p = item.pods
                objs += workloads.pods(p.name, ns, q, p.count, p.gpus, p.priority_class, p.preemptible, p.run_duration)
                self.applied[p.name] = "pods"
            elif item.job:
                j = item.job
                objs.append(workloads.job(j.name, ns, q, j.parallelism, j.gpus, j.gang, j.priority_class,
                                          j.preemptible, j.run_duration))
                self.applied[j.name] = "job"
            else:
                d = item.deployment
                objs.append(workloads.deployment(d.name, ns, q, d.replicas, d.gpus, d.priority_class, d.preemptible))
                self.applied[d.name] = "deployment"
        return objs

    def _delete(self, step: Step) -> None:
        ns = self.names.namespace
        for d in step.delete:
            kind = self.applied.get(d.workload)
            with self.observer.state.cond:
                for p in self.observer.state.workload_pods(d.workload):
                    self.observer.state.our_deletions.add(p.uid)
            if kind == "pods":
                for p in list(self.observer.state.workload_pods(d.workload)):
                    self.kube.delete("v1", "Pod", p.name, ns)
            elif kind == "job":
                self.kube.delete("batch/v1", "Job", d.workload, ns)
            elif kind == "deployment":
                self.kube.delete("apps/v1", "Deployment", d.workload, ns)

    def _patch(self, step: Step) -> None:
        parents = {n: p for n, p, _ in self.ex.queue_tree()}
        for p in step.patch:
            if p.queue is not None and p.gpu is not None:
                parent = parents[p.queue]
                self.kube.apply(workloads.queue(self.names.queue(p.queue), p.gpu.as_queue_gpu(),
                                                parent=self.names.queue(parent) if parent else None,
                                                labels={"kailab.io/exercise": self.ex.exercise}))
            elif p.deployment is not None:
                res = self.kube.resource("apps/v1", "Deployment")
                self.kube.dynamic.patch(res, name=p.deployment, namespace=self.names.namespace,
                                        body={"spec": {"replicas": p.replicas}},
                                        content_type="application/merge-patch+json")

    def _faults(self, step: Step) -> None:
        """Kill / restart lab processes, take nodes away: what do KAI and the controllers do then?"""
        if not step.faults:
            return
        if self.lab.runtime != "binary" and any(f.kill or f.restart for f in step.faults):
            raise LabError(f"step {step.name!r} kills or restarts lab processes, which needs the binary "
                           f"runtime (this lab is {self.lab.runtime})")
        from ..runtimes.binary import BinaryRuntime

        fleet_nodes = {n["metadata"]["name"]: n for n in load_fleet(self.ex.fleet).node_manifests()}
        for fault in step.faults:
            recs = processes.records(self.lab.dir)
            if fault.kill:
                processes.kill(recs[fault.kill])
                self.killed.add(fault.kill)
                self.observer.note(f"fault: killed {fault.kill}")
            elif fault.restart:
                BinaryRuntime().restart(self.lab, fault.restart)
                self.killed.discard(fault.restart)
                self.observer.note(f"fault: restarted {fault.restart}")
            elif fault.node_down:
                self.kube.delete("v1", "Node", fault.node_down)
                self.downed.add(fault.node_down)
                self.observer.note(f"fault: node {fault.node_down} gone")
            elif fault.node_up:
                self._node_up(fleet_nodes[fault.node_up])
                self.observer.note(f"fault: node {fault.node_up} back")
            elif fault.pause:
                time.sleep(seconds(fault.pause))

    def _node_up(self, node: dict) -> None:
        self.kube.apply({k: v for k, v in node.items() if k != "status"})
        self.kube.apply_status(node)
        self.downed.discard(node["metadata"]["name"])

    def _expect(self, step: Step, since: float, since_wall: float, timeout: float) -> None:
        counts = [e for e in step.expect if isinstance(e, CountExpect)]
        conds = [e for e in step.expect if isinstance(e, ConditionExpect)]
        events = [e for e in step.expect if isinstance(e, EventExpect)]
        deadline = time.time() + timeout

        def evaluate(state) -> list[Result]:
            out = []
            for e in counts:
                out += evaluate_count(state, e, self.names, since, step.name)
            for e in conds:
                out.append(evaluate_condition(state, e, self.names, step.name))
            return out

        self.observer.wait_for(lambda s: all(r.passed for r in evaluate(s)), timeout)
        with self.observer.state.cond:
            results = evaluate(self.observer.state)
        while events:
            listed = [e.to_dict() for e in self.kube.core.list_namespaced_event(self.names.namespace).items]
            listed = [_camel_event(e) for e in listed]
            with self.observer.state.cond:
                ev_results = [evaluate_event(listed, self.observer.state, e, self.names, since_wall, step.name)
                              for e in events]
            if all(r.passed for r in ev_results) or time.time() > deadline:
                results += ev_results
                break
            time.sleep(EVENT_POLL)
        self.outcome.results += results

    def _stays(self, step: Step, since: float) -> None:
        """Every condition must hold at every change for the whole window; stop at the first breach."""
        assert step.stays is not None
        start = time.time()
        end = start + seconds(step.stays.for_)
        seen: dict[str, dict] = {}  # what -> lowest/highest value observed, expected, first breach
        breach_at: float | None = None
        with self.observer.state.cond:
            while True:
                for e in step.stays.that:
                    for r in evaluate_count(self.observer.state, e, self.names, since, step.name, kind="stays"):
                        value = int(r.observed)
                        s = seen.setdefault(r.what, {"lo": value, "hi": value, "expected": r.expected, "breach": None})
                        s["lo"], s["hi"] = min(s["lo"], value), max(s["hi"], value)
                        if not r.passed and s["breach"] is None:
                            s["breach"] = r
                            breach_at = r.at if breach_at is None else breach_at
                if breach_at is not None or time.time() >= end:
                    break
                self.observer.state.cond.wait(timeout=min(0.5, max(0.01, end - time.time())))
        into = round(time.time() - start, 1)
        for what, s in seen.items():
            span = str(s["lo"]) if s["lo"] == s["hi"] else f"between {s['lo']} and {s['hi']}"
            r = s["breach"]
            if r is not None:
                observed, offending = f"{r.observed} at t={r.at}s, {into}s into the window", r.offending
            elif breach_at is not None:
                observed, offending = f"{span} until the window was broken at t={breach_at}s", []
            else:
                observed, offending = f"{span} throughout", []
            self.outcome.results.append(Result(step.name, "stays", f"{what} for {step.stays.for_}", s["expected"],
                                               observed, r is None, offending, breach_at))

    def _finish_invariants(self) -> None:
        for inv in self.ex.invariants:
            broken = self.observer.violations.get(inv)
            self.outcome.results.append(Result("whole run", "invariant", inv, "never violated",
                                               f"violated at t={broken[0]}s: {broken[1][0]}" if broken else "never violated",
                                               broken is None, broken[1] if broken else []))

    def _check_components(self) -> None:
        if self.lab.runtime != "binary":
            return
        recs = processes.records(self.lab.dir)
        dead = [c for c in KAI_COMPONENTS if c in recs and not recs[c].alive() and c not in self.killed]
        if dead:
            tail = processes.recent_log(self.lab.dir, dead[0], 10).replace("\n", " | ")
            raise ComponentDied(f"KAI component died: {', '.join(dead)} (last log lines: {tail[-600:]})")

    # ------------------------------------------------------------------ evidence and clean-up
    def _mark_logs(self) -> None:
        self.started_wall = time.time()
        if self.lab.runtime != "binary":
            return
        for comp in KAI_COMPONENTS:
            path = processes.logs_dir(self.lab.dir) / f"{comp}.log"
            self.log_offsets[comp] = path.stat().st_size if path.exists() else 0

    def _copy_logs(self) -> None:
        """KAI's log lines for the run's window: from the lab's log files (binary runtime) or
        from the KAI pods' logs (kind / existing clusters)."""
        if self.lab.runtime != "binary":
            since = max(1, int(time.time() - getattr(self, "started_wall", time.time())) + 5)
            for pod in self.kube.core.list_namespaced_pod(kai.KAI_NAMESPACE).items:
                for c in pod.spec.containers:
                    text = self.kube.core.read_namespaced_pod_log(pod.metadata.name, kai.KAI_NAMESPACE,
                                                                  container=c.name, since_seconds=since)
                    self.evidence.write(f"logs/{pod.metadata.name}.{c.name}.log", text or "")
            return
        for comp, offset in self.log_offsets.items():
            path = processes.logs_dir(self.lab.dir) / f"{comp}.log"
            if path.exists():
                with open(path, "rb") as f:
                    f.seek(offset)
                    self.evidence.write(f"logs/{comp}.log", f.read())

    def _conclude(self) -> None:
        """Runs on every exit path; each part is guarded so one failure cannot lose the rest."""
        parts = [
            ("final snapshot", lambda: self.evidence.snapshot(
                "final", self.kube, self.names.namespace,
                [self.names.queue(n) for n, _, _ in self.ex.queue_tree()], self.observer.state)),
            ("namespace dump", lambda: self.outcome.verdict != "passed"
             and self.evidence.dump_namespace(self.kube, self.names.namespace)),
            ("KAI logs", self._copy_logs),
            ("scheduler snapshot", lambda: self.lab.runtime == "binary" and "scheduler.plugins" in self.lab.ports
             and self.evidence.scheduler_snapshot(kai.snapshot_url(self.lab.ports))),
        ]
        parts.append(("restore what faults took away", self._restore_faults))
        notes = []
        for label, fn in parts:
            try:
                fn()
            except BaseException as err:  # noqa: BLE001 - keep going: evidence first
                notes.append(f"{label}: {type(err).__name__}: {err}")
        self.observer.stop()
        with self.observer.state.cond:
            self.evidence.timeline(list(self.observer.state.timeline))
            self.outcome.figures = figures(self.observer.state, self.ex)
        self._write_verdict(notes)
        try:
            self._cleanup()
        except BaseException as err:  # noqa: BLE001
            notes.append(f"clean-up: {err}")
            self._write_verdict(notes)
        self.kube.close()

    def _restore_faults(self) -> None:
        """The lab outlives the exercise: bring back what its faults stopped."""
        from ..runtimes.binary import BinaryRuntime

        for name in sorted(self.killed):
            BinaryRuntime().restart(self.lab, name)
        self.killed.clear()
        if self.downed:
            fleet_nodes = {n["metadata"]["name"]: n for n in load_fleet(self.ex.fleet).node_manifests()}
            for name in sorted(self.downed):
                self._node_up(fleet_nodes[name])

    def _write_verdict(self, notes: list[str]) -> None:
        self.evidence.write(evidence.VERDICT, {
            "exercise": self.ex.exercise, "verdict": self.outcome.verdict, "error": self.outcome.error,
            "kai_version": self.lab.kai_version, "lab": self.lab.name, "runtime": self.lab.runtime,
            "expectations": [asdict(r) for r in self.outcome.results], "figures": self.outcome.figures,
            "observer_errors": self.observer.errors, "evidence_notes": notes})

    def _cleanup(self) -> None:
        self.kube.delete("v1", "Namespace", self.names.namespace)
        deadline = time.time() + CLEANUP_TIMEOUT
        # the next exercise must start on an empty fleet: wait for this one's pods to be gone
        while time.time() < deadline and self.kube.core.list_namespaced_pod(self.names.namespace).items:
            time.sleep(0.2)
        for name, _, _ in reversed(self.ex.queue_tree()):  # children before parents
            self.kube.delete("scheduling.run.ai/v2", "Queue", self.names.queue(name))


def _camel_event(e: dict) -> dict:
    """The client's snake_case Event -> the API's field names used by the checks."""
    return {"reason": e.get("reason"), "message": e.get("message"), "count": e.get("count"),
            "involvedObject": e.get("involved_object") or {}, "lastTimestamp": e.get("last_timestamp"),
            "eventTime": e.get("event_time"), "firstTimestamp": e.get("first_timestamp"),
            "metadata": {"creationTimestamp": (e.get("metadata") or {}).get("creation_timestamp")}}


def figures(state, ex: Exercise) -> dict:
    """Key numbers for reports and trials: binds, evictions, gang bind spread."""
    out: dict = {"binds": sum(1 for e in state.timeline if e.what == "bound"),
                 "evictions": sum(1 for e in state.timeline if e.what == "evicted")}
    for workload in state.gangs:
        times = [e.t for e in state.timeline if e.what == "bound" and e.workload == workload]
        if times:
            out[f"gang_bind_spread_s.{workload}"] = round(max(times) - min(times), 3)
        decided = [e.t for e in state.timeline if e.what == "decided" and e.workload == workload]
        if decided and times:  # KAI's decision (first BindRequest) to the last pod bound
            out[f"gang_decision_to_bound_s.{workload}"] = round(max(times) - min(decided), 3)
    return out


def run_exercise(path: str | Path, lab: LabRecord, evidence_root: Path | None = None) -> Outcome:
    path = Path(path)
    ex = load_exercise(path)  # rejected before anything is applied
    return ExerciseRun(ex, path, lab, evidence_root).run()


def resolve_exercise(name_or_path: str) -> Path:
    from ..paths import exercises_dir

    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        return p
    return exercises_dir() / f"{name_or_path}.yaml"

