"""Expectations and invariants, evaluated over a ClusterState (pure: no API calls).

An expectation yields a Result: expected, observed, pass/fail and the objects that explain it.
Invariants are checked on every watch event for the whole run; the first violation of each is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import datetime as dt

from .match import fill, mismatch
from .spec import ConditionExpect, CountExpect, EventExpect, ObjectExpect, count_holds, count_text
from .spec_expect import OWNER_KINDS
from .state import ClusterState
from ..workloads import OWNER_LABEL
from ..report.operations import quantile, waits


@dataclass
class Result:
    step: str
    kind: str  # expect | stays | invariant
    what: str
    expected: str
    observed: str
    passed: bool
    offending: list[str] = field(default_factory=list)
    at: float | None = None  # seconds since start when decided

    def line(self) -> str:
        mark = "PASS" if self.passed else "FAIL"
        text = f"[{mark}] {self.step}: {self.what}: expected {self.expected}, observed {self.observed}"
        if self.offending and not self.passed:
            text += f" (e.g. {', '.join(self.offending[:5])})"
        return text


class Names:
    """Logical names in the exercise file -> real names in the cluster (queues are cluster-wide)."""

    def __init__(self, prefix: str, namespace: str, queues: tuple[str, ...] = ()):
        self.prefix, self.namespace = prefix, namespace
        self.queues = tuple(queues)  # the exercise's queue names, for ${queue:NAME}

    def queue(self, logical: str) -> str:
        return f"{self.prefix}-{logical}"

    def logical_queue(self, real: str) -> str:
        return real[len(self.prefix) + 1:] if real.startswith(self.prefix + "-") else real

    @property
    def topology(self) -> str:
        return f"{self.prefix}-topology"

    def of_run(self) -> dict[str, str]:
        """What a file's ${...} names mean in this run (spec.run_names lists the same keys)."""
        return {"namespace": self.namespace, "run": self.prefix, "topology": self.topology,
                **{f"queue:{q}": self.queue(q) for q in self.queues}}


def count_metrics(state: ClusterState, exp: CountExpect, names: Names, since: float) -> dict[str, tuple[int, list[str]]]:
    """Observed value and the pods behind it, for every metric the expectation names."""
    queues: set[str] = set()
    if exp.queue is not None:
        pods = state.queue_pods(names.queue(exp.queue))
        queues = state.subtree(names.queue(exp.queue))
    else:
        pods = state.workload_pods(exp.workload or "")
    pods = [p for p in pods if p.namespace == names.namespace]
    on = exp.on
    if on is not None:  # only pods on the chosen nodes (their labels as they are now)
        pods = [p for p in pods if on.holds(p.node, state.node_labels.get(p.node or "", {}))]
    mine = (lambda e: e.queue in queues) if exp.queue is not None else (lambda e: e.workload == exp.workload)
    evicted_from = [e for e in state.timeline if e.what == "evicted" and e.t >= since and mine(e)
                    and (on is None or on.holds(e.node, state.node_labels.get(e.node or "", {})))]
    evicted = len(evicted_from)
    out: dict[str, tuple[int, list[str]]] = {}
    for metric in ("bound", "running", "pending"):
        if getattr(exp, metric) is not None:
            chosen = [p for p in pods if getattr(p, metric)]
            out[metric] = (len(chosen), sorted(f"{p.name}@{p.node or '-'}" for p in chosen))
    if exp.evicted is not None:
        out["evicted"] = (evicted, [e.pod for e in evicted_from])
    if exp.nodes is not None:
        on = sorted({p.node for p in pods if p.bound})
        out["nodes"] = (len(on), on)
    if exp.devices is not None:
        # a shared device once, by its GPU group; whole GPUs one each
        shared = sorted({f"{p.node}/{p.gpu_group}" for p in pods if p.bound and p.gpu_group})
        whole = sum(p.gpus for p in pods if p.bound and not p.gpu_group)
        out["devices"] = (len(shared) + whole, shared)
    if exp.domains is not None:
        values = sorted({state.node_labels.get(p.node or "", {}).get(exp.level or "", "(none)") for p in pods if p.bound})
        out["domains"] = (len(values), [f"{exp.level}={v}" for v in values])
    return out


def subject(exp: CountExpect) -> str:
    who = f"queue {exp.queue}" if exp.queue is not None else f"workload {exp.workload}"
    return who + (f" on {exp.on}" if exp.on is not None else "")


def evaluate_count(state: ClusterState, exp: CountExpect, names: Names, since: float, step: str,
                   kind: str = "expect") -> list[Result]:
    results = []
    for metric, (value, pods) in count_metrics(state, exp, names, since).items():
        expected = getattr(exp, metric)
        results.append(Result(step, kind, f"{subject(exp)} {metric}", count_text(expected), str(value),
                              count_holds(expected, value), pods, state.now()))
    return results


