"""What a lesson says in plain English: expectations, actions, queue shares, check results, and the
kubectl commands that show a step. Text only: nothing here reads the course or touches a lab."""

from __future__ import annotations

import json

from ..exercise.spec import ConditionExpect, CountExpect, EventExpect, GpuShare, ObjectExpect, Range, Step, WaitExpect
from ..workloads import OWNER_LABEL, QUEUE_LABEL

METRICS = ("bound", "running", "pending", "evicted", "nodes", "devices", "domains")

INVARIANT_TEXT = {
    "no-gpu-overcommit": "no node's bound pods ask for more GPUs than the node has",
    "gang-never-partial": "a gang Job has either none or at least its gang size of pods allocated",
    "nonpreemptible-within-quota": "no queue holds more non-preemptible GPUs than its quota",
    "queue-within-limit": "no queue's subtree holds more GPUs than its limit",
}
# same fields the checks read (kailab.exercise.checks.podgroup_reasons)
PODGROUP_REASONS = ("kubectl get podgroups -A -o custom-columns=NAME:.metadata.name,QUEUE:.spec.queue,"
                    "CONDITION:.status.schedulingConditions[*].reason,"
                    "REASONS:.status.schedulingConditions[*].reasons[*].reason")


# ---------------------------------------------------------------------------- numbers and shares
def num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def quota_words(quota: float) -> str:
    return "unlimited" if quota < 0 else num(quota)


def limit_words(limit: float) -> str:
    return "none" if limit < 0 else num(limit)


def share_words(gpu: GpuShare) -> str:
    return (f"quota {quota_words(gpu.quota)}, limit {limit_words(gpu.limit)}, "
            f"overQuotaWeight {num(gpu.over_quota_weight)}")


def count_words(c: int | Range) -> str:
    if isinstance(c, int):
        return str(c)
    if c.min is not None and c.max is not None:
        return str(c.min) if c.min == c.max else f"{c.min} to {c.max}"
    return f"at least {c.min}" if c.min is not None else f"at most {c.max}"


def _because(why: str) -> str:
    return f" - why: {why}" if why else ""


def _why(c: int | Range) -> str:
    return f" ({c.why})" if isinstance(c, Range) and c.why else ""


# ---------------------------------------------------------------------------- what KAI must do
def describe_count(e: CountExpect) -> str:
    subject = f"queue {e.queue}" if e.queue is not None else f"workload {e.workload}"
    subject += f" on nodes {e.on}" if e.on is not None and e.on.node_selector else f" on node {e.on}" if e.on else ""
    parts = [f"{count_words(v)} {m}{_why(v)}" for m in METRICS if (v := getattr(e, m)) is not None]
    return f"{subject}: {', '.join(parts)}" + _because(e.why)


def describe_object(e: ObjectExpect) -> str:
    what = "no" if e.count == 0 else count_words(e.count)
    shape = f" matching {json.dumps(e.match, separators=(', ', ': '))}" if e.match else ""
    return f"{what} {e.subject()}{shape}{_why(e.count)}" + _because(e.why)


def describe_expect(e: CountExpect | ConditionExpect | EventExpect | ObjectExpect | WaitExpect) -> str:
    if isinstance(e, CountExpect):
        return describe_count(e)
    if isinstance(e, ObjectExpect):
        return describe_object(e)
    if isinstance(e, ConditionExpect):
        verb = "carry" if e.present else "do not carry"
        who = "every PodGroup" if e.every else "PodGroups"
        return f"{who} of {e.podgroup_of} {verb} the reason {e.reason}" + _because(e.why)
    if isinstance(e, WaitExpect):
        bounds = [f"{q} wait {b}" for q in ("p50", "p95", "p99", "max") if (b := getattr(e, q)) is not None]
        return f"queue {e.wait_of}: pending to bound, " + ", ".join(bounds) + _because(e.why)
    return f"workload {e.workload}: {count_words(e.count)} {e.event_reason} event(s){_why(e.count)}{_because(e.why)}"


COURSE_STACK = "kai"  # the course teaches KAI: what a file expects of another stack is not its answer


def answer_lines(step: Step) -> list[str]:
    lines = [describe_expect(e) for e in step.expect if e.checked_on(COURSE_STACK)]
    if step.stays:
        lines += [f"for the whole {step.stays.for_}: {describe_expect(c)}" for c in step.stays.that
                  if c.checked_on(COURSE_STACK)]
    return lines


