"""Twins side by side: one twin of the same snapshot per KAI version, or per design (the snapshot as it
was beside each change), each left to decide the pending work until it settles; then, per pending pod,
where each placed it or why it did not, what each evicted, and each queue's GPUs before and after.

One axis at a time (versions, or designs on one version), as replays do, so each difference has one
cause. On disk (evidence/twins-<stamp>/): <variant>/ (each twin's evidence, twin/run.py; error.txt when
it could not finish), comparison.json, comparison.md.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import toolchain, versions
from ..errors import KailabError
from ..evidence import new_folder
from ..paths import evidence_dir
from .design import AS_IS, TwinDesign
from .run import make_twin, twin_plan
from ..variants import side_by_side

MAX_ROWS = 40  # the terminal's and comparison.md's differences table; comparison.json has them all


@dataclass(frozen=True)
class TwinVariant:
    label: str
    kai_version: str
    design: TwinDesign | None = None


def variants_for(kai_versions: list[str], designs: list[TwinDesign]) -> list[TwinVariant]:
    """KAI versions side by side (the snapshot as it was), or designs on one version beside the snapshot
    as it was (`as-is`)."""
    if len(kai_versions) > 1 and designs:
        raise KailabError("compare KAI versions (--kai-versions vA,vB) or designs (--designs A.yaml,B.yaml), one at a time")
    names = [d.name for d in designs]
    for n in names:
        if names.count(n) > 1:
            raise KailabError(f"two designs are named {n!r}: the name is the comparison's column; rename one")
    if designs:
        version = kai_versions[0] if kai_versions else versions.DEFAULT_KAI
        return [TwinVariant(AS_IS, version)] + [TwinVariant(d.name, version, d) for d in designs]
    if len(set(kai_versions)) < 2:
        raise KailabError("--kai-versions needs two KAI versions or more (e.g. v0.16.8,v0.17.0)")
    return [TwinVariant(v, v) for v in dict.fromkeys(kai_versions)]


def lab_name(base: str, label: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", f"{base}-{label}".lower()).strip("-")[:40].rstrip("-")


def run_side_by_side(snapshot: str | Path, variants: list[TwinVariant], name: str = "twin", anonymise: bool = False,
                     settle_s: float = 30.0, timeout_s: float = 600.0, keep_up: bool = False,
                     echo: Callable[[str], None] = print, against_tool: bool = False) -> Path:
    """Every twin side by side, then the comparison; the twins' labs are taken down unless `keep_up`."""
    for v in variants:  # every input checked before anything is built or started
        twin_plan(snapshot, lab_name(name, v.label), anonymise, v.design)
    for version in dict.fromkeys(v.kai_version for v in variants):  # builds first, one at a time
        toolchain.build_all(toolchain.recipes_for(versions.normalise(version)), None)
    out = twins_folder()
    lock = threading.Lock()

    def one(v: TwinVariant) -> None:
        def say(text: str) -> None:
            with lock:
                echo(f"  [{v.label}] {text}")
        try:
            make_twin(snapshot, lab_name(name, v.label), versions.normalise(v.kai_version), anonymise, settle_s,
                      timeout_s, echo=say, design=v.design, out=out / v.label, keep_up=keep_up, against_tool=against_tool)
        except KailabError as err:
            (out / v.label).mkdir(parents=True, exist_ok=True)
            (out / v.label / "error.txt").write_text(str(err) + "\n")
            say(f"error: {err}")

    echo(f"twins of {Path(snapshot).name} side by side: {', '.join(v.label for v in variants)}; evidence: {out}")
    side_by_side(variants, one)
    return write_comparison(out, [v.label for v in variants], echo)


def twins_folder(root: Path | None = None) -> Path:
    return new_folder(root or evidence_dir(), "twins")


def write_comparison(out: Path, labels: list[str], echo: Callable[[str], None] = print) -> Path:
    """comparison.json, .md and the page, from each twin's folder under `out` (its record, or its
    error.txt): the same whether the twins ran here or as fan-out units elsewhere."""
    comparison = compare({label: _record(out / label) for label in labels})
    (out / "comparison.json").write_text(json.dumps(comparison, indent=2) + "\n")
    (out / "comparison.md").write_text(markdown(comparison))
    try:  # the comparison stands without its page; a page that cannot be written is said, not raised
        from ..report import write_report

        write_report([out])
    except Exception as err:  # noqa: BLE001
        echo(f"report: not written ({type(err).__name__}: {err})")
    return out


def _record(folder: Path) -> dict:
    if (folder / "error.txt").exists():
        return {"error": (folder / "error.txt").read_text().strip()}
    try:
        return json.loads((folder / "twin.json").read_text())
    except (OSError, ValueError) as err:
        return {"error": f"no record: {err}"}


