"""What a vCluster trial keeps and finds on the machine and the host, apart from the sequence:

- its working folder (`<state>/trials/<trial>/`: the vcluster.yaml files, kubeconfigs, the CLI's
  home) with `owner.json` (pid, host, versions): a trial whose process is gone is cleaned up by the
  next one — its kind host taken down, or its vClusters, pools and labels taken off an existing
  host — and the folder removed;
- the sentinel: the host workload every trial watches (a Deployment of two pods on the host's own
  KWOK nodes, never a trial's pool);
- KAI inside a vCluster: what ran, and made to misbehave for the blast radius.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
import subprocess
import time

from .. import toolchain, versions
from ..errors import KailabError
from ..fleet import load_fleet
from ..images import image_set
from ..images import vcluster as vc_images
from ..kube import FIELD_MANAGER, Kube
from ..paths import state_dir
from ..runtimes.shell import progress
from ..runtimes.waits import wait_until

SENTINEL_NAMESPACE = "kailab-trial-sentinel"  # the host workload every trial watches
from ..stacks.kai import kind as kai_kind
from . import plan as plan_mod
from ..runtimes.processes import pid_alive
from ..images import docker
from .. import labs
from ..labs import LabRecord
from .host import trial_stages
from .tools import resolve

OWNER = "owner.json"
SHARD = ("kai.scheduler/v1", "SchedulingShard", "default")
OPERATOR = "kai-operator"  # KAI's chart's Deployment of its operator


# ------------------------------------------------------------------ the trial's folder and owner
def trials_dir() -> Path:
    return state_dir().parent / "trials"  # beside the labs: a trial is not a lab


def trial_dir(name: str) -> Path:
    path = trials_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def claim(name: str, info: dict) -> None:
    (trial_dir(name) / OWNER).write_text(json.dumps({"pid": os.getpid(), **info}, indent=2))


def note(name: str, info: dict) -> None:
    path = trial_dir(name) / OWNER
    rec = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**rec, **info}, indent=2))


def release(name: str) -> None:
    shutil.rmtree(trials_dir() / name, ignore_errors=True)


def clean_dead_trials(tools: dict[str, str], mine: str = "") -> list[str]:
    """Take down what trials whose process is gone left: their kind host, or on an existing host
    their vClusters, pools, labels, sentinel and Stage; their labs' records; their folder."""
    cleaned = []
    for folder in sorted(trials_dir().glob("*")) if trials_dir().is_dir() else []:
        try:
            rec = json.loads((folder / OWNER).read_text())
        except (OSError, ValueError):
            rec = {}
        if folder.name == mine or (rec.get("pid") and pid_alive(int(rec["pid"]))):
            continue
        progress(f"cleaning up after trial {folder.name}, whose process is gone")
        for s in rec.get("slugs", []):
            if LabRecord.load(f"{folder.name}-{s}"):
                labs.down(f"{folder.name}-{s}")
        if rec.get("host_lab"):
            if LabRecord.load(rec["host_lab"]):
                labs.down(rec["host_lab"])
        elif rec.get("host_kubeconfig") and Path(rec["host_kubeconfig"]).is_file():
            import subprocess

            for s in rec.get("slugs", []):
                pool = [f"{s}-{n['metadata']['name']}" for n in load_fleet(rec["fleet"]).node_manifests()] if rec.get("fleet") else []
                for _, argv in plan_mod.cleanup_steps(s, rec["host_kubeconfig"], pool):
                    subprocess.run(resolve(argv, tools, folder), capture_output=True, timeout=600)
            kube = Kube(rec["host_kubeconfig"])
            try:
                sentinel_down(kube, SENTINEL_NAMESPACE)
                for stage in trial_stages():
                    kube.delete("kwok.x-k8s.io/v1alpha1", "Stage", stage["metadata"]["name"])
            finally:
                kube.close()
        shutil.rmtree(folder, ignore_errors=True)
        cleaned.append(folder.name)
    return cleaned + _orphan_hosts(tools, mine)


