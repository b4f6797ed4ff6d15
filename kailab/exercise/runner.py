"""Runs one exercise against a lab: its own namespace and queue names, steps in order, checks,
evidence after every step, clean-up always (also on failure, Ctrl-C or a dying KAI component)."""

from __future__ import annotations

import contextlib
import re
import secrets
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import operators, evidence, top, workloads
from ..report import operations
from ..errors import KailabError, LabError
from ..evidence import EvidenceDir
from ..fleet import load_fleet
from ..kube import FIELD_MANAGER, Kube
from ..paths import evidence_dir
from .. import labs
from ..labs import Lab, LabRecord
from ..runtimes.waits import wait_until
from ..stacks.base import HasMetricPanels, PlacesByTopology, topology_aware
from . import explain, faults, fleet_check
from .actions import ACTIONS, StepContext
from .checks import Names, Result
from .figures import figures, settle_times  # noqa: F401 - settle_times: as the runner's before
from .observer import Observer
from ..stacks.base import QueueDecl, Ref
from .load import load_exercise
from .match import fill
from .spec import Exercise, Step, seconds
from ..runtimes import metrics
from .actions import Scheduler

NO_QUEUE_SERIES = "no series for this run's queues"


@dataclass
class Outcome:
    exercise: str
    verdict: str  # passed | failed | error | interrupted
    results: list[Result] = field(default_factory=list)
    evidence: str = ""
    error: str = ""
    figures: dict = field(default_factory=dict)
    # where the run's wall time went: set-up, each kind of step operation (expect, stays, apply,
    # ...), evidence, clean-up; seconds, summed over the run (for `kailab bench` and the verdict)
    wall: dict = field(default_factory=dict)
    # what went wrong after the verdict, e.g. a clean-up that left the lab dirty for the next run
    warnings: list[str] = field(default_factory=list)
    # expectations the file keeps for other stacks than the lab's: named, never counted as passed
    not_checked: list[str] = field(default_factory=list)
    # why a failed run failed, where the lab can say more than the expectation (explain.py)
    explanations: list[str] = field(default_factory=list)
    # the lab's, as `up` recorded them (LabRecord.start_retries): components started again, and why
    lab: str = ""
    start_retries: list[dict] = field(default_factory=list)

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if not r.passed]

    def report(self, evidence: bool = True) -> str:
        lines = [f"{self.exercise}: {self.verdict.upper()}" + (f"  (evidence: {self.evidence})" if evidence else "")]
        if self.error:
            lines.append(f"  {self.error}")
        lines += [f"  {r.line()}" for r in self.results if not r.passed]
        lines += [f"  why: {x}" for x in self.explanations]
        lines += [f"  warning: {w}" for w in self.warnings]
        if self.not_checked:  # each one is in verdict.json, ending "(for STACKS only; this lab runs STACK)"
            said = [re.search(r"\(for (.+) only; this lab runs (\S+)\)$", n) for n in self.not_checked]
            others = sorted({s for m in said if m for s in m.group(1).split(", ")})
            here = next((m.group(2) for m in said if m), "this lab's")
            lines.append(f"  not checked on {here}: {len(self.not_checked)} expectation(s) the file keeps for "
                         f"{', '.join(others) or 'other schedulers'} (verdict.json: not_checked)")
        return "\n".join(lines)


