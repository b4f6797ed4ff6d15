"""Two ways a lab's pods can end, measured (`kailab bench endings N`, #56): by their run time (the
node ends each Succeeded: one status write; it stays until its namespace goes, then goes at once) or
deleted by whoever runs them (the node keeps it for the lab's termination grace, ends it Failed, then
removes it). Replays end their pods by run time; this says what that choice costs the API server,
etcd and KWOK against deleting them, per pod.

Each run: a namespace of N CPU-only pods placed round-robin on the fleet's nodes (spec.nodeName: no
scheduler involved, so only the ending differs), measured over their whole life, from the first
create until no pod is left: the lab processes' CPU and the API server's requests on pods by verb.
Creating and starting them costs the same in both; the difference is the ending."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from .. import workloads
from ..kube import Kube
from .. import labs
from ..labs import LabSpec
from ..scale import cpu_seconds
from .common import _record, machine

MODES = ("run-time", "deleted")
PARTIES = ("kube-apiserver", "etcd", "kwok", "kube-controller-manager")
RUN_TIME = "5s"  # the run-time pods' run: long enough for every pod to be Running first


def _pods(ns: str, count: int, nodes: list[str], mode: str) -> list[dict]:
    out = []
    for i in range(count):
        annotations = workloads.ending(RUN_TIME) if mode == "run-time" else {}
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"p-{i}", "namespace": ns, "annotations": annotations},
                    "spec": {"nodeName": nodes[i % len(nodes)], "restartPolicy": "Never",
                             "containers": [{"name": "main", "image": workloads.IMAGE,
                                             "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}})
    return out


def _requests(kube: Kube) -> dict[str, float]:
    """The API server's requests so far on pods, by verb (its own counter, apiserver_request_total)."""
    host = kube.api_client.configuration.host
    text = kube.api_client.rest_client.pool_manager.request("GET", f"{host}/metrics", timeout=30).data.decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="pods"' in line:
            verb = line.split('verb="', 1)[1].split('"', 1)[0]
            out[verb] = out.get(verb, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def _phases(kube: Kube, ns: str) -> list[str]:
    return [p.status.phase or "Pending" for p in kube.core.list_namespaced_pod(ns).items]


def _wait(what: str, predicate, timeout: float) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def _one(kube: Kube, lab_dir, nodes: list[str], count: int, mode: str, run: int, echo) -> dict:
    ns = f"endings-{mode}-{run}"
    kube.apply(workloads.namespace(ns))
    cpu0, req0, t0 = cpu_seconds(lab_dir), _requests(kube), time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(kube.apply, _pods(ns, count, nodes, mode)))
    if mode == "deleted":
        _wait("every pod Running", lambda: _phases(kube, ns).count("Running") == count, 600)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: kube.delete("v1", "Pod", f"p-{i}", ns), range(count)))
    else:
        _wait("every pod Succeeded", lambda: _phases(kube, ns).count("Succeeded") == count, 600)
        kube.delete("v1", "Namespace", ns)  # as a replay's clean-up does: its ended pods go with it
    _wait("no pod left", lambda: not _phases(kube, ns), 600)
    wall = time.perf_counter() - t0
    cpu1, req1 = cpu_seconds(lab_dir), _requests(kube)
    kube.delete("v1", "Namespace", ns)
    cpu = {p: round(cpu1.get(p, 0) - cpu0.get(p, 0), 2) for p in PARTIES}
    requests = {v: int(req1.get(v, 0) - req0.get(v, 0)) for v in sorted(set(req1) | set(req0))
                if req1.get(v, 0) - req0.get(v, 0) > 0}
    row = {"mode": mode, "run": run, "pods": count, "wall_s": round(wall, 1), "cpu_s": cpu,
           "cpu_total_s": round(sum(cpu.values()), 2), "requests": requests,
           "writes": sum(n for v, n in requests.items() if v in ("POST", "PUT", "PATCH", "DELETE", "APPLY")),
           "termination_grace_s": None}
    echo(f"  {mode:9} run {run}: {row['cpu_total_s']} CPU-s in all, {row['writes']} pod writes, {row['wall_s']} s")
    return row


def endings(count: int, fleet: str = "small", repeats: int = 2, echo=print) -> dict:
    """Run both endings `repeats` times each, alternating, on one lab without a scheduler."""
    name = f"bench-endings-{os.getpid()}"
    rec = labs.up(LabSpec(name=name, runtime="binary", fleet=fleet, stack="none", metrics=False)).record
    kube = Kube(rec.kubeconfig)
    rows = []
    try:
        nodes = sorted(n.metadata.name for n in kube.core.list_node().items
                       if (n.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake")
        echo(f"{count} pods on {len(nodes)} KWOK nodes of fleet {fleet}, termination grace {rec.termination_grace} s")
        for run in range(1, repeats + 1):
            for mode in MODES:
                row = _one(kube, rec.dir, nodes, count, mode, run, echo)
                row["termination_grace_s"] = rec.termination_grace
                rows.append(row)
    finally:
        kube.close()
        labs.down(name)
    results = {"kind": "endings", "pods": count, "fleet": fleet, "repeats": repeats, "machine": machine(),
               "termination_grace_s": rec.termination_grace, "runs": rows,
               "per_pod": {m: _per_pod([r for r in rows if r["mode"] == m]) for m in MODES}}
    return _record(results, f"-endings-{count}", endings_markdown(results), None)


def _per_pod(rows: list[dict]) -> dict:
    n = sum(r["pods"] for r in rows)
    return {"cpu_ms": round(1000 * sum(r["cpu_total_s"] for r in rows) / n, 2),
            "apiserver_cpu_ms": round(1000 * sum(r["cpu_s"]["kube-apiserver"] for r in rows) / n, 2),
            "writes": round(sum(r["writes"] for r in rows) / n, 2)}


def endings_markdown(results: dict) -> str:
    lines = [f"# Pods ending by run time vs deleted: {results['pods']} pods, fleet {results['fleet']}",
             "", f"Machine: {results['machine']}. No scheduler: pods placed by spec.nodeName. Termination grace "
             f"{results['termination_grace_s']} s. Measured over the pods' whole life, from the first create "
             f"(8 at a time) until none is left (run time: {RUN_TIME} each, then their namespace deleted, as a "
             "replay's clean-up does; deleted: once all are Running, one DELETE per pod, 8 at a time).", "",
             "| mode | run | wall s | kube-apiserver CPU s | etcd | kwok | kube-controller-manager | all CPU s | pod writes | requests by verb |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["runs"]:
        c = r["cpu_s"]
        lines.append(f"| {r['mode']} | {r['run']} | {r['wall_s']} | {c['kube-apiserver']} | {c['etcd']} | {c['kwok']} | "
                     f"{c['kube-controller-manager']} | {r['cpu_total_s']} | {r['writes']} | "
                     + ", ".join(f"{v} {n}" for v, n in r["requests"].items()) + " |")
    lines += ["", "Per pod, all runs:", "", "| mode | CPU ms (all) | kube-apiserver CPU ms | pod writes |", "|---|---|---|---|"]
    for m, f in results["per_pod"].items():
        lines.append(f"| {m} | {f['cpu_ms']} | {f['apiserver_cpu_ms']} | {f['writes']} |")
    return "\n".join(lines) + "\n"
