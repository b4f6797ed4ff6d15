"""Variants side by side on a cluster the user has: each unit a Job, on the lab image of its KAI version."""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def on_cluster(units: list, kubeconfig: str, evidence_root: Path, cpu: str, memory: str,
               namespace_labels: dict[str, str], say: Callable[[str], None]):
    """Run the units on the cluster, each on the lab image of its KAI version (loaded into a kailab kind
    lab's nodes when it is one); the FanOut (its record folder) and the units' results."""
    from ..fanout.run import FanOut, load_image_into_kind
    from ..images.lab import LabImage

    images = {v: LabImage(v).ref for v in dict.fromkeys(u.kai_version for u in units)}
    for image in images.values():
        if not load_image_into_kind(kubeconfig, image, say):
            say(f"{kubeconfig} is not a kailab kind lab: its nodes pull {image} (push it to a registry they reach)")
    run = FanOut(units, kubeconfig, images, evidence_root, cpu=cpu, memory=memory, namespace_labels=namespace_labels,
                 say=say)
    return run, run.run()
