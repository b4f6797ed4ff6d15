"""A twin held against KAI's own `cmd/snapshot-tool` (the same KAI version, built from the registered
repository into the version's cache folder): the tool loads the snapshot into fake clients and runs
one scheduling session; the twin's first session that decided anything is set beside it. Both speak
through KAI's scheduler log (the same code writes both): a bind request per placed pod, and at
verbosity 4 a line per evicted and per pipelined pod. The agreement is the share of pods both decided
alike; every difference gets its cause where kailab can tell it (a tie between identical nodes, a
decision the twin made only in a later session, one the tool's fake clients could not make).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
import zipfile
from dataclasses import replace
from pathlib import Path

from .. import toolchain, versions
from ..errors import KailabError
from ..runtimes.processes import strip_ansi

TOOL = "snapshot-tool"
TWIN_VERBOSITY = "--v=4"  # the twin's scheduler logs each eviction and pipelining (KAI's Statement.Commit)
_SESSION = re.compile(r"\[([A-Za-z0-9-]{4,})\]")
_BIND = re.compile(r"Creating bind request for task <([^>]+)> to node <([^>]+)>")
_EVICT = re.compile(r"Evicting task: (\S+)")
_PIPELINE = re.compile(r"Pipelining task: (\S+)")


def recipe(kai_version: str) -> toolchain.Recipe:
    """KAI's snapshot tool at `kai_version`: built beside that version's components, from the same source."""
    kai = toolchain.kai_recipe(versions.kai_release(kai_version))
    return replace(kai, binaries={TOOL: f"{kai.module}/cmd/{TOOL}"})


def decisions(log: str) -> list[tuple[str, dict]]:
    """Each session that decided something, in log order: (session id, {placed: {pod: node},
    evicted: [pods], pipelined: [pods]})."""
    out: dict[str, dict] = {}
    for raw in log.splitlines():
        line = strip_ansi(raw)
        found = [(k, m) for k, m in (("placed", _BIND.search(line)), ("evicted", _EVICT.search(line)),
                                     ("pipelined", _PIPELINE.search(line))) if m]
        if not found:
            continue
        kind, m = found[0]
        session = _SESSION.search(line)
        d = out.setdefault(session.group(1) if session else "?", {"placed": {}, "evicted": [], "pipelined": []})
        if kind == "placed":
            d["placed"][m.group(1)] = m.group(2)
        elif m.group(1) not in d[kind]:
            d[kind].append(m.group(1))
    return list(out.items())


def tool_snapshot(plan, params: dict) -> dict:
    """The state the twin holds (what was kept of the snapshot: no secret), as a snapshot the tool reads:
    the same objects, with what an API server would have added (uids, pods' priority from their class,
    bound pods Running, Ready nodes)."""
    priority = {o["metadata"]["name"]: o.get("value", 0) for o in plan.objects if o["kind"] == "PriorityClass"}

    def with_uid(obj: dict) -> dict:
        meta = obj["metadata"]
        key = f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"
        return {**obj, "metadata": {**meta, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, key))}}

    def pod(p: dict, phase: str) -> dict:
        out = with_uid(p)
        pc = out["spec"].get("priorityClassName")
        spec = {**out["spec"], **({"priority": priority[pc]} if pc in priority else {})}
        return {**out, "spec": spec, "status": {"phase": phase}}

    nodes = []
    for n in plan.fleet.node_manifests():
        n = with_uid(n)
        nodes.append({**n, "status": {**n["status"], "conditions": [{"type": "Ready", "status": "True"}]}})
    kinds = {"Queue": "queues", "PodGroup": "podGroups", "PriorityClass": "priorityClasses", "Topology": "topologies"}
    raw: dict[str, list] = {k: [] for k in kinds.values()}
    for o in plan.objects:
        raw[kinds[o["kind"]]].append(with_uid(o))
    raw["nodes"] = nodes
    raw["pods"] = [pod(p, "Running") for p in plan.bound] + [pod(p, "Pending") for p in plan.pending]
    return {"config": plan.conf, "schedulerParams": params, "rawObjects": raw}


def run_tool(snapshot: dict, kai_version: str, out: Path, timeout_s: float = 600) -> dict:
    """Build (once) and run KAI's snapshot tool on a snapshot (tool_snapshot's); its one session's decisions."""
    r = recipe(kai_version)
    toolchain.build_all([r], None)
    binary = toolchain.binary_path(r.component, r.version, TOOL)
    zipped = out / "snapshot-for-tool.zip"  # the twin's own state; removed after
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("snapshot.json", json.dumps(snapshot))
    t = time.monotonic()
    try:
        done = subprocess.run([str(binary), f"--filename={zipped}", "--verbosity=4"], capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise KailabError(f"KAI's snapshot tool ran over {timeout_s:g}s ({out})") from None
    finally:
        zipped.unlink(missing_ok=True)
    (out / f"{TOOL}.log").write_text(done.stderr + done.stdout)
    if done.returncode != 0:
        last = strip_ansi((done.stderr or done.stdout).strip().splitlines()[-1] if (done.stderr or done.stdout).strip() else "")
        raise KailabError(f"KAI's snapshot tool failed (exit {done.returncode}): {last[:300]} ({out / f'{TOOL}.log'})")
    sessions = decisions(done.stderr + done.stdout)
    merged = {"placed": {}, "evicted": [], "pipelined": []}
    for _, d in sessions:  # one session; merged in case the tool's logger names it twice
        merged["placed"].update(d["placed"])
        merged["evicted"] += [p for p in d["evicted"] if p not in merged["evicted"]]
        merged["pipelined"] += [p for p in d["pipelined"] if p not in merged["pipelined"]]
    summary = {}
    try:
        summary = json.loads(done.stdout[done.stdout.index("{"):])
    except ValueError:
        pass
    return {**merged, "seconds": round(time.monotonic() - t, 2), "summary": summary}


def _fate(d: dict, pod: str) -> str:
    if pod in d["placed"]:
        return f"on {d['placed'][pod]}"
    if pod in d["evicted"]:
        return "evicted"
    if pod in d["pipelined"]:
        return "pipelined"
    return "not decided"


def agreement(tool: dict, twin_sessions: list[tuple[str, dict]], twin_final: dict, same_nodes) -> dict:
    """The tool's session against the twin's first deciding session: pods both decided alike, and each
    difference with its cause. `twin_final`: the twin's settled decisions (placed, evicted);
    `same_nodes(a, b)`: whether two nodes are alike for a scheduler (labels but the name, taints, capacity)."""
    first_id, first = twin_sessions[0] if twin_sessions else ("", {"placed": {}, "evicted": [], "pipelined": []})
    later = {}
    for sid, d in twin_sessions[1:]:
        for pod in [*d["placed"], *d["evicted"], *d["pipelined"]]:
            later.setdefault(pod, sid)
    pods = sorted({*tool["placed"], *tool["evicted"], *tool["pipelined"],
                   *first["placed"], *first["evicted"], *first["pipelined"]})
    same, differences = [], []
    for pod in pods:
        a, b = _fate(tool, pod), _fate(first, pod)
        if a == b:
            same.append(pod)
            continue
        if a.startswith("on ") and b.startswith("on ") and same_nodes(a[3:], b[3:]):
            cause = "a tie between identical nodes, broken differently"
        elif b == "not decided" and pod in later:
            cause = f"the twin decided it in a later session ({later[pod]}): " \
                    + ("placed" if pod in twin_final.get("placed", {}) else "its final state differs")
        elif b == "not decided":
            cause = "the twin never decided it: " + ("it was placed by the end" if pod in twin_final.get("placed", {})
                                                     else "the twin's control plane refused or KAI did not try it")
        elif a == "not decided":
            cause = "the tool's one session did not decide it (the twin's first session saw state the fake clients lack)"
        else:
            cause = "decided differently by the same KAI version on the same state"
        differences.append({"pod": pod, "tool": a, "twin": b, "cause": cause})
    total = len(pods)
    return {"tool_session": {k: tool[k] for k in ("placed", "evicted", "pipelined")},
            "twin_first_session": {"id": first_id, **first}, "pods_decided": total, "alike": len(same),
            "agreement": round(len(same) / total, 4) if total else 1.0, "differences": differences,
            "tool_seconds": tool.get("seconds")}


def markdown(a: dict) -> str:
    lines = [f"Against KAI's snapshot tool (one session on fake clients) and the twin's first deciding session "
             f"({a['twin_first_session']['id'] or 'none'}): {a['alike']} of {a['pods_decided']} pods decided alike "
             f"(agreement {a['agreement']:.0%})."]
    if a["differences"]:
        lines += ["", "| pod | tool | twin | cause |", "|---|---|---|---|"]
        lines += [f"| {d['pod']} | {d['tool']} | {d['twin']} | {d['cause']} |" for d in a["differences"]]
    return "\n".join(lines) + "\n"
