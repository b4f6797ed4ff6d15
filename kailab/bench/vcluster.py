"""`kailab bench vcluster`: what a KAI version trial in vClusters costs and whether it tells the truth.

Two runs of the same versions and exercises, one after another:
1. the trial in vClusters (`kailab trial --runtime kind`): host up, each version's vCluster created
   until KAI binds its probe, exercise wall times inside the vCluster, the blast radius, each
   version's delete-to-clean (from promises.json), and afterwards the same exercises on a binary lab
   per version (the trial's `binary/`): the verdicts a vCluster's must equal;
2. a plain kind lab per version (KAI from its chart, no vCluster): up, and the same exercises' wall
   times — what the vCluster adds.
Figures are recorded (bench/results/<date>-vcluster.md|json), never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ..exercise.runner import run_exercise
from ..exercise.load import resolve_exercise
from .. import labs
from ..labs import LabRecord, LabSpec
from ..evidence import new_folder
from ..paths import evidence_dir
from .common import _record, machine


def _trial(runtime: str, version_list: list[str], exercises: list[str], repeat: int, root: Path, echo) -> dict:
    """One `kailab trial` run as the user runs it; its matrix (with promises), wall time, exit."""
    started = time.monotonic()
    argv = [sys.executable, "-m", "kailab.cli", "trial", "--runtime", runtime, "--kai-versions", ",".join(version_list),
            "--exercises", ",".join(exercises), "--repeat", str(repeat)]
    echo(f"[bench] {' '.join(argv[3:])}")
    out = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "KAILAB_EVIDENCE": str(root)})
    wall = round(time.monotonic() - started, 1)
    trials = sorted(root.glob("trial-*"))
    matrix = json.loads((trials[-1] / "matrix.json").read_text()) if trials and (trials[-1] / "matrix.json").is_file() else {}
    return {"wall_s": wall, "exit": out.returncode, "evidence": str(trials[-1]) if trials else "", "matrix": matrix,
            "stderr_tail": out.stderr.strip().splitlines()[-5:]}


def _exercise_walls(trial_dir: Path, version: str) -> dict[str, float]:
    """Each exercise's wall seconds in a trial's first run of a version."""
    out = {}
    for verdict in sorted((trial_dir / version / "run-1").glob("*/verdict.json")):
        v = json.loads(verdict.read_text())
        out[v["exercise"]] = round(sum(v.get("wall_seconds", {}).values()), 1)
    return out


def _plain_kind(version: str, exercises: list[str], root: Path, echo) -> dict:
    name = f"bench-vc-{version.replace('.', '-')}"
    started = time.monotonic()
    try:
        echo(f"[bench] a plain kind lab of KAI {version}")
        labs.up(LabSpec(name=name, runtime="kind", fleet="small", kai_version=version, images="local", metrics=False))
        up = round(time.monotonic() - started, 1)
        rec = LabRecord.load(name)
        walls, verdicts = {}, {}
        for e in exercises:  # wall seconds as the vCluster's are read: the run's own, from set-up to clean-up
            o = run_exercise(resolve_exercise(e), rec, root / f"kind-{version}")
            walls[o.exercise], verdicts[o.exercise] = round(sum(o.wall.values()), 1), o.verdict
        return {"up_s": up, "exercise_wall_s": walls, "verdicts": verdicts}
    finally:
        labs.down(name, "kind")


def _finished(trial_dir: Path) -> dict:
    """A vCluster trial that already ran (`kailab trial --runtime kind`): its matrix, as _trial's, and
    its wall time from its plan's writing to its matrix's (the checks before the plan not counted)."""
    matrix = json.loads((trial_dir / "matrix.json").read_text())
    wall = (trial_dir / "matrix.json").stat().st_mtime - (trial_dir / "plan.json").stat().st_mtime
    return {"wall_s": round(wall, 1), "exit": None, "evidence": str(trial_dir), "matrix": matrix, "stderr_tail": [],
            "read": True}


def vcluster_bench(version_list: list[str], exercises: list[str], repeat: int, echo=print,
                   out_dir: Path | None = None, trial_dir: Path | None = None) -> dict:
    """`trial_dir`: a finished vCluster trial of these versions and exercises, read instead of run
    again (its whole wall time is then not known)."""
    root = new_folder(evidence_dir(), "bench-vcluster")
    vc = _finished(trial_dir) if trial_dir else _trial("kind", version_list, exercises, repeat, root / "vcluster", echo)
    promises = vc["matrix"].get("promises") or {}
    timings = promises.get("timings") or {}
    results: dict = {"machine": machine(), "versions": version_list, "exercises": exercises, "repeat": repeat,
                     "vcluster_trial": {k: vc.get(k) for k in ("wall_s", "exit", "evidence", "stderr_tail", "read")},
                     "host_up_s": timings.get("host_up_seconds"),
                     "setup_s": {v: t.get("setup_seconds") for v, t in (timings.get("versions") or {}).items()},
                     "exercises_s": timings.get("exercises_seconds"),
                     "rollback_s": {v: r.get("seconds") for v, r in (promises.get("rollback_seconds") or {}).items()},
                     "rollback_objects": {v: r.get("objects_gone_at") for v, r in (promises.get("rollback_seconds") or {}).items()},
                     "promises": {k: (promises.get(k) or {}).get("verdict") for k in ("host_untouched", "no_interference", "blast_radius")},
                     "in_vcluster_wall_s": {v: _exercise_walls(Path(vc["evidence"]), v) for v in version_list} if vc["evidence"] else {}}
    results["plain_kind"] = {v: _plain_kind(v, exercises, root, echo) for v in version_list}
    table = vc["matrix"].get("against_binary") or {}
    results["verdicts"] = {e: {v: {"vcluster": _cell(table, e, v, "vcluster"), "binary": _cell(table, e, v, "binary"),
                                   "kind": results["plain_kind"][v]["verdicts"].get(e)}
                               for v in version_list} for e in exercises}
    results["verdicts_equal"] = bool(table) and all(c["same"] for row in table.values() for c in row.values())
    return _record(results, "-vcluster", vcluster_markdown(results), out_dir)


def _cell(table: dict, exercise: str, version: str, where: str) -> str:
    c = (table.get(exercise) or {}).get(version) or {}
    return f"{c[where]} {c[where + '_passed']}" if c else "not run"


def vcluster_markdown(r: dict) -> str:
    vs = r["versions"]
    lines = [f"# KAI version trial in vClusters: {', '.join(vs)}", "",
             f"Machine: {r['machine']['cores']} cores, {r['machine']['memory_gib']} GiB. Exercises: "
             f"{', '.join(r['exercises'])}, {r['repeat']} run(s) each per version.", "",
             "## Speed", "", "| what | seconds |", "|---|---|",
             f"| kind host up (KWOK, fake-gpu-operator, no KAI) | {r['host_up_s']} |"]
    lines += [f"| vCluster {v} created until KAI binds its probe | {r['setup_s'].get(v)} |" for v in vs]
    lines += [f"| exercises, every version at once | {r['exercises_s']} |"]
    lines += [f"| delete-to-clean {v} (last host object gone) | {r['rollback_s'].get(v)} |" for v in vs]
    lines += [f"| plain kind lab {v} up | {r['plain_kind'][v]['up_s']} |" for v in vs]
    lines += [f"| whole vCluster trial (`kailab trial --runtime kind`, its binary labs after it included) | "
              f"{r['vcluster_trial']['wall_s']}"
              f"{' (a finished trial, read: ' + r['vcluster_trial']['evidence'] + ', from its plan.json to its matrix.json)' if r['vcluster_trial'].get('read') else ''} |", "",
              "Exercise wall seconds (run 1): in a vCluster (both versions at once) vs a plain kind lab (alone):", "",
              "| exercise | " + " | ".join(f"{v} vCluster | {v} kind" for v in vs) + " |",
              "|---" * (2 * len(vs) + 1) + "|"]
    for e in r["exercises"]:
        cells = []
        for v in vs:
            cells += [str(r["in_vcluster_wall_s"].get(v, {}).get(e)), str(r["plain_kind"][v]["exercise_wall_s"].get(e))]
        lines.append(f"| {e} | " + " | ".join(cells) + " |")
    lines += ["", "## Verdicts: in a vCluster, on a binary lab (the trial's own), on a plain kind lab", "",
              "| exercise | " + " | ".join(f"{v} vCluster | {v} binary | {v} kind" for v in vs) + " |",
              "|---" * (3 * len(vs) + 1) + "|"]
    for e, row in r["verdicts"].items():
        lines.append(f"| {e} | " + " | ".join(f"{row[v]['vcluster']} | {row[v]['binary']} | {row[v]['kind']}" for v in vs) + " |")
    lines += ["", f"vCluster verdicts equal the binary trial's: **{r['verdicts_equal']}**.",
              "Promises: " + ", ".join(f"{k} {v}" for k, v in r["promises"].items()) + "."]
    for v, gone in (r.get("rollback_objects") or {}).items():
        if gone:  # what bounds a rollback: the host object that went last
            last = max(gone, key=gone.get)
            lines.append(f"Rollback {v}: the last host object gone, at {gone[last]} s: `{last}`.")
    lines.append("")
    return "\n".join(lines)
