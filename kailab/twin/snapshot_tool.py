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
from collections import Counter
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


def tool_snapshot(plan, params: dict, held: dict[str, dict] | None = None) -> dict:
    """The state the twin holds (what was kept of the snapshot: no secret), as a snapshot the tool reads:
    the same objects, with what an API server would have added (uids, pods' priority from their class,
    bound pods Running, Ready nodes) and, given what the lab `held` (Kind/namespace/name -> uid,
    creationTimestamp, startTime: run.lab_meta), the UIDs and times its pods and PodGroups carry there:
    KAI orders by them where its plugins tie, so the tool and the twin read one order."""
    held = held or {}
    priority = {o["metadata"]["name"]: o.get("value", 0) for o in plan.objects if o["kind"] == "PriorityClass"}

    def with_uid(obj: dict) -> dict:
        meta = obj["metadata"]
        key = f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"
        lab = held.get(key) or {}
        made = {"uid": lab.get("uid") or str(uuid.uuid5(uuid.NAMESPACE_URL, key)),
                **({"creationTimestamp": lab["creationTimestamp"]} if lab.get("creationTimestamp") else {})}
        return {**obj, "metadata": {**meta, **made}}

    def pod(p: dict, phase: str) -> dict:
        out = with_uid(p)
        pc = out["spec"].get("priorityClassName")
        spec = {**out["spec"], **({"priority": priority[pc]} if pc in priority else {})}
        when = held.get(f"Pod/{out['metadata'].get('namespace')}/{out['metadata']['name']}") or {}
        status = {"phase": phase, **({"startTime": when["startTime"]} if when.get("startTime") and phase == "Running" else {})}
        return {**out, "spec": spec, "status": status}

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
    # the tool dereferences the node-pool parameters; every snapshot KAI writes has them, a hand-made one may not
    params = {"partitionParams": {"NodePoolLabelKey": "kai.scheduler/node-pool", "NodePoolLabelValue": ""}, **params}
    return {"config": plan.conf, "schedulerParams": params, "rawObjects": raw}


