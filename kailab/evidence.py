"""Evidence on disk: one directory per run, written step by step so an interrupted run keeps it.

This module owns the layout: everything else (report, course, trial, bench) names evidence
files and finds runs through the names and functions here.

Layout of evidence/<timestamp>-<exercise>/:
  exercise.yaml            the exercise as run          run.json      lab, KAI version, name mapping
  manifests/NN-<step>.yaml every object applied         steps/NN-<step>/{queues,podgroups,pods,nodes,events,bindrequests}.yaml
  timeline.jsonl           every pod created/bound/running/evicted/deleted, from the watch
  logs/<component>.log     KAI's log lines for the run's window (binary runtime)
  scheduler-snapshot.zip   the scheduler's /get-snapshot dump at the end
  dump/<Kind>.yaml         on failure: every object of the exercise namespace, by type
  verdict.json             one record per expectation, stays-window and invariant
Secrets are never written: nothing here reads them, and the namespace dump skips them.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import urllib.request
from dataclasses import asdict
from pathlib import Path

from . import yamlfast

from .kube import Kube

SKIP_KINDS = {"Secret", "Event", "Binding", "LocalSubjectAccessReview", "TokenReview"}

# ------------------------------------------------------------------------------ the layout
EXERCISE, RUN, VERDICT, TIMELINE = "exercise.yaml", "run.json", "verdict.json", "timeline.jsonl"
SCHEDULER_SNAPSHOT = "scheduler-snapshot.zip"
KAI_METRICS = "kai-metrics.json"  # KAI's series from the lab's Prometheus (labs that run one)
SCHEDULER_SNAPSHOT_ERROR = "scheduler-snapshot.error.txt"  # written instead when the dump fails
STEPS, FINAL, LOGS, DUMP, MANIFESTS = "steps", "final", "logs", "dump", "manifests"
TOP = "top.json"  # per snapshot: `kailab top`'s picture of the lab (where it runs KAI)
SNAPSHOT_FILES = ("queues.yaml", "podgroups.yaml", "pods.yaml", "nodes.yaml", "events.yaml", "bindrequests.yaml",
                  "claims.yaml", TOP)
TOP_FILES = (EXERCISE, RUN, VERDICT, TIMELINE, SCHEDULER_SNAPSHOT)
MATRIX = "matrix.json"  # a trial directory's


STAMP = "%Y%m%dT%H%M%SZ"  # a folder's UTC time: twin-20250101T120000Z


def new_folder(root: Path, prefix: str, stamp_format: str = STAMP, utc: bool = True) -> Path:
    """Make root/<prefix>-<time> for this caller alone and return it: a second caller in the same second
    (two `kailab twin` started at once) gets <prefix>-<time>-2, then -3, ... — each made with
    exist_ok=False, so two processes never share one. What follows `<prefix>-` is the run's stamp
    (`stamp_of`): labs named after it are unique too."""
    now = dt.datetime.now(dt.timezone.utc) if utc else dt.datetime.now()
    return made_alone(Path(root), f"{prefix}-{now.strftime(stamp_format)}")


def made_alone(root: Path, base: str) -> Path:
    """root/base, or root/base-2, -3, ... where another process made it first; made by us alone."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = root / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir(exist_ok=False)
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def stamp_of(folder: Path, prefix: str) -> str:
    """The stamp `new_folder` gave `folder` (its time, and -N when another took that second first)."""
    return Path(folder).name.removeprefix(f"{prefix}-")


def write_matrix(folder: Path, matrix: dict, markdown: str) -> None:
    """A side-by-side's matrix.json and matrix.md (a trial's, a comparison's): one writer for both."""
    (folder / MATRIX).write_text(json.dumps(matrix, indent=2))
    (folder / "matrix.md").write_text(markdown)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "step"


def step_dir(index: int, name: str) -> str:
    """A step's snapshot directory inside a run (index from 1)."""
    return f"{STEPS}/{index:02d}-{_slug(name)}"


def is_run(path: Path) -> bool:
    """A run directory: it has at least one of the files every run starts with."""
    return any((Path(path) / f).exists() for f in (VERDICT, RUN, EXERCISE))


def runs_under(path: Path) -> list[Path]:
    """Every run directory at any depth below `path` (a trial, a repeat series), in name order."""
    return sorted(v.parent for v in Path(path).glob(f"**/{VERDICT}"))


def read_verdict(run: Path) -> dict:
    return json.loads((Path(run) / VERDICT).read_text())


