"""A snapshot reduced to what a twin reads, in the snapshot's own form: what travels when a twin runs
elsewhere (`kailab twin … --on`: a pod of another cluster makes it). A twin made from the reduced
snapshot is the twin made from the whole one (tested); the images, commands, env values, volumes,
secrets and annotations a user's snapshot carries stay here.

Kept: the scheduler's configuration and parameters; nodes' labels, taints, capacity and Ready; pods
as keep.pod keeps them, with their phase, whether they were being deleted, and the names of their
owners and volume claims (the twin says it cannot reproduce those, by name); queues, PodGroups,
priority classes and topologies as the twin puts them in; of every other object its name only.
"""

from __future__ import annotations

from . import keep
from .snapshot import KNOWN_FIELDS, KNOWN_OBJECTS, Snapshot

TWIN_OBJECTS = ("nodes", "pods", "queues", "podGroups", "priorityClasses", "topologies")


def _node(obj: dict) -> dict:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return {"metadata": {"name": meta["name"], **({"labels": meta["labels"]} if meta.get("labels") else {})},
            "spec": {k: spec[k] for k in ("taints", "unschedulable") if k in spec},
            "status": {**{k: status[k] for k in ("capacity", "allocatable") if k in status},
                       "conditions": [{"type": "Ready", "status": c.get("status")} for c in ready]}}


def _pod(obj: dict, names: keep.Names) -> dict:
    spec, meta = obj.get("spec") or {}, obj["metadata"]
    out = keep.pod(obj, names, bound=bool(spec.get("nodeName")))
    if meta.get("deletionTimestamp"):
        out["metadata"]["deletionTimestamp"] = meta["deletionTimestamp"]
    owners = [{"kind": o.get("kind"), "name": o.get("name")} for o in meta.get("ownerReferences") or []]
    if owners:
        out["metadata"]["ownerReferences"] = owners
    claims = [{"name": v.get("name"), "persistentVolumeClaim": {"claimName": v["persistentVolumeClaim"].get("claimName")}}
              for v in spec.get("volumes") or [] if v.get("persistentVolumeClaim")]
    if claims:
        out["spec"]["volumes"] = claims
    phase = (obj.get("status") or {}).get("phase")
    if phase:
        out["status"] = {"phase": phase}
    return out


def kept_snapshot(snap: Snapshot) -> dict:
    """The snapshot.json a twin elsewhere is made from (names as they are: --anonymise renames there)."""
    names = keep.Names()
    raw: dict[str, list[dict]] = {
        "nodes": [_node(n) for n in snap.of("nodes")],
        "pods": [_pod(p, names) for p in snap.of("pods")],
        "queues": [keep.queue(q, names) for q in snap.of("queues")],
        "podGroups": [keep.podgroup(g, names) for g in snap.of("podGroups")],
        "priorityClasses": [keep.priority_class(c) for c in snap.of("priorityClasses")],
        "topologies": [keep.topology(t) for t in snap.of("topologies")],
    }
    for kind, items in snap.objects.items():  # the rest by name: the twin lists what it does not reproduce
        if kind not in TWIN_OBJECTS:
            raw[kind] = [{"metadata": {k: o["metadata"][k] for k in ("name", "namespace") if k in o["metadata"]}}
                         for o in items] if kind in KNOWN_OBJECTS else []
    for f in snap.unknown:
        if f.startswith("rawObjects."):
            raw.setdefault(f.removeprefix("rawObjects."), [])
    out: dict = {"config": snap.config, "schedulerParams": snap.params, "rawObjects": raw}
    # fields kailab does not know: their names, so the twin there lists them as the twin here would
    out.update({f: None for f in snap.unknown if "." not in f and f not in KNOWN_FIELDS})
    return out
