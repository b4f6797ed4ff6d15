"""The volcano stack on a real binary lab: Volcano's scheduler, controller manager and webhook manager
as named lab components, every listener on loopback, what Volcano does with a Queue's capability
(measured here, never assumed from its docs), a dead component named in a run's verdict, and a lab
that leaves nothing behind. Volcano is built from its registered repository."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from helpers import bound_then_held, lab_listeners, stack_lab
from kailab.exercise.runner import run_exercise
from kailab.exercise.spec import SchedulerSetting
from kailab.kube import Kube
from kailab import labs
from kailab.labs import LabRecord
from kailab.runtimes import processes
from kailab.runtimes.waits import wait_until
from kailab.stacks.volcano import install

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("own_labs")]  # a lab of its own, one such test at a time

API = install.API
NS = "volcano-capability"
COMPONENTS = {"vc-scheduler", "vc-controller-manager", "vc-webhook-manager"}


@pytest.fixture(scope="module")
def volcano_lab():
    with stack_lab("volcano") as rec:
        yield rec


def test_the_lab_runs_volcanos_three_processes_as_named_components(volcano_lab):
    version = install.pins()["version"]
    assert volcano_lab.stack["name"] == "volcano" and volcano_lab.stack["version"] == version
    report = labs.open(volcano_lab).status()
    assert report["state"] == "up", report
    for name in COMPONENTS:
        assert report["components"][name]["state"] == "running"
    assert report["stack"] == {"name": "volcano", "version": version}
    assert not any(n in report["components"] for n in ("scheduler", "binder", "kueue"))  # no KAI, no Kueue
    kube = Kube(volcano_lab.kubeconfig)
    try:  # the probe's queue went with it: only the two Volcano's scheduler makes itself
        assert {q["metadata"]["name"] for q in kube.list(API, "Queue")} == {"root", "default"}
    finally:
        kube.close()


def test_every_listener_of_a_volcano_lab_is_on_loopback(volcano_lab):
    listeners = lab_listeners(volcano_lab.dir)
    ports = {p for _, p in listeners}
    # every port kailab gave Volcano's processes is listened on, and nothing else of theirs is open
    ours = {p for n, p in volcano_lab.ports.items() if n.split(".")[0] in COMPONENTS}
    assert len(ours) == 6 and ours <= ports, sorted(ours - ports)
    assert {ip for ip, _ in listeners} == {"127.0.0.1"}, sorted(listeners)
    # the scheduler's klog socket is in the lab, not in /tmp/klog-socks shared by every Volcano on the host
    sockets = Path("/proc/net/unix").read_text()
    assert str(volcano_lab.dir / "volcano-socks") in sockets
    pid = processes.records(volcano_lab.dir)["vc-scheduler"].pid
    assert "/tmp/klog-socks" not in " ".join(os.readlink(f) for f in Path(f"/proc/{pid}/fd").iterdir()
                                               if os.path.exists(f))


def test_the_scheduler_runs_the_configuration_the_lab_wrote_and_records(volcano_lab):
    conf = labs.open(volcano_lab).scheduler_config()
    assert conf == install.scheduler_conf()  # kailab/data/volcano.yaml's default, as data
    written = yaml.safe_load((volcano_lab.dir / install.CONF).read_text())
    assert written["actions"] == ", ".join(conf["actions"])
    # the scheduler's own log says which actions and plugins it loaded from that file
    log = (volcano_lab.dir / "logs" / "vc-scheduler.log").read_text()
    plugins = " ".join(p["name"] for t in conf["tiers"] for p in t["plugins"])
    assert f"actions=[{' '.join(conf['actions'])}], plugins=[{plugins}]" in log


def _pod(name: str, queue: str, namespace: str = NS) -> dict:
    container = {"name": "main", "image": "kailab.io/never-pulled",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                               "limits": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": "1"}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": {"scheduling.volcano.sh/queue-name": queue}},
            "spec": {"schedulerName": "volcano", "containers": [container], "terminationGracePeriodSeconds": 0,
                     "automountServiceAccountToken": False}}


def _clean(kube: Kube, namespace: str) -> None:
    """The namespace's pods gone before the next test: a pod still ending holds its node's CPU, and
    nodeorder then scored both nodes alike for spread's second pod (CI: both pods on one node)."""
    kube.delete("v1", "Namespace", namespace)
    kube.delete_pods(namespace)
    try:
        wait_until(f"the pods of {namespace} to be gone", lambda: not kube.list("v1", "Pod", namespace), timeout=120)
    finally:
        kube.close()


