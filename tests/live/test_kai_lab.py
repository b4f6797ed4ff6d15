"""A binary lab with real KAI: parity with KAI's chart (its own quickstart applies unchanged),
every listener on loopback (KAI's podgroupcontroller listens on :8080 on all interfaces when left
alone), and two KAI labs side by side."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import yaml

from kailab import toolchain, versions, workloads
from kailab.stacks.kai import install as kai
from kailab.kube import Kube
from kailab.runtimes import processes
from kailab.runtimes.waits import wait_until

from helpers import kailab_cli, lab_listeners

pytestmark = [pytest.mark.lab, pytest.mark.kai]


def _kai_tree(lab) -> Path:
    """The KAI source the lab's binaries were built from (the registered repository's tag)."""
    return toolchain.kai_tree(toolchain.kai_recipe(versions.kai_release(lab.kai_version)))


def test_kai_quickstart_applies_unchanged_and_its_pods_get_bound(kai_lab):
    tree = _kai_tree(kai_lab)
    quickstart = tree / "docs" / "quickstart"
    kube = Kube(kai_lab.kubeconfig)
    try:
        # the default queues the chart creates are there, exactly as KAI's quickstart shows them
        for doc in yaml.safe_load_all((quickstart / "default-queues.yaml").read_text()):
            live = kube.get("scheduling.run.ai/v2", "Queue", doc["metadata"]["name"])
            assert live is not None, doc["metadata"]["name"]
            assert live["spec"] == doc["spec"], doc["metadata"]["name"]
        ns = "kai-quickstart"
        kube.apply(workloads.namespace(ns))
        wait_until("default ServiceAccount", lambda: kube.core.read_namespaced_service_account("default", ns),
                   timeout=60)
        names = []
        for f in sorted((quickstart / "pods").glob("*.yaml")):
            pod = yaml.safe_load(f.read_text())
            pod["metadata"]["namespace"] = ns  # the quickstart says: a dedicated namespace
            kube.apply(pod)
            names.append(pod["metadata"]["name"])
        assert {"gpu-pod", "cpu-only-pod"} <= set(names)
        for name in names:
            pod = wait_until(f"KAI binds quickstart pod {name}",
                             lambda n=name: (p := kube.core.read_namespaced_pod(n, ns)).spec.node_name and p,
                             timeout=60)
            assert pod.spec.scheduler_name == "kai-scheduler"
        for pc, value in {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}.items():
            assert kube.get("scheduling.k8s.io/v1", "PriorityClass", pc)["value"] == value
        kube.delete("v1", "Namespace", ns)
    finally:
        kube.close()


def test_every_listener_of_a_kai_lab_is_on_loopback(kai_lab):
    listeners = lab_listeners(kai_lab.dir)
    ports = {p for _, p in listeners}
    # every port kailab recorded for the lab is listened on (the podgroupcontroller's through its bridge)
    assert set(kai_lab.ports.values()) <= ports, sorted(set(kai_lab.ports.values()) - ports)
    assert kai.PODGROUPCONTROLLER_METRICS_PORT not in ports
    assert {ip for ip, _ in listeners} == {"127.0.0.1"}, sorted(listeners)


def test_podgroupcontrollers_private_8080_is_bridged_to_its_metrics_port(kai_lab):
    import urllib.request

    port = kai_lab.ports["podgroupcontroller.metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:  # noqa: S310
        assert resp.status == 200 and b"controller_runtime" in resp.read()


@contextlib.contextmanager
def _scratch_queue(kube: Kube, ns: str, queue: str, quota: int):
    """A namespace and a queue (under its own root) for a test's pods; all of it removed after."""
    try:
        kube.apply(workloads.namespace(ns))
        kube.apply(workloads.queue(f"{queue}-root", {"quota": -1, "limit": -1}))
        kube.apply(workloads.queue(queue, {"quota": quota, "limit": -1}, parent=f"{queue}-root"))
        wait_until("default ServiceAccount", lambda: kube.core.read_namespaced_service_account("default", ns),
                   timeout=60)
        yield
    finally:
        kube.delete("v1", "Namespace", ns)
        for q in (queue, f"{queue}-root"):
            kube.delete("scheduling.run.ai/v2", "Queue", q)


