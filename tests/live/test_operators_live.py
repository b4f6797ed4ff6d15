"""Workload operators as lab components (binary runtime), with real KAI v0.17.0 grouping their kinds:
the Kubeflow training-operator, JobSet, LeaderWorkerSet and KubeRay as supervised processes, their
webhooks on 127.0.0.1 signed for the lab, and what KAI's podgrouper makes of a PyTorchJob, a JobSet,
an LWS and a RayCluster — measured on the lab, never assumed from the plugins' source."""

from __future__ import annotations

import json
import os
import time

import pytest

from helpers import kailab_cli, lab_listeners, wait_for
from kailab import workloads
from kailab.exercise.state import GANG_COMMIT_GRACE
from kailab.kube import Kube
from kailab import labs
from kailab.labs import LabSpec
from kailab.paths import cache_dir
from kailab.runtimes import processes

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("operator_labs")]

PG = "scheduling.run.ai/v2alpha2"
OPERATORS = ("kubeflow", "jobset", "lws", "ray")
PROCESSES = {"kubeflow": "training-operator", "jobset": "jobset-controller", "lws": "lws-controller",
             "ray": "ray-operator"}
QUEUE = "ops-team"


@pytest.fixture(scope="module")
def lab(kailab_labs):
    """The session's small lab with every workload operator (the operator exercises' too)."""
    rec = kailab_labs.get("small", operators=OPERATORS)
    kube = Kube(rec.kubeconfig)
    kube.apply(workloads.queue(QUEUE, {"quota": -1, "limit": -1}))
    kube.close()
    return rec


@pytest.fixture
def kube(lab, request):
    k = Kube(lab.kubeconfig)
    ns = f"ops-{request.node.name.split('[')[0][5:30].replace('_', '-').strip('-')}"
    k.apply(workloads.namespace(ns))
    k.apply(workloads.service_account("default", ns))
    k.ns = ns
    yield k
    k.delete("v1", "Namespace", ns)
    k.close()


