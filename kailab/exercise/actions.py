"""What a step can do, as a registry: one class per step key, run in the order the file writes them.

A new action is one class here (its `key` is the step field it reads, declared on `Step` in
spec.py) and one row in docs/exercise-format.md. Each action gets a StepContext: the run it
belongs to (cluster, names, observer, evidence, outcome) and the step's clock.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

from .. import workloads
from ..errors import KailabError
from ..kube import FIELD_MANAGER
from . import faults
from .checks import Result
from .expectations import evaluate_all, event_kinds, state_kinds
from .run_state import RunState
from .spec import Step, seconds


@dataclass
class StepContext:
    run: RunState  # the ExerciseRun the step belongs to, as its actions see it (run_state.py)
    step: Step
    index: int  # from 0
    since: float  # observer time the step began (s since the run started)
    since_wall: float  # wall clock the step began
    timeout: float  # the step's named timeout, seconds


class Action:
    key: ClassVar[str]

    def run(self, ctx: StepContext, value) -> None:
        raise NotImplementedError


class Scheduler(Action):
    """Restart KAI's scheduler with a placement strategy; its configuration goes to the evidence,
    and the run puts KAI's default back at its end."""
    key = "scheduler"

    @staticmethod
    def setting(r, index: int, value):
        """The step's setting (the lab's stack renders it; KAI: a SchedulerChange) on the run's lab. The run's preflight computes it for every
        scheduler step (run.scheduler_settings), so what KAI refuses stops the run before anything
        is applied and each step is rendered once."""
        url = None
        if value.usage is not None:  # time-based fair share: usage from this lab's Prometheus
            url = r.lab.usage_db_url()
            if not url:
                raise KailabError(f"step {index + 1} scheduler.usage needs the lab's Prometheus: lab "
                                  f"{r.lab.name!r} runs none (labs run one unless brought up --without-metrics)")
        return r.lab.scheduler_setting(value, url, f"{r.source}: step {index + 1}")

    def run(self, ctx: StepContext, value) -> None:
        r = ctx.run
        setting = r.scheduler_settings[ctx.index]
        stem = f"scheduler-conf/{ctx.index + 1:02d}-{value.placement}"
        r.evidence.write(f"{stem}.yaml", setting.conf)  # what the scheduler runs (KAI: its operator's rendering)
        if getattr(setting, "shard", None) is not None:
            r.evidence.write(f"{stem}.schedulingshard.yaml", setting.shard)  # what KAI's operator is told
        r.lab.configure_scheduler(setting)
        r.scheduler_changed = True
        r.observer.note(f"scheduler restarted with placement {value.placement}"
                        + (", time-based fair share on" if value.usage is not None else "")
                        + (f", shard {sorted(value.shard)}" if value.shard else ""))


class Delete(Action):
    """Delete workloads applied earlier (the exercise's own deletions are not evictions)."""
    key = "delete"

    def run(self, ctx: StepContext, value) -> None:
        r = ctx.run
        for d in value:
            kind = r.applied.get(d.workload)
            with r.observer.state.cond:
                pods = list(r.observer.state.workload_pods(d.workload))
                r.observer.state.our_deletions.update(p.uid for p in pods)
            if kind in ("pods", "elastic"):
                for p in pods:
                    r.kube.delete("v1", "Pod", p.name, r.names.namespace)
            elif kind in workloads.CONTROLLERS:
                api_version, api_kind = workloads.CONTROLLERS[kind]
                r.kube.delete(api_version, api_kind, d.workload, r.names.namespace)
            elif kind == "manifest":
                o = r.manifests_applied[d.workload]
                r.kube.delete(o["apiVersion"], o["kind"], d.workload, r.names.namespace)
            r.delete(r.stack.workload_leftovers(d.workload, kind, r.names.namespace))


