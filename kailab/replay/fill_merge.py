"""`kailab fill-merge DIR[:DESIGN,...] ...`: fills of one plan run at different times (a seed a
session, say: a full-scale seed takes the machine for most of an hour a design) read as one fill,
so the table and the picture show every seed's spread.

The merged folder is a fill's own (plan.json, <design>/seed-<s>/steps.jsonl and run.json, fill.json,
fill.md, fill.svg, report.html) with `merged_from` in its plan naming where each design and seed came
from. Only what the fills measured is copied; nothing is re-run. Fills merge when their plans agree
on everything that shapes the figures (fleet, task count, target, step, settle, runtime, KAI version,
and the trace's and fleet's content where both plans record it); a design and seed found twice is
refused, and `DIR:DESIGN` takes only that design from DIR (a seed re-run because the first stopped).

A source may also be a `kailab bench fill` record (bench/results/<name>.json), which keeps the plan
and every seed's steps: the record is committed, where evidence stays on the machine that ran it, so
a fill can still be read with another after its evidence folder is gone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..errors import KailabError
from ..evidence import new_folder
from ..paths import evidence_dir
from .fill import write_outputs

# what a plan must share with the others to be merged (where both plans have it)
SAME = ("fleet_name", "tasks_in_trace", "target", "step", "settle_s", "runtime", "kai_version",
        "trace_sha256", "fleet_sha256")


def parse_source(text: str) -> tuple[Path, list[str] | None]:
    """'DIR' or 'DIR:design,design' -> (DIR, the designs to take or None for all)."""
    path, _, designs = text.partition(":")
    names = [d.strip() for d in designs.split(",") if d.strip()] if designs else None
    return Path(path), names


class _Folder:
    """A fill's evidence folder."""

    def __init__(self, d: Path):
        self.path = d
        f = d / "plan.json"
        if not f.is_file():
            raise KailabError(f"{d}: no plan.json — not a fill's evidence folder (evidence/fill-<time>) "
                              "nor a `bench fill` record (bench/results/<name>.json)")
        try:
            self.plan = json.loads(f.read_text())
        except ValueError as err:
            raise KailabError(f"{f}: not JSON ({err}); give a fill's evidence folder") from None

    def where(self) -> Path:
        return self.path / "plan.json"

    def has(self, design: str, seed: int) -> bool:
        return (self.path / design / f"seed-{seed}" / "steps.jsonl").is_file()

    def copy(self, design: str, seed: int, out: Path) -> None:
        """The seed's steps and run, the design's lab files (once), into `out`/<design>."""
        src = self.path / design
        for f in ("steps.jsonl", "run.json"):
            if (src / f"seed-{seed}" / f).is_file():
                shutil.copyfile(src / f"seed-{seed}" / f, out / design / f"seed-{seed}" / f)
        for f in ("up.json", "lab.json", "scheduler-conf.yaml"):
            if (src / f).is_file() and not (out / design / f).exists():
                shutil.copyfile(src / f, out / design / f)

    def error(self, design: str) -> str | None:
        f = self.path / design / "error.txt"
        return f.read_text().strip() if f.is_file() else None