def chosen_objects(state: ClusterState, exp: ObjectExpect, names: Names) -> list[tuple[str, dict]]:
    """(display name, object) of the kind, chosen by name / workload / labels, in the run's scope."""
    run = names.of_run()
    pool = state.ended if exp.ended else state.objects.get(exp.object, {})
    if exp.object in ("Pod", "PodGroup", "BindRequest", "ResourceClaim", "Job", *OWNER_KINDS):
        objs = [(n, o) for (ns, n), o in pool.items() if ns == names.namespace]
    elif exp.object == "Queue":  # the run's queues, by their names in the file
        objs = [(names.logical_queue(n), o) for (_, n), o in pool.items() if n.startswith(names.prefix + "-")]
    else:
        objs = [(n, o) for (_, n), o in pool.items()]
    if exp.name is not None:
        want = str(fill(exp.name, run))
        objs = [(n, o) for n, o in objs if n == want or o["metadata"]["name"] == want]
    if exp.label_selector:
        objs = [(n, o) for n, o in objs
                if all((o["metadata"].get("labels") or {}).get(k) == v for k, v in exp.label_selector.items())]
    if exp.of is not None:
        pods = {p.name for p in state.workload_pods(exp.of) if p.namespace == names.namespace}
        pods |= {e.pod for e in state.timeline if e.workload == exp.of}
        if exp.object == "Pod":
            objs = [(n, o) for n, o in objs if n in pods]
        elif exp.object == "PodGroup":
            objs = [(n, o) for n, o in objs if n in state.workload_podgroups.get(exp.of, set())]
        elif exp.object == "BindRequest":
            objs = [(n, o) for n, o in objs if (o.get("spec") or {}).get("podName") in pods]
        elif exp.object == "ResourceClaim":  # made for one of its pods, or reserved for one
            objs = [(n, o) for n, o in objs if _claim_pods(o) & pods]
        elif exp.object in ("Job", *OWNER_KINDS):  # the workload's own (kailab labels it with the workload's name)
            objs = [(n, o) for n, o in objs if (o["metadata"].get("labels") or {}).get(OWNER_LABEL) == exp.of]
        else:  # Node: where the workload's pods are bound now
            on = {p.node for p in state.workload_pods(exp.of) if p.bound and p.namespace == names.namespace}
            objs = [(n, o) for n, o in objs if n in on]
    return sorted(objs, key=lambda x: x[0])


def _claim_pods(claim: dict) -> set[str]:
    """The pods a claim was made for (a template's claim is owned by its pod) or is reserved for."""
    owners = {r.get("name") for r in claim["metadata"].get("ownerReferences") or [] if r.get("kind") == "Pod"}
    users = {r.get("name") for r in (claim.get("status") or {}).get("reservedFor") or [] if r.get("resource") == "pods"}
    return (owners | users) - {None}


def evaluate_object(state: ClusterState, exp: ObjectExpect, names: Names, step: str, kind: str = "expect") -> Result:
    """How many chosen objects match the partial object; the count is the observation."""
    pattern = fill(exp.match, names.of_run())
    chosen = chosen_objects(state, exp, names)
    matching, missed = [], []
    for name, obj in chosen:
        why = mismatch(pattern, obj)
        (missed if why else matching).append(f"{name}{': ' + why if why else ''}")
    passed = count_holds(exp.count, len(matching))
    # a failure shows why the others missed; a pass the objects that matched
    detail = (missed + matching if not passed and len(matching) < _least(exp.count) else matching) \
        or [f"none of {exp.object} chosen yet"]
    return Result(step, kind, f"{exp.subject()} matching", count_text(exp.count),
                  str(len(matching)), passed, [f"{len(chosen)} chosen"] + detail, state.now())


def _least(count) -> int:
    return count if isinstance(count, int) else (count.min or 0)


def podgroup_reasons(state: ClusterState, workload: str, namespace: str) -> dict[str, set[str]]:
    """PodGroup name -> the reasons in its scheduling conditions, for the workload's pods."""
    groups = {p.podgroup for p in state.workload_pods(workload) if p.podgroup and p.namespace == namespace}
    out: dict[str, set[str]] = {}
    for (ns, name), pg in state.podgroups.items():
        if ns != namespace or name not in groups:
            continue
        reasons: set[str] = set()
        for cond in (pg.get("status") or {}).get("schedulingConditions") or []:
            reasons.add(cond.get("reason", ""))
            for r in cond.get("reasons") or []:
                reasons.add(r.get("reason", ""))
        out[name] = reasons - {""}
    return out


