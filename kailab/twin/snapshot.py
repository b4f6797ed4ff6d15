"""Reading KAI's scheduler snapshot (`/get-snapshot`: a zip holding snapshot.json), checked before any
lab starts: what it must hold is refused in one line naming the file and the field, what kailab does not
know is tolerated and listed."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

MEMBER = "snapshot.json"
# the snapshot's top-level fields (KAI v0.16-v0.17, pkg/scheduler/plugins/snapshot) and its raw objects
KNOWN_FIELDS = ("config", "schedulerParams", "rawObjects", "discovery")
REQUIRED_FIELDS = ("config", "rawObjects")
KNOWN_OBJECTS = ("pods", "nodes", "queues", "podGroups", "bindRequests", "priorityClasses", "configMaps",
                 "persistentVolumes", "persistentVolumeClaims", "csiStorageCapacities", "storageClasses",
                 "csiDrivers", "resourceClaims", "resourceSlices", "deviceClasses", "topologies",
                 "nodeResourceTopologies")
REQUIRED_OBJECTS = ("nodes", "pods", "queues")


@dataclass
class Snapshot:
    path: Path
    config: dict
    params: dict
    objects: dict[str, list[dict]]  # rawObjects, each list ([] where the snapshot has null)
    unknown: list[str] = field(default_factory=list)  # fields kailab does not know: tolerated, listed
    ignored: list[str] = field(default_factory=list)  # the zip's other members: a twin reads none of them

    def of(self, kind: str) -> list[dict]:
        return self.objects.get(kind) or []


def _text(path: Path) -> tuple[str, list[str]]:
    """snapshot.json's text, and the zip's other members (folders aside), which a twin does not read."""
    if not path.is_file():
        raise InputError(path, "", "no such file", "give the .zip KAI's /get-snapshot returned, or its snapshot.json")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            if MEMBER not in zf.namelist():
                raise InputError(path, MEMBER, f"the zip holds no {MEMBER} ({', '.join(zf.namelist()[:5]) or 'empty'})",
                                 "give the zip KAI's /get-snapshot returned")
            others = [n for n in zf.namelist() if n != MEMBER and not n.endswith("/")]
            return zf.read(MEMBER).decode("utf-8", errors="replace"), others
    raw = path.read_bytes()
    if not raw.lstrip().startswith(b"{"):
        raise InputError(path, "", "neither a zip nor a JSON object",
                         "give the .zip KAI's /get-snapshot returned, or its snapshot.json")
    return raw.decode("utf-8", errors="replace"), []


def load_snapshot(path: str | Path) -> Snapshot:
    path = Path(path)
    text, ignored = _text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(path, "", f"not valid JSON ({err.msg} at line {err.lineno})",
                         "give the snapshot.json KAI wrote, unedited") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "the JSON is not an object", "give KAI's snapshot.json")
    missing = [f for f in REQUIRED_FIELDS if not isinstance(data.get(f), dict)]
    if missing:
        raise InputError(path, missing[0], "missing (or not an object): not a KAI scheduler snapshot",
                         "take one from the scheduler's /get-snapshot")
    raw = data["rawObjects"]
    for kind in REQUIRED_OBJECTS:
        if not isinstance(raw.get(kind), (list, type(None))):
            raise InputError(path, f"rawObjects.{kind}", "is not a list", "give KAI's snapshot.json, unedited")
    if not raw.get("nodes"):
        raise InputError(path, "rawObjects.nodes", "no nodes: a twin needs the cluster's nodes",
                         "take the snapshot from a scheduler that sees nodes")
    unknown = [f for f in data if f not in KNOWN_FIELDS] + [f"rawObjects.{k}" for k in raw if k not in KNOWN_OBJECTS]
    objects = {k: list(v or []) for k, v in raw.items() if isinstance(v, (list, type(None)))}
    for kind, items in objects.items():
        for i, obj in enumerate(items):
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict) or not obj["metadata"].get("name"):
                raise InputError(path, f"rawObjects.{kind}[{i}].metadata.name", "missing",
                                 "every object in a snapshot has a name")
    return Snapshot(path, data["config"], data.get("schedulerParams") or {}, objects, unknown, ignored)
