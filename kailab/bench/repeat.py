"""Exercises run again and again on one lab, and labs compared on the same exercises."""

from __future__ import annotations

import datetime as dt
import os
import statistics
import time
from pathlib import Path

from ..errors import KailabError
from ..evidence import new_folder
from ..paths import evidence_dir
from .. import labs
from ..labs import LabSpec
from .common import _record, machine
from ..exercise.load import load_exercise, resolve_exercise
from ..exercise.runner import run_exercise
from ..labs import require_kai_lab
from ..paths import exercises_dir


def repeatability(runs: int, names: list[str] | None = None, lab_name: str | None = None,
                  out_dir: Path | None = None, echo=print) -> dict:
    """Every exercise `runs` times in a row against one lab: passes per exercise, wall time per
    run, and the failing checks of any run that did not pass (a flake is a bug to find)."""
    paths = [resolve_exercise(n) for n in names] if names else sorted(exercises_dir().glob("*.yaml"))
    fleets = {load_exercise(p).fleet for p in paths}  # validated before any lab work
    if lab_name is None:
        if len(fleets) != 1:
            raise KailabError(f"exercises for several fleets ({', '.join(sorted(fleets))}): pass --name")
        spec = LabSpec(name=f"bench-{os.getpid()}-repeat", runtime="binary", fleet=fleets.pop())
        with labs.running(spec) as lab:
            rec = lab.record
            records = _repeat_on(rec, runs, paths, echo)
    else:
        rec = require_kai_lab(lab_name, "repeatability runs")
        other = sorted(p.stem for p in paths if load_exercise(p).fleet != rec.fleet)
        if other:  # on another fleet they would only time out
            raise KailabError(f"lab {lab_name} runs fleet {rec.fleet}, but {', '.join(other)} need another fleet: "
                              f"leave them out with --exercises, or pass a lab of their fleet")
        records = _repeat_on(rec, runs, paths, echo)
    per: dict[str, dict] = {}
    for run_ in records:
        e = per.setdefault(run_["exercise"], {"runs": 0, "passed": 0, "seconds": [], "not_passed": [], "wall": []})
        e["wall"].append(run_.get("wall") or {})
        e["runs"] += 1
        e["passed"] += run_["verdict"] == "passed"
        e["seconds"].append(run_["seconds"])
        if run_["verdict"] != "passed":
            e["not_passed"].append(run_)
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "kai_version": records[0]["kai_version"] if records else None, "runtime": rec.runtime,
               "runs": runs, "exercises": per,
               "passed": sum(e["passed"] for e in per.values()), "total": len(records)}
    return _record(results, "-repeatability", repeatability_markdown(results), out_dir)


def _repeat_on(lab_rec, runs: int, paths: list[Path], echo) -> list[dict]:
    records: list[dict] = []
    root = new_folder(evidence_dir(), "repeat")
    for i in range(1, runs + 1):
        for p in paths:
            start = time.perf_counter()
            outcome = run_exercise(p, lab_rec, root)
            rec = {"exercise": outcome.exercise, "run": i, "verdict": outcome.verdict,
                   "seconds": round(time.perf_counter() - start, 1), "evidence": outcome.evidence,
                   "kai_version": lab_rec.kai_version, "wall": outcome.wall,
                   "failed": [r.line() for r in outcome.results if not r.passed][:3]}
            records.append(rec)
            echo(f"run {i}/{runs} {rec['exercise']}: {rec['verdict']} in {rec['seconds']} s")
    return records


