"""The order KAI reads from creation: where its plugins tie, it orders a job's pods, and jobs (PodGroups),
by creation time and then UID (KAI v0.17.0, framework/session_plugins.go). A twin makes its objects in the
snapshot's order, but its API server stamps creation to the second and gives every object a new UID, so
objects made in one second are ordered by a UID nobody chose: what the twin could not keep is listed.
"""

from __future__ import annotations

LAST = "~"  # no creation time: after every timestamp (ISO 8601 sorts as text)


def key_of(meta: dict) -> tuple[str, str]:
    """KAI's tie order for one object: (creation time, UID)."""
    return (meta.get("creationTimestamp") or LAST, meta.get("uid") or "")


def ref(obj: dict) -> str:
    """Kind/namespace/name: how an object is named in an order map."""
    meta = obj["metadata"]
    return f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"


def in_creation_order(objs: list[dict], order: dict[str, tuple[str, str]]) -> list[dict]:
    """`objs` in the snapshot's creation order (stable: objects the map lacks keep their place, last)."""
    return sorted(objs, key=lambda o: order.get(ref(o), (LAST, "")))


def _sets(plan_objects: list[dict], pods: list[dict]) -> dict[str, list[str]]:
    """The sets whose order KAI reads: each PodGroup's pods, and each queue's PodGroups."""
    out: dict[str, list[str]] = {}
    for p in pods:
        group = (p["metadata"].get("annotations") or {}).get("pod-group-name")
        if group:
            out.setdefault(f"pods of PodGroup {p['metadata']['namespace']}/{group}", []).append(ref(p))
    for g in plan_objects:
        if g["kind"] == "PodGroup":
            out.setdefault(f"PodGroups of queue {(g.get('spec') or {}).get('queue') or '(none)'}", []).append(ref(g))
    return out


def not_kept(planned: dict[str, tuple[str, str]], lab: dict[str, tuple[str, str]], plan_objects: list[dict],
             pods: list[dict]) -> dict[str, list[str]]:
    """Each set whose objects the lab orders otherwise than the snapshot did, with how many and a pair."""
    notes: dict[str, list[str]] = {}
    for what, refs in sorted(_sets(plan_objects, pods).items()):
        refs = [r for r in refs if r in planned and r in lab]
        want = sorted(refs, key=lambda r: (planned[r], r))
        got = sorted(refs, key=lambda r: (lab[r], r))
        if want == got:
            continue
        moved = sum(1 for a, b in zip(want, got) if a != b)
        first = next(i for i, (a, b) in enumerate(zip(want, got)) if a != b)
        a, b = want[first], got[first]
        short = lambda r: r.split("/", 1)[1]  # noqa: E731
        same_second = lab[a][0] == lab[b][0]
        notes[f"order/{what}"] = [
            f"{moved} of {len(refs)} in another order than the snapshot's: {short(a)} came before {short(b)} "
            f"there, after it here" + (" (made in the same second: KAI then orders by UID, which the twin cannot "
                                       "choose)" if same_second else "")]
    return notes
