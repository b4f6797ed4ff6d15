"""Bringing a twin up: a binary lab whose fleet is the snapshot's nodes, the snapshot's state put in while
KAI's scheduler is held (so it decides nothing before every pod that was bound is on its node), then the
scheduler started on the snapshot's configuration and left to decide the pending work.

On disk (evidence/twin-<stamp>/): fleet.yaml (the nodes), objects.yaml (what went in, as kept: nothing
else of the snapshot is written), twin.json (counts, what the twin does not reproduce, the round trip:
the lab's state against the snapshot's before KAI acted, and what KAI then decided), twin.md.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import yaml

from .. import toolchain, versions
from ..errors import KailabError
from ..kube import Kube
from .. import labs
from ..labs import Lab, LabRecord, LabSpec
from ..evidence import new_folder
from ..paths import evidence_dir, lab_dir
from ..runtimes import processes
from ..runtimes.waits import wait_until
from . import order, snapshot_tool
from .design import TwinDesign, check_against
from .plan import TwinPlan, make_plan
from .snapshot import load_snapshot


@dataclass(frozen=True)
class SnapshotSetting:
    """The scheduler's configuration as the snapshot had it: its whole `conf` (actions, tiers), its
    parameters as flags (`args`); no SchedulingShard says it (`shard`), so only a runtime that runs the
    scheduler itself (binary) can take it."""

    conf: dict
    args: tuple[str, ...]
    shard: dict | None = None


def _fleet_yaml(plan: TwinPlan) -> str:
    return yaml.safe_dump(plan.fleet.model_dump(by_alias=True, exclude_defaults=True), sort_keys=False)


def state_of(kube: Kube, namespaces: list[str]) -> dict:
    """What the lab holds, in the terms a twin is checked by: nodes, queues, pods bound (on which node)
    and pending, PodGroups."""
    pods = [p for ns in namespaces for p in kube.list("v1", "Pod", namespace=ns)]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    return {
        "nodes": sorted(n["metadata"]["name"] for n in kube.list("v1", "Node")),
        "queues": sorted(q["metadata"]["name"] for q in kube.list("scheduling.run.ai/v2", "Queue")),
        "bound": {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"]["nodeName"]
                  for p in live if p["spec"].get("nodeName")},
        "pending": sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in live
                          if not p["spec"].get("nodeName")),
        "podgroups": sorted(f"{g['metadata']['namespace']}/{g['metadata']['name']}" for ns in namespaces
                            for g in kube.list("scheduling.run.ai/v2alpha2", "PodGroup", namespace=ns)),
    }


def lab_meta(kube: Kube, namespaces: list[str]) -> dict[str, dict]:
    """Each pod's and PodGroup's creation time and UID as the lab's API server set them, and a bound pod's
    start time: keyed Kind/namespace/name (order.ref), what KAI orders by where its plugins tie."""
    out = {}
    for ns in namespaces:
        for kind, o in [*(("Pod", p) for p in kube.list("v1", "Pod", namespace=ns)),
                        *(("PodGroup", g) for g in kube.list("scheduling.run.ai/v2alpha2", "PodGroup", namespace=ns))]:
            meta = o["metadata"]
            out[order.ref({**o, "kind": kind})] = {"creationTimestamp": meta.get("creationTimestamp"), "uid": meta.get("uid"),
                                 "startTime": (o.get("status") or {}).get("startTime")}
    return out


def planned_state(plan: TwinPlan) -> dict:
    """The same terms, from the plan: what the lab must hold once the state is in."""
    key = lambda p: f"{p['metadata']['namespace']}/{p['metadata']['name']}"  # noqa: E731
    return {"nodes": sorted(n["metadata"]["name"] for n in plan.fleet.node_manifests()),
            "queues": sorted(o["metadata"]["name"] for o in plan.objects if o["kind"] == "Queue"),
            "bound": {key(p): p["spec"]["nodeName"] for p in plan.bound},
            "pending": sorted(key(p) for p in plan.pending),
            "podgroups": sorted(key(o) for o in plan.objects if o["kind"] == "PodGroup")}


def differences(want: dict, got: dict) -> list[str]:
    """Every way the lab's state differs from the snapshot's ([] for a faithful twin)."""
    out = []
    for part in ("nodes", "queues", "pending", "podgroups"):
        missing, extra = sorted(set(want[part]) - set(got[part])), sorted(set(got[part]) - set(want[part]))
        if part == "queues":
            extra = [q for q in extra if q not in ("default-queue", "default-parent-queue")]  # the chart's own
        out += [f"{part}: {m} missing" for m in missing] + [f"{part}: {e} not in the snapshot" for e in extra]
    for pod, node in want["bound"].items():
        if got["bound"].get(pod) != node:
            out.append(f"bound: {pod} on {got['bound'].get(pod) or 'no node'}, not {node}")
    out += [f"bound: {p} not in the snapshot" for p in sorted(set(got["bound"]) - set(want["bound"]))]
    return out


def _apply_all(kube: Kube, objs: list[dict]) -> None:
    kube.create_many(objs)  # a twin's objects are new: made, not applied (thousands, on a small machine)


def put_state(kube: Kube, plan: TwinPlan, echo: Callable[[str], None]) -> dict[str, float]:
    """Namespaces, then the objects in the plan's order, then the bound pods, then the pending ones;
    the seconds each part took."""
    took: dict[str, float] = {}
    t = time.monotonic()
    for ns in plan.namespaces:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for kind in ("PriorityClass", "Queue", "Topology", "PodGroup"):
        objs = [o for o in plan.objects if o["kind"] == kind]
        if kind == "PriorityClass":  # a value is immutable: the lab's own class of that name goes first
            for pc in objs:
                have = kube.get(pc["apiVersion"], kind, pc["metadata"]["name"])
                if have and have.get("value") != pc.get("value"):
                    kube.delete(pc["apiVersion"], kind, pc["metadata"]["name"])
                    wait_until(f"PriorityClass {pc['metadata']['name']} to go",
                               lambda pc=pc: kube.get(pc["apiVersion"], kind, pc["metadata"]["name"]) is None, timeout=60)
            _apply_all(kube, objs)
        elif kind == "Queue":
            for q in objs:  # parents first, one at a time: a child names its parent
                kube.apply(q)
        else:
            _apply_all(kube, objs)
        took[kind], t = round(time.monotonic() - t, 1), time.monotonic()
    echo(f"{len(plan.bound)} bound pods on their nodes, {len(plan.pending)} pending")
    # bound and pending in one pass, in the snapshot's creation order (the scheduler is held meanwhile)
    _apply_all(kube, order.in_creation_order(plan.bound + plan.pending, plan.order))
    took["pods"] = round(time.monotonic() - t, 1)
    return took


def twin_plan(snapshot: str | Path, name: str, anonymise: bool = False, design: TwinDesign | None = None) -> TwinPlan:
    """The plan, every input checked (the snapshot, the design's queues against it): refused here, before
    anything is made."""
    plan = make_plan(load_snapshot(snapshot), name, anonymise)
    if design is not None:
        check_against(design, plan.queue_names())
    return plan.with_design(design)


def make_twin(snapshot: str | Path, name: str, kai_version: str = "", anonymise: bool = False,
              settle_s: float = 30.0, timeout_s: float = 600.0, echo: Callable[[str], None] = print,
              design: TwinDesign | None = None, out: Path | None = None, keep_up: bool = True,
              against_tool: bool = False) -> Path:
    """Bring the twin up and return its evidence folder. Left up (`kailab down --name NAME`) unless
    `keep_up` is false; `design` changes its queues and scheduler before KAI decides; `against_tool`
    also runs KAI's snapshot tool on the same state and sets its session beside the twin's first."""
    plan = twin_plan(snapshot, name, anonymise, design)
    if against_tool:
        plan = replace(plan, args=plan.args + [snapshot_tool.TWIN_VERBOSITY])
    if LabRecord.load(name) is not None:
        raise KailabError(f"a lab named {name!r} exists: `kailab down --name {name}`, or --name another")
    if out is None:
        out = new_folder(evidence_dir(), "twin")  # two twins in one second: twin-<time>-2
    else:
        out.mkdir(parents=True)
    (out / "fleet.yaml").write_text(_fleet_yaml(plan))
    (out / "objects.yaml").write_text(yaml.safe_dump_all(plan.objects + plan.bound + plan.pending, sort_keys=False))
    if design is not None:
        (out / "design.yaml").write_text(design.path.read_text())
        (out / "scheduler-conf.yaml").write_text(yaml.safe_dump(plan.conf, sort_keys=False))
    record: dict = {"snapshot": str(Path(snapshot).resolve()), "lab": name, "anonymised": anonymise,
                    "design": plan.design, "counts": plan.counts(), "not_reproduced": plan.not_reproduced,
                    "unknown_fields": plan.unknown, "scheduler_args": plan.args, "seconds": {}}
    tool, tool_version = None, versions.normalise(kai_version or versions.DEFAULT_KAI)
    if against_tool:  # built before any lab: a failed build leaves nothing up
        toolchain.build_all([snapshot_tool.recipe(tool_version)], None)
    started = time.monotonic()
    echo(f"twin {name}: {plan.fleet.nodes_total} nodes, {plan.fleet.gpus_total} GPUs; lab coming up")
    try:
        lab = labs.up(LabSpec(name=name, runtime="binary", fleet=str(out / "fleet.yaml"), kai_version=kai_version))
    except BaseException:
        if not keep_up and LabRecord.load(name) is not None:
            labs.down(name)  # a start that failed: whatever it made
        raise
    record["seconds"]["lab_up"] = round(time.monotonic() - started, 1)
    record["kai_version"] = lab.record.kai_version
    kube = Kube(lab.kubeconfig)
    try:
        lab.kill("scheduler")  # held while the state goes in
        t = time.monotonic()
        record["seconds"]["state_in_parts"] = put_state(kube, plan, echo)
        want = planned_state(plan)
        got = wait_until("the twin's state to match the snapshot's",
                         lambda: (lambda now: now if not differences(want, now) else None)(state_of(kube, plan.namespaces)),
                         timeout=timeout_s,
                         hint=f"compare `kubectl get pods -A -o wide` ({lab.kubeconfig}) with {out}/objects.yaml")
        record["seconds"]["state_in"] = round(time.monotonic() - t, 1)
        # the state that matched, listed once: what the round trip records
        record["round_trip"] = {"differences": differences(want, got), "checked": {k: len(v) for k, v in want.items()}}
        held = lab_meta(kube, plan.namespaces)
        record["not_reproduced"] = {**plan.not_reproduced, **order.not_kept(
            plan.order, {k: order.key_of(v) for k, v in held.items()}, plan.objects, plan.bound + plan.pending)}
        if against_tool:  # on the state the lab holds: its objects' UIDs, creation and start times (KAI orders by them)
            echo(f"KAI's snapshot tool ({tool_version}) on the twin's state")
            tool = snapshot_tool.run_tool(snapshot_tool.tool_snapshot(plan, plan.params, held),
                                          tool_version, out, timeout_s)
            record["seconds"]["snapshot_tool"] = tool["seconds"]
        t = time.monotonic()
        lab.configure_scheduler(SnapshotSetting(conf=plan.conf, args=tuple(plan.args)))
        record["seconds"]["scheduler_on"] = round(time.monotonic() - t, 1)
        record["decided"] = _settle(kube, plan, settle_s, timeout_s, echo)
        record["decided"].update(_why(kube, plan.namespaces, record["decided"]))
        record["queues_gpus"] = queue_gpus(plan, record["decided"])
        if tool is not None:
            record["against_snapshot_tool"] = _against(tool, plan, lab, record["decided"], out)
        record["seconds"]["total"] = round(time.monotonic() - started, 1)
    finally:
        kube.close()
        (out / "twin.json").write_text(json.dumps(record, indent=2) + "\n")
        (out / "twin.md").write_text(markdown(record))
        if not keep_up:
            lab.down()
    return out


def _against(tool: dict, plan: TwinPlan, lab: Lab, decided: dict, out: Path) -> dict:
    """The tool's session beside the twin's first session that decided a pod of the snapshot."""
    log = processes.logs_dir(lab_dir(lab.name)) / "scheduler.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    (out / "scheduler.log").write_text(processes.strip_ansi(text))
    pods = set(planned_state(plan)["bound"]) | set(planned_state(plan)["pending"])
    sessions = [(sid, d) for sid, d in snapshot_tool.decisions(text)
                if pods & {*d["placed"], *d["evicted"], *d["pipelined"]}]
    return snapshot_tool.agreement(tool, sessions, decided, plan.same_nodes, plan.equivalent_pods, plan.similar_pods)


_EVICTED = re.compile(r"^Pod (\S+/\S+) was (\w+) by (?:workload )?(\S+?)\.?$")


def _why(kube: Kube, namespaces: list[str], decided: dict) -> dict:
    """From KAI's events: why each pod still pending was not placed (its last Unschedulable words) and
    what each evicted pod was evicted for (the workload it made room for)."""
    last: dict[str, tuple[str, str]] = {}
    evictions: dict[str, str] = {}
    for ns in namespaces:
        for e in kube.list("v1", "Event", namespace=ns):
            obj, reason = e.get("involvedObject") or {}, e.get("reason", "")
            when = e.get("lastTimestamp") or e.get("eventTime") or ""
            if reason == "Unschedulable" and obj.get("kind") == "Pod":
                key = f"{ns}/{obj.get('name')}"
                if when >= last.get(key, ("", ""))[0]:
                    last[key] = (when, (e.get("message") or "").splitlines()[0][:300] if e.get("message") else "")
            elif reason == "Evict":
                m = _EVICTED.match((e.get("message") or "").splitlines()[0] if e.get("message") else "")
                if m:
                    evictions[m.group(1)] = f"{m.group(2)} by {m.group(3)}"
    return {"why_pending": {p: last[p][1] for p in decided["still_pending"] if p in last},
            "evicted_for": {p: evictions.get(p, "") for p in decided["evicted"]}}


def queue_gpus(plan: TwinPlan, decided: dict) -> dict[str, dict[str, float]]:
    """Per queue: GPUs allocated in the snapshot, and once KAI had decided."""
    shares = plan.pod_shares(decided["placed"])
    before_bound = set(planned_state(plan)["bound"])
    after_bound = (before_bound - set(decided["evicted"])) | set(decided["placed"])
    out: dict[str, dict[str, float]] = {}
    for label, pods in (("before", before_bound), ("after", after_bound)):
        for p in pods:
            queue, gpus = shares[p]
            row = out.setdefault(queue, {"before": 0.0, "after": 0.0})
            row[label] = round(row[label] + gpus, 3)
    return dict(sorted(out.items()))


def _settle(kube: Kube, plan: TwinPlan, settle_s: float, timeout_s: float, echo: Callable[[str], None]) -> dict:
    """Let KAI decide until nothing changes for `settle_s` (or `timeout_s`); what it decided, per pod."""
    before = planned_state(plan)
    began = time.monotonic()
    last, since, deadline = None, began, began + timeout_s
    while time.monotonic() < deadline:
        now = state_of(kube, plan.namespaces)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settle_s:
            break
        time.sleep(1)
    placed = {p: last["bound"][p] for p in before["pending"] if p in last["bound"]}
    evicted = sorted(p for p in before["bound"] if p not in last["bound"])
    moved = {p: last["bound"][p] for p, n in before["bound"].items() if last["bound"].get(p) not in (None, n)}
    echo(f"KAI placed {len(placed)} of {len(before['pending'])} pending pods, evicted {len(evicted)}")
    return {"settled": time.monotonic() < deadline, "last_change_s": round(since - began, 1),
            "placed": placed, "still_pending": sorted(last["pending"]),
            "evicted": evicted, "moved": moved}


def markdown(record: dict) -> str:
    c = record["counts"]
    lines = [f"# Twin {record['lab']} of {Path(record['snapshot']).name}", "",
             f"{c['nodes']} nodes, {c['gpus']} GPUs; {c.get('queues', 0)} queues, {c.get('podgroups', 0)} PodGroups; "
             f"{c['pods_bound']} pods bound, {c['pods_pending']} pending. KAI {record.get('kai_version', '?')}.", ""]
    rt = record.get("round_trip")
    if rt is not None:
        lines += [f"Round trip (before KAI acted): {'the lab holds the snapshot' if not rt['differences'] else 'differs'}"
                  + "".join(f"\n- {d}" for d in rt["differences"]), ""]
    d = record.get("decided")
    if d:
        lines += [f"KAI then placed {len(d['placed'])} pending pods, left {len(d['still_pending'])} pending, "
                  f"evicted {len(d['evicted'])}, moved {len(d['moved'])}"
                  + ("" if d["settled"] else " (had not settled at the timeout)") + ".", ""]
    if record.get("against_snapshot_tool"):
        lines += [snapshot_tool.markdown(record["against_snapshot_tool"])]
    if record["not_reproduced"]:
        lines += ["Not reproduced:", *[f"- {k}: {'; '.join(v)}" for k, v in sorted(record["not_reproduced"].items())], ""]
    if record["unknown_fields"]:
        lines += [f"Fields kailab does not know (tolerated): {', '.join(record['unknown_fields'])}", ""]
    return "\n".join(lines)