def test_volcano_places_within_a_queues_gpu_capability_and_holds_the_rest(volcano_lab):
    """Capability 2 GPUs, three 1-GPU pods on a fleet with 8 free: two bound, the third held (a window),
    each pod given a PodGroup of its own by Volcano's controller manager."""
    kube = Kube(volcano_lab.kubeconfig)
    try:
        for obj in [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NS}},
                    {"apiVersion": API, "kind": "Queue", "metadata": {"name": "capped"},
                     "spec": {"capability": {"nvidia.com/gpu": "2"}, "deserved": {"nvidia.com/gpu": "1"}}}]:
            kube.apply(obj)
        deadline = time.monotonic() + 30  # a new Queue takes no PodGroup until the controller manager opens it
        while ((kube.get(API, "Queue", "capped") or {}).get("status") or {}).get("state") != "Open":
            assert time.monotonic() < deadline, "the controller manager never opened the Queue"
            time.sleep(0.2)
        for i in range(3):
            kube.apply(_pod(f"p{i}", "capped"))

        bound_then_held(kube, NS, 2)  # two bound, the third held for a window, not just at one moment
        groups = kube.list(API, "PodGroup", NS)
        assert len(groups) == 3 and {g["spec"]["queue"] for g in groups} == {"capped"}
        assert sorted(g["status"].get("phase") for g in groups).count("Running") == 2
    finally:
        _clean(kube, NS)


@pytest.mark.parametrize("placement, nodes", [("binpack", 1), ("spread", 2)])
def test_binpack_on_or_off_is_a_design_input_volcano_acts_on(volcano_lab, placement, nodes):
    """The scheduler's configuration changed as an exercise's `scheduler:` step changes it: with its
    binpack plugin two 1-GPU pods share a node of the tiny fleet's two, without it (nodeorder alone)
    each gets a node of its own; the scheduler's log says it loaded the file, and the lab's default
    is put back after."""
    ns = f"volcano-{placement}"
    lab = labs.open(volcano_lab)
    setting = lab.scheduler_setting(SchedulerSetting(placement=placement), None, "test")
    lab.configure_scheduler(setting)
    kube = Kube(volcano_lab.kubeconfig)
    try:
        assert lab.scheduler_config()["tiers"] == setting.conf["tiers"]
        for obj in [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}}]:
            kube.apply(obj)
        for i in range(2):
            kube.apply(_pod(f"p{i}", "default", ns))
        bound_then_held(kube, ns, 2, window=0)
        assert len({p["spec"]["nodeName"] for p in kube.list("v1", "Pod", ns)}) == nodes
    finally:
        _clean(kube, ns)
        lab.configure_scheduler(None)
    assert lab.scheduler_config() == install.scheduler_conf()


def test_a_dead_volcano_component_is_named_in_the_verdict_and_down_leaves_nothing(volcano_lab, tmp_path):
    pids = {n: processes.records(volcano_lab.dir)[n].pid for n in COMPONENTS}
    lab = labs.open(volcano_lab)
    lab.kill("vc-controller-manager")
    dead = dict(lab.dead_components(ignore=set()))
    assert set(dead) == {"vc-controller-manager"}
    # the names a death of the stack's is reported under: its processes here (and its kind Deployments')
    assert COMPONENTS <= lab.scheduler_components()
    # an exercise on the lab stops with an error verdict that names it
    exercise = tmp_path / "one-pod.yaml"
    exercise.write_text(yaml.safe_dump({
        "exercise": "one-pod", "title": "One pod", "concept": "a pod is placed", "fleet": "tiny",
        "queues": {"lab": {"gpu": {"quota": -1, "limit": -1}, "children": {"team": {"gpu": {"quota": 4}}}}},
        "steps": [{"name": "one pod", "apply": [{"pods": {"name": "p", "queue": "team", "count": 1, "gpus": 1}}],
                   "expect": [{"queue": "team", "bound": 1}]}],
        "invariants": ["no-gpu-overcommit"], "proves": "nothing", "does_not_prove": "anything"}, sort_keys=False))
    out = run_exercise(exercise, volcano_lab, tmp_path)
    assert out.verdict == "error" and "Volcano component died: vc-controller-manager" in out.error, out.error
    labs.down(volcano_lab.name)
    assert LabRecord.load(volcano_lab.name) is None and not volcano_lab.dir.exists()
    for pid in pids.values():
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