class Patch(Action):
    """Change a queue's GPU share, or scale a Deployment."""
    key = "patch"

    def run(self, ctx: StepContext, value) -> None:
        r = ctx.run
        for p in value:
            if p.queue is not None and p.gpu is not None:
                # the whole tree again, as it stands now: a stack may write one queue's change into
                # others (a parent that opens may release its leaves)
                r.queue_gpu[p.queue] = p.gpu.as_queue_gpu()
                for obj in r.stack.queue_objects(r.queue_decls(), r.names.namespace):
                    r.kube.apply(obj)
            elif p.deployment is not None:
                res = r.kube.resource("apps/v1", "Deployment")
                r.kube.dynamic.patch(res, name=p.deployment, namespace=r.names.namespace,
                                     body={"spec": {"replicas": p.replicas}},
                                     content_type="application/merge-patch+json")


WATCH_CATCH_UP_S = 30  # the watch seeing a step's own creations: milliseconds, unless the API server is swamped


class Apply(Action):
    """Create workloads (in parallel); their manifests go to the evidence first."""
    key = "apply"

    def run(self, ctx: StepContext, value) -> None:
        r = ctx.run
        objs = []
        for item in value:
            objs += r.workload_objects(ctx.step, item)
            r.applied[item.workload.name] = item.kind
            if item.manifest:
                r.manifests_applied[item.workload.name] = item.manifest.object
        r.evidence.manifests(ctx.index + 1, ctx.step.name, objs)
        # a manifest's config maps exist before the pods that read them; a fractional pod's GPU-sharing
        # maps, named by KAI's webhook, right after it (see workloads.SHARED_GPU_CONFIGMAP)
        first = [o for o in objs if o["kind"] in workloads.CREATED_FIRST]

        def create(obj: dict) -> None:
            made = r.kube.apply(obj)
            for cm in workloads.sharing_config_maps(made) if obj["kind"] == "Pod" else []:
                r.kube.apply(cm)

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(r.kube.apply, first))
            list(pool.map(create, [o for o in objs if o["kind"] not in workloads.CREATED_FIRST]))
        # the step's windows start from what the watch has seen: wait for it to see the pods this
        # step created itself (a `stays: pending: 2` must not begin with one of them still unseen)
        made = {(o["metadata"].get("namespace") or r.names.namespace, o["metadata"]["name"])
                for o in objs if o["kind"] == "Pod"}
        if made:
            state = r.observer.state
            with state.cond:
                deadline = time.time() + WATCH_CATCH_UP_S
                while not made <= set(state.pods) and time.time() < deadline:
                    state.cond.wait(timeout=0.2)
        # what a `stays` window of this step must see the stack take in before it may end
        want = r.intake.setdefault(ctx.index, {})
        for o in objs:
            workload = (o["metadata"].get("labels") or {}).get(workloads.OWNER_LABEL)
            if workload and (n := workloads.pods_made(o)):
                want[workload] = want.get(workload, 0) + n


def not_taken_in(r, since: float, want: dict[str, int]) -> list[str]:
    """What of a step's submissions the stack has not yet taken in: pods not yet made (counted from
    the step's start), pending pods the stack has not taken up (KAI: not yet in a PodGroup)."""
    state = r.observer.state
    made: dict[str, set[str]] = {w: set() for w in want}
    for e in reversed(state.timeline):
        if e.t < since:
            break
        if e.what == "created" and e.workload in made:
            made[e.workload].add(e.pod)
    out = [f"{w}: {len(made[w])} of {n} pods made" for w, n in want.items() if len(made[w]) < n]
    for w in want:
        left = r.stack.not_taken_in([p for p in state.workload_pods(w) if p.pending])
        if left:
            out.append(f"{w}: {len(left)} pod(s) not taken in ({', '.join(left[:3])})")
    return out


class Faults(Action):
    """Kill / restart lab processes, take nodes away: what do KAI and the controllers do then? Each
    fault is a class of faults.py's registry."""
    key = "faults"

    def run(self, ctx: StepContext, value) -> None:
        for item in value:
            faults.inject(ctx.run, item)


