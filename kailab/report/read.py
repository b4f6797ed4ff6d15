"""Reading runs and trials from evidence directories; file names come from kailab.evidence.

A damaged or missing file is recorded in the run's `problems` and reading goes on: the report
of a broken run is the one most worth having.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path


from .. import evidence, yamlfast
from ..errors import KailabError
from .text import fmt

# links on the page: the run's own files, and the note left when the scheduler dump failed
TOP_FILES = (*evidence.TOP_FILES, evidence.SCHEDULER_SNAPSHOT_ERROR)
SNAPSHOT_FILES = evidence.SNAPSHOT_FILES
SNAPSHOT_FILE = {Path(f).stem: f for f in SNAPSHOT_FILES}  # "pods" -> "pods.yaml"
SUBDIRS = (evidence.MANIFESTS, evidence.LOGS, evidence.DUMP)


@dataclass
class Snapshot:
    index: int  # 1.. for steps; 0 for final
    name: str
    rel: str  # directory relative to the run directory
    queues: list | None = None
    podgroups: list | None = None
    pods: list | None = None
    nodes: dict | None = None
    claims: list | None = None  # ResourceClaims (DRA): pods, node, devices
    top: dict | None = None  # `kailab top`'s picture of the lab (labs with KAI)

    @property
    def label(self) -> str:
        return self.name if self.index == 0 else f"{self.index}. {self.name}"


@dataclass
class Run:
    path: Path
    verdict: dict | None = None
    run: dict | None = None
    exercise: dict | None = None
    timeline: list[dict] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files missing or unreadable

    @property
    def name(self) -> str:
        for src in (self.verdict, self.run, self.exercise):
            if isinstance(src, dict) and isinstance(src.get("exercise"), str):
                return src["exercise"]
        return self.path.name

    @property
    def verdict_text(self) -> str:
        if isinstance(self.verdict, dict) and "verdict" in self.verdict:
            return fmt(self.verdict["verdict"])
        return "unknown"

    def info(self, key: str):
        for src in (self.verdict, self.run):
            if isinstance(src, dict) and src.get(key) not in (None, ""):
                return src[key]
        return None

    @property
    def queue_map(self) -> dict[str, str]:
        """real queue name -> logical name (from run.json)."""
        qs = (self.run or {}).get("queues") if isinstance(self.run, dict) else None
        if not isinstance(qs, dict):
            return {}
        return {str(real): str(logical) for logical, real in qs.items()}

    def logical(self, real) -> str:
        if real is None:
            return ""
        return self.queue_map.get(str(real), str(real))


def _read(path: Path, kind: str, problems: list[str], required: bool = True):
    if not path.exists():
        if required:
            problems.append(f"{path.name}: missing")
        return None
    try:
        text = path.read_text(errors="replace")
        return json.loads(text) if kind == "json" else yamlfast.load(text)
    except Exception as err:  # noqa: BLE001 - a broken file is reported, not fatal
        problems.append(f"{path.name}: unreadable ({type(err).__name__}: {err})")
        return None


def step_names(exercise: dict | None) -> list[str]:
    steps = exercise.get("steps") if isinstance(exercise, dict) else None
    if not isinstance(steps, list):
        return []
    return [str(s.get("name", "")) if isinstance(s, dict) else "" for s in steps]


def load_run(path: Path) -> Run:
    run = Run(Path(path))
    p = run.path
    run.verdict = _read(p / evidence.VERDICT, "json", run.problems)
    run.run = _read(p / evidence.RUN, "json", run.problems)
    run.exercise = _read(p / evidence.EXERCISE, "yaml", run.problems)
    for src in ("verdict", "run", "exercise"):
        if getattr(run, src) is not None and not isinstance(getattr(run, src), dict):
            run.problems.append(f"{src}: not a mapping")
            setattr(run, src, None)
    run.timeline = _read_timeline(p / evidence.TIMELINE, run.problems)
    run.snapshots = _read_snapshots(p, step_names(run.exercise), run.problems)
    return run


def _read_timeline(tl: Path, problems: list[str]) -> list[dict]:
    """The entries with a numeric time; unreadable lines are counted, not fatal."""
    if not tl.exists():
        problems.append(f"{tl.name}: missing")
        return []
    entries, bad = [], 0
    for line in tl.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(entry, dict) and isinstance(entry.get("t"), (int, float)):
            entries.append(entry)
        else:
            bad += 1
    if bad:
        problems.append(f"{tl.name}: {bad} unreadable lines skipped")
    return entries


def _read_snapshots(p: Path, names: list[str], problems: list[str]) -> list[Snapshot]:
    """Each step's snapshot in directory order (named after the exercise's steps), then the final one."""
    steps = p / evidence.STEPS
    dirs = sorted(d for d in steps.glob("*") if d.is_dir()) if steps.is_dir() else []
    out = []
    for d in dirs:
        m = re.match(r"(\d+)-(.*)", d.name)
        index = int(m.group(1)) if m else 0
        name = names[index - 1] if m and 0 < index <= len(names) and names[index - 1] else d.name
        out.append(_snapshot(d, index, name, f"{evidence.STEPS}/{d.name}", problems))
    if (p / evidence.FINAL).is_dir():
        out.append(_snapshot(p / evidence.FINAL, 0, evidence.FINAL, evidence.FINAL, problems))
    return out


def _snapshot(d: Path, index: int, name: str, rel: str, problems: list[str]) -> Snapshot:
    snap = Snapshot(index, name, rel)
    for attr, kind in (("queues", list), ("podgroups", list), ("pods", list), ("nodes", dict), ("claims", list)):
        found: list[str] = []
        data = _read(d / SNAPSHOT_FILE[attr], "yaml", found, required=False)
        problems += [f"{rel}/{x}" for x in found]
        if data is not None and not isinstance(data, kind):
            problems.append(f"{rel}/{SNAPSHOT_FILE[attr]}: unexpected shape, ignored")
            data = None
        setattr(snap, attr, data)
    found = []
    top = _read(d / evidence.TOP, "json", found, required=False)
    problems += [f"{rel}/{x}" for x in found]
    snap.top = top if isinstance(top, dict) and isinstance(top.get("cluster"), dict) else None
    return snap


# ------------------------------------------------------------------------------ raw files
def top_files(run: Run) -> list[Path]:
    return [run.path / f for f in TOP_FILES if (run.path / f).exists()]


def subdir_files(run: Run) -> list[tuple[str, list[Path]]]:
    """(manifests|logs|dump, the files below it) for each of them that holds any."""
    out = []
    for sub in SUBDIRS:
        if (run.path / sub).is_dir():
            files = sorted(f for f in (run.path / sub).rglob("*") if f.is_file())
            if files:
                out.append((sub, files))
    return out


def snapshot_files(run: Run, snap: Snapshot) -> list[Path]:
    d = run.path / snap.rel
    return [d / f for f in SNAPSHOT_FILES if (d / f).exists()]


# ------------------------------------------------------------------------------ finding runs
def _trial(d: Path) -> tuple[dict, list[Path]]:
    """A trial's matrix and its runs: those below it, and any other a cell names."""
    problems: list[str] = []
    matrix = _read(d / evidence.MATRIX, "json", problems)
    if not isinstance(matrix, dict):
        matrix = {"versions": [], "exercises": {}, "problems": problems or ["not a mapping"]}
    runs = evidence.runs_under(d)
    for cells in (matrix.get("exercises") or {}).values():
        for cell in (cells or {}).values() if isinstance(cells, dict) else []:
            ev = cell.get("evidence") if isinstance(cell, dict) else None
            if ev and evidence.is_run(d / ev) and (d / ev) not in runs:
                runs.append(d / ev)
    return matrix, runs


