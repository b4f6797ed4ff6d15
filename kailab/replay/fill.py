"""The fill experiment: how much of a fleet's GPU KAI can allocate as it fills, per placement design.

The procedure of the "Beware of Fragmentation" (ATC '23) artifact, on a real KAI: the trace's tasks
(one pod each) inflated by seeded sampling to `target` x the fleet's GPU capacity, shuffled with the
seed, and submitted in that order with no departures. Submitting and waiting one pod at a time would
take hours at KAI's cycle, so tasks go in steps of at most `step` x capacity; each step settles
(every pod of it bound, or no bind for `settle_s` — several of KAI's 500 ms cycles — with pods left
pending), is recorded, and its pods still pending are deleted as *unplaced* (the artifact fails a
task it cannot place; KAI would keep it pending and retry it each cycle, which loads the lab and
changes nothing else). Every task runs in one queue owning the whole fleet, at one priority, and is
marked non-preemptible: as in the artifact a task once placed stays where it is. (Preemptible bare
pods were tried: KAI's consolidation evicted placed pods to make room — a plain delete, which loses
a bare pod for good, so the fill lost allocation KAI meant to move. A pod that still goes is counted
in `evicted_pods`, named in run.json's `deleted_after_bound` and, with the log lines that name it, in
seed-<s>/deleted-pods.log: KAI v0.17.0's binder deletes a bound shared-GPU pod it finds without its
reservation pod, and under load it deleted that reservation pod itself first.)

On disk (evidence/fill-<stamp>/): plan.json; <design>/lab.json; <design>/seed-<s>/steps.jsonl (one
line per step) and error.txt when a run could not finish; fill.json, fill.md, fill.svg, report.html.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
import urllib.request

from .. import toolchain, versions, workloads
from ..errors import KailabError
from ..fleet import fleet_path, load_fleet, node_name
from ..kube import Kube
from .. import labs
from ..labs import LabSpec
from ..evidence import new_folder, stamp_of
from ..paths import evidence_dir
from ..scale import cpu_seconds, machine_busy_seconds, peak_memory_mib
from .design import Design
from .figures import Expectation
from .fill_state import FleetState, log_lines
from .fragmentation import Node, Shape, fragmented_milli
from .player import _create
from .session import apply_design, wait_gone, write_lab_json
from .trace import Trace, TraceJob, check_against
from ..report import write_report
from ..report.fill import fewer_seeds, fill_svg
from ..variants import side_by_side

STEP_LABEL = "kailab.io/fill-step"
FILL_PRIORITY = "train"  # one priority for every task: the artifact preempts nothing
MARKS = (0.8, 0.9, 1.0, 1.1, 1.3)  # arrived shares the table reports
FIGURES = ("allocated_pct", "fragmented_pct", "unplaced_gpu_pct")  # at each mark: arrived-100.allocated_pct
STOP = threading.Event()  # Ctrl-C: every design's fill stops after its step, and its lab goes down


@dataclass
class FillPlan:
    trace: Trace
    designs: list[Design]
    fleet: str
    seeds: list[int]
    target: float = 1.3
    step: float = 0.01
    settle_s: float = 3.0
    runtime: str = "binary"
    labs: int | None = None  # designs side by side (None: all); 1 one after another
    kai_version: str = versions.DEFAULT_KAI
    # a fill reads no metric: without Prometheus and kube-state-metrics scraping every node, a large
    # fleet's lab spends its CPU on KAI and the API server
    metrics: bool = False
    # `[design/]arrived-100.allocated_pct >= 85` (figures(): the median over the seeds), as a replay's
    expectations: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        # content fingerprints: fills run at different times merge only on the same tasks and fleet
        jobs = json.dumps([j.as_row() for j in self.trace.jobs], sort_keys=True).encode()
        return {"trace": str(self.trace.path), "tasks_in_trace": sum(j.pods for j in self.trace.jobs),
                "trace_sha256": hashlib.sha256(jobs).hexdigest(),
                "fleet_sha256": hashlib.sha256(Path(fleet_path(self.fleet)).read_bytes()).hexdigest(),
                "fleet": self.fleet, "fleet_name": load_fleet(self.fleet).name, "seeds": self.seeds,
                "target": self.target, "step": self.step, "settle_s": self.settle_s, "runtime": self.runtime,
                "kai_version": self.kai_version, "metrics": self.metrics, "expectations": self.expectations,
                "designs": [{"name": d.name, "file": str(d.path)} for d in self.designs]}


def tasks_for(trace: Trace, capacity_gpus: int, target: float, seed: int) -> list[TraceJob]:
    """The trace's pods as one-pod tasks, inflated by seeded sampling (or cut) to `target` x capacity
    in requested GPUs, shuffled with the seed."""
    rng = random.Random(seed)
    pool = [replace(j, pods=1, min_members=1, priority=FILL_PRIORITY) for j in trace.jobs for _ in range(j.pods)]
    if not any(p.gpus for p in pool):
        raise KailabError(f"{trace.path}: no task asks for a GPU; a fill needs GPU tasks")
    want = target * capacity_gpus
    tasks, total = [], 0.0
    order = rng.sample(pool, len(pool))
    while total < want:
        t = order[len(tasks)] if len(tasks) < len(order) else rng.choice(pool)
        tasks.append(t)
        total += t.gpus
    rng.shuffle(tasks)
    return [replace(t, name=f"t{i:05d}") for i, t in enumerate(tasks)]


def steps_of(tasks: list[TraceJob], capacity_gpus: int, step: float) -> list[list[TraceJob]]:
    """Consecutive groups of tasks asking at most `step` x capacity GPUs each (at least one task)."""
    limit = step * capacity_gpus
    out: list[list[TraceJob]] = [[]]
    used = 0.0
    for t in tasks:
        if out[-1] and used + t.gpus > limit:
            out.append([])
            used = 0.0
        out[-1].append(t)
        used += t.gpus
    return out


def shape(t: TraceJob) -> Shape:
    return Shape(int(round(t.gpus * 1000)), t.cpu_milli, t.memory_mib,
                 frozenset(t.models))


def fleet_nodes(fleet_name: str) -> dict[str, Node]:
    fleet = load_fleet(fleet_name)
    return {node_name(p, i): Node(p.gpus, p.cpu * 1000, p.memory_gib * 1024, product=p.product)
            for p in fleet.pools for i in range(p.count)}


def run_seed(kube: Kube, rec, plan: FillPlan, seed: int, sdir: Path, say, queue_objects) -> list[dict]:
    """One fill of the lab's empty fleet with the seed's task order; a line per step in steps.jsonl.
    `queue_objects(namespace)`: the design's queues as the lab's stack makes them."""
    sdir.mkdir(parents=True)
    nodes = fleet_nodes(plan.fleet)
    capacity = sum(n.gpus for n in nodes.values())
    tasks = tasks_for(plan.trace, capacity, plan.target, seed)
    shapes = Counter(shape(t) for t in tasks)
    ns = f"fill-seed-{seed}"
    kube.apply(workloads.namespace(ns, labels={"kailab.io/fill": str(seed)}))
    kube.apply(workloads.service_account("default", ns))
    for obj in queue_objects(ns):  # a stack's queues may live in the namespace
        kube.apply(obj)
    state = FleetState(kube, ns, nodes)
    state.thread.start()
    state.ready.wait(30)
    arrived = arrived_cpu = 0.0
    unplaced = unplaced_milli = 0
    cpu_capacity = sum(n.cpu_milli for n in nodes.values())
    rows, started, cpu0, busy0 = [], time.monotonic(), cpu_seconds(rec.dir), machine_busy_seconds()
    steps = steps_of(tasks, capacity, plan.step)
    try:
        for i, group in enumerate(steps, 1):
            if STOP.is_set():
                raise KailabError(f"interrupted at step {i} of {len(steps)}")
            t0 = time.monotonic()
            for t in group:
                state.expect(t.name, i, shape(t))
                for obj in _pod(t, ns, i):
                    err = _create(kube, obj)
                    if err:
                        raise KailabError(f"step {i}: the API server refused task {t.name}: {err}")
            submit_s = time.monotonic() - t0  # one POST at a time, and a fraction's config maps after its pod
            arrived += sum(t.gpus for t in group)
            arrived_cpu += sum(t.cpu_milli for t in group)
            pending = _settle(state, kube, ns, i, len(group), plan.settle_s)
            for name in pending:
                state.ours.add(name)
                kube.delete("v1", "Pod", name, ns, grace=0)
            unplaced += len(pending)
            unplaced_milli += sum(state.shapes[name][1].milli for name in pending)
            now = state.nodes()
            used = sum(n.used_milli for n in now.values())
            rows.append({"step": i, "tasks": len(group), "arrived_pct": round(100 * arrived / capacity, 2),
                         "allocated_pct": round(100 * used / (capacity * 1000), 2),
                         "cpu_allocated_pct": round(100 * sum(n.cpu_used for n in now.values()) / cpu_capacity, 2),
                         "cpu_arrived_pct": round(100 * arrived_cpu / cpu_capacity, 2),
                         "unplaced_pods": unplaced, "unplaced_gpu_pct": round(100 * unplaced_milli / (capacity * 1000), 2),
                         "fragmented_pct": round(100 * fragmented_milli(now, shapes) / (capacity * 1000), 2),
                         "evicted_pods": len(state.gone_pods), "settle_s": round(time.monotonic() - t0, 2),
                         "submit_s": round(submit_s, 2),
                         "cycle_ms": scheduler_cycle_ms(rec)})
            with open(sdir / "steps.jsonl", "a") as f:
                f.write(json.dumps(rows[-1]) + "\n")
            if i % 10 == 0 or i == len(steps):
                say(f"seed {seed}: step {i}/{len(steps)}: arrived {rows[-1]['arrived_pct']:.0f} %, allocated "
                    f"{rows[-1]['allocated_pct']:.1f} %, unplaced {unplaced} pods")
    finally:
        state.stopping.set()
    cpu1, busy1 = cpu_seconds(rec.dir), machine_busy_seconds()
    (sdir / "run.json").write_text(json.dumps({
        "seed": seed, "tasks": len(tasks), "steps": len(steps), "capacity_gpus": capacity,
        "wall_s": round(time.monotonic() - started, 1), "watch_errors": state.errors[:5],
        "cpu_seconds": {k: round(cpu1[k] - cpu0.get(k, 0), 1) for k in cpu1},
        "peak_memory_mib": peak_memory_mib(rec.dir), "machine_cpu_seconds": round(busy1 - busy0, 1),
        "nodes_not_ready": nodes_not_ready(kube), "deleted_after_bound": dict(state.gone_pods)}, indent=2))
    if state.gone_pods:  # who deleted them, in the components' own words (the lab's logs go with the lab)
        (sdir / "deleted-pods.log").write_text(log_lines(rec.dir / "logs", set(state.gone_pods)))
    return rows


def scheduler_cycle_ms(rec) -> float | None:
    """How long KAI's last scheduling cycle took (its scheduler's own gauge), None where it has none."""
    port = (rec.ports or {}).get("scheduler.metrics")
    if not port:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:  # noqa: S310 - loopback
            for line in resp.read().decode().splitlines():
                if line.startswith("kai_e2e_scheduling_latency_milliseconds "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def nodes_not_ready(kube: Kube) -> int:
    """Fleet nodes whose Ready condition is not True (a lab that let its nodes' Leases lapse would
    change what KAI can place)."""
    pool = kube.api_client.rest_client.pool_manager
    nodes = json.loads(pool.request("GET", f"{kube.api_client.configuration.host}/api/v1/nodes", timeout=120).data)
    return sum(1 for n in nodes.get("items", [])
               if not any(c.get("type") == "Ready" and c.get("status") == "True"
                          for c in (n.get("status") or {}).get("conditions") or []))


def _pod(t: TraceJob, ns: str, step: int) -> list[dict]:
    size = {"cpu_milli": t.cpu_milli, "memory_mib": t.memory_mib,
            "gpu_models": t.models or None}
    share = {workloads.GPU_FRACTION: f"{t.gpus:g}"} if t.fractional else None
    pods = workloads.pods(t.name, ns, t.queue, 1, gpus=0 if t.fractional else int(t.gpus),
                          priority_class=FILL_PRIORITY, preemptible=False, labels={STEP_LABEL: str(step)},
                          share=share, size=size)
    for p in pods:
        p["metadata"]["name"] = t.name
    return pods


def _tried(kube: Kube, ns: str, pending: list[dict], tried: set[str]) -> bool:
    """KAI has tried every pending pod and said why it could not place it: its PodGroup carries a
    scheduling condition. (On a large fleet a cycle takes seconds: a quiet spell alone would call
    pods unplaced that KAI had not yet looked at.) `tried` keeps the PodGroups already seen so: each
    is read until it has a condition, not on every poll."""
    for p in pending:
        if p["podgroup"] in tried:
            continue
        pg = kube.get("scheduling.run.ai/v2alpha2", "PodGroup", p["podgroup"], ns) if p["podgroup"] else None
        if not pg or not (pg.get("status") or {}).get("schedulingConditions"):
            return False
        tried.add(p["podgroup"])
    return True


def _settle(state: FleetState, kube: Kube, ns: str, step: int, count: int, quiet_s: float,
            limit_s: float = 600) -> set[str]:
    """Wait until every pod of the step is bound, or none has bound for `quiet_s` and KAI has tried
    every one still pending; the pending ones."""
    last_bound, since, tried = -1, time.monotonic(), set()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not STOP.is_set():
        pods = state.step_pods(step)
        bound = sum(1 for _, p in pods if p["node"])
        seen = len(pods) + state.removed(step)
        if seen >= count and bound == len(pods):
            return set()
        if bound != last_bound:
            last_bound, since = bound, time.monotonic()
        elif (time.monotonic() - since >= quiet_s and seen >= count
              and _tried(kube, ns, [p for _, p in pods if not p["node"]], tried)):
            break
        time.sleep(0.2)
    return {n for n, p in state.step_pods(step) if not p["node"]}


def check_plan(plan: FillPlan) -> None:
    """Everything about a fill that can be wrong before a lab exists: refused in one line."""
    fleet = load_fleet(plan.fleet)
    if not 0 < plan.step <= 0.5 or not 0 < plan.target <= 5:
        raise KailabError(f"--step {plan.step:g} / --target {plan.target:g}: a step in (0, 0.5], a target in (0, 5]")
    for text in plan.expectations:
        try:
            Expectation(text)  # its syntax, before any lab
        except ValueError as err:
            raise KailabError(str(err)) from None
    for d in plan.designs:
        check_against(plan.trace, d.leaf_queues(), f"design {d.path}", fleet.gpus_total, products=fleet.products)
        if len(d.leaf_queues()) != 1:
            raise KailabError(f"{d.path}: a fill design has one leaf queue (every task goes to it), not "
                              f"{len(d.leaf_queues())}")


def run_fill(plan: FillPlan, root: Path | None = None, echo=print) -> Path:
    check_plan(plan)
    fleet = load_fleet(plan.fleet)
    toolchain.build_all(toolchain.recipes_for(versions.normalise(plan.kai_version)), None)
    out = new_folder(root or evidence_dir(), "fill")
    stamp = stamp_of(out, "fill")
    (out / "plan.json").write_text(json.dumps(plan.as_json(), indent=2))
    echo(f"fill: {len(plan.designs)} design(s) x {len(plan.seeds)} seed(s) to {plan.target:.0%} of "
         f"{fleet.gpus_total} GPUs in steps of {plan.step:.1%}; evidence: {out}")
    lock = threading.Lock()

    def design_run(d: Design) -> None:
        ddir = out / d.name
        ddir.mkdir()
        if STOP.is_set():
            (ddir / "error.txt").write_text("interrupted before it started\n")
            return

        def say(text: str) -> None:
            with lock:
                echo(f"  [{d.name}] {text}")
        spec = LabSpec(name=f"fill-{stamp.lower()}-{d.name}"[:50].rstrip("-"), runtime=plan.runtime,
                       fleet=plan.fleet, kai_version=plan.kai_version, metrics=plan.metrics)
        try:
            up0 = time.monotonic()
            with labs.running(spec) as lab:
                rec = lab.record
                write_lab_json(ddir, lab)
                (ddir / "up.json").write_text(json.dumps({"up_wall_s": round(time.monotonic() - up0, 1),
                                                          "peak_memory_mib": peak_memory_mib(rec.dir)}, indent=2))
                say(f"lab {rec.name} up ({rec.nodes} nodes, {rec.gpus} GPUs)")
                kube = Kube(rec.kubeconfig)
                try:
                    apply_design(kube, lab, d, ddir)
                    queue = next(iter(d.leaf_queues()))  # every task goes to the design's one queue
                    ours = replace(plan, trace=Trace(plan.trace.path, [replace(j, queue=queue) for j in plan.trace.jobs]))
                    stack = lab.stack
                    for seed in plan.seeds:
                        run_seed(kube, rec, ours, seed, ddir / f"seed-{seed}", say,
                                 lambda ns: stack.queue_objects(d.queue_decls(), ns))
                        dead = lab.dead_components(ignore=set())
                        if dead:
                            raise KailabError("; ".join(f"component died: {c}" for c, _ in dead))
                        if seed != plan.seeds[-1]:  # the next seed fills an empty fleet; after the last, the lab goes
                            kube.delete("v1", "Namespace", f"fill-seed-{seed}")
                            wait_gone(kube, f"fill-seed-{seed}", timeout=600)
                finally:
                    kube.close()
        except KailabError as err:
            (ddir / "error.txt").write_text(str(err) + "\n")
            say(f"error: {err}")

    STOP.clear()
    side_by_side(plan.designs, design_run, plan.labs, stop=STOP)  # Ctrl-C: each design stops, its lab down
    write_outputs(out)
    return out


def write_outputs(out: Path) -> dict:
    """fill.json, fill.md, fill.svg and report.html from what `out` holds; the summary."""
    summary = summarise(out)
    (out / "fill.json").write_text(json.dumps(summary, indent=2))
    (out / "fill.md").write_text(markdown(summary))
    (out / "fill.svg").write_text(fill_svg(summary))
    write_report([out])
    return summary


def at_mark(rows: list[dict], mark: float, key: str) -> float | None:
    """`key` at the first step whose arrived share reached `mark` (None: the fill stopped before)."""
    for r in rows:
        if r["arrived_pct"] >= mark * 100 - 1e-9:
            return r[key]
    return None


def summarise(out: Path) -> dict:
    """Read back from disk (never memory): per design and seed the curve, and the table at MARKS."""
    plan = json.loads((out / "plan.json").read_text())
    curves: dict[str, dict[str, list[dict]]] = {}
    errors: dict[str, str] = {}
    for d in plan["designs"]:
        ddir = out / d["name"]
        if (ddir / "error.txt").exists():
            errors[d["name"]] = (ddir / "error.txt").read_text().strip()
        curves[d["name"]] = {}
        for s in plan["seeds"]:
            f = ddir / f"seed-{s}" / "steps.jsonl"
            if f.exists():
                curves[d["name"]][str(s)] = [json.loads(line) for line in f.read_text().splitlines() if line]
    table, figures = {}, {}
    for name, seeds in curves.items():
        table[name], figures[name] = {}, {}
        for m in MARKS:
            for key in FIGURES:
                vals = [v for rows in seeds.values() if (v := at_mark(rows, m, key)) is not None]
                table[name][f"{key}@{m:.0%}"] = [min(vals), max(vals)] if vals else None
                if vals:
                    figures[name][f"arrived-{round(m * 100)}.{key}"] = round(statistics.median(vals), 2)
    checked = []
    for text in plan.get("expectations", []):
        try:
            checked += [{"expect": text, "held": held, "figures": what} for held, what in Expectation(text).check(figures)]
        except ValueError as err:  # a design or figure the fill has no value for
            checked.append({"expect": text, "held": False, "figures": str(err)})
    return {"plan": plan, "curves": curves, "table": table, "figures": figures, "expectations": checked,
            "errors": errors, "ok": not errors and all(len(s) == len(plan["seeds"]) for s in curves.values())
            and all(c["held"] for c in checked)}


def _table(s: dict, key: str) -> list[str]:
    """A markdown table of `key` per design at each arrived mark (a range: the seeds' min-max)."""
    lines = ["| design | " + " | ".join(f"arrived {m:.0%}" for m in MARKS) + " |", "|---" * (len(MARKS) + 1) + "|"]

    for name, row in s["table"].items():
        cells = []
        for m in MARKS:
            v = row[f"{key}@{m:.0%}"]
            cells.append("-" if v is None else (f"{v[0]:.1f} %" if v[0] == v[1] else f"{v[0]:.1f}-{v[1]:.1f} %")
                         + fewer_seeds(s, name, m * 100))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def markdown(s: dict) -> str:
    plan = s["plan"]
    lines = [f"# Fill of fleet {plan.get('fleet_name', plan['fleet'])} with {plan['trace']}", "",
             f"KAI {plan['kai_version']}, seeds {', '.join(map(str, plan['seeds']))}, to {plan['target']:.0%} of the "
             f"fleet's GPU capacity in steps of {plan['step']:.1%}. GPU allocated (% of capacity) when the arrived "
             "GPU workload reached each share; a range is the seeds' min-max.", "",
             *_table(s, "allocated_pct"), "",
             "Fragmented GPU (% of capacity, the next task's expected unusable free GPU) at the same points:", "",
             *_table(s, "fragmented_pct")]
    for e in s.get("expectations", []):
        lines += ["", f"- expect `{e['expect']}`: {'held' if e['held'] else 'FAILED'} ({e['figures']})"]
    for name, err in s["errors"].items():
        lines += ["", f"- {name}: error: {err}"]
    return "\n".join(lines) + "\n"
