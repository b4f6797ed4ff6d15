"""KWOK Stages of the user's own: how *their* containers behave on the fleet's fake nodes, beside
kailab's stages (data/kwok-stages.yaml), on every runtime kailab makes (`kailab up --stages PATH`).

E.g. "a container whose args are [entrypoint-tester] exits 0 at once", "a Ray head is Ready after 5 s".
KWOK's own format (a file, or a folder of them, each document a `kwok.x-k8s.io/v1alpha1` Stage); each
document is checked here so a bad one is one line naming the file, the document and the field, before
any lab starts. The stages are passed to KWOK verbatim.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import InputError

API = "kwok.x-k8s.io/v1alpha1"
RESERVED = "kailab-"  # kailab's own stages are named so


def stage_files(path: str | Path) -> list[Path]:
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml"))
        if not files:
            raise InputError(p, "", "no .yaml files in this folder of KWOK stages")
        return files
    if not p.is_file():
        raise InputError(p, "", "no such file or folder", "--stages takes a KWOK Stage file, or a folder of them")
    return [p]


def load(path: str | Path) -> list[dict]:
    """Every Stage in `path` (a file or a folder), checked; one InputError line for the first bad one."""
    stages: list[dict] = []
    seen: dict[str, str] = {}
    for f in stage_files(path):
        try:
            docs = [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f":{mark.line + 1}" if mark else ""
            raise InputError(f"{f}{where}", "", f"not YAML ({getattr(err, 'problem', err)})") from None
        for i, doc in enumerate(docs):
            at = f"{f}: document {i + 1}"
            _check(doc, at)
            name = doc["metadata"]["name"]
            if name in seen:
                raise InputError(at, "metadata.name", f"stage {name!r} is also in {seen[name]}", "give each stage its own name")
            seen[name] = at
            stages.append(doc)
    return stages


def _check(doc, at: str) -> None:
    if not isinstance(doc, dict):
        raise InputError(at, "", "a KWOK Stage is a mapping (apiVersion, kind, metadata, spec)")
    if doc.get("apiVersion") != API or doc.get("kind") != "Stage":
        raise InputError(at, "apiVersion/kind", f"{doc.get('apiVersion')!r}/{doc.get('kind')!r} is not a KWOK Stage",
                         f"write apiVersion: {API} and kind: Stage")
    name = (doc.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise InputError(at, "metadata.name", "missing", "name the stage")
    if name.startswith(RESERVED):
        raise InputError(at, "metadata.name", f"{name!r}: names starting with {RESERVED!r} are kailab's own stages",
                         "choose another")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise InputError(at, "spec", "missing", "a Stage has resourceRef, selector and next")
    ref = spec.get("resourceRef")
    if not isinstance(ref, dict) or not ref.get("kind"):
        raise InputError(at, "spec.resourceRef.kind", "missing", "the kind it plays: Pod or Node")
    if ref["kind"] not in ("Pod", "Node"):
        raise InputError(at, "spec.resourceRef.kind", f"{ref['kind']!r}", "the fleet's KWOK plays Pod and Node")
    if not isinstance(spec.get("selector"), dict):
        raise InputError(at, "spec.selector", "missing",
                         f"which {ref['kind']}s it applies to: matchLabels, matchAnnotations or matchExpressions")
    if not isinstance(spec.get("next"), dict):
        raise InputError(at, "spec.next", "missing", "what the stage does: statusTemplate, delete, finalizers, event")
    delay = spec.get("delay")
    if delay is not None and (not isinstance(delay, dict) or not isinstance(delay.get("durationMilliseconds", 0), int)):
        raise InputError(at, "spec.delay.durationMilliseconds", "not a number", "an integer number of milliseconds")


def text(stages: list[dict]) -> str:
    """The stages as YAML documents, to follow kailab's in KWOK's configuration (or as Stage objects)."""
    return "".join("---\n" + yaml.safe_dump(s, sort_keys=False) for s in stages)