def _orphan_hosts(tools: dict[str, str], mine: str) -> list[str]:
    """Kind hosts of trials that left no folder (their state was wiped while the cluster stayed, as a
    Docker engine restarted kind's containers): a trial claims its folder before its host is made,
    so a `kailab-trial-*` cluster without a live owner's folder is no running trial's."""
    if "kind" not in tools:
        return []
    listed = subprocess.run([tools["kind"], "get", "clusters"], capture_output=True, text=True, timeout=120)
    cleaned = []
    for cluster in listed.stdout.split():
        name = cluster.removeprefix("kailab-")
        if not name.startswith("trial-") or name == mine or (trials_dir() / name / OWNER).is_file():
            continue
        progress(f"cleaning up the kind host {cluster} of a trial that left no record")
        subprocess.run([tools["kind"], "delete", "cluster", "--name", cluster], capture_output=True, timeout=600)
        shutil.rmtree(state_dir() / name, ignore_errors=True)
        cleaned.append(name)
    return cleaned


# ------------------------------------------------------------------ images
def require_images(version_list: list[str]) -> None:
    """Every image and chart the trial loads into a kind host, built here; one line naming the build."""
    missing: list[str] = []
    for v in version_list:
        s = image_set(v)
        missing += [ref for ref in s.images if "/kai-scheduler/" in ref and not docker.has(ref)]
        missing += [str(s.kai_chart)] if not s.kai_chart.is_file() else []
    vs = vc_images.vcluster_set(versions.kai_release(max(version_list, key=versions.parse)).kubernetes)
    missing += vc_images.missing(vs)
    if missing:
        builds = " and ".join(f"`kailab tools images --kai-version {v}`" for v in version_list)
        raise KailabError(f"the trial's images built here are missing: {missing[0]}"
                          f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''}: build them with {builds} "
                          "(add --vcluster to the first: vCluster's CLI, images and chart)")


def coredns_image(kube: Kube) -> str:
    """The CoreDNS image the host itself runs (its nodes have it), for the vClusters' CoreDNS."""
    dep = kube.get("apps/v1", "Deployment", "coredns", "kube-system")
    if dep:
        return dep["spec"]["template"]["spec"]["containers"][0]["image"]
    return ""