def expand(evidence_dirs: list[Path]) -> list[tuple[Path, dict | None, list[Path]]]:
    """Each given directory -> (dir, matrix or None, run directories in it)."""
    out = []
    for d in evidence_dirs:
        d = Path(d)
        if not d.is_dir():
            raise KailabError(f"{d}: not a directory (give an evidence run directory, e.g. evidence/<run>)")
        if (d / evidence.MATRIX).exists():
            out.append((d, *_trial(d)))
        elif evidence.is_run(d):
            out.append((d, None, [d]))
        else:
            runs = sorted(c for c in d.iterdir() if c.is_dir() and evidence.is_run(c))
            if not runs:
                raise KailabError(f"{d}: no evidence here (no {evidence.VERDICT}, {evidence.RUN}, "
                                  f"{evidence.EXERCISE} or {evidence.MATRIX})")
            out.append((d, None, runs))
    return out


_STAMP = re.compile(r"^(?:trial-)?(\d{8}T\d{6})(?:\.(\d+))?Z")


def _age(c: Path):
    """Sort key: stamped names by their stamp, after unstamped ones; then modification time."""
    m = _STAMP.match(c.name)
    if m:
        return (1, m.group(1) + "." + (m.group(2) or "").ljust(6, "0"), c.stat().st_mtime)
    return (0, "", c.stat().st_mtime)


def newest_run(root: Path) -> Path:
    """The newest run (or trial) directory under root, by the timestamp in its name."""
    root = Path(root)
    candidates = [c for c in root.iterdir()
                  if c.is_dir() and (evidence.is_run(c) or (c / evidence.MATRIX).exists())] \
        if root.is_dir() else []
    if not candidates:
        raise KailabError(f"no run directories under {root}: run an exercise first (`kailab run NAME`) "
                          "or name a directory (`kailab report DIR`)")
    return max(candidates, key=_age)