def evaluate_condition(state: ClusterState, exp: ConditionExpect, names: Names, step: str) -> Result:
    groups = podgroup_reasons(state, exp.podgroup_of, names.namespace)
    having = sorted(g for g, reasons in groups.items() if exp.reason in reasons)
    seen = sorted({r for reasons in groups.values() for r in reasons})
    if exp.every:
        pods = [p for p in state.workload_pods(exp.podgroup_of) if p.namespace == names.namespace]
        without = [p.name for p in pods if p.podgroup not in having]
        passed = bool(pods) and not without if exp.present else not having
    else:
        passed = bool(having) == exp.present
    observed = (f"{len(having)} of {len(groups)} podgroups have it" if groups else "no podgroups yet")
    if seen:
        observed += f"; reasons seen: {', '.join(seen)}"
    return Result(step, "expect", f"podgroup condition of {exp.podgroup_of}",
                  f"{exp.reason} {'present' if exp.present else 'absent'}{' on every pod' if exp.every else ''}",
                  observed, passed,
                  having or sorted(groups), state.now())


def evaluate_event(events: list[dict], state: ClusterState, exp: EventExpect, names: Names,
                   since_wall: float, step: str) -> Result:
    """`events`: core/v1 Event dicts of the namespace (listed by the runner)."""
    pods = {p.name for p in state.workload_pods(exp.workload)}
    groups = state.workload_podgroups.get(exp.workload, set())
    # evicted pods are gone from the state: the timeline still knows them
    pods |= {e.pod for e in state.timeline if e.workload == exp.workload}
    matching = []
    for ev in events:
        obj = ev.get("involvedObject") or ev.get("regarding") or {}
        if ev.get("reason") != exp.event_reason:
            continue
        if obj.get("name") not in pods and obj.get("name") not in groups:
            continue
        if _event_time(ev) + 1 < since_wall:  # event times have second precision
            continue
        matching.append(ev)
    total = sum(int(ev.get("count") or 1) for ev in matching)
    return Result(step, "expect", f"{exp.event_reason} events for {exp.workload}", count_text(exp.count),
                  str(total), count_holds(exp.count, total),
                  [f"{(ev.get('involvedObject') or {}).get('name')}: {ev.get('message', '')[:120]}" for ev in matching],
                  state.now())


def _event_time(ev: dict) -> float:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        val = ev.get(key)
        if val:
            if isinstance(val, dt.datetime):
                return val.timestamp()
            return dt.datetime.fromisoformat(str(val).replace("Z", "+00:00")).timestamp()
    meta = ev.get("metadata") or {}
    val = meta.get("creationTimestamp")
    if isinstance(val, dt.datetime):
        return val.timestamp()
    return dt.datetime.fromisoformat(str(val).replace("Z", "+00:00")).timestamp() if val else 0.0


# ----------------------------------------------------------------------------- invariants
def check_invariant(name: str, state: ClusterState, names: Names) -> list[str]:
    """Violations of invariant `name` in the current state (empty list: holds)."""
    if name == "no-gpu-overcommit":
        used = state.gpus_on_nodes()
        # pods still bound to a node that is gone (until the pod GC acts) hold no node's GPUs
        return [f"node {n} holds {g} GPUs of {state.node_gpus[n]}"
                for n, g in sorted(used.items()) if n in state.node_gpus and g > state.node_gpus[n]]
    if name == "gang-never-partial":
        # partial while KAI commits (or evicts) a gang is normal; resting partial is not
        out = []
        allocation = state.gang_allocation(names.namespace)
        for workload, since in sorted(state.gang_partial_since.items()):
            held = state.now() - since
            if held >= state.gang_grace:
                allocated, min_member = allocation[workload]
                out.append(f"gang {workload}: {allocated} of {min_member} pods allocated for {held:.1f} s "
                           f"with none allocated since t={since:.3f}s (a commit adds members as it goes)")
        return out
    if name in ("nonpreemptible-within-quota", "queue-within-limit"):
        out = []
        for real, q in state.queues.items():
            if not real.startswith(names.prefix + "-"):
                continue
            pods = [p for p in state.queue_pods(real) if p.bound]
            if name == "nonpreemptible-within-quota":
                used = sum(p.gpus for p in pods if not state.preemptible(p))
                bound_ = q.get("quota", -1)
                label = "non-preemptible GPUs"
            else:
                used = sum(p.gpus for p in pods)
                bound_ = q.get("limit", -1)
                label = "GPUs"
            if bound_ is not None and bound_ >= 0 and used > bound_:
                out.append(f"queue {names.logical_queue(real)} holds {used} {label}, above {bound_}")
        return out
    raise ValueError(f"unknown invariant {name}")


def evaluate_wait(state: ClusterState, exp, names: Names, step: str) -> list[Result]:
    """One result per bound asked: the queue's wait quantile (created -> bound) from the timeline."""
    real = names.queue(exp.wait_of)
    per_queue, _ = waits([e for e in state.timeline if e.queue == real], lambda q: q)
    values = per_queue.get(real, [])
    out = []
    for name, q in (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100)):
        bound = getattr(exp, name)
        if bound is None:
            continue
        observed = quantile(values, q) if values else None
        out.append(Result(step, "expect", f"queue {exp.wait_of} wait {name}", str(bound),
                          "no pod bound yet" if observed is None else f"{observed} s",
                          observed is not None and bound.holds(observed), [], state.now()))
    return out
