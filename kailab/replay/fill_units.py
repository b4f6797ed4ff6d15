"""`kailab fill … --on KUBECONFIG`: a fill fanned out, one unit per design and seed, each a `kailab
fill` of that design and seed on a lab of its own in its pod; the units' folders merged here into one
fill (replay/fill_merge.py), its expectations checked on the whole, as if the fill had run here."""

from __future__ import annotations

from pathlib import Path

from .. import versions
from ..fleet import fleet_path, load_fleet
from .fill import FillPlan, check_plan, write_outputs
from .fill_merge import merge
from ..fanout.costs import requests_for
from ..fanout.unit import Kind, Unit, UnitResult, cli_command, dns_label, summary_outcome

TRACE, FLEET, DESIGN = "trace", "fleet.yaml", "design.yaml"  # the unit's files, in /unit
KIND = Kind("fill", summary_outcome("fill.json"), own_folder=True)


def fill_units(plan: FillPlan) -> list[Unit]:
    """One unit per design and seed: the trace, the fleet and that design shipped, checked first
    as `kailab fill` checks them (bad input never reaches a cluster). Expectations are left out: a
    unit holds one design and one seed, and they are read on the merged fill."""
    check_plan(plan)
    kai = versions.normalise(plan.kai_version)
    trace_name = f"{TRACE}{plan.trace.path.suffix}"
    shared = ((trace_name, plan.trace.path.read_text()), (FLEET, Path(fleet_path(plan.fleet)).read_text()))
    requests = requests_for(KIND.name, load_fleet(plan.fleet).nodes_total)  # a bigger fleet, a busier lab
    units = []
    for d in plan.designs:
        for seed in plan.seeds:
            command = cli_command("fill", f"/unit/{trace_name}", "--designs", f"/unit/{DESIGN}", "--fleet", f"/unit/{FLEET}",
                           "--seeds", seed, "--target", plan.target, "--step", plan.step, "--settle", plan.settle_s,
                           "--kai-version", kai, "--labs", 1,
                           *(["--with-metrics"] if plan.metrics else []))
            units.append(Unit(name=f"u{len(units):02d}-{dns_label(d.name)[:30]}-s{seed}", title=f"fill {d.name} seed {seed}",
                              kind=KIND, files=(*shared, (DESIGN, d.path.read_text())), command=command,
                              kai_version=kai, part=(d.name, str(seed)), requests=requests))
    return units


def merge_units(plan: FillPlan, units: list[Unit], results: list[UnitResult], record_dir: Path,
                root: Path | None = None) -> Path | None:
    """The collected units' fills as one fill (evidence/fill-merged-<time>), its plan the user's (local
    files, every design and seed asked, the expectations) with the fan-out's record named; a unit that
    brought nothing back is its design's error there, so the fill is not ok. None when no unit did."""
    folders = [r.evidence for r in results if r.evidence]
    if not folders:
        return None
    here = plan.as_json()
    out = merge(folders, root, least=1, plan_changes=lambda merged: {
        "trace": here["trace"], "fleet": here["fleet"], "designs": here["designs"], "seeds": here["seeds"],
        "expectations": plan.expectations, "fanout": str(record_dir)})
    failed = [(u, r) for u, r in zip(units, results) if not r.evidence]
    for u, r in failed:
        design, seed = u.part
        (out / design).mkdir(exist_ok=True)
        with (out / design / "error.txt").open("a") as f:
            f.write(f"seed {seed}: {r.error or r.state} (fan-out unit {u.name})\n")
    if failed:
        write_outputs(out)
    return out