def test_two_kai_labs_run_side_by_side(kai_lab, kailab_labs):
    """The session keeps a tiny and a small KAI lab up at once: both whole, and in each, KAI binds a
    pod and that lab's own podgroupcontroller writes what its PodGroup holds (resourcesStatus)."""
    other = kailab_labs.get("small")
    def status(lab) -> dict:
        out = kailab_cli("status", "--json", "--name", lab.name, timeout=None)
        return {**json.loads(out.stdout), "rc": out.returncode}

    for lab in (kai_lab, other):
        # eventually up: on a loaded CI machine one Prometheus scrape of a target may time out, and
        # status calls a lab whose Prometheus has a target down broken until the next scrape
        info = wait_until(f"lab {lab.name} up in `kailab status`",
                          lambda lab=lab: (lambda i: i if i["rc"] == 0 and i["state"] == "up" else None)(status(lab)),
                          timeout=60, hint=f"kailab status --name {lab.name}")
        assert info["components"]["podgroupcontroller"]["state"] == "running"
        kube = Kube(lab.kubeconfig)
        ns = "side-by-side"
        try:
            with _scratch_queue(kube, ns, "sbs", quota=2):
                for pod in workloads.pods("sbs", ns, "sbs", 1, gpus=1):
                    kube.apply(pod)

                def allocated():
                    groups = kube.list("scheduling.run.ai/v2alpha2", "PodGroup", ns)
                    return [g for g in groups if ((g.get("status") or {}).get("resourcesStatus") or {}).get("allocated")]

                (group,) = wait_until(f"the podgroupcontroller of lab {lab.name} to record the allocation", allocated,
                                      timeout=60)
                assert group["status"]["resourcesStatus"]["allocated"]["nvidia.com/gpu"] in ("1", 1)
        finally:
            kube.close()


def test_a_raw_manifest_runs_as_a_workload_of_an_exercise(kai_lab, tmp_path):
    """The escape hatch end to end: a pod the format does not model, applied from its manifest,
    is scheduled by KAI in its queue and counted like any workload."""
    from kailab.exercise.runner import ExerciseRun
    from kailab.exercise.load import load_exercise

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "raw", "annotations": {"team": "x"}},
           "spec": {"schedulerName": "kai-scheduler", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "never-pulled",
                                    "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    doc = {"exercise": "rawmanifest", "title": "t", "concept": "c", "fleet": "tiny",
           "queues": {"q": {"gpu": {"quota": 8}}},
           "steps": [{"name": "raw pod", "apply": [{"manifest": {"queue": "q", "object": pod}}],
                      "expect": [{"workload": "raw", "bound": 1}, {"queue": "q", "bound": 1}]},
                     {"name": "it goes", "delete": [{"workload": "raw"}],
                      "expect": [{"workload": "raw", "bound": 0}]}]}
    path = tmp_path / "rawmanifest.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    outcome = ExerciseRun(load_exercise(path), path, kai_lab, tmp_path / "ev").run()
    assert outcome.verdict == "passed", outcome.report()
    # the run's evidence says which scheduler configuration the lab ran: the operator's rendering
    ran = yaml.safe_load((Path(outcome.evidence) / "scheduler-conf" / "00-lab.yaml").read_text())
    assert ran == yaml.safe_load((kai_lab.dir / "scheduler-conf.yaml").read_text())
    assert "podaffinity" in [p["name"] for t in ran["tiers"] for p in t["plugins"]]


def test_repeat_runs_refuse_exercises_of_another_fleet_before_running_any(kai_lab):
    # on a lab of another fleet an exercise would only time out, step after step
    proc = kailab_cli("bench", "repeat-exercises", "1", "--name", kai_lab.name, "--exercises", "reclaim,topology",
                      timeout=None)
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "topology need another fleet" in lines[0] and kai_lab.fleet in lines[0], proc.stderr
    assert "run 1/1" not in proc.stdout