# ------------------------------------------------------------------ the sentinel
def sentinel_up(kube: Kube, namespace: str, trial_keys: list[str]) -> None:
    """Two pods on the host's own KWOK nodes (not a trial's pool), Running before the trial starts."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace, "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}}})
    exprs = [{"key": "type", "operator": "In", "values": ["kwok"]},
             *[{"key": k, "operator": "DoesNotExist"} for k in trial_keys]]
    kube.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "sentinel", "namespace": namespace},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "sentinel"}},
                         "template": {"metadata": {"labels": {"app": "sentinel"}},
                                      "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                          "nodeSelectorTerms": [{"matchExpressions": exprs}]}}},
                                               "containers": [{"name": "sentinel", "image": "registry.k8s.io/pause:3.10",
                                                               "resources": {"requests": {"cpu": "10m"}}}]}}}})

    def running():
        pods = kube.list("v1", "Pod", namespace)
        return len([p for p in pods if (p.get("status") or {}).get("phase") == "Running"]) >= 2 or None

    wait_until("the host's sentinel workload to run", running, timeout=180,
               hint=f"kubectl -n {namespace} get pods -o wide (it needs the host's own KWOK nodes)")


def sentinel_down(kube: Kube, namespace: str) -> None:
    kube.delete("v1", "Namespace", namespace)
    try:
        wait_until("the sentinel's namespace to go", lambda: kube.get("v1", "Namespace", namespace) is None or None,
                   timeout=120)
    except KailabError:
        pass


# ------------------------------------------------------------------ KAI in a vCluster
def kai_ran(kube: Kube, version: str) -> dict:
    """What KAI a vCluster really ran: its Deployments' images, its build's manifest, the scheduler's
    own version line."""
    ns = kai_kind.namespace()
    images = {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["image"]
              for d in kube.list("apps/v1", "Deployment", ns)}
    said = ""
    for pod in kube.list("v1", "Pod", ns, label_selector="app=kai-scheduler-default"):
        try:
            head = kube.core.read_namespaced_pod_log(pod["metadata"]["name"], ns, limit_bytes=20000) or ""
        except Exception:  # noqa: BLE001 - evidence, never a reason to stop
            head = ""
        said = next((line.strip() for line in head.splitlines() if "gitVersion" in line or "version" in line.lower()), "")
        break
    manifest = toolchain.manifest("kai", version) or {}
    return {"lab_kai_version": version, "images": images, "scheduler_said": said[:300],
            "manifest_version": manifest.get("version"), "source": manifest.get("source"),
            "binaries": manifest.get("binaries")}


class SchedulerBreaker:
    """KAI made to misbehave as a bad rollout would: its operator stopped (nothing puts it right)
    and its scheduler's Deployment given a flag the scheduler does not know, rolled out by
    recreating, so every scheduler pod exits at start and the kubelet restarts it with back-off:
    that version schedules nothing while it is broken. A SchedulingShard with such a flag does not
    do it: KAI's operator drops args it does not know (v0.16.8, measured). Deleting the scheduler's
    pods every 2 s did it too, but the restarts it forced (~200 in 13 min) took so much of this
    2-core machine that the other version's KAI wrote its events minutes late (measured
    2026-11-25): that is the host's CPU shared, which no vCluster claims to isolate."""

    FLAG = "--kailab-broken-on-purpose=true"

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.errors: list[str] = []
        self.broken_after_s: float | None = None

    def _scheduler_pods(self, kube: Kube) -> list[dict]:
        return kube.list("v1", "Pod", kai_kind.namespace(), label_selector=f"app={kai_kind.SCHEDULER_DEPLOYMENT}")

    def start(self) -> None:
        ns, dep = kai_kind.namespace(), kai_kind.SCHEDULER_DEPLOYMENT
        kube = Kube(self.kubeconfig)
        try:
            deployments = kube.resource("apps/v1", "Deployment")

            def patch(name: str, body: dict, content_type: str):
                # retried: one refused write through a vCluster's API server on a busy host is not a
                # breaker that failed (CI, 2026-11-28: the blast gave up before breaking anything)
                return lambda: kube.dynamic.patch(deployments, name=name, namespace=ns, body=body,
                                                  content_type=content_type) or True

            wait_until("KAI's operator to be scaled to 0", patch(OPERATOR, {"spec": {"replicas": 0}},
                                                                 "application/merge-patch+json"),
                       timeout=PATCH_S, hint=f"kubectl -n {ns} get deployment {OPERATOR}")
            wait_until("KAI's operator to stop", lambda: not ((kube.get("apps/v1", "Deployment", OPERATOR, ns) or {})
                                                              .get("status") or {}).get("replicas") or None,
                       timeout=120, hint=f"kubectl -n {ns} get deployment {OPERATOR}")
            c = wait_until(f"KAI's {dep} Deployment", lambda: kube.get("apps/v1", "Deployment", dep, ns)["spec"]
                           ["template"]["spec"]["containers"][0], timeout=PATCH_S)
            # strategic: the container is merged by name (a merge patch would replace the whole list)
            flagged_template = {"spec": {"containers": [{"name": c["name"], "args": [*(c.get("args") or []), self.FLAG]}]}}
            give_flag = patch(dep, {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None},
                                             "template": flagged_template}}, "application/strategic-merge-patch+json")
            wait_until(f"{dep} to be given {self.FLAG}", give_flag, timeout=PATCH_S)

            def crashing() -> bool | None:
                pods = self._scheduler_pods(kube)
                flagged = [p for p in pods if self.FLAG in (p["spec"]["containers"][0].get("args") or [])]
                d = kube.get("apps/v1", "Deployment", dep, ns) or {}
                if not flagged and self.FLAG not in ((d.get("spec") or {}).get("template", {}).get("spec", {})
                                                     .get("containers") or [{}])[0].get("args", []):
                    # put back by something (CI, 2026-11-28: the old pod ran on, unflagged, for 420 s): again
                    give_flag()
                # an old pod already being deleted schedules nothing more worth waiting for
                old_live = [p for p in pods if p not in flagged and not p["metadata"].get("deletionTimestamp")]
                if flagged and not old_live and any(_exited_once(p) for p in flagged):
                    return True
                # not yet: said on a timeout (CI, 2026-11-27: 180 s ran out on a slow host, no state shown)
                said = "; ".join(
                    f"{p['metadata']['name']} {(p.get('status') or {}).get('phase')}"
                    f"{' flagged' if p in flagged else ' old'}{' deleting' if p['metadata'].get('deletionTimestamp') else ''}"
                    f" restarts {sum(st.get('restartCount', 0) for st in _statuses(p))}"
                    f" state {[next(iter(st.get('state') or {'?': 0})) for st in _statuses(p)]}"
                    for p in pods) or "no scheduler pod"
                raise RuntimeError(f"{said}; Deployment generation {(d.get('metadata') or {}).get('generation')}, "
                                   f"observed {(d.get('status') or {}).get('observedGeneration')}")

            # the old pod ends (Recreate), the flagged one starts and exits: minutes on 2 cores
            started = time.monotonic()
            wait_until("the broken scheduler to exit at start", crashing, timeout=CRASH_S,
                       hint=f"kubectl -n {ns} get pods -l app={dep}; kubectl -n {ns} logs deployment/{dep} --previous")
            self.broken_after_s = round(time.monotonic() - started, 1)
        finally:
            kube.close()

    def stop(self) -> dict:
        """What the broken scheduler did meanwhile: its restarts, and whether a pod of it is ready
        at the end (it must not be: broken throughout, that version scheduled nothing)."""
        kube = Kube(self.kubeconfig)
        try:
            statuses = [st for p in self._scheduler_pods(kube)
                        for st in (p.get("status") or {}).get("containerStatuses") or []]
        except Exception as err:  # noqa: BLE001 - noted in the promise
            self.errors.append(f"{type(err).__name__}: {str(err)[:200]}")
            statuses = []
        finally:
            kube.close()
        return {"scheduler_restarts": sum(st.get("restartCount", 0) for st in statuses),
                "scheduler_ready_at_end": any(_up_for(st, UP_S) for st in statuses),
                "broken_after_seconds": self.broken_after_s, "errors": self.errors[:10]}