def _container(gpus: int = 1, name: str = "main") -> dict:
    return {"name": name, "image": "kailab.io/never-pulled",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                          "limits": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": str(gpus)}}}


def _template(container: str = "main") -> dict:
    return {"spec": {"restartPolicy": "Never", "containers": [_container(name=container)]}}


def _pods(kube, name: str) -> list[dict]:
    return [p for p in kube.list("v1", "Pod", kube.ns)
            if (p["metadata"].get("labels") or {}).get(workloads.OWNER_LABEL) == name]


def _bound(pods: list[dict]) -> int:
    return sum(1 for p in pods if (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp"))


def _podgroups(kube) -> list[dict]:
    return kube.list(PG, "PodGroup", kube.ns)


_wait = wait_for


def test_the_lab_runs_each_operator_as_a_named_component_on_loopback(lab):
    assert lab.stack["name"] == "kai" and lab.stack["operators"] == {
        "kubeflow": "v1.9.3", "jobset": "v0.10.1", "lws": "v0.7.0", "ray": "v1.5.1"}
    report = labs.open(lab).status()
    # every component runs (the state also reads Prometheus's last scrapes, not this test's subject)
    assert not {n: c["state"] for n, c in report["components"].items() if c["state"] != "running"}, report["components"]
    for op in OPERATORS:
        assert report["components"][PROCESSES[op]]["state"] == "running", report["components"]
    assert report["stack"]["operators"] == lab.stack["operators"]
    def said():  # `status` exits 0 once Prometheus has scraped every target of a lab just up (it may not have yet)
        done = kailab_cli("status", "--name", lab.name, timeout=None)
        return done if done.returncode == 0 else None

    said = wait_for("`kailab status` to say the lab is up", said, timeout=60, every=2)
    assert "KAI v0.17.0, kubeflow v1.9.3, jobset v0.10.1, lws v0.7.0, ray v1.5.1, fleet small" in said.stdout, said.stdout
    # every listener the lab owns in the host's network is on loopback (the training-operator's webhook
    # server, which listens on every interface, is in a network namespace of its own)
    assert {addr for addr, _ in lab_listeners(lab.dir)} <= {"127.0.0.1"}
    # their webhooks are registered on 127.0.0.1 with a CA that signs what the process serves
    kube = Kube(lab.kubeconfig)
    try:
        hooks = [h for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
                 for c in kube.list("admissionregistration.k8s.io/v1", kind) for h in c.get("webhooks") or []
                 if "kubeflow" in h["name"] or "kb.io" in h["name"]]
        assert hooks and all(h["clientConfig"]["url"].startswith("https://127.0.0.1:") for h in hooks)
    finally:
        kube.close()


def test_a_pytorchjob_of_1_master_and_3_workers_binds_nothing_on_3_free_gpus_then_all_4_at_once(lab, kube):
    """The done-when of the workloads issue: KAI's podgrouper (plugins/kubeflow/pytorch) makes one
    PodGroup of minMember 4 from the PyTorchJob; with 3 GPUs free none of its pods binds, for a window;
    when a 4th frees, all 4 bind, and no observation ever saw 1 to 3 of them bound."""
    held = lab.gpus - 3  # 3 GPUs left free
    blockers = workloads.pods("blocker", kube.ns, QUEUE, held, priority_class="inference")
    for pod in blockers:
        kube.apply(pod)
    _wait(f"{held} blockers bound", lambda: _bound(_pods(kube, "blocker")) == held)
    job = workloads.adopt({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train"},
                           "spec": {"pytorchReplicaSpecs": {
                               "Master": {"replicas": 1, "restartPolicy": "Never", "template": _template("pytorch")},
                               "Worker": {"replicas": 3, "restartPolicy": "Never", "template": _template("pytorch")}}}},
                          kube.ns, QUEUE)
    kube.apply(job)
    ours = lambda: [p for p in _podgroups(kube) if p["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"]  # noqa: E731
    _wait("KAI's podgrouper to make the PyTorchJob's PodGroup and the operator its 4 pods, each in it",
          lambda: len(_pods(kube, "train")) == 4 and ours()
          and all((p["metadata"].get("annotations") or {}).get("pod-group-name") for p in _pods(kube, "train")))
    [pg] = ours()
    assert pg["spec"]["minMember"] == 4 and pg["spec"]["queue"] == QUEUE, pg["spec"]
    assert {s["name"]: s.get("minMember") for s in pg["spec"].get("subGroups") or []} == {"master": 1, "worker": 3}
    assert {p["metadata"]["annotations"]["pod-group-name"] for p in _pods(kube, "train")} == {pg["metadata"]["name"]}
    # held: 3 GPUs free, a gang of 4 - nothing binds for 10 s (after KAI has seen all 4 pods)
    until = time.monotonic() + 10
    while time.monotonic() < until:
        assert _bound(_pods(kube, "train")) == 0
        time.sleep(0.25)
    kube.delete("v1", "Pod", blockers[0]["metadata"]["name"], kube.ns)
    # KAI decides the gang in one cycle and its binder commits it a pod at a time, so an instant of the
    # commit shows part of it bound: never resting there (the exercises' gang-never-partial rule)
    seen: list[tuple[float, int]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not seen or seen[-1][1] < 4):
        now = _bound(_pods(kube, "train"))
        if not seen or now != seen[-1][1]:
            seen.append((time.monotonic(), now))
        time.sleep(0.1)
    assert seen[-1][1] == 4, seen
    rests = [(b - a, n) for (a, n), (b, _) in zip(seen, seen[1:]) if 0 < n < 4]
    assert all(held < GANG_COMMIT_GRACE for held, _ in rests), rests


def test_jobset_lws_and_raycluster_are_grouped_by_kais_plugins_and_placed(lab, kube):
    """A JobSet of two replicated Jobs (plugins/jobset: one PodGroup, a SubGroup per replica), an LWS
    of 2 groups of 4 (plugins/leaderworkerset: a PodGroup per group, minMember 4; its pods labelled by
    LWS's own pod webhook) and a RayCluster of a head and 2 workers (plugins/ray: minMember 3)."""
    rj = lambda name, replicas: {"name": name, "replicas": replicas,  # noqa: E731
                                 "template": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                                                       "template": _template()}}}
    objs = [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
         "spec": {"replicatedJobs": [rj("driver", 1), rj("workers", 2)]}},
        {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "lws"},
         "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
             "spec": {"containers": [_container()]}}}}},
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "ray"},
         "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [_container(0)]}}},
                  "workerGroupSpecs": [{"groupName": "cpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                        "rayStartParams": {}, "template": {"spec": {"containers": [_container(0)]}}}]}},
    ]
    for obj in objs:
        kube.apply(workloads.adopt(obj, kube.ns, QUEUE))
    expect = {"js": 3, "lws": 4, "ray": 3}
    _wait("every pod bound", lambda: all(_bound(_pods(kube, n)) == c for n, c in expect.items()), timeout=90,
          seen=lambda: {n: (len(_pods(kube, n)), _bound(_pods(kube, n))) for n in expect})
    by_owner: dict[str, list[dict]] = {}
    for pg in _podgroups(kube):
        by_owner.setdefault(pg["metadata"]["ownerReferences"][0]["kind"], []).append(pg)
    [js] = by_owner["JobSet"]
    # a parent SubGroup per replicated Job, a leaf per replica; AnyOrder (JobSet's default): both jobs gang
    assert {s["name"]: s.get("parent") for s in js["spec"]["subGroups"]} == {
        "driver": None, "driver-replica-0": "driver", "workers": None, "workers-replica-0": "workers",
        "workers-replica-1": "workers"}, js["spec"]
    assert js["spec"]["minSubGroup"] == 2, js["spec"]
    lws = by_owner["LeaderWorkerSet"]
    assert len(lws) == 2 and {p["spec"]["minMember"] for p in lws} == {2}, [p["spec"] for p in lws]
    [ray] = by_owner["RayCluster"]
    assert ray["spec"]["minMember"] == 3, ray["spec"]
    for pods in (_pods(kube, n) for n in expect):
        assert all(p["metadata"]["annotations"].get("pod-group-name") for p in pods)


def test_the_webhook_probe_a_kind_lab_waits_on_reaches_each_operators_webhooks_and_fails_while_one_is_stopped(lab):
    """A kind lab's `up` waits until a dry run of each operator's first kind is answered by its webhooks
    (kailab/operators/kind.py): each pin's probe passes its CRD's schema (so its validating webhooks are called,
    the training-operator's among them), and a webhook that does not answer keeps the wait going."""
    import signal

    from kailab.operators.base import Pin
    from kailab.operators.kind import webhooks_answer

    kube = Kube(lab.kubeconfig)
    try:
        with_webhooks = [n for n in OPERATORS if Pin.of(n).webhooks]
        assert set(with_webhooks) == {"kubeflow", "jobset", "lws"}, with_webhooks
        for name in with_webhooks:
            assert webhooks_answer(Pin.of(name), kube), name
        pid = processes.records(lab.dir)["lws-controller"].pid  # stopped, not killed: the lab stays as it was
        os.kill(pid, signal.SIGSTOP)
        try:
            assert not webhooks_answer(Pin.of("lws"), kube)
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        kube.close()


def test_an_operator_that_dies_is_a_named_dead_component(lab):
    proc = PROCESSES["ray"]
    held = labs.open(lab)
    held.kill(proc)
    try:
        dead = dict(held.dead_components(set()))
        assert proc in dead, dead
    finally:
        held.restart(proc)
    assert not held.dead_components(set())


def test_down_leaves_no_operator_behind(tmp_path):
    name = f"operators-down-{os.getpid()}"
    rec = labs.up(LabSpec(name=name, runtime="binary", fleet="tiny", metrics=False, operators=("kubeflow", "lws"))).record
    pids = {n: r.pid for n, r in processes.records(rec.dir).items()}
    assert {"training-operator", "lws-controller"} <= set(pids)
    labs.down(name)
    assert not rec.dir.exists()
    assert not [n for n, pid in pids.items() if os.path.exists(f"/proc/{pid}")], pids


def test_a_lab_plays_the_users_own_kwok_stages_beside_kailabs():
    """`kailab up --stages`: a container whose args are [entrypoint-tester] exits 0 at once (the user's
    stage), while a pod without them runs on (kailab's stages) - on the lab's real KWOK."""
    from kailab.paths import PROJECT_ROOT

    name = f"operators-stages-{os.getpid()}"
    stages = PROJECT_ROOT / "docs" / "examples" / "stages-entrypoint-tester.yaml"
    rec = labs.up(LabSpec(name=name, runtime="binary", fleet="tiny", metrics=False, stack="none",
                        stages=str(stages))).record
    kube = Kube(rec.kubeconfig)
    try:
        assert rec.stages == ["entrypoint-tester-exits"]
        node = kube.list("v1", "Node")[0]["metadata"]["name"]
        for pod, args in (("tester", ["entrypoint-tester"]), ("server", ["serve"])):
            kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": "default"},
                        "spec": {"nodeName": node, "restartPolicy": "Never",
                                 "containers": [{"name": "main", "image": "kailab.io/never-pulled", "args": args}]}})
        phase = lambda pod: (kube.get("v1", "Pod", pod, "default") or {}).get("status", {}).get("phase")  # noqa: E731
        _wait("the tester to exit 0", lambda: phase("tester") == "Succeeded", timeout=30, seen=lambda: phase("tester"))
        ended = kube.get("v1", "Pod", "tester", "default")["status"]["containerStatuses"][0]["state"]["terminated"]
        assert ended["exitCode"] == 0, ended
        until = time.monotonic() + 5
        while time.monotonic() < until:  # kailab's stages alone for the other: it runs until deleted
            assert phase("server") == "Running", phase("server")
            time.sleep(0.5)
    finally:
        kube.close()
        labs.down(name)