def repeatability_markdown(r: dict) -> str:
    m = r["machine"]
    lines = [f"# Exercise repeatability, {r['date']}", "",
             f"Each exercise {r['runs']} times in a row on one {r.get('runtime') or 'binary'} lab, KAI {r['kai_version']}; "
             f"{m['cores']} cores, {m['memory_gib']} GiB. Total: **{r['passed']} / {r['total']}** passed.", "",
             "| exercise | passed / runs | wall s (median, min-max) |", "|---|---|---|"]
    for name, e in sorted(r["exercises"].items()):
        secs = e["seconds"]
        lines.append(f"| {name} | {e['passed']} / {e['runs']} | {statistics.median(secs):.1f} "
                     f"({min(secs):.1f}-{max(secs):.1f}) |")
    kinds = sorted({k for e in r["exercises"].values() for w in e.get("wall", []) for k in w})
    if kinds:
        lines += ["", "Where each exercise's wall time goes (median seconds per run; `stays` and `settle` are "
                  "windows the exercise asks for, `expect` ends when KAI gets there, `evidence` is "
                  "snapshots and logs, `clean-up` waits for the namespace's pods to be gone):", "",
                  "| exercise | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
        totals = {k: 0.0 for k in kinds}
        for name, e in sorted(r["exercises"].items()):
            meds = {k: statistics.median([w.get(k, 0.0) for w in e["wall"]]) for k in kinds}
            for k in kinds:
                totals[k] += meds[k]
            lines.append(f"| {name} | " + " | ".join(f"{meds[k]:.1f}" for k in kinds) + " |")
        lines.append("| **all** | " + " | ".join(f"**{totals[k]:.0f}**" for k in kinds) + " |")
    flakes = [rec for e in r["exercises"].values() for rec in e["not_passed"]]
    if flakes:
        lines += ["", "Runs that did not pass:"]
        lines += [f"- {rec['exercise']} run {rec['run']}: {rec['verdict']}: {'; '.join(rec['failed'])} "
                  f"({rec['evidence']})" for rec in flakes]
    return "\n".join(lines) + "\n"


def compare_labs(names: list[str], exercise_names: list[str] | None = None, out_dir: Path | None = None,
                 echo=print) -> dict:
    """The same exercises on two running labs of one fleet and KAI version (e.g. a binary and a kind
    lab): verdicts and figures side by side. A disagreement is a finding naming what differs."""
    recs = [require_kai_lab(n, "lab comparisons") for n in names]
    if len({(r.fleet, r.kai_version) for r in recs}) != 1:
        raise KailabError("bench compare-labs: the labs differ in fleet or KAI version ("
                          + ", ".join(f"{r.name}: {r.fleet} {r.kai_version}" for r in recs) + "): compare like with like")
    paths = ([resolve_exercise(n) for n in exercise_names] if exercise_names
             else sorted(p for p in exercises_dir().glob("*.yaml") if load_exercise(p).fleet == recs[0].fleet))
    root = new_folder(evidence_dir(), "compare")
    rows = []
    for p in paths:
        row = {"exercise": p.stem, "labs": {}}
        for rec in recs:
            start = time.perf_counter()
            o = run_exercise(p, rec, root / rec.name)
            row["labs"][rec.name] = {"runtime": rec.runtime, "verdict": o.verdict,
                                     "seconds": round(time.perf_counter() - start, 1),
                                     "figures": {k: v for k, v in o.figures.items() if not k.startswith("expected_after")},
                                     "failed": [r.line() for r in o.failures][:3], "evidence": o.evidence}
            echo(f"{p.stem} on {rec.name} ({rec.runtime}): {o.verdict}")
        verdicts = {v["verdict"] for v in row["labs"].values()}
        row["agree"] = len(verdicts) == 1
        rows.append(row)
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
               "fleet": labs[0].fleet, "kai_version": labs[0].kai_version,
               "labs": {r.name: r.runtime for r in recs}, "rows": rows,
               "agree": sum(r["agree"] for r in rows), "total": len(rows)}
    return _record(results, "-runtimes", compare_markdown(results), out_dir)


def compare_markdown(r: dict) -> str:
    names = list(r["labs"])
    lines = [f"# The same exercises on {len(names)} labs, {r['date']}", "",
             f"Fleet {r['fleet']}, KAI {r['kai_version']}; " + ", ".join(f"`{n}`: {rt}" for n, rt in r["labs"].items())
             + f". Verdicts agree on **{r['agree']} / {r['total']}** exercises.", "",
             "| exercise | " + " | ".join(f"{r['labs'][n]} verdict (s)" for n in names) + " | agree |",
             "|---|" + "---|" * len(names) + "---|"]
    for row in r["rows"]:
        cells = [f"{row['labs'][n]['verdict']} ({row['labs'][n]['seconds']:.0f})" for n in names]
        lines.append(f"| {row['exercise']} | " + " | ".join(cells) + f" | {'yes' if row['agree'] else '**no**'} |")
    differ = [row for row in r["rows"] if not row["agree"] or any(v["verdict"] != "passed" for v in row["labs"].values())]
    if differ:
        lines += ["", "Runs that did not pass or disagree:"]
        for row in differ:
            for n, v in row["labs"].items():
                if v["verdict"] != "passed":
                    lines.append(f"- {row['exercise']} on {n} ({v['runtime']}): {v['verdict']}: {'; '.join(v['failed'])}")
    return "\n".join(lines) + "\n"
