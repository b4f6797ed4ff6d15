"""Running units as Jobs on a cluster the user has, and bringing their evidence back.

One namespace per run, labelled with the run's id: every object of the run is in it, so deleting it
(at the end, on Ctrl-C or on any error) leaves nothing of the run on the cluster. A unit is collected
when its pod's log says it is done: its /evidence is copied out (`kubectl exec … tar`) into the local
evidence folder, as if it had run here, and its Job deleted. A pod that ends, or goes, before its unit
is done is named with how it ended, its log kept in the run's record."""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import tarfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..errors import KailabError, LabError
from ..images import docker
from ..kube import Kube
from ..paths import state_dir
from ..runtimes.base import LabRecord
from ..runtimes.kind.host import engine_env, find_tool
from .unit import CPU, DONE, MEMORY, RUN_LABEL, UNIT_TIMEOUT_S, Unit, UnitResult, objects

POLL_S = 2.0


@dataclass
class FanOut:
    """A run's units on one cluster; `run()` returns when every unit is collected or failed."""

    units: list[Unit]
    kubeconfig: str
    images: dict[str, str]  # KAI version -> the lab image with its binaries (a unit's lab runs its unit's version)
    evidence_root: Path
    # every pod's requests, when given (--unit-cpu, --unit-memory); else each unit's own, from its kind's measured cost
    cpu: str | None = None
    memory: str | None = None
    namespace_labels: dict = field(default_factory=dict)  # e.g. the Pod Security level the cluster asks for
    say: Callable[[str], None] = print
    # its second and a few random letters: runs started in one second (pytest's workers, each item a
    # run of its own) get namespaces of their own
    run_id: str = field(default_factory=lambda: f"{datetime.now(timezone.utc).strftime('%Y%m%dt%H%M%Sz')}-{secrets.token_hex(2)}")

    @property
    def namespace(self) -> str:
        return f"kailab-fanout-{self.run_id}"

    @property
    def record_dir(self) -> Path:
        return self.evidence_root / f"{self.run_id.upper()}-fanout"

    def run(self) -> list[UnitResult]:
        self.results = {u.name: UnitResult(u.name, u.title) for u in self.units}
        self._pull_since: dict[str, float] = {}
        self.kube = Kube(self.kubeconfig)
        self.kubectl = find_tool("kubectl")
        try:
            if not self.kube.readyz():
                raise LabError(f"--on {self.kubeconfig}: the cluster's API server does not answer")
            self.kube.apply({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": self.namespace,
                                          "labels": {**self.namespace_labels, RUN_LABEL: self.run_id}}})
            for u in self.units:
                cpu, memory = self.cpu or u.requests[0], self.memory or u.requests[1]
                self.results[u.name].requests = {"cpu": cpu, "memory": memory}
                for obj in objects(u, self.namespace, self.run_id, self.images[u.kai_version], cpu, memory):
                    self.kube.apply(obj)
            self.say(f"{len(self.units)} units as Jobs in namespace {self.namespace} (image {', '.join(sorted(set(self.images.values())))})")
            started = time.monotonic()
            while any(r.state in ("pending", "running") for r in self.results.values()):
                # one list of the run's pods a round, whatever the number of units
                pods: dict[str, list[dict]] = {}
                for pod in self.kube.list("v1", "Pod", self.namespace, label_selector=f"{RUN_LABEL}={self.run_id}"):
                    pods.setdefault((pod["metadata"].get("labels") or {}).get("kailab.io/unit", ""), []).append(pod)
                for u in self.units:
                    if self.results[u.name].state in ("pending", "running"):
                        self._poll(u, started, pods.get(u.name, []))
                time.sleep(POLL_S)
        finally:  # Ctrl-C and errors too: nothing of the run stays on the cluster
            self._delete_namespace()
            self.kube.close()
            self._write_record()
        return list(self.results.values())

    # ------------------------------------------------------------------ one unit
    def _poll(self, u: Unit, started: float, pods: list[dict]) -> None:
        r = self.results[u.name]
        r.seconds = round(time.monotonic() - started, 1)
        # once a unit has a pod, that pod it is: a Job's replacement for it would start its unit over
        pod = next((p for p in pods if p["metadata"]["name"] == r.pod), None) if r.pod else (pods[0] if pods else None)
        if pod is None:
            refused = self._refused(u) if not r.pod else ""
            if r.pod:
                self._fail(u, r, f"its pod {r.pod} is gone (deleted before its unit was done)")
            elif refused:
                self._fail(u, r, f"the cluster refused its pod: {refused}")
            elif r.seconds > UNIT_TIMEOUT_S:
                self._fail(u, r, f"no pod in {UNIT_TIMEOUT_S} s (kubectl -n {self.namespace} describe job {u.name})")
            return
        r.pod, r.node = pod["metadata"]["name"], pod["spec"].get("nodeName") or ""
        status = pod.get("status") or {}
        if status.get("phase") == "Pending":
            pull = _image_refused(status)
            since = self._pull_since.setdefault(u.name, time.monotonic()) if pull else self._pull_since.pop(u.name, None)
            if pull and time.monotonic() - since >= PULL_GRACE_S:  # else it would wait out the unit's hour
                self._fail(u, r, f"pod {r.pod} cannot get its image: {pull} (a kailab kind lab is given it by "
                                 f"`kailab tools lab-image --kai-version {u.kai_version}` and the run's `kind load`; "
                                 "another cluster pulls it from a registry its nodes reach)")
            elif r.seconds > UNIT_TIMEOUT_S:
                why = "; ".join(c.get("message", "") for c in status.get("conditions") or [] if c.get("status") == "False")
                self._fail(u, r, f"pod {r.pod} still Pending after {UNIT_TIMEOUT_S} s: {why or 'no reason given'}")
            return
        if r.state == "pending":
            r.state = "running"
            self.say(f"{u.title}: running in pod {r.pod} on node {r.node}")
        log = self._logs(r.pod)
        r.log = log or r.log  # the last log seen stays, should the pod go
        done = [line for line in log.splitlines() if line.startswith(DONE)]
        if done:
            r.exit_status = int(done[-1].split()[-1])
            r.cpu_seconds = _said(log, CPU)
            peak = _said(log, MEMORY)
            r.memory_peak_mib = round(peak / 2**20, 1) if peak is not None else None
            self._collect(u, r)
            return
        ended = _terminated(status)
        if ended or pod["metadata"].get("deletionTimestamp"):
            self._fail(u, r, f"pod {r.pod} on node {r.node} ended before its unit was done: {ended or 'deleted'}")
        elif r.seconds > UNIT_TIMEOUT_S:
            self._fail(u, r, f"not done after {UNIT_TIMEOUT_S} s")

    def _refused(self, u: Unit) -> str:
        """Why the Job controller could not make the unit's pod (its FailedCreate event: a policy
        refusing the pod's capabilities, a quota), or ''."""
        for e in self.kube.list("v1", "Event", self.namespace):
            obj = e.get("involvedObject") or e.get("involved_object") or {}
            if obj.get("kind") == "Job" and obj.get("name") == u.name and e.get("reason") == "FailedCreate":
                return (e.get("message") or "").strip()
        return ""

    def _logs(self, pod: str) -> str:
        """The pod's whole log through the API (no process a unit a round), '' until it has one."""
        try:
            return self.kube.core.read_namespaced_pod_log(pod, self.namespace, container="lab", _request_timeout=60)
        except Exception:  # noqa: BLE001 - not started yet, or gone: the pod's status says which
            return ""

    def _collect(self, u: Unit, r: UnitResult) -> None:
        """The pod's /evidence into the local evidence folder; the run's verdict read from it."""
        out = subprocess.run([self.kubectl, "--kubeconfig", self.kubeconfig, "-n", self.namespace, "exec", r.pod,
                              "-c", "lab", "--", "tar", "-C", "/evidence", "-cf", "-", "."],
                             capture_output=True, timeout=300)
        if out.returncode != 0:
            self._fail(u, r, f"could not copy its evidence out of pod {r.pod}: {out.stderr.decode(errors='replace').strip()}")
            return
        kind = u.kind
        # a fill's folder is named by its second, and the units start together: each in the run's
        # record under its unit's name (merged into one fill there); an exercise's run folder as if run here
        root = self.record_dir / u.name if kind.own_folder else self.evidence_root
        root.mkdir(parents=True, exist_ok=True)
        found = kind.read(root, _extract(out.stdout, root))
        if found:
            r.evidence, r.verdict = str(found[0]), found[1]
            r.state = "collected"
        else:
            r.state = "failed"
            r.error = f"its unit ended with status {r.exit_status} and no evidence of its run (its log: {self._log_path(u)})"
        self.kube.delete("batch/v1", "Job", u.name, self.namespace, grace=0)
        cpu = f", {r.cpu_seconds:.0f} CPU-s" if r.cpu_seconds is not None else ""
        cpu += f", {r.memory_peak_mib:.0f} MiB peak" if r.memory_peak_mib is not None else ""
        self.say(f"{u.title}: {r.verdict or r.state} ({r.seconds:.0f} s{cpu}, pod {r.pod}, node {r.node})"
                 + (f" evidence: {r.evidence}" if r.evidence else f": {r.error}"))

    def _fail(self, u: Unit, r: UnitResult, why: str) -> None:
        r.state, r.error = "failed", why + (f" (its log: {self._log_path(u)})" if r.log else "")
        self.kube.delete("batch/v1", "Job", u.name, self.namespace, grace=0)
        self.say(f"{u.title}: error: {r.error}")

    # ------------------------------------------------------------------ the run
    def _log_path(self, u: Unit) -> Path:
        return self.record_dir / f"{u.name}.log"

    def _delete_namespace(self) -> None:
        try:
            self.kube.delete("v1", "Namespace", self.namespace)
            deadline = time.monotonic() + 180
            while self.kube.get("v1", "Namespace", self.namespace) is not None and time.monotonic() < deadline:
                time.sleep(1)
        except Exception as e:  # noqa: BLE001 - said, with what to delete by hand
            self.say(f"could not delete namespace {self.namespace}: {e} (kubectl delete namespace -l {RUN_LABEL}={self.run_id})")

    def _write_record(self) -> None:
        self.record_dir.mkdir(parents=True, exist_ok=True)
        for u in self.units:
            r = self.results[u.name]
            if r.log:
                self._log_path(u).write_text(r.log)
        record = {"run": self.run_id, "cluster": os.path.abspath(self.kubeconfig), "namespace": self.namespace,
                  "images": self.images, "requests": {"cpu": self.cpu or "each unit's own", "memory": self.memory or "each unit's own"},
                  "units": [{k: v for k, v in asdict(r).items() if k != "log"} for r in self.results.values()]}
        (self.record_dir / "fanout.json").write_text(json.dumps(record, indent=2))