def outcome(record: dict, pod: str) -> str:
    """One pending pod's fate in one twin: the node KAI placed it on, or pending and why."""
    d = record.get("decided") or {}
    if pod in d.get("placed", {}):
        return f"on {d['placed'][pod]}"
    why = (d.get("why_pending") or {}).get(pod, "")
    return "pending" + (f": {why}" if why else "")


def compare(records: dict[str, dict]) -> dict:
    """What each twin decided, side by side, and the pods they decided differently (a pod placed by one
    and left pending by another, or placed on other nodes)."""
    ok = {k: r for k, r in records.items() if "decided" in r}
    pending = sorted({p for r in ok.values() for p in [*r["decided"]["placed"], *r["decided"]["still_pending"]]})
    evicted = sorted({p for r in ok.values() for p in r["decided"]["evicted"]})
    rows = []
    for pod in pending + [p for p in evicted if p not in pending]:
        cells = {k: (outcome(r, pod) if pod in pending else "running") for k, r in ok.items()}
        for k, r in ok.items():
            if pod in r["decided"]["evicted"]:
                why = (r["decided"].get("evicted_for") or {}).get(pod)
                cells[k] = "evicted" + (f" ({why})" if why else "")
        fates = {c.split(" ", 1)[0].rstrip(":") for c in cells.values()}  # on / pending / evicted / running
        kind = "decision" if len(fates) > 1 else "node" if fates == {"on"} and len(set(cells.values())) > 1 else ""
        if kind:
            rows.append({"pod": pod, "kind": kind, "outcomes": cells})
    queues = sorted({q for r in ok.values() for q in r.get("queues_gpus", {})})
    return {
        "variants": {k: {"kai_version": r.get("kai_version", ""), "design": r.get("design", AS_IS),
                         "error": r.get("error", ""),
                         **({"placed": len(r["decided"]["placed"]), "still_pending": len(r["decided"]["still_pending"]),
                             "evicted": len(r["decided"]["evicted"]), "settled": r["decided"]["settled"],
                             "seconds": r.get("seconds", {}).get("total")} if k in ok else {})}
                     for k, r in records.items()},
        "pending_in_snapshot": len(pending),
        "queues_gpus": {q: {"before": next((r["queues_gpus"][q]["before"] for r in ok.values()
                                            if q in r.get("queues_gpus", {})), 0),
                            **{k: r.get("queues_gpus", {}).get(q, {}).get("after", 0) for k, r in ok.items()}}
                        for q in queues},
        "differences": rows,
        "decided_differently": sum(r["kind"] == "decision" for r in rows),
        "placed_differently": sum(r["kind"] == "node" for r in rows),
        "ok": len(ok) == len(records),
    }


def markdown(c: dict) -> str:
    labels = list(c["variants"])
    lines = ["# Twins side by side", "",
             "| twin | KAI | design | placed | still pending | evicted | settled | s |", "|---|---|---|---|---|---|---|---|"]
    for k, v in c["variants"].items():
        if v["error"]:
            lines.append(f"| {k} | {v['kai_version']} | {v['design']} | error: {v['error'][:120]} |  |  |  |  |")
        else:
            lines.append(f"| {k} | {v['kai_version']} | {v['design']} | {v['placed']} | {v['still_pending']} | "
                         f"{v['evicted']} | {'yes' if v['settled'] else 'no'} | {v['seconds']} |")
    lines += ["", f"{c['pending_in_snapshot']} pods were pending in the snapshot. Decided differently: "
              f"{c['decided_differently']} (placed by one, pending or evicted in another); placed on other nodes: "
              f"{c['placed_differently']}.", ""]
    if c["queues_gpus"]:
        lines += ["GPUs allocated per queue, in the snapshot and once each twin had decided:", "",
                  "| queue | snapshot | " + " | ".join(labels) + " |", "|---" * (len(labels) + 2) + "|"]
        lines += [f"| {q} | {g['before']:g} | " + " | ".join(f"{g.get(k, 0):g}" for k in labels) + " |"
                  for q, g in c["queues_gpus"].items()]
        lines.append("")
    if c["differences"]:
        lines += ["Pods decided differently:", "", "| pod | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
        for row in c["differences"][:MAX_ROWS]:
            lines.append(f"| {row['pod']} | " + " | ".join(row["outcomes"].get(k, "")[:80].replace("|", "/")
                                                          for k in labels) + " |")
        if len(c["differences"]) > MAX_ROWS:
            lines.append(f"\n… and {len(c['differences']) - MAX_ROWS} more: comparison.json")
        lines.append("")
    return "\n".join(lines)