class Nodes(Action):
    """Label, unlabel, taint, untaint, cordon or uncordon fleet nodes (by name or selector); each
    change goes on the timeline, and the run puts the nodes back as the fleet declares them."""
    key = "nodes"

    def run(self, ctx: StepContext, value) -> None:
        r = ctx.run
        res = r.kube.resource("v1", "Node")
        for change in value:
            if change.node is not None:
                targets = [r.kube.get("v1", "Node", change.node)]
            else:
                sel = ",".join(f"{k}={v}" for k, v in change.node_selector.items())
                targets = r.kube.list("v1", "Node", label_selector=sel)
            targets = [n for n in targets if n]
            if not targets:
                raise KailabError(f"step {ctx.step.name!r}: no node is {change} now (nodes: a node "
                                  "taken away by a fault cannot be changed)")
            for node in targets:
                name = node["metadata"]["name"]
                r.nodes_changed.setdefault(name, set()).update(change.label, change.unlabel)
                # as kailab's field manager: the fleet check tells labels kailab set from others'
                r.kube.dynamic.patch(res, name=name, body=self._patch(node, change),
                                     content_type="application/merge-patch+json", field_manager=FIELD_MANAGER)
                r.observer.note(f"node {name}: {change.describe()}", what="node", node=name)

    @staticmethod
    def _patch(node: dict, change) -> dict:
        labels = {**{k: None for k in change.unlabel}, **change.label}
        spec: dict = {}
        if change.taint or change.untaint:
            new = {(t.key, t.effect) for t in change.taint}
            kept = [t for t in (node.get("spec") or {}).get("taints") or []
                    if t.get("key") not in change.untaint and (t.get("key"), t.get("effect")) not in new]
            spec["taints"] = kept + [t.model_dump() for t in change.taint] or None
        if change.cordon or change.uncordon:
            spec["unschedulable"] = True if change.cordon else None
        return {"metadata": {"labels": labels}, **({"spec": spec} if spec else {})}


class Settle(Action):
    """Wait until no pod changes placement or phase for this long (within the step's timeout)."""
    key = "settle"

    def run(self, ctx: StepContext, value) -> None:
        ctx.run.observer.wait_settled(seconds(value), ctx.timeout)


class Expect(Action):
    """Eventually true within the step's timeout: state checks wait on the watch, event checks poll."""
    key = "expect"
    EVENT_POLL = 1.0
    # Past the step's timeout the wait goes on while some pod changed in the last MOVING_S seconds, up
    # to STRETCH x the timeout: on a loaded machine (CI: load 20-30 on 2 cores) a 24-pod Deployment
    # was still binding at 120 s; a lab at rest with the expectation unmet fails at the timeout as before
    STRETCH = 3.0
    MOVING_S = 15.0

    def run(self, ctx: StepContext, value) -> None:
        r = ctx.run
        value = r.on_this_stack(value, ctx.step, "expect")
        on_state = [e for e in value if type(e) in state_kinds()]
        on_events = [e for e in value if type(e) in event_kinds()]
        deadline = time.time() + ctx.timeout

        def evaluate(state) -> list[Result]:
            return evaluate_all(on_state, state, r.names, ctx.since, ctx.step.name)

        began = time.time()
        r.observer.wait_for(lambda s: all(x.passed for x in evaluate(s)), ctx.timeout,
                            stretch=self.STRETCH, moving=self.MOVING_S)
        waited = time.time() - began
        if waited > ctx.timeout + 1:  # never silent: the run's timeline says the timeout stretched
            r.observer.note(f"{ctx.step.name}: past its {ctx.timeout:.0f} s timeout, expect waited on while "
                            f"pods were still changing ({waited:.0f} s in all)", what="wait")
        with r.observer.state.cond:
            results = evaluate(r.observer.state)
        while on_events:
            listed = r.list_events()
            with r.observer.state.cond:
                ev = evaluate_all(on_events, r.observer.state, r.names, ctx.since, ctx.step.name,
                                  events=listed, since_wall=ctx.since_wall)
            if all(x.passed for x in ev) or time.time() > deadline:
                results += ev
                break
            time.sleep(self.EVENT_POLL)
        r.outcome.results += results


