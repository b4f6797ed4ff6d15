"""A registered KAI git repository: where KAI's source comes from when the module proxy refuses it.

`kailab tools kai-source PATH` copies a KAI git repository (a bare mirror, an organisation's
internal clone, a work tree's .git) into kailab's cache as a bare mirror, so it outlives PATH.
Any release tag it holds can then be built: the tag's tree is exported next to it (one per
version, never rebuilt) and compiled inside KAI's own module, with KAI's own go.sum — a wrapper
module would start with an empty go.sum and ask the checksum database about pseudo-versions it
does not know. The mechanism is sources.py's, shared with every project the proxy refuses.

Nothing of KAI is ever copied into the project: the mirror and the trees live in the cache.
"""

from __future__ import annotations

from pathlib import Path

from . import sources

NAME = "kai"


def home() -> Path:
    return sources.home(NAME)


def mirror() -> Path:
    return sources.mirror(NAME)


def release_tags(git_dir: Path) -> list[str]:
    return sources.release_tags(git_dir, sources.project(NAME))


def register(path: str) -> dict:
    return sources.register(NAME, path)


def registered() -> dict | None:
    return sources.registered(NAME)


def commit_of(version: str) -> str:
    return sources.commit_of(NAME, version)


def export_tree(version: str) -> Path:
    return sources.export_tree(NAME, version)


def no_source_message(version: str) -> str:
    return (f"KAI {version} has no source here: the Go module proxy does not serve it and no KAI "
            "repository is registered. Register one with `kailab tools kai-source PATH` (a clone or "
            "bare mirror of github.com/kai-scheduler/KAI-scheduler), or set KAILAB_KAI_SOURCE to a KAI work tree")
