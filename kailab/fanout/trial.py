"""`kailab trial … --on KUBECONFIG`: a version trial fanned out, one unit per KAI version, each pod a
part of the trial — `kailab trial --part` of its version alone, on a binary lab of its own from that
version's lab image; the versions' folders brought together here into one trial whose matrix is read
from every run's verdict, as if the trial had run here."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from .. import trial
from ..errors import InputError
from ..exercise.load import load_exercise
from ..fleet import fleet_path
from ..paths import evidence_dir
from .unit import Kind, Unit, UnitResult, cli_command, dns_label, summary_outcome

KIND = Kind("trial", summary_outcome("matrix.json", ok=trial.all_passed), own_folder=True)


def trial_units(version_list: list[str], exercises: list[str], fleet: str, repeat: int) -> list[Unit]:
    """One unit per version, the exercise files and the fleet shipped; checked first as `kailab trial`
    checks them. A fleet given as a path is refused (the pod has fleets/ and the one shipped)."""
    plan = trial.checked_plan(version_list, exercises, fleet)
    paths = [Path(p) for p in plan["exercises"]]
    for p in paths:
        if "/" in load_exercise(p).fleet:
            raise InputError(p, "fleet", f"{load_exercise(p).fleet!r} is a path", "name a fleet of fleets/ to run it with --on")
    if len({p.name for p in paths}) < len(paths):
        raise InputError(paths[0], "", "two exercises of one file name", "give each exercise file its own name")
    files = (*((p.name, p.read_text()) for p in paths), (f"fleets/{fleet}.yaml", Path(fleet_path(fleet)).read_text()))
    units = []
    for i, v in enumerate(version_list):
        command = cli_command("trial", "--part", "--versions", v, "--exercises", ",".join(f"/unit/{p.name}" for p in paths),
                              "--fleet", fleet, "--repeat", repeat, "--runtime", "binary")
        units.append(Unit(name=f"u{i:02d}-kai-{dns_label(v)}", title=f"trial {v}", kind=KIND, files=files,
                          command=command, kai_version=v, env=(("KAILAB_FLEETS", "/unit/fleets"),), part=(v,)))
    return units


def merge_units(version_list: list[str], exercises: list[str], fleet: str, repeat: int, units: list[Unit],
                results: list[UnitResult], record_dir: Path, root: Path | None = None) -> Path:
    """evidence/trial-<time>/ as a local trial writes it: the plan (the fan-out's record named), each
    version's folder from its unit's trial part, a unit that brought nothing back its version's lab
    error; the matrix and the page read from the runs' verdicts."""
    plan = {**trial.checked_plan(version_list, exercises, fleet), "repeat": repeat, "runtime": "binary",
            "fanout": str(record_dir)}
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = (root or evidence_dir()) / f"trial-{stamp}"
    out.mkdir(parents=True)
    (out / "plan.json").write_text(json.dumps(plan, indent=2))
    for u, r in zip(units, results):
        (version,) = u.part
        src = Path(r.evidence) / version if r.evidence else None
        if src is not None and src.is_dir():
            shutil.copytree(src, out / version)
        else:
            (out / version).mkdir()
            (out / version / "lab-error.txt").write_text(f"{r.error or r.state} (fan-out unit {u.name})\n")
    trial.write_outputs(out)
    return out