class Stays(Action):
    """Every condition must hold at every change for the whole window; stop at the first breach.
    The window watches from its start, and after an `apply` in its step it ends no sooner than its
    length after the stack has taken in all the step submitted: a window the scheduler could not
    yet act in would pass whatever it does (KAI's podgrouper, under load, groups a gang's pods up
    to ~15 s late). If that intake never comes within the step's timeout, the step fails saying so."""
    key = "stays"

    def run(self, ctx: StepContext, value) -> None:
        r = ctx.run
        start = time.time()
        length = seconds(value.for_)
        end = start + length
        want = r.intake.get(ctx.index) or {}
        taken_in = not want
        intake_deadline = max(end, ctx.since_wall + ctx.timeout)
        left: list[str] = []
        seen: dict[str, dict] = {}  # what -> lowest/highest value observed, expected, first breach
        breach_at: float | None = None
        value = value.model_copy(update={"that": r.on_this_stack(value.that, ctx.step, f"stays for {value.for_}")})
        if not value.that:
            return
        state = r.observer.state
        with state.cond:
            while True:
                breach_at = self._look(r, ctx, value, seen, breach_at)
                if not taken_in and not (left := not_taken_in(r, ctx.since, want)):
                    taken_in, end = True, max(end, time.time() + length)
                now = time.time()
                if breach_at is not None or (taken_in and now >= end) or now >= intake_deadline:
                    break
                until = end if taken_in else intake_deadline
                state.cond.wait(timeout=min(0.5, max(0.01, until - now)))
            at = state.now()
        into = round(time.time() - start, 1)
        for what, s in seen.items():
            r.outcome.results.append(self._result(ctx, value, what, s, breach_at, into))
        if not taken_in and breach_at is None:
            title = r.stack.title or r.stack.name
            r.outcome.results.append(Result(ctx.step.name, "stays", f"{title} took in this step's workloads "
                                            "within the window", "every pod made and taken in", "; ".join(left),
                                            False, [], at))

    @staticmethod
    def _look(r, ctx: StepContext, value, seen: dict, breach_at: float | None) -> float | None:
        for e in value.that:
            for res in evaluate_all([e], r.observer.state, r.names, ctx.since, ctx.step.name):
                res.kind = "stays"
                n = int(res.observed)
                s = seen.setdefault(res.what, {"lo": n, "hi": n, "expected": res.expected, "breach": None})
                s["lo"], s["hi"] = min(s["lo"], n), max(s["hi"], n)
                if not res.passed and s["breach"] is None:
                    s["breach"] = res
                    breach_at = res.at if breach_at is None else breach_at
        return breach_at

    @staticmethod
    def _result(ctx: StepContext, value, what: str, s: dict, breach_at: float | None, into: float) -> Result:
        span = str(s["lo"]) if s["lo"] == s["hi"] else f"between {s['lo']} and {s['hi']}"
        first = s["breach"]
        if first is not None:
            observed, pods = f"{first.observed} at t={first.at}s, {into}s into the window", first.offending
        elif breach_at is not None:
            observed, pods = f"{span} until the window was broken at t={breach_at}s", []
        else:
            observed, pods = f"{span} throughout", []
        return Result(ctx.step.name, "stays", f"{what} for {value.for_}", s["expected"], observed,
                      first is None, pods, breach_at)


ACTIONS: dict[str, Action] = {a.key: a for a in (Scheduler(), Delete(), Patch(), Apply(), Nodes(), Faults(),
                                                 Settle(), Expect(), Stays())}
