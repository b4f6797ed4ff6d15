"""Version trials: the same exercises against several KAI versions, one isolated lab per version.

On the binary runtime every version gets its own control plane (own ports, certificates, etcd,
fleet), so versions cannot see each other. Every version is checked and every binary built
before the first lab starts; labs then run side by side, as many at once as `parallel` allows.
The matrix (exercise x version) is built from each run's verdict.json, never from memory.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import toolchain, versions
from .errors import KailabError
from .exercise.runner import ExerciseRun, resolve_exercise
from .exercise.spec import load_exercise
from .paths import evidence_dir
from .runtimes.base import LabSpec
from .runtimes.binary import BinaryRuntime


def parse_versions(text: str) -> list[str]:
    """Normalised, de-duplicated versions; any unknown or unsupported one fails here."""
    out: list[str] = []
    for raw in [v for v in text.split(",") if v.strip()]:
        v = versions.kai_release(raw).version
        if v in out:
            raise KailabError(f"--versions lists {v} twice")
        out.append(v)
    if len(out) < 2:
        raise KailabError("a trial compares at least two KAI versions: --versions vA,vB")
    if os.environ.get("KAILAB_KAI_SOURCE"):
        # one work tree is one version: it would build every version from the same code
        raise KailabError(f"KAILAB_KAI_SOURCE={os.environ['KAILAB_KAI_SOURCE']} is one KAI work tree and "
                          "cannot serve several versions: unset it and register the repository "
                          "(`kailab tools kai-source PATH`) to build each tag")
    return out


def plan(version_list: list[str], exercises: list[str], fleet: str) -> dict:
    """Everything checked before any lab starts: versions, exercise files, fleet sizes."""
    paths = [resolve_exercise(e) for e in exercises]
    loaded = [load_exercise(p) for p in paths]
    for ex in loaded:
        if ex.fleet != fleet:
            raise KailabError(f"exercise {ex.exercise} is sized for fleet {ex.fleet}, not {fleet}: "
                              f"run it in a trial with --fleet {ex.fleet}")
    return {"versions": version_list, "exercises": [str(p) for p in paths], "fleet": fleet}


def run_trial(version_list: list[str], exercises: list[str], fleet: str = "small",
              parallel: int | None = None, root: Path | None = None, console=None) -> Path:
    the_plan = plan(version_list, exercises, fleet)
    for v in version_list:  # builds are sequential (each already uses every core)
        toolchain.build_all(toolchain.recipes_for(v), console)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    trial_dir = (root or evidence_dir()) / f"trial-{stamp}"
    trial_dir.mkdir(parents=True)
    (trial_dir / "plan.json").write_text(json.dumps(the_plan, indent=2))
    parallel = parallel or max(1, min(len(version_list), (os.cpu_count() or 2) // 2))

    def one(version: str) -> None:
        name = f"trial-{stamp}-{version.replace('.', '-')}"
        rt = BinaryRuntime()
        vdir = trial_dir / version
        vdir.mkdir()
        try:
            lab = rt.up(LabSpec(name=name, runtime="binary", fleet=fleet, kai_version=version))
            for p in the_plan["exercises"]:
                ExerciseRun(load_exercise(p), Path(p), lab, vdir).run()
        except KailabError as err:
            (vdir / "lab-error.txt").write_text(str(err) + "\n")
        finally:
            rt.down(name)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, version_list))
    matrix = build_matrix(trial_dir)
    (trial_dir / "matrix.json").write_text(json.dumps(matrix, indent=2))
    (trial_dir / "matrix.md").write_text(matrix_markdown(matrix))
    from .report import write_report

    write_report([trial_dir])  # report.html beside the matrix, with every run's evidence
    return trial_dir


def build_matrix(trial_dir: Path) -> dict:
    """exercise x version -> verdict and figures, read from every run's verdict.json."""
    plan_ = json.loads((trial_dir / "plan.json").read_text())
    names = [Path(p).stem for p in plan_["exercises"]]
    cells: dict[str, dict[str, dict]] = {n: {} for n in names}
    for version in plan_["versions"]:
        vdir = trial_dir / version
        lab_error = (vdir / "lab-error.txt").read_text().strip() if (vdir / "lab-error.txt").exists() else ""
        found = {}
        for verdict_file in sorted(vdir.glob("*/verdict.json")):
            v = json.loads(verdict_file.read_text())
            found[v["exercise"]] = {"verdict": v["verdict"], "figures": v.get("figures", {}),
                                    "error": v.get("error", ""),
                                    "evidence": str(verdict_file.parent.relative_to(trial_dir))}
        for n in names:
            cells[n][version] = found.get(n) or {"verdict": "not run", "figures": {},
                                                 "error": lab_error or "no verdict.json", "evidence": ""}
    differing = [n for n in names if len({json.dumps([c["verdict"], c["figures"]], sort_keys=True)
                                          for c in cells[n].values()}) > 1]
    return {"versions": plan_["versions"], "fleet": plan_["fleet"], "exercises": cells, "differing": differing}


def matrix_markdown(matrix: dict) -> str:
    vs = matrix["versions"]
    lines = ["| exercise | " + " | ".join(vs) + " |", "|---" * (len(vs) + 1) + "|"]
    order = matrix["differing"] + [n for n in matrix["exercises"] if n not in matrix["differing"]]
    for n in order:
        row = []
        for v in vs:
            c = matrix["exercises"][n][v]
            figs = ", ".join(f"{k}={val}" for k, val in c["figures"].items())
            text = c["verdict"] + (f" ({figs})" if figs else "")
            row.append(f"**{text}**" if n in matrix["differing"] else text)
        lines.append(f"| {n}{' ≠' if n in matrix['differing'] else ''} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
