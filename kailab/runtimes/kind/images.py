"""Which images a kind lab uses: those built here (`kailab tools images`) or the published ones.

Built here, a lab needs the base set every kind lab runs (node, KWOK, fake-gpu-operator, metrics) and
what its scheduler's Addon names (`local_images`, `local_files`: the stack's own)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ...errors import LabError
from ...images import ImageSet, image_set
from ..addon import InstallsFromCharts
from ...images import docker as images_docker
from .workers import control_plane


IMAGES = ("auto", "local", "published")


def needed_local(s: ImageSet, addon: InstallsFromCharts | None = None) -> tuple[list[str], list[Path]]:
    """The images and files built here a kind lab of `addon` uses (None: the base set with KAI's)."""
    if addon is None:
        return s.built_images, [s.kai_chart, s.fgo_chart, s.kwok_manifest]
    return ([s.node_image, *s.base_images, *addon.local_images(s)],
            [s.fgo_chart, s.kwok_manifest, *addon.local_files(s)])


def missing_local(s: ImageSet, addon: InstallsFromCharts | None = None) -> list[str]:
    """What of the locally built image set is not here (images in Docker, charts, KWOK's manifest)."""
    images, files = needed_local(s, addon)
    return [ref for ref in images if not images_docker.has(ref)] + [str(p) for p in files if not p.is_file()]


def build_command(kai_version: str, addon: InstallsFromCharts | None = None) -> str:
    stack = f" --stack {addon.image_stack}" if addon is not None and addon.image_stack else ""
    ops = getattr(addon, "image_operators", "") if addon is not None else ""
    stack += f" --operators {ops}" if ops else ""
    return f"`kailab tools images --kai-version {kai_version}{stack}`"


def choose_images(requested: str, kai_version: str, missing: list[str],
                  addon: InstallsFromCharts | None = None) -> tuple[ImageSet | None, str]:
    """Which images a kind lab uses, and the one line that says so. `local` needs every one of the
    set built here; `auto` takes them when all are there (the network is never probed)."""
    s = image_set(kai_version)
    build = build_command(s.kai_version, addon)
    count = len(needed_local(s, addon)[0])
    if requested == "published":
        return None, "images: the published ones (registries), as asked"
    if requested == "local":
        if missing:
            raise LabError(f"--images local: {len(missing)} of the kind lab's images built here are missing "
                           f"({missing[0]}{', …' if len(missing) > 1 else ''}): build them with {build}")
        return s, f"images: built here by {build} ({count} images), as asked"
    if not missing:
        return s, (f"images: built here by {build} (all {count} present); "
                   "--images published pulls the released ones")
    return None, (f"images: the published ones ({len(missing)} of the set built here are missing; {build} "
                  "makes them for hosts without a registry)")


def node_images(node: str) -> dict[str, str]:
    """Image reference -> ID of what a kind node's containerd holds ({} when it cannot be asked): the
    IDs `docker image inspect` gives, as kind compares them."""
    out = subprocess.run([images_docker.client(), "exec", node, "crictl", "images", "-o", "json"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return {}
    held = {}
    for image in json.loads(out.stdout or "{}").get("images") or []:
        for ref in image.get("repoTags") or []:
            held[ref] = image.get("id", "")
    return held


def to_load(cluster: str, refs: list[str]) -> tuple[list[str], list[str]]:
    """Of `refs`: (what Docker has and the cluster's node lacks, what Docker lacks). The node (made from
    one node image, kailab's holding what labs run) is compared by image ID, as kind compares; kind saves
    every image it is given when any one is missing, so it is given only the first list."""
    held = node_images(control_plane(cluster))
    lacks, absent = [], []
    for ref in refs:
        local = images_docker.image_id(ref)
        if local is None:
            absent.append(ref)
        elif held.get(ref) != local:
            lacks.append(ref)
    return lacks, absent