def test_the_training_operator_starts_when_the_labs_state_and_kailabs_cache_are_under_tmp(tmp_path):
    """Its private /tmp (a tmpfs of its own for the certificate's fixed path) must not hide a lab whose
    state is under /tmp (KAILAB_STATE=/tmp/...: its kubeconfig and keys), as CI's isolated runs have it,
    nor its binary when kailab's cache is there (a cold CI's HOME is a temporary folder: every test with
    the operator failed at start, "training-operator: not found"). The cache here: links to this one's."""
    assert str(tmp_path.absolute()).startswith("/tmp/"), tmp_path  # else this tests nothing
    cache = tmp_path / "cache"
    cache.mkdir()
    for entry in cache_dir().iterdir():
        (cache / entry.name).symlink_to(entry)
    env = {"KAILAB_STATE": str(tmp_path / "state"), "KAILAB_CACHE": str(cache)}
    name = f"tmp-state-{os.getpid()}"
    try:
        up = kailab_cli("up", "--name", name, "--fleet", "tiny", "--operators", "kubeflow", "--without-metrics",
                        env=env, timeout=None)
        assert up.returncode == 0, up.stderr[-3000:]
        said = kailab_cli("status", "--json", "--name", name, env=env)
        info = json.loads(said.stdout)
        assert info["components"]["training-operator"]["state"] == "running", info["components"]
    finally:
        kailab_cli("down", "--name", name, env=env, timeout=None)
    assert not (tmp_path / "state" / "labs" / name).exists()
