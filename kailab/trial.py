"""Version trials: the same exercises against several KAI versions, one isolated lab per version.

On the binary runtime every version gets its own control plane (own ports, certificates, etcd,
fleet), so versions cannot see each other. Every version is checked and every binary built
before the first lab starts; labs then run side by side, as many at once as `parallel` allows.
The matrix (exercise x version) is built from each run's verdict.json, never from memory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from . import evidence, toolchain, versions
from .errors import InputError, KailabError
from .fanout.costs import requests_for
from .fanout.unit import Kind, Unit, UnitResult, bring_back, cli_command, dns_label, summary_outcome
from .fleet import fleet_path, load_fleet
from .exercise.load import load_exercise, resolve_exercise
from .paths import evidence_dir
from .labs import LabSpec
from .runtimes import processes
from .vcluster.dry import dry_run_text
from .vcluster.tools import need_docker
from .variants.exercises import exercises_side_by_side, write_matrix_page

BINARY = "binary"  # a vCluster trial's binary-lab runs of the same versions and exercises


def parse_versions(text: str, least: int = 2) -> list[str]:
    """Normalised, de-duplicated versions; any unknown or unsupported one fails here. A fanned-out
    trial's part (one pod's) runs one version: `least` 1."""
    out: list[str] = []
    for raw in [v for v in text.split(",") if v.strip()]:
        v = versions.kai_release(raw).version
        if v in out:
            raise KailabError(f"--kai-versions lists {v} twice")
        out.append(v)
    if len(out) < least:
        raise KailabError("a trial compares at least two KAI versions: --kai-versions vA,vB")
    if os.environ.get("KAILAB_KAI_SOURCE"):
        # one work tree is one version: it would build every version from the same code
        raise KailabError(f"KAILAB_KAI_SOURCE={os.environ['KAILAB_KAI_SOURCE']} is one KAI work tree and "
                          "cannot serve several versions: unset it and register the repository "
                          "(`kailab tools kai-source PATH`) to build each tag")
    return out


def checked_plan(version_list: list[str], exercises: list[str], fleet: str) -> dict:
    """Everything checked before any lab starts: versions, exercise files, fleet sizes."""
    paths = [resolve_exercise(e) for e in exercises]
    loaded = [load_exercise(p) for p in paths]
    for ex in loaded:
        if ex.fleet != fleet:
            raise KailabError(f"exercise {ex.exercise} is sized for fleet {ex.fleet}, not {fleet}: "
                              f"run it in a trial with --fleet {ex.fleet}")
    return {"versions": version_list, "exercises": [str(p) for p in paths], "fleet": fleet}


def run_trial(version_list: list[str], exercises: list[str], fleet: str = "small",
              parallel: int | None = None, root: Path | None = None, console=None, repeat: int = 2,
              runtime: str = "binary", kubeconfig: str | None = None, blast: bool | list[str] = True,
              hooks: dict | None = None, against_binary: bool = False) -> Path:
    """One trial, whatever runs the versions: checked plan, trial directory, the versions' runs
    (binary: a lab per version, side by side; kind / existing: a vCluster per version on one host,
    a kind lab made for it or the cluster `kubeconfig` names), then the matrix and the report, all
    read back from the runs' evidence. `against_binary` (vCluster trials): afterwards the same
    exercises on a binary lab per version, in `binary/`, and the matrix says where a version's
    verdict in its vCluster is not its verdict on a lab of its own."""
    need_docker(runtime)  # kind: one line at once, not after the versions' sources are read
    the_plan = {**checked_plan(version_list, exercises, fleet), "repeat": repeat, "runtime": runtime}
    if runtime == "binary" or against_binary:  # every binary lab's build before anything is made
        for v in version_list:  # sequential: each build already uses every core
            toolchain.build_all(toolchain.recipes_for(v), console)
    if runtime in ("kind", "existing"):
        from .vcluster import run as vtrial

        if runtime == "existing" and not kubeconfig:
            raise KailabError("--runtime existing needs --kubeconfig PATH: the host cluster the vClusters go in")
        # blast: True (every exercise again beside the broken version) or the exercises to run then
        the_plan["blast"] = bool(blast) and len(version_list) > 1
        if isinstance(blast, (list, tuple)):
            the_plan["blast_exercises"] = [str(resolve_exercise(e)) for e in blast]
        vtrial.check(the_plan, kubeconfig)  # before anything is made
        trial_dir = evidence.new_folder(root or evidence_dir(), "trial")  # two in one second: trial-<time>-2
        stamp = evidence.stamp_of(trial_dir, "trial")
        (trial_dir / "plan.json").write_text(json.dumps(the_plan, indent=2))
        vtrial.run_versions(trial_dir, stamp, the_plan, str(Path(kubeconfig).expanduser().resolve()) if kubeconfig else None,
                            hooks)
        if against_binary:  # after the vClusters are gone: the machine is theirs while they run
            (trial_dir / BINARY).mkdir()
            _run_binary(trial_dir / BINARY, f"{stamp}-bin", the_plan, parallel)
    else:
        trial_dir = evidence.new_folder(root or evidence_dir(), "trial")
        stamp = evidence.stamp_of(trial_dir, "trial")
        (trial_dir / "plan.json").write_text(json.dumps(the_plan, indent=2))
        _run_binary(trial_dir, stamp, the_plan, parallel)
    write_outputs(trial_dir)
    return trial_dir


def write_outputs(trial_dir: Path) -> dict:
    """matrix.json, matrix.md and report.html (with every run's evidence) from what the folder holds."""
    matrix = build_matrix(trial_dir)
    return write_matrix_page(trial_dir, matrix, matrix_markdown(matrix))


def all_passed(matrix: dict) -> bool:
    """Every run of every exercise on every version passed, and no promise of a vCluster trial broke."""
    return all(c["runs"] and c["passed"] == c["runs"] for row in matrix["exercises"].values() for c in row.values()) \
        and not promises_broken(matrix)


def _run_binary(trial_dir: Path, stamp: str, the_plan: dict, parallel: int | None) -> None:
    specs = {v: LabSpec(name=f"trial-{stamp}-{v.replace('.', '-')}", runtime="binary", fleet=the_plan["fleet"],
                        kai_version=v) for v in the_plan["versions"]}

    def prepare(version: str, lab, vdir: Path) -> None:
        (vdir / "kai.json").write_text(json.dumps(kai_ran(lab.record), indent=2))

    exercises_side_by_side(trial_dir, specs, the_plan["exercises"], the_plan["repeat"], parallel, prepare)


def dry_run_kind(version_list: list[str], exercises: list[str], fleet: str, runtime: str = "kind",
                 kubeconfig: str | None = None, against_binary: bool = True) -> str:
    """A vCluster trial's printed plan; a plan problem a real run would stop at is shown as a warning."""
    load_fleet(fleet)  # bad input fails here, before anything is printed
    warnings = []
    try:
        names = [Path(p).stem for p in checked_plan(version_list, exercises, fleet)["exercises"]]
    except InputError:  # a missing or invalid exercise file: bad input fails
        raise
    except KailabError as err:  # an exercise sized for another fleet: a real run stops there
        warnings.append(f"{err} (a real run stops here)")
        names = list(exercises)
    return dry_run_text(version_list, fleet, names, warnings, runtime, kubeconfig, against_binary)


def kai_ran(rec) -> dict:
    """What KAI a lab really ran: its binaries' manifest and the scheduler's own version lines."""
    manifest = toolchain.manifest("kai", rec.kai_version) or {}
    said = {}
    for line in processes.log_head(rec.dir, "scheduler", 200).splitlines():
        for key in ("gitVersion", "gitCommit"):
            if line.strip().startswith(key + ":"):
                said.setdefault(key, line.split(":", 1)[1].strip())
    return {"lab_kai_version": rec.kai_version, "manifest_version": manifest.get("version"),
            "source": manifest.get("source"), "binaries": manifest.get("binaries"),
            "scheduler_version": said.get("gitVersion"), "scheduler_commit": said.get("gitCommit")}


def _cell(verdicts: list[dict], lab_error: str) -> dict:
    """One exercise on one version over its repeated runs."""
    if not verdicts:
        return {"verdict": "not run", "runs": 0, "passed": 0, "figures": {}, "ranges": {},
                "error": lab_error or "no verdict.json", "evidence": "", "evidence_all": []}
    kinds = [v["verdict"] for v in verdicts]
    passed = kinds.count("passed")
    verdict = kinds[0] if len(set(kinds)) == 1 else f"mixed ({passed}/{len(kinds)} passed)"
    ranges: dict[str, list] = {}
    for v in verdicts:
        for k, val in (v.get("figures") or {}).items():
            if isinstance(val, (int, float)):
                lo, hi = ranges.get(k, [val, val])
                ranges[k] = [min(lo, val), max(hi, val)]
    figures = {k: (lo if lo == hi else f"{lo}-{hi}") for k, (lo, hi) in ranges.items()}
    return {"verdict": verdict, "runs": len(kinds), "passed": passed, "verdicts": kinds, "figures": figures,
            "ranges": ranges, "error": next((v.get("error") for v in verdicts if v.get("error")), ""),
            "failures": [f for v in verdicts if (f := why_failed(v))],
            "evidence": verdicts[0]["_evidence"], "evidence_all": [v["_evidence"] for v in verdicts]}


def why_failed(verdict: dict) -> str:
    """A run that did not pass, in one line: its first failed expectation or its error, and its evidence
    (a cell's "failed 0/1" alone sent a reader of the matrix to open every run's folder)."""
    if verdict.get("verdict") == "passed":
        return ""
    first = next((e for e in verdict.get("expectations") or [] if not e.get("passed")), None)
    what = (f"{first['step']}: {first['what']}: expected {first['expected']}, observed {first['observed']}"
            if first else verdict.get("error") or verdict.get("verdict", "?"))
    return f"{verdict.get('verdict')}: {what} ({verdict.get('_evidence', '')})"


def differences(row: dict[str, dict]) -> list[str]:
    """Why a row differs across versions, or [] - never for a flake: verdicts must differ
    consistently over at least two runs each, or a figure's ranges (2+ runs each) must not overlap."""
    cells = {v: c for v, c in row.items() if c["runs"] >= 2}
    out = []
    steady = {v: c["verdicts"][0] for v, c in cells.items() if len(set(c["verdicts"])) == 1}
    if len(set(steady.values())) > 1:
        out.append("verdict: " + ", ".join(f"{v} {k}" for v, k in steady.items()))
    keys = sorted({k for c in cells.values() for k in c["ranges"]})
    for k in keys:
        spans = {v: c["ranges"][k] for v, c in cells.items() if k in c["ranges"]}
        for a in spans:
            for b in spans:
                if a < b and (spans[a][1] < spans[b][0] or spans[b][1] < spans[a][0]):
                    out.append(f"{k}: {a} {spans[a][0]}..{spans[a][1]} vs {b} {spans[b][0]}..{spans[b][1]}")
    return out


def _version_cells(trial_dir: Path, base: Path, versions_: list[str], names: list[str]):
    """exercise -> version -> cell, and version -> the KAI that ran, from the runs under base/<version>."""
    cells: dict[str, dict[str, dict]] = {n: {} for n in names}
    kai: dict[str, dict] = {}
    for version in versions_:
        vdir = base / version
        lab_error = (vdir / "lab-error.txt").read_text().strip() if (vdir / "lab-error.txt").exists() else ""
        if (vdir / "kai.json").exists():
            kai[version] = json.loads((vdir / "kai.json").read_text())
        found: dict[str, list[dict]] = {}
        for run in evidence.runs_under(vdir):
            v = evidence.read_verdict(run)
            v["_evidence"] = str(run.relative_to(trial_dir))
            found.setdefault(v["exercise"], []).append(v)
        for n in names:
            cells[n][version] = _cell(found.get(n, []), lab_error)
    return cells, kai


def verdicts_against_binary(cells: dict, binary: dict) -> dict:
    """exercise -> version -> the verdict in the vCluster, on a binary lab, and whether they are the
    same (a mixed cell on either side is not the same: a flake there is a difference to look at)."""
    return {n: {v: {"vcluster": c["verdict"], "binary": binary[n][v]["verdict"],
                    "vcluster_passed": f"{c['passed']}/{c['runs']}",
                    "binary_passed": f"{binary[n][v]['passed']}/{binary[n][v]['runs']}",
                    "same": c["verdict"] == binary[n][v]["verdict"] and c["runs"] > 0 and binary[n][v]["runs"] > 0}
                for v, c in row.items()} for n, row in cells.items()}


def build_matrix(trial_dir: Path) -> dict:
    """exercise x version -> verdicts and figure ranges over the repeated runs, read from every
    run's verdict.json; `differing` names rows whose versions really differ (see differences)."""
    plan_ = json.loads((trial_dir / "plan.json").read_text())
    names = [Path(p).stem for p in plan_["exercises"]]
    cells, kai = _version_cells(trial_dir, trial_dir, plan_["versions"], names)
    why = {n: d for n in names if (d := differences(cells[n]))}
    flaky = [n for n in names if any(c["runs"] and 0 < c["passed"] < c["runs"] for c in cells[n].values())]
    promises = trial_dir / "promises.json"  # a vCluster trial's (kailab/vcluster/run.py)
    extra = {}
    if (trial_dir / BINARY).is_dir():
        binary, _ = _version_cells(trial_dir, trial_dir / BINARY, plan_["versions"], names)
        extra = {"binary": binary, "against_binary": verdicts_against_binary(cells, binary)}
    return {"versions": plan_["versions"], "fleet": plan_["fleet"], "repeat": plan_.get("repeat", 1),
            "exercises": cells, "differing": list(why), "why_differing": why, "flaky": flaky, "kai": kai,
            **extra,
            **({"promises": json.loads(promises.read_text())} if promises.is_file() else {}),
            **({"trial_error": (trial_dir / "trial-error.txt").read_text().strip()}
               if (trial_dir / "trial-error.txt").is_file() else {})}


def promises_broken(matrix: dict) -> list[str]:
    """A vCluster trial's promises that did not hold, each in a line naming what (empty: all held)."""
    out = [f"the trial stopped: {matrix['trial_error']}"] if matrix.get("trial_error") else []
    for name, p in (matrix.get("promises") or {}).items():
        if isinstance(p, dict) and p.get("verdict") == "broken":
            what = p.get("left") or p.get("violations") or p.get("verdicts") or ""
            out.append(f"{name}: broken — {what if isinstance(what, (str, dict)) else '; '.join(map(str, what[:5]))}")
    for n, row in (matrix.get("against_binary") or {}).items():
        for v, c in row.items():
            if not c["same"]:
                out.append(f"{n} on {v}: {c['vcluster']} ({c['vcluster_passed']}) in its vCluster, "
                           f"{c['binary']} ({c['binary_passed']}) on a binary lab")
    return out


def matrix_markdown(matrix: dict) -> str:
    vs = matrix["versions"]
    lines = [f"Each cell: {matrix.get('repeat', 1)} run(s). A row differs (≠) only when verdicts differ "
             "consistently over 2+ runs each, or a figure's ranges do not overlap; a mixed cell is a flake.", "",
             "| exercise | " + " | ".join(vs) + " |", "|---" * (len(vs) + 1) + "|"]
    order = matrix["differing"] + [n for n in matrix["exercises"] if n not in matrix["differing"]]
    for n in order:
        row = []
        for v in vs:
            c = matrix["exercises"][n][v]
            figs = ", ".join(f"{k}={val}" for k, val in c["figures"].items())
            text = f"{c['verdict']} {c['passed']}/{c['runs']}" + (f" ({figs})" if figs else "")
            row.append(f"**{text}**" if n in matrix["differing"] else text)
        lines.append(f"| {n}{' ≠' if n in matrix['differing'] else ''} | " + " | ".join(row) + " |")
    for n, reasons in (matrix.get("why_differing") or {}).items():
        lines.append(f"\n{n} differs: " + "; ".join(reasons))
    if not matrix["differing"]:
        lines.append("\nNo exercise behaves differently across these versions.")
    failed = [f"- {n} on {v}: {f}" for n in order for v in vs for f in matrix["exercises"][n][v].get("failures") or []]
    if failed:
        lines += ["", "Runs that did not pass:", *failed]
    promises = matrix.get("promises")
    if promises is not None:
        lines += ["", "vCluster promises (promises.json):"]
        for name in ("host_untouched", "no_interference", "blast_radius"):
            if name in promises:
                lines.append(f"- {name}: {promises[name].get('verdict')}")
        for v, r in (promises.get("rollback_seconds") or {}).items():
            lines.append(f"- rollback {v}: {r.get('seconds')} s from delete to the last host object gone"
                         + (f"; left: {'; '.join(r['left'][:3])}" if r.get("left") else ""))
        lines += [f"- {line}" for line in promises_broken(matrix)]
    if matrix.get("against_binary"):
        lines += ["", "In its vCluster against on a binary lab of its own (binary/), each version:", "",
                  "| exercise | " + " | ".join(f"{v} vCluster | {v} binary | same" for v in vs) + " |",
                  "|---" * (3 * len(vs) + 1) + "|"]
        for n, row in matrix["against_binary"].items():
            lines.append(f"| {n} | " + " | ".join(
                f"{row[v]['vcluster']} {row[v]['vcluster_passed']} | {row[v]['binary']} {row[v]['binary_passed']} | "
                + ("yes" if row[v]["same"] else "**no**") for v in vs) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- fanned out (`kailab trial --on`)
# One unit per KAI version, each pod a part of the trial (`kailab trial --part`: its version alone, on a
# binary lab of its own from that version's lab image); the versions' folders brought together here
# into one trial whose matrix is read from every run's verdict, as if the trial had run here.

FANOUT_KIND = Kind("trial", summary_outcome("matrix.json", ok=all_passed), own_folder=True)


def exercise_files(plan: dict) -> tuple[tuple[tuple[str, str], ...], str]:
    """A checked plan's exercise files and its fleet as a unit's files, and the exercises as the pod names
    them (/unit/NAME.yaml,…). A fleet given as a path is refused (the pod has fleets/ and the one shipped)."""
    paths, fleet = [Path(p) for p in plan["exercises"]], plan["fleet"]
    for p in paths:
        if "/" in load_exercise(p).fleet:
            raise InputError(p, "fleet", f"{load_exercise(p).fleet!r} is a path", "name a fleet of fleets/ to run it with --on")
    if len({p.name for p in paths}) < len(paths):
        raise InputError(paths[0], "", "two exercises of one file name", "give each exercise file its own name")
    files = (*((p.name, p.read_text()) for p in paths), (f"fleets/{fleet}.yaml", Path(fleet_path(fleet)).read_text()))
    return files, ",".join(f"/unit/{p.name}" for p in paths)


def trial_units(version_list: list[str], exercises: list[str], fleet: str, repeat: int) -> list[Unit]:
    """One unit per version, the exercise files and the fleet shipped; checked first as `kailab trial`
    checks them."""
    plan = checked_plan(version_list, exercises, fleet)
    files, shipped = exercise_files(plan)
    units = []
    for i, v in enumerate(version_list):
        command = cli_command("trial", "--part", "--kai-versions", v, "--exercises", shipped,
                              "--fleet", fleet, "--repeat", repeat, "--runtime", "binary")
        units.append(Unit(name=f"u{i:02d}-kai-{dns_label(v)}", title=f"trial {v}", kind=FANOUT_KIND, files=files,
                          command=command, kai_version=v, env=(("KAILAB_FLEETS", "/unit/fleets"),), part=(v,),
                          requests=requests_for(FANOUT_KIND.name)))
    return units


def merge_fanned_out(version_list: list[str], exercises: list[str], fleet: str, repeat: int, units: list[Unit],
                results: list[UnitResult], record_dir: Path, root: Path | None = None) -> Path:
    """evidence/trial-<time>/ as a local trial writes it: the plan (the fan-out's record named), each
    version's folder from its unit's trial part, a unit that brought nothing back its version's lab
    error; the matrix and the page read from the runs' verdicts."""
    plan = {**checked_plan(version_list, exercises, fleet), "repeat": repeat, "runtime": "binary",
            "fanout": str(record_dir)}
    return bring_together("trial", plan, units, results, root, write_outputs)


def bring_together(kind: str, plan: dict, units: list[Unit], results: list[UnitResult], root: Path | None,
                   write: Callable[[Path], object]) -> Path:
    """evidence/<kind>-<time>/ (a trial's, a comparison's): the plan, each column's folder from its unit
    (a unit that brought nothing back: that column's lab error), then what `write` makes of them."""
    out = evidence.new_folder(root or evidence_dir(), kind)
    (out / "plan.json").write_text(json.dumps(plan, indent=2))
    for u, r in zip(units, results):
        (column,) = u.part
        bring_back(u, r, column, out / column, "lab-error.txt")
    write(out)
    return out