def _said(log: str, what: str) -> float | None:
    """A figure the unit's pod said of its container (CPU-seconds, memory peak), or None where it could
    not read it."""
    said = [line.split()[-1] for line in log.splitlines() if line.startswith(what)]
    try:
        return float(said[-1]) if said else None
    except ValueError:
        return None


PULL_REFUSED = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName")
PULL_GRACE_S = 60.0  # a registry's passing refusal is retried by the kubelet; one that lasts is named


def _image_refused(status: dict) -> str:
    """Why a pending pod's container cannot get its image, or ''."""
    for c in status.get("containerStatuses") or []:
        w = (c.get("state") or {}).get("waiting") or {}
        if w.get("reason") in PULL_REFUSED:
            return f"{w['reason']}: {(w.get('message') or c.get('image') or '').strip()}"
    return ""


def _terminated(status: dict) -> str:
    for c in status.get("containerStatuses") or []:
        t = (c.get("state") or {}).get("terminated")
        if t:
            return f"{t.get('reason') or 'terminated'}, exit code {t.get('exitCode')}"
    return ""


def _extract(data: bytes, root: Path) -> list[str]:
    """The run folders of a unit's /evidence tar, extracted under `root`; nothing outside it."""
    names = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = [m for m in tar.getmembers() if (m.isfile() or m.isdir())
                   and not m.name.startswith(("/", "..")) and ".." not in Path(m.name).parts]
        tar.extractall(root, members=members, filter="data")
        for m in members:
            top = Path(m.name).parts[:1]  # ("./x/…" is ("x", …) to pathlib)
            if top and top[0] not in names and (root / top[0]).is_dir():
                names.append(top[0])
    return names


