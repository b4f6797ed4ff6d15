"""`kailab replay … --on KUBECONFIG`: a replay fanned out, one unit per variant (a design, a KAI
version or a stack), each a `kailab replay` of that variant alone on a lab of its own in its pod; the
variants' folders brought together here into one replay, compared and checked against the
expectations as if it had run here (replay/session.py reads it back from disk)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import KailabError
from ..fleet import fleet_path
from . import session
from ..fanout.costs import requests_for
from ..fanout.unit import Kind, Unit, UnitResult, bring_back, cli_command, dns_label, summary_outcome

FLEET, DESIGN = "fleet.yaml", "design.yaml"  # the unit's files, in /unit
KIND = Kind("replay", summary_outcome("comparison.json"), own_folder=True)


def replay_units(plan: session.Plan, trace_file: Path, window_text: str = "") -> list[Unit]:
    """One unit per variant, its trace (the file as given: the pod cuts its --window itself), fleet
    and design shipped; checked first as `kailab replay` checks them. Expectations are left out: they
    compare variants, and are read on the whole."""
    others = sorted({v.stack for v in plan.variants} - {"kai"})
    if others:  # the lab image holds a binary lab with KAI (images/lab.py), no other stack's builds
        raise KailabError(f"--stacks {','.join(others)} with --on: the lab image runs KAI only; compare stacks "
                          "without --on (on this machine's labs)")
    session.check(plan)
    trace_name = f"trace{trace_file.suffix.lower()}"
    shared = ((trace_name, trace_file.read_text()), (FLEET, Path(fleet_path(plan.fleet)).read_text()))
    units = []
    for i, v in enumerate(plan.variants):
        argv = ["replay", f"/unit/{trace_name}", "--designs", f"/unit/{DESIGN}", "--fleet", f"/unit/{FLEET}",
                "--kai-versions", v.kai_version, "--compress", plan.compress, "--repeat", plan.repeat]  # KAI: the only stack
        argv += ["--timeout", plan.timeout_s] if plan.timeout_s else []
        argv += ["--whole-gpus"] if plan.whole_gpus else []
        argv += ["--window", window_text] if window_text else []
        units.append(Unit(name=f"u{i:02d}-{dns_label(v.label)[:40]}", title=f"replay {v.label}", kind=KIND,
                          files=(*shared, (DESIGN, v.design.path.read_text())), command=cli_command(*argv),
                          kai_version=v.kai_version, part=(v.label, v.design.name), requests=requests_for(KIND.name)))
    return units


def merge_units(plan: session.Plan, units: list[Unit], results: list[UnitResult], record_dir: Path,
                root: Path | None = None) -> Path:
    """evidence/replay-<time>/ as a local replay writes it: the plan (the fan-out's record named), and
    each variant's folder from its unit's replay, where the pod had it under its design's name; a
    unit that brought nothing back is its variant's error. Compared and drawn from disk."""
    out = session.begin(plan, root)
    pj = json.loads((out / "plan.json").read_text())
    (out / "plan.json").write_text(json.dumps({**pj, "runtime": "binary", "fanout": str(record_dir)}, indent=2))
    for u, r in zip(units, results):
        label, design = u.part
        bring_back(u, r, design, out / label)
    session.write_outputs(out)
    return out