def test_up_leaves_none_of_its_probe_objects(kai_lab):
    """The probe's pod and queues are gone once `up` returns: a user's `kubectl get queues` shows
    only the chart's default queues."""
    from kailab.kube import Kube
    from kailab.runtimes.labkit import PROBE_NAMESPACE

    kube = Kube(kai_lab.kubeconfig)
    try:
        queues = {q["metadata"]["name"] for q in kube.list("scheduling.run.ai/v2", "Queue")}
        pods = kube.list("v1", "Pod", PROBE_NAMESPACE)
    finally:
        kube.close()
    assert not {"kailab-probe", "kailab-probe-root"} & queues, queues
    assert not [p for p in pods if not p["metadata"].get("deletionTimestamp")], pods


def test_preferred_pod_anti_affinity_is_honoured_as_on_an_installed_kai(kai_lab):
    """A pod with a *preferred* anti-affinity to a running pod lands on another node. KAI's built-in
    default configuration (a scheduler without --scheduler-conf) has no podaffinity plugin and puts it
    right beside that pod (bin-packing); the lab's scheduler runs what KAI's operator renders, which has."""
    kube = Kube(kai_lab.kubeconfig)
    ns = "anti-affinity"
    try:
        with _scratch_queue(kube, ns, "aa", quota=-1):
            (anchor,) = workloads.pods("anchor", ns, "aa", 1, gpus=0, labels={"role": "anchor"})
            kube.apply(anchor)
            node_of = lambda name: (kube.get("v1", "Pod", name, ns) or {}).get("spec", {}).get("nodeName")  # noqa: E731
            first = wait_until("KAI to bind the anchor pod", lambda: node_of("anchor-0"), timeout=60)
            (other,) = workloads.pods("other", ns, "aa", 1, gpus=0)
            other["spec"]["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"role": "anchor"}},
                                                    "topologyKey": "kubernetes.io/hostname"}}]}}
            kube.apply(other)
            second = wait_until("KAI to bind the other pod", lambda: node_of("other-0"), timeout=60)
            assert second != first, f"both pods on {first}: the preferred anti-affinity was ignored"
            conf = yaml.safe_load((kai_lab.dir / "scheduler-conf.yaml").read_text())
            assert "podaffinity" in [p["name"] for t in conf["tiers"] for p in t["plugins"]]
    finally:
        kube.close()


def test_a_shards_args_reach_the_binary_labs_scheduler_and_go_with_the_default(kai_lab):
    """SchedulingShard.spec.args (the scheduler's client qps/burst here) reach the lab's scheduler as
    flags, as KAI's operator passes them into its Deployment; the scheduler runs with them and binds;
    the lab's default takes them off again."""
    from kailab import labs

    def cmdline() -> list[str]:
        pid = processes.records(kai_lab.dir)["scheduler"].pid
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")

    change = kai.scheduler_change(toolchain.kai_recipe(versions.kai_release(kai_lab.kai_version)), _kai_tree(kai_lab),
                                  {"args": {"qps": "300", "burst": "600"}})
    kube, lab = Kube(kai_lab.kubeconfig), labs.open(kai_lab)
    try:
        lab.configure_scheduler(change)
        assert {"--qps=300", "--burst=600"} <= set(cmdline()), cmdline()
        ns = "shard-args"
        with _scratch_queue(kube, ns, "sa", quota=-1):
            (p,) = workloads.pods("p", ns, "sa", 1, gpus=1)
            kube.apply(p)
            wait_until("KAI (its scheduler with the shard's args) to bind a pod",
                       lambda: (kube.get("v1", "Pod", "p-0", ns) or {}).get("spec", {}).get("nodeName"), timeout=60)
    finally:
        lab.configure_scheduler(None)
        kube.close()
    assert not {a for a in cmdline() if a.startswith(("--qps", "--burst"))}, cmdline()