# ---------------------------------------------------------------------------- what the runner does
def _gpus(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def _class_words(w) -> str:
    out = f"priority class {w.priority_class}" if w.priority_class else "no priority class"
    if w.preemptible is not None:
        out += ", labelled " + ("preemptible" if w.preemptible else "non-preemptible")
    if getattr(w, "run_duration", None):
        code = getattr(w, "exit_code", None)
        out += f", each finishing {w.run_duration} after it starts" + (f" with exit code {code}" if code else "")
    if w.termination_exit_code is not None:
        out += f", exiting {w.termination_exit_code} when stopped"
    return out


def _apply_line(item) -> str | None:
    if item.pods:
        p = item.pods
        size = (f"{p.gpu_fraction} of a GPU" if p.gpu_fraction is not None else
                f"{p.gpu_memory} MiB of a GPU" if p.gpu_memory is not None else _gpus(p.gpus))
        return (f"creates {p.count} pods {p.name}-0..{p.count - 1} in queue {p.queue}: "
                f"{size} each, {_class_words(p)}")
    if item.job:
        j = item.job
        gang = f"a gang of {j.gang} (all or nothing)" if j.gang else "no gang size"
        done = f", {j.completions} completions" if j.completions and j.completions != j.parallelism else ""
        policy = "disruptions ignored" if j.ignore_disruptions else "no podFailurePolicy"
        return (f"creates Job {j.name} with {j.parallelism} pods in queue {j.queue}{done}: {_gpus(j.gpus)} each, "
                f"{gang}, {_class_words(j)}; backoffLimit {j.backoff_limit}, {policy}")
    if item.manifest:
        m = item.manifest
        return (f"creates {m.object['kind']} {m.name} from its manifest"
                + (f" in queue {m.queue}" if m.queue else ""))
    if item.elastic:
        e = item.elastic
        return (f"creates elastic workload {e.name}: {e.pods} pods in one PodGroup (minMember {e.min_member}) "
                f"in queue {e.queue}: {_gpus(e.gpus)} each, {_class_words(e)}")
    if item.deployment:
        d = item.deployment
        cls = (_class_words(d) if d.priority_class else
               "no priority class, so KAI's podgrouper gives it inference (non-preemptible)")
        return (f"creates Deployment {d.name} with {d.replicas} replicas in queue {d.queue}: "
                f"{_gpus(d.gpus)} each, {cls}")
    return None


def action_lines(step: Step) -> list[str]:
    """What the runner does in this step, in the order the step writes it (checks aside)."""
    out: list[str] = []
    for key, value in step.operations():
        out += _ACTION_WORDS.get(key, lambda v: [])(value)
    return out


def _patch_line(p) -> str:
    if p.queue is not None and p.gpu is not None:
        return f"changes queue {p.queue} to {share_words(p.gpu)}"
    return f"scales Deployment {p.deployment} to {p.replicas} replicas"


_ACTION_WORDS = {
    "scheduler": lambda v: [f"restarts KAI's scheduler with placement {v.placement}"],
    "delete": lambda v: [f"deletes workload {d.workload}" for d in v],
    "patch": lambda v: [_patch_line(p) for p in v],
    "apply": lambda v: [line for item in v if (line := _apply_line(item)) is not None],
    "faults": lambda v: [f.words() for f in v],  # each fault's own words (exercise/faults.py)
    "settle": lambda v: [f"waits until no pod changes placement for {v}"],
    "nodes": lambda v: [f"changes {'node ' + c.node if c.node else 'the nodes ' + str(c)}: {c.describe()}" for c in v],
}


# ---------------------------------------------------------------------------- how to see it by hand
def _checks(step: Step) -> list:
    return [e for e in list(step.expect) + (list(step.stays.that) if step.stays else []) if e.checked_on(COURSE_STACK)]


def _workloads(step: Step) -> list[str]:
    """The step's workloads in first-mention order: applied, patched, deleted, then checked."""
    named = [item.workload.name for item in step.apply] + [p.deployment for p in step.patch] \
        + [d.workload for d in step.delete] \
        + [e.podgroup_of if isinstance(e, ConditionExpect) else e.of if isinstance(e, ObjectExpect) else e.workload
           for e in _checks(step) if not isinstance(e, WaitExpect)]  # a wait names a queue
    return [w for w in dict.fromkeys(named) if w]


def step_commands(step: Step) -> list[str]:
    """kubectl commands that show this step's subjects; real names are per run, so -A and labels."""
    checks = _checks(step)
    cmds = [f"kubectl get pods -A -l {OWNER_LABEL}={w} -o wide" for w in _workloads(step)]
    if any(isinstance(e, CountExpect) and e.queue is not None for e in checks) or any(p.queue for p in step.patch):
        cmds.append(f"kubectl get pods -A -o wide -L {QUEUE_LABEL}")
    if any(isinstance(e, ConditionExpect) for e in checks):
        cmds.append(PODGROUP_REASONS)
    for kind in dict.fromkeys(e.object for e in checks if isinstance(e, ObjectExpect)):
        cmds.append("kubectl get nodes --show-labels" if kind == "Node" else
                    f"kubectl get {kind.lower()}s.scheduling.run.ai -A -o yaml" if kind in ("BindRequest", "PodGroup")
                    else f"kubectl get {kind.lower()}s -A -o yaml")
    if step.nodes:
        cmds.append("kubectl get nodes --show-labels")
    for reason in dict.fromkeys(e.event_reason for e in checks if isinstance(e, EventExpect)):
        cmds.append(f"kubectl get events -A --field-selector reason={reason} --sort-by=.lastTimestamp")
    return cmds


# ---------------------------------------------------------------------------- what a check found
def check_text(r) -> str:
    return f"{r.what}: expected {r.expected}, observed {r.observed}"


def result_text(r) -> str:
    text = f"{'PASS' if r.passed else 'FAIL'}  {check_text(r)}"
    if r.offending and not r.passed:
        text += f" (e.g. {', '.join(r.offending[:5])})"
    return text
