"""Loading an exercise file: parse, validate, and check it against its fleet (names, labels, node
choices, device classes, placeholders) — one line naming file and field for anything wrong."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator
from pathlib import Path



from ..errors import InputError, raise_all
from ..fleet import (Fleet, fleet_path, load_fleet)
from ..paths import exercises_dir, fleets_dir
from ..inputs import one_line, read_yaml, validate_all

from .spec import (CountExpect, EventExpect, Exercise, ExpectItem, NodeChoice, ObjectExpect, Step, WaitExpect,
                   _name)
from ..stacks import STACKS
from .match import placeholders


def _check_references(ex: Exercise, fleet: Fleet, path: Path) -> Iterator[InputError]:
    """Cross-field checks pydantic cannot do: names exist, sizes fit the fleet. Every problem, each
    once: a check that fails does not lead to another about the same thing."""
    for stack in ex.invariants_on:
        yield from _check_stack(stack, path, f"invariantsOn.{stack}")
    for i, stack in enumerate(ex.stacks or []):
        yield from _check_stack(stack, path, f"stacks[{i}]")
    names = [n for n, _, _ in ex.queue_tree()]
    tree = []
    for n in names:
        try:
            _name(n)
        except ValueError as err:
            tree.append(InputError(path, f"queues.{one_line(str(n))}", str(err)))
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        tree.append(InputError(path, "queues", f"queue {sorted(dup)[0]!r} appears twice in the tree", "rename one"))
    if tree:  # what the steps say of queues would be judged against a tree that is not the one meant
        yield from tree
        return
    leaves = ex.leaf_queues()
    workloads: dict[str, str] = {}
    nodes = {n["metadata"]["name"] for n in fleet.node_manifests()}
    set_labels: set[tuple[str, str]] = set()  # labels node steps set so far (a selector may name them)
    known_names = run_names(ex)
    step_labels = {item for step in ex.steps for change in step.nodes for item in change.label.items()}
    for si, step in enumerate(ex.steps):
        where = f"steps[{si}] ({one_line(step.name)})"
        for ai, item in enumerate(step.apply):
            w = item.workload
            kind = item.kind
            field = f"{where}.apply[{ai}].{kind}"
            if w.queue is None:  # a manifest that names no queue
                pass
            elif w.queue not in names:
                yield InputError(path, f"{field}.queue", f"queue {w.queue!r} is not in the queue tree",
                                 f"define it under queues (have: {', '.join(names)})")
            elif w.queue not in leaves:
                yield InputError(path, f"{field}.queue", f"queue {w.queue!r} has children; KAI schedules "
                                 "workloads in leaf queues only", "use one of its child queues")
            if w.gpus > fleet.max_gpus_per_node and not w.unschedulable:
                yield InputError(path, f"{field}.gpus", f"{w.gpus} GPUs per pod is more than any node of "
                                 f"fleet {fleet.name!r} has ({fleet.max_gpus_per_node})",
                                 "lower it, or set unschedulable: true if that is the point")
            if w.node_selector and not any(all(n["metadata"]["labels"].get(k) == v for k, v in w.node_selector.items())
                                           for n in fleet.node_manifests()) \
                    and not set(w.node_selector.items()) <= step_labels:  # waits for a node step's label
                yield InputError(path, f"{field}.nodeSelector", f"no node of fleet {fleet.name!r} has the labels "
                                 f"{w.node_selector}", "use a node's labels, e.g. kubernetes.io/hostname: <node>, "
                                 "or set them with a nodes: step")
            if w.topology is not None:
                levels = ex.topology or []
                for which in ("required", "preferred"):
                    level = getattr(w.topology, which)
                    if level is not None and level not in levels:
                        yield InputError(path, f"{field}.topology.{which}", f"{level!r} is not a level of the "
                                         "exercise's topology", f"levels: {', '.join(levels) or 'none (add topology:)'}")
            if kind == "manifest":
                yield from _check_placeholders(item.manifest.object, known_names, path, f"{field}.object")
                yield from _check_device_classes(item.manifest.object, fleet, path, f"{field}.object")
            if w.name in workloads and workloads[w.name] != kind:
                yield InputError(path, f"{field}.name", f"workload {w.name!r} is already a {workloads[w.name]}")
            else:
                workloads[w.name] = kind
        for pi, p in enumerate(step.patch):
            if p.queue is not None and p.queue not in names:
                yield InputError(path, f"{where}.patch[{pi}].queue", f"queue {p.queue!r} is not in the queue tree")
            if p.deployment is not None and workloads.get(p.deployment) != "deployment":
                yield InputError(path, f"{where}.patch[{pi}].deployment",
                                 f"no deployment {p.deployment!r} was applied before this step")
        for ni, change in enumerate(step.nodes):
            yield from _check_nodes(change, fleet, set_labels, path, f"{where}.nodes[{ni}]")
        for change in step.nodes:
            set_labels.update(change.label.items())
        for fi, f in enumerate(step.faults):
            if (wrong := f.check(fleet)) is not None:  # the fault's own check (faults.py)
                yield InputError(path, f"{where}.faults[{fi}]", *wrong)
        for di, d in enumerate(step.delete):
            if d.workload not in workloads:
                yield InputError(path, f"{where}.delete[{di}].workload",
                                 f"no workload {d.workload!r} was applied before this step")
        checks: list[tuple[str, ExpectItem]] = [(f"{where}.expect[{i}]", e) for i, e in enumerate(step.expect)]
        if step.stays:
            checks += [(f"{where}.stays.that[{i}]", e) for i, e in enumerate(step.stays.that)]
        for field, e in checks:
            for si, stack in enumerate(e.stacks or []):
                yield from _check_stack(stack, path, f"{field}.stacks[{si}]")
            if isinstance(e, CountExpect) and e.queue is not None and e.queue not in names:
                yield InputError(path, f"{field}.queue", f"queue {e.queue!r} is not in the queue tree")
            if isinstance(e, WaitExpect):
                if e.wait_of not in names:
                    yield InputError(path, f"{field}.waitOf", f"queue {e.wait_of!r} is not in the queue tree",
                                     f"name one of: {', '.join(names)}")
                continue
            if isinstance(e, CountExpect) and e.on is not None:
                yield from _check_nodes(e.on, fleet, set_labels, path, f"{field}.on")
            if isinstance(e, ObjectExpect):
                yield from _check_object(e, names, nodes, known_names, path, field)
            ref = (e.workload if isinstance(e, (CountExpect, EventExpect))
                   else e.of if isinstance(e, ObjectExpect) else e.podgroup_of)
            if ref is not None and ref not in workloads:
                yield InputError(path, f"{field}", f"workload {ref!r} is not applied by this or an earlier step")


def _check_stack(name: str, path: Path, field: str) -> Iterator[InputError]:
    if name not in STACKS:
        yield InputError(path, field, f"{name!r} is not a scheduler stack", f"name one of: {', '.join(STACKS)}")


def _check_device_classes(obj: dict, fleet: Fleet, path: Path, field: str) -> Iterator[InputError]:
    """A ResourceClaim(Template) must ask for a DeviceClass the fleet publishes (a typo would leave
    the pod pending with no reason the exercise means)."""
    kind = obj.get("kind")
    if kind not in ("ResourceClaim", "ResourceClaimTemplate"):
        return
    spec = obj.get("spec") or {}
    spec = (spec.get("spec") or {}) if kind == "ResourceClaimTemplate" else spec
    prefix = f"{field}.spec" + (".spec" if kind == "ResourceClaimTemplate" else "")
    classes = {o["metadata"]["name"] for o in fleet.dra_objects() if o["kind"] == "DeviceClass"}
    for i, req in enumerate(((spec.get("devices") or {}).get("requests")) or []):
        name = ((req or {}).get("exactly") or {}).get("deviceClassName")
        if name is not None and name not in classes:
            yield InputError(path, f"{prefix}.devices.requests[{i}].exactly.deviceClassName",
                             f"DeviceClass {one_line(str(name))!r} is not published by fleet {fleet.name!r}",
                             f"use {', '.join(sorted(classes))}" if classes
                             else "give a pool dra: true (e.g. fleet dra) for DRA devices")


def run_names(ex: Exercise) -> set[str]:
    """The ${...} names a file may use for what each run names anew (see checks.Names.of_run)."""
    return {"namespace", "run"} | ({"topology"} if ex.topology else set()) | \
        {f"queue:{n}" for n, _, _ in ex.queue_tree()}


def _check_placeholders(value: object, known: set[str], path: Path, field: str) -> Iterator[InputError]:
    for name in placeholders(value):
        if name not in known:
            queues = sorted(k for k in known if k.startswith("queue:"))
            yield InputError(path, field, f"unknown name ${{{one_line(name)}}}",
                             "use ${namespace}, ${run}, " + ("${topology}, " if "topology" in known else "")
                             + ", ".join(f"${{{q}}}" for q in queues[:4]))


def _check_nodes(choice: NodeChoice, fleet: Fleet, set_labels: set[tuple[str, str]], path: Path,
                 field: str) -> Iterator[InputError]:
    """A node must be a fleet node; a selector must match one, or name labels a node step sets."""
    manifests = fleet.node_manifests()
    if choice.node is not None:
        if choice.node not in {n["metadata"]["name"] for n in manifests}:
            yield InputError(path, f"{field}.node", f"node {choice.node!r} is not in fleet {fleet.name!r}",
                             f"nodes: {', '.join(sorted(n['metadata']['name'] for n in manifests)[:6])}")
        return
    sel = choice.node_selector or {}
    if not any(all(n["metadata"]["labels"].get(k) == v for k, v in sel.items()) for n in manifests) \
            and not set(sel.items()) <= set_labels:
        yield InputError(path, f"{field}.nodeSelector", f"no node of fleet {fleet.name!r} has the labels {sel}",
                         "use a node's labels, or set them with an earlier nodes: step")


def _check_object(e: "ObjectExpect", queues: list[str], nodes: set[str], known: set[str], path: Path,
                  field: str) -> Iterator[InputError]:
    yield from _check_placeholders({"name": e.name, "match": e.match}, known, path, field)
    if e.name is None or "${" in e.name:
        return
    if e.object == "Queue" and e.name not in queues:
        yield InputError(path, f"{field}.name", f"queue {e.name!r} is not in the queue tree")
    if e.object == "Node" and e.name not in nodes:
        yield InputError(path, f"{field}.name", f"node {e.name!r} is not in the exercise's fleet")


def fleet_reference(fleet: str, exercise_path: Path) -> str:
    """A fleet name as written; a fleet file's path relative to the exercise file, so the exercise
    means the same fleet from any working directory."""
    p = fleet_path(fleet)
    if p.is_absolute() or p.parent == fleets_dir():
        return fleet if p.parent == fleets_dir() else str(p)
    return str((exercise_path.parent / p).resolve())


def load_exercise(path: Path | str) -> Exercise:
    """Parse, validate and cross-check an exercise file. Every problem found is an InputError naming
    file and field: one raised alone, several as one InputErrors (a line each). Its references (names,
    the fleet) are checked once the file's shape is valid."""
    path = Path(path)
    data = read_yaml(path)
    errors: list[InputError] = []
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        # name the step in errors: pydantic only knows its index
        data = {**data, "steps": list(data["steps"])}
        for i, step in enumerate(data["steps"]):
            if isinstance(step, dict):
                known = set(Step.model_fields) | {"for"}
                unknown = [k for k in step if k not in known]
                label = one_line(str(step.get("name", "?")))
                errors += [InputError(path, f"steps[{i}] ({label}).{one_line(str(k))}", "unknown step field",
                                      "known: " + ", ".join(Step.model_fields)) for k in unknown]
                data["steps"][i] = {k: v for k, v in step.items() if k not in unknown}  # the rest is checked still
    ex, invalid = validate_all(Exercise, data, path)
    for err in invalid:
        m = re.match(r"steps\[(\d+)\](.*)", err.field)
        if m and isinstance(data, dict):
            step = data["steps"][int(m.group(1))]
            label = one_line(str(step.get("name", "?"))) if isinstance(step, dict) else "?"
            err = InputError(path, f"steps[{m.group(1)}] ({label}){m.group(2)}", err.problem, err.fix)
        errors.append(err)
    name = data.get("exercise") if isinstance(data, dict) else None
    if isinstance(name, str) and name != path.stem:  # with the file's other problems: a copied exercise has it
        errors.append(InputError(path, "exercise", f"name {name!r} differs from the file name {path.stem!r}",
                                 "make them equal"))
    if ex is None:
        raise_all(sorted(errors, key=lambda e: _order(e.field)))
    ex.fleet = fleet_reference(ex.fleet, path)
    try:
        fleet = load_fleet(ex.fleet)
    except InputError as err:
        errors.append(InputError(path, "fleet", f"unknown fleet {ex.fleet!r} ({err.problem})"))
    else:
        errors += _check_references(ex, fleet, path)
    raise_all(errors)
    return ex


def _order(field: str) -> tuple:
    """A field's place in the file, roughly: steps in their order, top-level fields first."""
    m = re.match(r"steps\[(\d+)\]", field)
    return (1, int(m.group(1))) if m else (0, 0)


def resolve_exercise(name_or_path: str) -> Path:
    """A path as given, or the shipped exercise of that name; a name that is none says which are."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        return p
    shipped = exercises_dir() / f"{name_or_path}.yaml"
    if not shipped.is_file():
        names = sorted(f.stem for f in exercises_dir().glob("*.yaml"))
        close = difflib.get_close_matches(name_or_path, names, n=3)
        hint = f"did you mean {' or '.join(close)}?" if close else f"the exercises: {', '.join(names)}."
        raise InputError(name_or_path, "", f"no exercise of that name in {exercises_dir()}",
                         f"{hint} A file of your own goes by its path")
    return shipped
