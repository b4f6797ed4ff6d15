"""Which images a kind lab uses: those built here (`kailab tools images`) or the published ones."""

from __future__ import annotations



from ..errors import LabError
from ..images import ImageSet, image_set


IMAGES = ("auto", "local", "published")


def missing_local(s: ImageSet) -> list[str]:
    """What of the locally built image set is not here (images in Docker, charts, KWOK's manifest)."""
    from ..images import docker as images_docker

    files = [str(p) for p in (s.kai_chart, s.fgo_chart, s.kwok_manifest) if not p.is_file()]
    return [ref for ref in s.built_images if not images_docker.has(ref)] + files


def choose_images(requested: str, kai_version: str, missing: list[str]) -> tuple[ImageSet | None, str]:
    """Which images a kind lab uses, and the one line that says so. `local` needs every one of the
    set built here; `auto` takes them when all are there (the network is never probed)."""
    s = image_set(kai_version)
    build = f"`kailab tools images --kai-version {s.kai_version}`"
    if requested == "published":
        return None, "images: the published ones (registries), as asked"
    if requested == "local":
        if missing:
            raise LabError(f"--images local: {len(missing)} of the kind lab's images built here are missing "
                           f"({missing[0]}{', …' if len(missing) > 1 else ''}): build them with {build}")
        return s, f"images: built here by {build} ({len(s.built_images)} images), as asked"
    if not missing:
        return s, (f"images: built here by {build} (all {len(s.built_images)} present); "
                   "--images published pulls the released ones")
    return None, (f"images: the published ones ({len(missing)} of the set built here are missing; {build} "
                  "makes them for hosts without a registry)")
