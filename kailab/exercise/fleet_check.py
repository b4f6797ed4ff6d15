"""Before a run makes anything: the lab's fleet is the exercise's fleet, all of it Ready, and free.

An exercise's numbers and node names are chosen for one fleet: a verdict on another fleet, on part of
it, or on a fleet other pods still hold would be about a fleet it never saw."""

from __future__ import annotations

from ..errors import KailabError, LabError
from ..fleet import LIFECYCLE_TAINTS, fleet_difference, load_fleet
from ..kube import Kube
from ..runtimes.clusterinfo import pods_holding, ready_nodes_and_gpus
from ..runtimes.waits import wait_until


def whole_and_free(kube: Kube, ex, lab) -> None:
    """One line naming what differs (a refusal: exit 2), what is not Ready, or which pods hold the fleet
    (the lab's state: exit 3) (`lab`: a labs.Lab)."""
    fleet, prefix = load_fleet(ex.fleet), lab.record.fleet_prefix
    if prefix and ex.names_nodes:
        raise KailabError(f"exercise {ex.exercise} changes fleet nodes by name, and lab {lab.name!r} names "
                          f"its fleet's nodes {prefix}NAME (a pool on a shared host): run it on a lab of its own")
    differs = fleet_difference(fleet, kube.list("v1", "Node"), prefix)
    if differs:
        raise KailabError(f"exercise {ex.exercise} is sized for fleet {fleet.name} ({fleet.nodes_total} nodes, "
                          f"{fleet.gpus_total} GPUs) but lab {lab.name!r} runs {differs}: run it on a lab "
                          f"brought up with `kailab up --fleet {ex.fleet}`")
    nodes = {n["metadata"]["name"] for n in fleet.node_manifests(prefix)}
    await_ready(kube, ex, lab, fleet, nodes)
    await_free(kube, ex, lab, nodes)


def await_ready(kube: Kube, ex, lab, fleet, nodes: set[str]) -> None:
    """Every GPU Ready, and no fleet node still carrying a lifecycle taint (a node a run before this one
    took down is Ready again a moment before the node controller takes its not-ready taint off: a CI
    run met that)."""
    def ready() -> bool:
        _, have = ready_nodes_and_gpus(kube)
        if have != fleet.gpus_total:
            raise LabError(f"{have} Ready GPUs of {fleet.gpus_total}")
        tainted = sorted(f"{n['metadata']['name']} ({t.get('key')})" for n in kube.list("v1", "Node")
                         if n["metadata"]["name"] in nodes
                         for t in (n.get("spec") or {}).get("taints") or [] if str(t.get("key")).startswith(LIFECYCLE_TAINTS))
        if tainted:
            raise LabError(f"node {', '.join(tainted[:3])}")
        return True
    _waited(f"lab {lab.name!r}'s fleet to be Ready", ready,
            f"exercise {ex.exercise} is sized for fleet {fleet.name} ({fleet.gpus_total} GPUs) but lab {lab.name!r}'s "
            "fleet is not all Ready: {}: wait for its nodes (`kailab status`)")


def await_free(kube: Kube, ex, lab, nodes: set[str]) -> None:
    """Pods still on the fleet (a run before this one whose pods are still going, a user's own)."""
    def free() -> bool:
        held = pods_holding(kube, nodes)
        if held:
            raise LabError(f"{len(held)} pods: {', '.join(held[:3])}{' ...' if len(held) > 3 else ''}")
        return True
    _waited(f"lab {lab.name!r}'s fleet to be free", free,
            f"exercise {ex.exercise} needs lab {lab.name!r}'s whole fleet, and pods still hold its nodes: {{}} "
            "— delete them, or run it on a lab of its own")


def _waited(what: str, check, refusal: str) -> None:
    """Waited for as long as a run's own clean-up waits for its pods; still not so, one line: `refusal`
    with the wait's own line (what the check last raised) in its {}."""
    try:
        wait_until(what, check, timeout="exercise-clean-up")
    except LabError as err:
        raise LabError(refusal.format(str(err).splitlines()[0])) from None