UP_S = 10.0  # a scheduler that exits at start runs well under this; one that came back up, longer
PATCH_S = 60.0  # a write to a vCluster's API server, retried this long
CRASH_S = 420.0  # Recreate ends the old pod first, then the flagged one starts and exits: 300 s ran out in CI


def _statuses(pod: dict) -> list[dict]:
    return (pod.get("status") or {}).get("containerStatuses") or []


def _exited_once(pod: dict) -> bool:
    """Its container has exited at least once: restarted, or now terminated or waiting to restart."""
    for st in _statuses(pod):
        state = st.get("state") or {}
        if (st.get("restartCount", 0) > 0 or (st.get("lastState") or {}).get("terminated") or state.get("terminated")
                or (state.get("waiting") or {}).get("reason") in ("CrashLoopBackOff", "Error")):
            return True
    return False


def _up_for(status: dict, seconds: float) -> bool:
    """A container ready and running for `seconds` or more. Not `ready` alone: a container with no
    readiness probe is ready the moment it runs, so one sampled between its start and its exit at start
    counted as up (CI-like run, 2026-11-27: 2 restarts, "ready at end")."""
    started = ((status.get("state") or {}).get("running") or {}).get("startedAt")
    if not status.get("ready") or not started:
        return False
    began = started if isinstance(started, datetime) else datetime.fromisoformat(str(started).replace("Z", "+00:00"))
    return (datetime.now(timezone.utc) - began).total_seconds() >= seconds