def _plain(obj):
    """API objects (dicts with datetimes) -> YAML/JSON-friendly data."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items() if k != "managedFields"}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, (dt.datetime, dt.date)):
        return obj.isoformat()
    return obj


CLAIMS = "claims.yaml"  # per snapshot: the namespace's ResourceClaims (DRA), who holds which devices


def claims_table(kube: Kube, namespace: str) -> list[dict]:
    """The namespace's ResourceClaims, one row each: the pods it is reserved for, the node its
    allocation is on and the devices (driver/pool/device) it holds; [] where DRA is not served."""
    try:
        claims = kube.list("resource.k8s.io/v1", "ResourceClaim", namespace)
    except Exception:  # noqa: BLE001 - no resource.k8s.io/v1 here: no claims to show
        return []
    rows = []
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        results = (alloc.get("devices") or {}).get("results") or []
        terms = ((alloc.get("nodeSelector") or {}).get("nodeSelectorTerms")) or []
        node = next((v for t in terms for f in t.get("matchFields") or [] for v in f.get("values") or []
                     if f.get("key") == "metadata.name"), None)
        rows.append({"name": c["metadata"]["name"],
                     "pods": [r.get("name") for r in (c.get("status") or {}).get("reservedFor") or []],
                     "requests": [{"name": r.get("name"), **((r.get("exactly") or {}))}
                                  for r in ((c.get("spec") or {}).get("devices") or {}).get("requests") or []],
                     "allocated": bool(results), "node": node,
                     "devices": [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results]})
    return rows


class EvidenceDir:
    def __init__(self, root: Path, exercise: str):
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")[:-4] + "Z"
        self.path = made_alone(Path(root), f"{stamp}-{exercise}")  # the same millisecond twice: -2, -3, ...

    def write(self, rel: str, data) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, (bytes, bytearray)):
            target.write_bytes(data)
        elif isinstance(data, str):
            target.write_text(data)
        elif rel.endswith(".json"):
            target.write_text(json.dumps(_plain(data), indent=2, default=str))
        else:
            target.write_text(yamlfast.dump(_plain(data), sort_keys=False, default_flow_style=False))
        return target

    def step_dir(self, index: int, name: str) -> str:
        return step_dir(index, name)

    def manifests(self, index: int, name: str, objects: list[dict]) -> None:
        if objects:
            text = yamlfast.dump_all([_plain(o) for o in objects], sort_keys=False)
            self.write(f"{MANIFESTS}/{index:02d}-{_slug(name)}.yaml", text)

    def snapshot(self, rel: str, kube: Kube, namespace: str, state, reservation_namespace: str = "",
                 scheduler_objects: dict[str, list] | None = None) -> None:
        """The scheduler's own objects as its stack reads them (KAI: queues spec+status, podgroups,
        BindRequests - its decisions, on every run, not only failures), claims, pods, nodes' GPU use,
        events by time."""
        for name, objs in (scheduler_objects or {}).items():
            self.write(f"{rel}/{name}", objs)
        self.write(f"{rel}/{CLAIMS}", claims_table(kube, namespace))
        with state.cond:
            pods = [p for p in state.pods_table() if p["namespace"] == namespace]
            nodes = state.node_use(reservation_namespace)
        self.write(f"{rel}/pods.yaml", pods)
        self.write(f"{rel}/nodes.yaml", nodes)
        self.write(f"{rel}/events.yaml", events_by_time(kube, namespace))

    def timeline(self, entries) -> None:
        self.write(TIMELINE, "".join(json.dumps(asdict(e)) + "\n" for e in entries))

    def scheduler_snapshot(self, url: str) -> str:
        try:
            with urllib.request.urlopen(url, timeout=20) as resp:  # noqa: S310 - loopback only
                self.write(SCHEDULER_SNAPSHOT, resp.read())
            return SCHEDULER_SNAPSHOT
        except Exception as err:  # noqa: BLE001 - evidence of absence is still evidence
            self.write(SCHEDULER_SNAPSHOT_ERROR, f"GET {url} failed: {err}\n")
            return f"unavailable: {err}"

    def dump_namespace(self, kube: Kube, namespace: str) -> None:
        """A typed dump of every object in the namespace (Volcano-e2e style), secrets excepted."""
        for res in kube.dynamic.resources.search(namespaced=True):
            if res.kind in SKIP_KINDS or res.kind.endswith("List") or "list" not in (res.verbs or []):
                continue
            if "/" in res.name:  # subresources
                continue
            try:
                items = res.get(namespace=namespace).to_dict().get("items", [])
            except Exception:  # noqa: BLE001 - some aggregated APIs refuse; skip them
                continue
            if items:
                self.write(f"dump/{res.kind}.{res.group or 'core'}.yaml", items)


def events_by_time(kube: Kube, namespace: str) -> list[dict]:
    rows = []
    for e in kube.list("v1", "Event", namespace):
        meta, involved, source = e.get("metadata") or {}, e.get("involvedObject") or {}, e.get("source") or {}
        when = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or meta.get("creationTimestamp")
        rows.append({"time": when or "", "type": e.get("type"), "reason": e.get("reason"),
                     "object": f"{involved.get('kind')}/{involved.get('name')}",
                     "count": e.get("count") or 1,
                     "source": source.get("component") or e.get("reportingComponent") or "",
                     "message": e.get("message")})
    return sorted(rows, key=lambda r: r["time"])