def load_image_into_kind(kubeconfig: str, image: str, say) -> bool:
    """When the cluster is a kailab kind lab, `kind load` the lab image into it (nothing is pulled
    from a registry there); False for another cluster, which pulls the image itself."""
    target = os.path.realpath(kubeconfig)
    for lab_json in state_dir().glob("*/lab.json"):
        rec = LabRecord.load(lab_json.parent.name)
        if rec and rec.runtime == "kind" and os.path.realpath(rec.kubeconfig) == target:
            # kind loads from the engine the lab runs in (its record's), whatever DOCKER_HOST says here
            env = engine_env(rec.docker_host)
            if not docker.has(image, env=env):
                version = image.rsplit(":kai-", 1)[-1]
                raise KailabError(f"{image} is not in the Docker engine of kind lab {rec.name!r}"
                                  f"{f' ({rec.docker_host})' if rec.docker_host else ''}: build it there with "
                                  f"`kailab tools lab-image --kai-version {version}`")
            say(f"loading {image} into kind lab {rec.name!r}")
            out = subprocess.run([find_tool("kind"), "load", "docker-image", image, "--name", f"kailab-{rec.name}"],
                                 capture_output=True, text=True, timeout=900, env=env)
            if out.returncode != 0:
                raise LabError(f"kind load docker-image {image} failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
            return True
    return False