class _Record:
    """A `kailab bench fill` record: its plan, every seed's steps (curves) and runs."""

    def __init__(self, f: Path):
        self.path = f
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError) as err:
            raise KailabError(f"{f}: not a readable JSON file ({err}); give a `bench fill` record") from None
        if not isinstance(data, dict) or "plan" not in data or "curves" not in data:
            raise KailabError(f"{f}: no plan and curves — not a `bench fill` record of one that keeps its steps "
                              "(records before 2026-11-26 do not: give the fill's evidence folder)")
        self.plan, self.curves = data["plan"], data["curves"]
        self.runs, self.errors = data.get("runs", {}), data.get("errors", {})

    def where(self) -> Path:
        return self.path

    def has(self, design: str, seed: int) -> bool:
        return bool(self.curves.get(design, {}).get(str(seed)))

    def copy(self, design: str, seed: int, out: Path) -> None:
        rows = self.curves[design][str(seed)]
        (out / design / f"seed-{seed}" / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        run = self.runs.get(design, {})
        if (r := run.get("seeds", {}).get(str(seed))) is not None:
            (out / design / f"seed-{seed}" / "run.json").write_text(json.dumps(r, indent=2))
        if run.get("up") and not (out / design / "up.json").exists():
            (out / design / "up.json").write_text(json.dumps(run["up"], indent=2))

    def error(self, design: str) -> str | None:
        return self.errors.get(design)


def _open(d: Path) -> _Folder | _Record:
    return _Record(d) if d.is_file() else _Folder(d)


def collect(sources: list[str], least: int = 2) -> tuple[dict, list[tuple[_Folder | _Record, str, int]]]:
    """Check the sources before anything is written: the merged plan and (source, design, seed) for
    every seed a fill has steps for."""
    if len(sources) < least:
        raise KailabError("kailab fill-merge: give two fills or more (evidence/fill-<time>[:DESIGN,...])")
    opened: dict[Path, _Folder | _Record] = {}
    take: list[tuple[_Folder | _Record, str, int]] = []
    seen: dict[tuple[str, int], Path] = {}
    known: dict[str, tuple[object, Path]] = {}
    for text in sources:
        d, only = parse_source(text)
        src = opened[d] = _open(d)
        plan = src.plan
        names = [x["name"] for x in plan.get("designs", [])]
        for n in only or []:
            if n not in names:
                raise KailabError(f"{text}: {d} has no design {n!r} (its designs: {', '.join(names)})")
        for key in SAME:
            b = plan.get(key)
            if b is None:
                continue
            a, where = known.setdefault(key, (b, src.where()))
            if a != b:
                raise KailabError(f"{src.where()}: {key} is {b!r}, but {a!r} in {where}; "
                                  "merge fills of one plan only")
        for n in only or names:
            for s in plan.get("seeds", []):
                if not src.has(n, s):
                    continue
                if (n, s) in seen:
                    was = seen[(n, s)]
                    others = [x["name"] for x in opened[was].plan.get("designs", []) if x["name"] != n]
                    fix = (f"give {was}:{','.join(others)} to take only its other designs" if others
                           else f"leave {was} out")
                    raise KailabError(f"{text}: design {n} seed {s} is in {was} too; take it from one only: {fix}")
                seen[(n, s)] = d
                take.append((src, n, s))
    if not take:
        raise KailabError(f"{', '.join(sources)}: no seed of any design has steps to merge")
    plan = dict(next(iter(opened.values())).plan)
    designs = list(dict.fromkeys(n for _, n, _ in take))
    files = {x["name"]: x.get("file") for o in opened.values() for x in o.plan.get("designs", [])}
    plan["designs"] = [{"name": n, "file": files.get(n)} for n in designs]
    plan["seeds"] = sorted({s for _, _, s in take})
    plan["merged_from"] = [{"design": n, "seed": s, "evidence": str(src.path)} for src, n, s in take]
    return plan, take


def merge(sources: list[str], root: Path | None = None, plan_changes=None, least: int = 2) -> Path:
    """Write evidence/fill-merged-<time>/ from the sources; its path. `plan_changes(plan)` gives what
    replaces the merged plan's (a fan-out's: its expectations, checked on the whole fill, and the local
    files where the units had theirs in their pods)."""
    plan, take = collect(sources, least)
    if plan_changes is not None:
        plan.update(plan_changes(plan))
    out = new_folder(root or evidence_dir(), "fill-merged")
    try:
        (out / "plan.json").write_text(json.dumps(plan, indent=2))
        errors: dict[str, list[str]] = {}
        for src, n, s in take:
            (out / n / f"seed-{s}").mkdir(parents=True)
            src.copy(n, s, out)
            if (why := src.error(n)) is not None:  # a design that stopped: say so where its seeds went
                errors.setdefault(n, []).append(f"{src.path}: {why}")
        for n, lines in errors.items():
            (out / n / "error.txt").write_text("\n".join(lines) + "\n")
        write_outputs(out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # nothing half-made
        raise
    return out
