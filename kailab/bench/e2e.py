"""KAI's whole e2e on kailab (`kailab bench e2e`): `kailab e2e --all` (every suite a lab can run, each on
the runtime that runs most of its specs, the binary and kind lanes side by side), then `kailab e2e --dra`
(the DRA specs, on their fleet), one after the other, each timed with the machine's CPU. The record:
per lane and suite ran / passed / failed / skipped / seconds, every failure named, and the coverage line
— the specs run and passed of KAI's own (`It`/`Entry` in test/e2e/suites at that version)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from .. import toolchain, versions
from ..e2e.session import SUMMARY, markdown as suites_markdown
from ..errors import KailabError
from ..paths import evidence_dir
from .common import _MachineSampler, _record, machine

RUNS = {"all": ["--all"], "dra": ["--dra"]}
SPEC = re.compile(r"^\s*(It|Entry)\(", re.M)


def count_specs(tree: Path) -> int:
    """KAI's e2e specs as KAI writes them: each `It(` or `Entry(` in test/e2e/suites."""
    suites = tree / "test" / "e2e" / "suites"
    if not suites.is_dir():
        raise KailabError(f"{suites}: no KAI e2e suites there (is the KAI source whole?)")
    return sum(len(SPEC.findall(p.read_text(errors="replace"))) for p in suites.rglob("*.go"))


def _run(label: str, args: list[str], root: Path, echo) -> dict:
    """One `kailab e2e` run, its evidence under `root`; its summary, wall and the machine's CPU."""
    root.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "kailab.cli", "e2e", *args]
    echo(f"[{label}] kailab e2e {' '.join(args)}")
    t = time.monotonic()
    with _MachineSampler() as sampler:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "KAILAB_EVIDENCE": str(root)})
        for line in proc.stdout:  # its progress, as it goes
            echo(f"[{label}] {line.rstrip()}")
        proc.wait()
    wall = round(time.monotonic() - t, 1)
    folders = sorted(root.glob("e2e-*"))
    if not folders or not (folders[-1] / SUMMARY).is_file():
        raise KailabError(f"`kailab e2e {' '.join(args)}` exited {proc.returncode} with no summary under {root}")
    summary = json.loads((folders[-1] / SUMMARY).read_text())
    return {"args": args, "exit": proc.returncode, "wall_s": wall, "evidence": str(folders[-1]),
            **sampler.figures(wall), "summary": summary}


def e2e_bench(kai_version: str = "", dra: bool = True, echo=print, root: Path | None = None) -> dict:
    version = versions.normalise(kai_version or versions.DEFAULT_KAI)
    tree = toolchain.kai_tree(toolchain.kai_recipe(versions.kai_release(version)))
    total = count_specs(tree)
    root = root or evidence_dir() / f"bench-e2e-{time.strftime('%Y%m%dT%H%M%S')}"
    version_args = ["--kai-versions", version] if kai_version else []
    runs = {label: _run(label, [*args, *version_args], root / label, echo)
            for label, args in RUNS.items() if dra or label != "dra"}
    ran = sum(r["summary"]["totals"]["tests"] - r["summary"]["totals"]["skipped"] for r in runs.values())
    passed = sum(r["summary"]["totals"]["passed"] for r in runs.values())
    results = {"machine": machine(), "kai_version": version, "kai_specs": total, "specs_run": ran,
               "specs_passed": passed, "wall_s": round(sum(r["wall_s"] for r in runs.values()), 1),
               "cpu_seconds": round(sum(r["cpu_seconds"] for r in runs.values()), 1), "runs": runs}
    return _record(results, f"-kai-e2e-all-{version}", render(results), None)


def render(results: dict) -> str:
    lines = [f"# KAI's whole e2e on kailab, KAI {results['kai_version']} (`kailab bench e2e`)", "",
             f"**{results['specs_run']} of KAI {results['kai_version']}'s {results['kai_specs']} e2e specs ran on "
             f"kailab, {results['specs_passed']} passed** (`It`/`Entry` in test/e2e/suites), in "
             f"{results['wall_s']:.0f} s and {results['cpu_seconds']:.0f} CPU-s of the machine "
             f"({results['machine']['cores']} cores, {results['machine']['memory_gib']} GiB).", ""]
    for label, run in results["runs"].items():
        t = run["summary"]["totals"]
        lines += [f"## `kailab e2e {' '.join(run['args'])}`", "",
                  f"{t['tests'] - t['skipped']} ran, {t['passed']} passed, {t['failed']} failed, {t['skipped']} "
                  f"skipped; exit {run['exit']}; {run['wall_s']:.0f} s, {run['cpu_seconds']:.0f} CPU-s "
                  f"(busy cores mean {run['busy_cores_mean']}, load average up to {run['load_avg_max']}). "
                  f"Evidence: {run['evidence']} (not committed).", "",
                  suites_markdown(run["summary"]), ""]
    lines.append("Each spec left out, and why: `kailab e2e --list`; what a failure is: docs/kai-e2e.md.")
    return "\n".join(lines) + "\n"
