"""`kailab fill-merge DIR[:DESIGN,...] ...`: fills of one plan run at different times (a seed a
session, say: a full-scale seed takes the machine for most of an hour a design) read as one fill,
so the table and the picture show every seed's spread.

The merged folder is a fill's own (plan.json, <design>/seed-<s>/steps.jsonl and run.json, fill.json,
fill.md, fill.svg, report.html) with `merged_from` in its plan naming where each design and seed came
from. Only what the fills measured is copied; nothing is re-run. Fills merge when their plans agree
on everything that shapes the figures (fleet, task count, target, step, settle, runtime, KAI version,
and the trace's and fleet's content where both plans record it); a design and seed found twice is
refused, and `DIR:DESIGN` takes only that design from DIR (a seed re-run because the first stopped)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from ..errors import KailabError
from ..paths import evidence_dir

# what a plan must share with the others to be merged (where both plans have it)
SAME = ("fleet_name", "tasks_in_trace", "target", "step", "settle_s", "runtime", "kai_version",
        "trace_sha256", "fleet_sha256")


def parse_source(text: str) -> tuple[Path, list[str] | None]:
    """'DIR' or 'DIR:design,design' -> (DIR, the designs to take or None for all)."""
    path, _, designs = text.partition(":")
    names = [d.strip() for d in designs.split(",") if d.strip()] if designs else None
    return Path(path), names


def _plan(d: Path) -> dict:
    f = d / "plan.json"
    if not f.is_file():
        raise KailabError(f"{d}: no plan.json — not a fill's evidence folder (evidence/fill-<time>)")
    try:
        return json.loads(f.read_text())
    except ValueError as err:
        raise KailabError(f"{f}: not JSON ({err}); give a fill's evidence folder") from None


def collect(sources: list[str]) -> tuple[dict, list[tuple[Path, str, int]]]:
    """Check the sources before anything is written: the merged plan and (folder, design, seed) for
    every seed a fill has steps for."""
    if len(sources) < 2:
        raise KailabError("kailab fill-merge: give two fills or more (evidence/fill-<time>[:DESIGN,...])")
    plans: dict[Path, dict] = {}
    take: list[tuple[Path, str, int]] = []
    seen: dict[tuple[str, int], Path] = {}
    known: dict[str, tuple[object, Path]] = {}
    for text in sources:
        d, only = parse_source(text)
        plan = plans[d] = _plan(d)
        names = [x["name"] for x in plan.get("designs", [])]
        for n in only or []:
            if n not in names:
                raise KailabError(f"{text}: {d} has no design {n!r} (its designs: {', '.join(names)})")
        for key in SAME:
            b = plan.get(key)
            if b is None:
                continue
            a, where = known.setdefault(key, (b, d))
            if a != b:
                raise KailabError(f"{d / 'plan.json'}: {key} is {b!r}, but {a!r} in {where / 'plan.json'}; "
                                  "merge fills of one plan only")
        for n in only or names:
            for s in plan.get("seeds", []):
                if not (d / n / f"seed-{s}" / "steps.jsonl").is_file():
                    continue
                if (n, s) in seen:
                    was = seen[(n, s)]
                    others = [x["name"] for x in plans[was].get("designs", []) if x["name"] != n]
                    fix = (f"give {was}:{','.join(others)} to take only its other designs" if others
                           else f"leave {was} out")
                    raise KailabError(f"{text}: design {n} seed {s} is in {was} too; take it from one only: {fix}")
                seen[(n, s)] = d
                take.append((d, n, s))
    if not take:
        raise KailabError(f"{', '.join(sources)}: no seed of any design has steps to merge")
    plan = dict(next(iter(plans.values())))
    designs = list(dict.fromkeys(n for _, n, _ in take))
    files = {x["name"]: x.get("file") for p in plans.values() for x in p.get("designs", [])}
    plan["designs"] = [{"name": n, "file": files.get(n)} for n in designs]
    plan["seeds"] = sorted({s for _, _, s in take})
    plan["merged_from"] = [{"design": n, "seed": s, "evidence": str(d)} for d, n, s in take]
    return plan, take


def merge(sources: list[str], root: Path | None = None) -> Path:
    """Write evidence/fill-merged-<time>/ from the sources; its path."""
    from .fill import write_outputs

    plan, take = collect(sources)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = (root or evidence_dir()) / f"fill-merged-{stamp}"
    out.mkdir(parents=True)
    try:
        (out / "plan.json").write_text(json.dumps(plan, indent=2))
        errors: dict[str, list[str]] = {}
        for d, n, s in take:
            dst = out / n / f"seed-{s}"
            dst.mkdir(parents=True)
            for f in ("steps.jsonl", "run.json"):
                if (d / n / f"seed-{s}" / f).is_file():
                    shutil.copyfile(d / n / f"seed-{s}" / f, dst / f)
            if (d / n / "error.txt").is_file():  # a design that stopped: say so where its seeds went
                errors.setdefault(n, []).append(f"{d}: {(d / n / 'error.txt').read_text().strip()}")
            for f in ("up.json", "lab.json", "scheduler-conf.yaml"):
                if (d / n / f).is_file() and not (out / n / f).exists():
                    shutil.copyfile(d / n / f, out / n / f)
        for n, lines in errors.items():
            (out / n / "error.txt").write_text("\n".join(lines) + "\n")
        write_outputs(out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # nothing half-made
        raise
    return out
