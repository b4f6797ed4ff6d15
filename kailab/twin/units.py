"""`kailab twin … --kai-versions/--designs … --on KUBECONFIG`: twins side by side fanned out, one unit per
twin (a KAI version, or the snapshot as it was and each design), each a `kailab twin --part LABEL` on
a lab of its own in its pod; the twins' folders brought together here into one comparison, written by
the code a local side-by-side writes it with (compare.py). Here, not in kailab/fanout: the twin sits
above the fan-out in the layers, as trial does.

What travels is the snapshot reduced to what a twin reads (twin/kept.py), never the user's whole
snapshot; the designs go as they are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from ..errors import KailabError
from ..fanout.costs import requests_for
from ..fanout.unit import Kind, Unit, UnitResult, bring_back, cli_command, dns_label, summary_outcome
from .compare import TwinVariant, lab_name, twins_folder, write_comparison
from .kept import kept_snapshot
from .run import twin_plan
from .snapshot import load_snapshot

SNAPSHOT = "snapshot.json"  # the unit's files, in /unit
KIND = Kind("twin", summary_outcome("comparison.json"), own_folder=True)


def twin_units(snapshot: str | Path, variants: list[TwinVariant], name: str, anonymise: bool, settle_s: float,
               timeout_s: float) -> list[Unit]:
    """One unit per twin; every input checked first as a local side-by-side checks it."""
    for v in variants:
        twin_plan(snapshot, lab_name(name, v.label), anonymise, v.design)
    kept = json.dumps(kept_snapshot(load_snapshot(snapshot)))
    designs = [v.design for v in variants if v.design is not None]
    if len({d.path.name for d in designs}) < len(designs):
        raise KailabError(f"two designs share the file name {designs[0].path.name!r}: give each design file its own name")
    files = ((SNAPSHOT, kept), *((d.path.name, d.path.read_text()) for d in designs))
    kai_versions = ",".join(dict.fromkeys(v.kai_version for v in variants))
    units = []
    for i, v in enumerate(variants):
        argv = ["twin", f"/unit/{SNAPSHOT}", "--part", v.label, "--name", name, "--settle", settle_s,
                "--timeout", timeout_s]
        argv += ["--designs", ",".join(f"/unit/{d.path.name}" for d in designs), "--kai-version", v.kai_version] \
            if designs else ["--kai-versions", kai_versions]
        argv += ["--anonymise"] if anonymise else []
        units.append(Unit(name=f"u{i:02d}-{dns_label(v.label)[:40]}", title=f"twin {v.label}", kind=KIND, files=files,
                          command=cli_command(*argv), kai_version=v.kai_version, part=(v.label,),
                          requests=requests_for(KIND.name)))
    return units


def merge_units(snapshot: str | Path, units: list[Unit], results: list[UnitResult], record_dir: Path,
                echo: Callable[[str], None] = print, root: Path | None = None) -> Path:
    """evidence/twins-<time>/ as a local side-by-side writes it: each twin's folder from its unit (a unit
    that brought nothing back is that twin's error.txt), then the comparison, read from disk."""
    out = twins_folder(root)
    labels = []
    for u, r in zip(units, results):
        (label,) = u.part
        labels.append(label)
        bring_back(u, r, label, out / label)
    (out / "plan.json").write_text(json.dumps({"snapshot": str(Path(snapshot).resolve()), "twins": labels,
                                               "runtime": "binary", "fanout": str(record_dir)}, indent=2) + "\n")
    return write_comparison(out, labels, echo)