def _run_once(binary: Path, zipped: Path, out: Path, log_name: str, timeout_s: float) -> dict:
    try:
        done = subprocess.run([str(binary), f"--filename={zipped}", "--verbosity=4"], capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise KailabError(f"KAI's snapshot tool ran over {timeout_s:g}s ({out})") from None
    (out / log_name).write_text(done.stderr + done.stdout)
    if done.returncode != 0:
        last = strip_ansi((done.stderr or done.stdout).strip().splitlines()[-1] if (done.stderr or done.stdout).strip() else "")
        raise KailabError(f"KAI's snapshot tool failed (exit {done.returncode}): {last[:300]} ({out / log_name})")
    merged: dict = {"placed": {}, "evicted": [], "pipelined": []}
    for _, d in decisions(done.stderr + done.stdout):  # one session; merged in case the logger names it twice
        merged["placed"].update(d["placed"])
        merged["evicted"] += [p for p in d["evicted"] if p not in merged["evicted"]]
        merged["pipelined"] += [p for p in d["pipelined"] if p not in merged["pipelined"]]
    return merged


def run_tool(snapshot: dict, kai_version: str, out: Path, timeout_s: float = 600, runs: int = 2) -> dict:
    """Build (once) and run KAI's snapshot tool on a snapshot (tool_snapshot's) `runs` times: the first run's
    decisions, and the pods on which a later run decided otherwise (KAI varying with itself on one state)."""
    r = recipe(kai_version)
    toolchain.build_all([r], None)
    binary = toolchain.binary_path(r.component, r.version, TOOL)
    zipped = out / "snapshot-for-tool.zip"  # the twin's own state; removed after
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("snapshot.json", json.dumps(snapshot))
    t = time.monotonic()
    try:
        results = [_run_once(binary, zipped, out, f"{TOOL}.log" if i == 0 else f"{TOOL}-{i + 1}.log", timeout_s)
                   for i in range(runs)]
    finally:
        zipped.unlink(missing_ok=True)
    first = results[0]
    varied = sorted({p for other in results[1:] for p in {*first["placed"], *first["evicted"], *first["pipelined"],
                                                             *other["placed"], *other["evicted"], *other["pipelined"]}
                     if _fate(first, p) != _fate(other, p)})
    return {**first, "seconds": round((time.monotonic() - t) / runs, 2), "runs": runs, "varied_between_runs": varied}


def _fate(d: dict, pod: str) -> str:
    if pod in d["placed"]:
        return f"on {d['placed'][pod]}"
    if pod in d["evicted"]:
        return "evicted"
    if pod in d["pipelined"]:
        return "pipelined"
    return "not decided"


def _fate_word(kind: str) -> str:
    return {"evicted": "evicted", "pipelined": "pipelined", "placed": "on"}[kind]


def agreement(tool: dict, twin_sessions: list[tuple[str, dict]], twin_final: dict, same_nodes,
              equivalent=lambda a, b: False, similar=lambda a, b: False) -> dict:
    """The tool's session against the twin's first deciding session: pods both decided alike, and each
    difference with its cause. `twin_final`: the twin's settled decisions (placed, evicted);
    `same_nodes(a, b)`: whether two nodes are alike for a scheduler (labels but the name, taints, capacity);
    `equivalent(a, b)`: whether two pods are (same queue, shape, priority, on nodes alike); `similar(a, b)`:
    whether they share a queue and a priority class. When neither side decided a pod, `neither` says what
    both did: every pod the twin left pending (`twin_final`'s still_pending) and KAI's reasons for them."""
    varied = tool.get("varied_between_runs") or []
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
    # a victim (or a pod placed) where the other side chose an equivalent one: pair them up
    for kind in ("evicted", "pipelined", "placed"):
        tool_only = [d for d in differences if d["tool"].split(" ")[0] == _fate_word(kind) and d["twin"] == "not decided"]
        twin_only = [d for d in differences if d["twin"].split(" ")[0] == _fate_word(kind) and d["tool"] == "not decided"]
        for d in tool_only:
            match = next((e for e in twin_only if not e.get("paired") and equivalent(d["pod"], e["pod"])), None)
            if match:
                match["paired"] = d["paired"] = True
                d["cause"] = match["cause"] = (f"an equivalent choice: the tool {kind} {d['pod']}, the twin {match['pod']} "
                                               "(same queue, shape and priority, on nodes alike)")
        for d in tool_only:  # then another pod of the same queue and priority: a different, equally allowed choice
            match = next((e for e in twin_only if not e.get("paired") and similar(d["pod"], e["pod"])), None)
            if match:
                match["paired"] = d["paired"] = True
                d["cause"] = match["cause"] = (
                    f"another choice of the same queue and priority: the tool {kind} {d['pod']}, the twin {match['pod']}"
                    + (f"; KAI's tool itself decided {len(varied)} pods otherwise between its runs on this state"
                       if varied else f"; the tool chose the same in each of its {tool.get('runs', 1)} runs, so the "
                       "twin's choice came from what the live cluster adds to the snapshot's objects (statuses its "
                       "controllers write, the order its informers delivered them)" if tool.get("runs", 1) > 1 else ""))
    for d in differences:
        d.pop("paired", None)
    total = len(pods)
    neither = {}
    if not total:  # nothing to agree on: what both did is leave the pending pods pending, for KAI's reasons
        why = twin_final.get("why_pending") or {}
        left = twin_final.get("still_pending") or []
        neither = {"neither": {"pending": len(left),
                               "reasons": dict(Counter(why.get(p) or "no reason recorded" for p in left).most_common())}}
    return {**neither, "tool_session": {k: tool[k] for k in ("placed", "evicted", "pipelined")},
            "twin_first_session": {"id": first_id, **first}, "pods_decided": total, "alike": len(same),
            "agreement": round(len(same) / total, 4) if total else 1.0, "differences": differences,
            "tool_seconds": tool.get("seconds"), "tool_runs": tool.get("runs", 1),
            "tool_varied_between_runs": len(varied)}


def alike_words(a: dict) -> str:
    """How the tool and the twin agreed, in words: "3 of 4 pods decided alike (agreement 75%)", or, when
    neither decided a pod, what both did ("neither side placed a pod: 4 pending in both")."""
    if a["pods_decided"]:
        return f"{a['alike']} of {a['pods_decided']} pods decided alike (agreement {a['agreement']:.0%})"
    n = (a.get("neither") or {}).get("pending", 0)
    return f"neither side placed, evicted or pipelined a pod: {n} pending in both"


def markdown(a: dict) -> str:
    reasons = (a.get("neither") or {}).get("reasons") or {}
    lines = [f"Against KAI's snapshot tool (one session on fake clients) and the twin's first deciding session "
             f"({a['twin_first_session']['id'] or 'none'}): {alike_words(a)}"
             + (" (KAI's reason: " + "; ".join(f"{why} — {n} pod{'s' if n != 1 else ''}" for why, n in reasons.items())
                + ")" if reasons else "") + "."
             + (f" The tool itself, run {a['tool_runs']} times on this state, decided {a['tool_varied_between_runs']} pods "
                "otherwise between runs." if a.get("tool_runs", 1) > 1 else "")]
    if a["differences"]:
        lines += ["", "| pod | tool | twin | cause |", "|---|---|---|---|"]
        lines += [f"| {d['pod']} | {d['tool']} | {d['twin']} | {d['cause']} |" for d in a["differences"]]
    return "\n".join(lines) + "\n"