def _clip(text: str, head: int = 250, tail: int = 550) -> str:
    """How a component ended (its start) and its last log lines (its end), within one readable line."""
    return text if len(text) <= head + tail else f"{text[:head]} … {text[-tail:]}"


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
    (a lesson asks, then reveals, there; the lab keeps the step's state while they run).
    `fail_fast`: no step after the first one with a failed check runs (each would only wait out its
    timeout on a state the failure already broke); the verdict and evidence are the same otherwise."""

    def __init__(self, ex: Exercise, source: Path, lab: "Lab | LabRecord", evidence_root: Path | None = None,
                 before_step=None, after_step=None, fail_fast: bool = False):
        lab = lab if isinstance(lab, Lab) else labs.open(lab)  # a lab's record (a test's fixture) opens as its lab
        self.ex, self.source, self.lab, self.fail_fast = ex, source, lab, fail_fast
        self.before_step = before_step or (lambda index, step: None)
        self.after_step = after_step or (lambda index, step, results: None)
        run_id = secrets.token_hex(2)
        self.names = Names(prefix=f"x{run_id}", namespace=f"kx-{ex.exercise}-{run_id}"[:63],
                           queues=tuple(n for n, _, _ in ex.queue_tree()))
        self.kube = Kube(lab.kubeconfig)
        self.stack = lab.stack  # what schedules: its vocabulary, metrics, side namespaces
        self.evidence = EvidenceDir(evidence_root or evidence_dir(), ex.exercise)
        self.outcome = Outcome(ex.exercise, "error", evidence=str(self.evidence.path), lab=lab.name,
                               start_retries=list(lab.record.start_retries))
        gangs = {a.workload.name: a.gang for s in ex.steps for a in s.apply if a.gang}
        self.invariants = list(ex.invariants_on.get(self.stack.name, ex.invariants))
        self.observer = Observer(self.kube, self.names, self.invariants, gangs,
                                 watched=self.stack.watched(), queue_view=self.stack.queue_view,
                                 owners=operators.kinds_of((lab.record.stack or {}).get("operators") or {}))
        self.log_mark: dict = {}
        self.applied: dict[str, str] = {}  # workload -> kind
        self.intake: dict[int, dict[str, int]] = {}  # step index -> pods each workload it applied makes
        self.queue_gpu: dict[str, dict] = {}  # queue (its name in the file) -> its GPU share as a step patched it
        self.manifests_applied: dict[str, dict] = {}  # raw manifests by workload name (to delete them)
        self.step_started: dict[str, float] = {}  # step name -> when it began (observer time)
        self.stack_figures: dict = {}  # figures from the scheduler's own metrics (labs with Prometheus)
        self.faulted: dict[str, set[str]] = {}  # fault key -> what the exercise's faults took away (faults.py)
        self.scheduler_changed = False  # a step reconfigured KAI's scheduler: put the default back
        self.scheduler_settings: dict = {}  # step index -> its kai.SchedulerChange, rendered in preflight
        self.topology_name = self.names.topology if ex.topology else None
        self.refusal: KailabError | None = None  # the preflight's, when it refused the run
        # fleet nodes a `nodes:` step changed -> the label keys it touched (put back at the end)
        self.nodes_changed: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ top level
    def run(self) -> Outcome:
        self.evidence.write("exercise.yaml", self.source.read_text())
        self.evidence.write(evidence.RUN, {
            "exercise": self.ex.exercise, "lab": self.lab.name, "runtime": self.lab.record.runtime,
            "install": self.lab.describe()["install"], "stack": self.lab.describe(),
            "operators": (self.lab.record.stack or {}).get("operators") or {},
            "kai_version": self.lab.record.kai_version, "fleet": self.lab.record.fleet, "namespace": self.names.namespace,
            "queues": {n: self.names.queue(n) for n, _, _ in self.ex.queue_tree()},
            "lab_start_retries": self.lab.record.start_retries,
            # a deleted pod's grace period on the fleet's nodes, at most (seconds; None: the cluster's own KWOK)
            "termination_grace_s": self.lab.record.termination_grace,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        try:  # the scheduler configuration the lab runs as the run starts (steps may change it)
            conf = self.lab.scheduler_config()
            if conf is not None:
                self.evidence.write("scheduler-conf/00-lab.yaml", conf)
        except Exception as err:  # noqa: BLE001 - evidence, never a reason not to run
            self.evidence.write("scheduler-conf/00-lab.unreadable.txt", f"{type(err).__name__}: {err}\n")
        try:
            with self._timed("set-up"):
                try:
                    self._preflight()
                except ComponentDied:
                    raise
                except KailabError as err:  # what the lab cannot run, said before anything was made
                    self.refusal = err
                    raise
                self._mark_logs()
                self.observer.start()
                self._setup()
            for index, step in enumerate(self.ex.steps):
                with _allure_step(f"step {index + 1}: {step.name}"):
                    self._run_step(index, step)
                if self.fail_fast and self.outcome.failures:
                    self.outcome.warnings.append(f"fail-fast: {len(self.ex.steps) - index - 1} step(s) after "
                                                 f"step {index + 1} ({step.name}) not run")
                    break
            self._finish_invariants()
            self.outcome.verdict = "passed" if not self.outcome.failures else "failed"
        except KeyboardInterrupt:
            self.outcome.verdict, self.outcome.error = "interrupted", "interrupted by the user (Ctrl-C / SIGTERM)"
            raise
        except ComponentDied as err:
            self.outcome.verdict, self.outcome.error = "error", str(err)
        except KailabError as err:
            self.outcome.verdict, self.outcome.error = "error", self._death_behind(str(err))
        except Exception as err:  # noqa: BLE001 - the verdict must say what happened
            self.outcome.verdict, self.outcome.error = "error", self._death_behind(f"{type(err).__name__}: {err}")
        finally:
            self._conclude()
        return self.outcome

    @contextlib.contextmanager
    def _timed(self, what: str):
        start = time.monotonic()
        try:
            yield
        finally:
            self.outcome.wall[what] = round(self.outcome.wall.get(what, 0.0) + time.monotonic() - start, 2)

    def _preflight(self) -> None:
        if any(s.scheduler for s in self.ex.steps) and not self.lab.configures_scheduler():
            self.lab.configure_scheduler(None)  # its one-line refusal
        faults.preflight(self, [f for s in self.ex.steps for f in s.faults])  # what the lab cannot do, refused
        self.stack.preflight(self.kube, self.lab.record)
        if self.ex.stacks and self.stack.name not in self.ex.stacks:
            raise KailabError(f"{self.source.name}: stacks: the exercise runs on {', '.join(self.ex.stacks)}, and lab "
                              f"{self.lab.name!r} runs {self.stack.name}: bring one up with "
                              f"`kailab up --scheduler {self.ex.stacks[0]}`")
        fleet_check.whole_and_free(self.kube, self.ex, self.lab)
        # what the stack cannot express is refused here, by name, before anything is made
        self.stack.queue_objects(self.queue_decls(), self.names.namespace)
        if self.topology_name:
            topology_aware(self.stack, f"{self.source.name}:").topology_objects(self.topology_name, self.ex.topology,
                                                                                f"{self.source.name}:")
        made = [obj for step in self.ex.steps for item in step.apply for obj in self.workload_objects(step, item)]
        # a kind whose operator the lab lacks would sit there unreconciled: refused by name instead
        operators.missing_for(made, (self.lab.record.stack or {}).get("operators") or {}, f"{self.source.name}: apply")

        for index, step in enumerate(self.ex.steps):  # what KAI's operator refuses, before anything is made
            if step.scheduler is not None:
                self.scheduler_settings[index] = Scheduler.setting(self, index, step.scheduler)

    def _setup(self) -> None:
        # the namespace's default ServiceAccount is made with it rather than awaited from
        # kube-controller-manager: admission holds pods until it exists
        objs = [workloads.namespace(self.names.namespace, {"kailab.io/exercise": self.ex.exercise}),
                workloads.service_account("default", self.names.namespace)]
        objs += self.stack.queue_objects(self.queue_decls(), self.names.namespace)
        if self.topology_name:
            objs += topology_aware(self.stack, f"{self.source.name}:").topology_objects(
                self.topology_name, self.ex.topology, f"{self.source.name}:")
        self.evidence.manifests(0, "queues-and-namespace", objs)
        for obj in objs:  # a child queue right after its parent: a stack's webhook may not have seen the parent yet
            self.kube.apply_settling(obj)

    # ------------------------------------------------------------------ steps
    def queue_decls(self) -> list[QueueDecl]:
        """The exercise's queue tree as the run names it and as its steps have patched it, for the stack."""
        leaves = self.ex.leaf_queues()
        return [QueueDecl(self.names.queue(name), self.names.queue(parent) if parent else None,
                          self.queue_gpu.get(name) or gpu.as_queue_gpu(), leaf=name in leaves,
                          labels={"kailab.io/exercise": self.ex.exercise}, where=f"{self.source.name}: queues.{name}")
                for name, parent, gpu in self.ex.queue_tree()]

    def workload_objects(self, step: Step, item) -> list[dict]:
        """An apply item's objects in the run's namespace and queue names, as the lab's stack runs them."""
        queue = self.names.queue(item.workload.queue) if item.workload.queue else ""
        # a hand-written manifest may name the run's queues, namespace, topology: ${...}
        built = fill(item.manifests(self.names.namespace, queue, self.topology_name), self.names.of_run())
        return self.stack.workload_objects(built, f"{self.source.name}: step {step.name!r} apply {item.workload.name}")

    def on_this_stack(self, items: list, step: Step, how: str) -> list:
        """The expectations checked on the lab's stack; the rest named in the outcome (`stacks:`)."""
        kept = [e for e in items if e.checked_on(self.stack.name)]
        for e in items:
            if e not in kept:
                self.outcome.not_checked.append(f"step {step.name!r} {how}: {e.model_dump(exclude_defaults=True, by_alias=True, exclude={'stacks', 'why'})}"
                                                f" (for {', '.join(e.stacks)} only; this lab runs {self.stack.name})")
        return kept

    def delete(self, refs: list[Ref]) -> None:
        for ref in refs:
            self.kube.delete(ref.api_version, ref.kind, ref.name, ref.namespace)

    def _run_step(self, index: int, step: Step) -> None:
        """The step's operations, in the order the file writes them (see actions.py)."""
        self.before_step(index, step)
        first_result = len(self.outcome.results)
        ctx = StepContext(self, step, index, self.observer.state.now(), time.time(), seconds(step.timeout))
        self.step_started[step.name] = ctx.since
        for key, value in step.operations():
            with self._timed(key):
                ACTIONS[key].run(ctx, value)
            self.check_components()
        with self._timed("evidence"):
            self._snapshot(self.evidence.step_dir(index + 1, step.name))
        self.after_step(index, step, self.outcome.results[first_result:])

    def _snapshot(self, rel: str) -> None:
        queues = [self.names.queue(n) for n, _, _ in self.ex.queue_tree()]
        self.evidence.snapshot(rel, self.kube, self.names.namespace, self.observer.state, self._side_namespace(),
                               self.stack.snapshot_objects(self.kube, self.names.namespace, queues))
        picture = top.once(self.kube, metrics.url(self.lab.record.ports) if self.lab.record.metrics else None, missing_ok=True)
        if picture:  # the lab as `kailab top` shows it, per step in report.html (where the lab serves its queues)
            self.evidence.write(f"{rel}/{evidence.TOP}", picture)

    def _side_namespace(self) -> str:
        """Where the scheduler keeps pods of its own for the run's (KAI's GPU reservation pods)."""
        return next(iter(self.stack.side_namespaces()), "")

    def _finish_invariants(self) -> None:
        for inv in self.invariants:
            broken = self.observer.violations.get(inv)
            self.outcome.results.append(Result("whole run", "invariant", inv, "never violated",
                                               f"violated at t={broken[0]}s: {broken[1][0]}" if broken else "never violated",
                                               broken is None, broken[1] if broken else []))

    def list_events(self) -> list[dict]:
        """The run namespace's Events, with the API's field names."""
        return self.kube.list("v1", "Event", self.names.namespace)

    def _death_behind(self, error: str) -> str:
        """An error a lab component's death caused (its API server refusing connections) is that death."""
        try:
            self.check_components()
        except Exception as died:  # noqa: BLE001 - no answer about deaths: the error stands as it is
            return f"{died} (the run stopped on: {_clip(error)})" if isinstance(died, ComponentDied) else error
        return error

    def check_components(self) -> None:
        dead = self.lab.dead_components(ignore=faults.stopped_processes(self.faulted))
        if dead:
            tail = dead[0][1].replace("\n", " | ")
            names = [c for c, _ in dead]
            # a lab's own processes (Prometheus, kube-state-metrics) are named as such, not as KAI's
            what = (f"{self.stack.title} component" if set(names) & self.lab.scheduler_components()
                    else "lab component")
            raise ComponentDied(f"{what} died: {', '.join(names)} "
                                f"({_clip(tail)})")

    # ------------------------------------------------------------------ evidence and clean-up
    def _mark_logs(self) -> None:
        self.log_mark = self.lab.log_mark()

    def _copy_logs(self) -> None:
        """KAI's log lines for the run's window, from wherever the lab's runtime keeps them."""
        for name, data in self.lab.scheduler_logs(self.log_mark).items():
            self.evidence.write(f"{evidence.LOGS}/{name}", data)

    def _scheduler_snapshot(self) -> None:
        url = self.lab.scheduler_snapshot_url()
        if url:
            self.evidence.scheduler_snapshot(url)

    def _stack_metrics(self) -> None:
        """KAI's own series for the run's window (its dashboards' queries), this run's queues only."""
        if not self.lab.record.metrics:
            return

        prometheus = metrics.url(self.lab.record.ports)
        panels = self._stack_panels(prometheus, time.time())
        if any(p.get("missing") == NO_QUEUE_SERIES for p in panels):
            # the run may have ended before a scrape saw its queues (or a busy machine failed one): ask again
            # after every target's next scrape, and say what those scrapes were if the series are still absent
            try:
                ports = self.lab.record.ports  # the queues' series come from the jobs scraped every 2 s
                scrapes = metrics.wait_for_scrape(ports, after=time.time(),
                                                  jobs=self.lab.scheduler_components() & metrics.figure_jobs(ports))
                seen = metrics.describe_scrapes(scrapes, since=self.observer.state.started)
            except (OSError, ValueError, KeyError) as err:  # the panels still go to the evidence, as they are
                seen = f"Prometheus's targets unreadable: {err}"
            panels = self._stack_panels(prometheus, time.time())
            for p in panels:
                if p.get("missing") == NO_QUEUE_SERIES:
                    p["missing"] += f" (last scrapes: {seen})"
        if panels:
            self.evidence.write(evidence.KAI_METRICS, {"prometheus": prometheus, "panels": panels})

    def _stack_panels(self, prometheus: str, end: float) -> list[dict]:
        ours = {self.names.queue(n): n for n, _, _ in self.ex.queue_tree()}
        if not isinstance(self.stack, HasMetricPanels):
            return []
        panels = self.stack.metric_panels(self.lab.record, prometheus, self.observer.state.started, end)
        if not panels:
            return []
        # this run's pod groups only: a lab may hold other runs beside it
        evicted = self.stack.evictions_by_action(prometheus, self.observer.state.started, end, self.names.namespace)
        panels.append(evicted)
        for action, n in (evicted.get("by_action") or {}).items():
            if n:
                self.stack_figures[f"evicted_by_action.{action}"] = n
        for panel in panels:
            series = panel.get("series") or []
            if "queue_name" in panel.get("promql", "") or any("queue_name" in s["labels"] for s in series):
                kept = [s for s in series if s["labels"].get("queue_name") in ours]
                for s in kept:
                    s["labels"]["queue"] = ours[s["labels"]["queue_name"]]
                panel["series"] = kept
                if not kept:  # none at all, or only other runs' queues
                    panel["missing"] = NO_QUEUE_SERIES
        return panels

    def _conclude(self) -> None:
        """Runs on every exit path; each part is guarded so one failure cannot lose the rest."""
        parts = [
            ("final snapshot", lambda: self._snapshot("final")),
            ("namespace dump", lambda: self.outcome.verdict != "passed"
             and self.evidence.dump_namespace(self.kube, self.names.namespace)),
            ("KAI logs", self._copy_logs),
            ("scheduler snapshot", self._scheduler_snapshot),
            ("KAI metrics", self._stack_metrics),
        ]
        parts.append(("restore what faults took away", self.restore_faults))
        notes = []
        for label, fn in parts:
            try:
                # each part its own figure: what the evidence costs a run, part by part
                with self._timed("restore faults" if label.startswith("restore") else f"evidence: {label}"):
                    fn()
            except BaseException as err:  # noqa: BLE001 - keep going: evidence first
                notes.append(f"{label}: {type(err).__name__}: {err}")
        self.observer.stop()
        with self.observer.state.cond:
            self.evidence.timeline(list(self.observer.state.timeline))
            if self.outcome.verdict == "failed":
                self.outcome.explanations = explain.jobs_failed_by_eviction(self.observer.state)
            self.outcome.figures = {**figures(self.observer.state, self.ex),
                                    **operations.queue_figures(self.observer.state.timeline, self.names.logical_queue),
                                    **self.stack_figures,
                                    **settle_times(self.outcome.results, self.step_started)}
        self._write_verdict(notes)  # before clean-up: a run killed there still has its verdict
        try:
            with self._timed("clean-up"):
                self._cleanup()
        except BaseException as err:  # noqa: BLE001
            notes.append(f"clean-up: {err}")
            # the next exercise on this lab may find this one's pods or queues
            self.outcome.warnings.append(f"clean-up failed, the lab may hold this run's objects: {err}")
        self._write_verdict(notes)
        self.kube.close()

    def restore_faults(self) -> None:
        """The lab outlives the exercise: bring back what its faults and steps changed."""
        faults.undo_all(self)
        if self.scheduler_changed:
            self.lab.configure_scheduler(None)
            self.scheduler_changed = False
        if self.nodes_changed:
            fleet_nodes = {n["metadata"]["name"]: n for n in load_fleet(self.ex.fleet).node_manifests()}
            for name, keys in sorted(self.nodes_changed.items()):
                self.restore_node(fleet_nodes[name], keys)
            self.nodes_changed.clear()

    def restore_node(self, declared: dict, keys: set[str]) -> None:
        """Put a node a step changed back as its fleet declares it: the labels the steps touched,
        its taints, schedulable."""
        labels = declared["metadata"]["labels"]
        self.kube.dynamic.patch(self.kube.resource("v1", "Node"), name=declared["metadata"]["name"],
                                body={"metadata": {"labels": {k: labels.get(k) for k in keys}},
                                      "spec": {"taints": declared["spec"].get("taints"), "unschedulable": None}},
                                content_type="application/merge-patch+json", field_manager=FIELD_MANAGER)

    def _write_verdict(self, notes: list[str]) -> None:
        self.evidence.write(evidence.VERDICT, {
            "exercise": self.ex.exercise, "verdict": self.outcome.verdict, "error": self.outcome.error,
            "kai_version": self.lab.record.kai_version, "lab": self.lab.name, "runtime": self.lab.record.runtime,
            "expectations": [asdict(r) for r in self.outcome.results], "figures": self.outcome.figures,
            "observer_errors": self.observer.errors, "evidence_notes": notes, "wall_seconds": self.outcome.wall,
            "stack": self.stack.name, "not_checked": self.outcome.not_checked, "why": self.outcome.explanations,
            "lab_start_retries": self.lab.record.start_retries})

    def _cleanup(self) -> None:
        # The namespace controller would take about 6 s to reach the pods, after discovery and
        # every other kind. The namespace is Terminating first, so no controller can make a pod
        # in it again; its pods then go at once (the run's evidence is already written).
        self.kube.delete("v1", "Namespace", self.names.namespace)
        self.kube.delete_pods(self.names.namespace)
        # the next exercise must start on an empty fleet: wait for this one's pods to be gone, and
        # for the reservation pods KAI's binder held their shared devices with
        with self.observer.state.cond:
            groups = sorted({p.gpu_group for p in self.observer.state.pods.values()
                             if p.gpu_group and p.namespace == self.names.namespace})
        waits = [(self.names.namespace, None)]
        if groups and self._side_namespace():
            waits.append((self._side_namespace(), f"{workloads.GPU_GROUP_LABEL} in ({','.join(groups)})"))
        for namespace, selector in waits:
            def gone(namespace=namespace, selector=selector) -> bool:
                left = self.kube.list("v1", "Pod", namespace, label_selector=selector)
                if left:  # shown on timeout as the last error
                    raise LabError(f"{len(left)} pods left, e.g. {left[0]['metadata']['name']}")
                return True
            wait_until(f"the pods of namespace {namespace} to be gone", gone, timeout="exercise-clean-up")
        self.delete(self.stack.queue_leftovers(self.queue_decls(), self.names.namespace))
        if self.topology_name:
            # (a stack without topology refused it at preflight, before anything was made)
            if isinstance(self.stack, PlacesByTopology):
                self.delete(self.stack.topology_leftovers(self.topology_name))


def run_exercise(path: str | Path, lab: LabRecord, evidence_root: Path | None = None,
                 raise_refusal: bool = False) -> Outcome:
    """One run; with `raise_refusal` (`kailab run`), a run its preflight refused leaves no evidence and
    raises the refusal (one line, exit 2 or 3) instead of returning an `error` verdict."""
    path = Path(path)
    ex = load_exercise(path)  # rejected before anything is applied
    run = ExerciseRun(ex, path, lab, evidence_root)
    outcome = run.run()
    if raise_refusal and run.refusal is not None:
        shutil.rmtree(outcome.evidence, ignore_errors=True)  # nothing was made: no run to keep, or to report on
        raise run.refusal
    return outcome
