"""The binary runtime against a real kube-apiserver: fleet, KWOK stages, status, idempotence, KAI."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from kailab.stacks import stack_of
from kailab.fleet import FLEET_LABEL, load_fleet
from kailab.kube import Kube
from kailab.runtimes import processes
from kailab.runtimes.base import LabSpec
from kailab import labs
from kailab.runtimes.waits import wait_until
from kailab import workloads

from helpers import kailab_cli

pytestmark = pytest.mark.lab


def kailab(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = kailab_cli(*args, timeout=None)
    if check and out.returncode != 0:
        raise AssertionError(f"kailab {' '.join(args)} failed ({out.returncode}): {out.stderr}{out.stdout[-1500:]}")
    return out


@pytest.fixture
def kube(infra_lab):
    k = Kube(infra_lab.kubeconfig)
    yield k
    k.close()


def test_fleet_nodes_and_gpu_allocatable_match_the_fleet(infra_lab, kube):
    fleet = load_fleet("tiny")
    nodes = kube.core.list_node(label_selector=f"{FLEET_LABEL}=tiny").items
    assert sorted(n.metadata.name for n in nodes) == sorted(m["metadata"]["name"] for m in fleet.node_manifests())
    for node in nodes:
        assert node.status.allocatable["nvidia.com/gpu"] == "4"
        assert node.status.capacity["nvidia.com/gpu"] == "4"
        assert node.metadata.labels["nvidia.com/gpu.count"] == "4"
        assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True"


def test_status_json_reports_components_nodes_and_gpus(infra_lab):
    info = json.loads(kailab("status", "--json", "--name", infra_lab.name).stdout)
    assert info["runtime"] == "binary"
    assert info["state"] == "up"
    assert info["nodes"] == 2 and info["gpus"] == 8
    assert info["kubeconfig"] == infra_lab.kubeconfig
    assert info["termination_grace_s"] == 1.0  # the lab's default: a deleted pod ends within 1 s
    assert info["kai_version"] == infra_lab.kai_version
    assert all(c["state"] == "running" for c in info["components"].values())
    expected = {"etcd", "kube-apiserver", "kube-controller-manager", "kwok"}
    if stack_of(infra_lab).kai_inside:
        expected |= {"scheduler", "binder", "podgrouper", "queuecontroller", "podgroupcontroller", "admission"}
    if infra_lab.metrics:  # on by default
        expected |= {"prometheus", "kube-state-metrics"}
    assert set(info["components"]) == expected


def test_env_prints_the_kubeconfig_export(infra_lab):
    lines = kailab("env", "--name", infra_lab.name).stdout.strip().splitlines()
    assert lines[0] == f"export KUBECONFIG={infra_lab.kubeconfig}"
    assert lines[1:] == ([f"export KAILAB_PROMETHEUS_URL=http://127.0.0.1:{infra_lab.ports['prometheus.web']}"]
                         if infra_lab.metrics else [])


def test_second_up_on_a_healthy_lab_is_a_no_op(infra_lab):
    before = {n: r.pid for n, r in processes.records(infra_lab.dir).items()}
    rec = labs.up(LabSpec(name=infra_lab.name, runtime="binary", fleet="tiny",
                          stack=stack_of(infra_lab).name)).record
    assert rec.name == infra_lab.name and rec.state == "up"
    assert {n: r.pid for n, r in processes.records(infra_lab.dir).items()} == before


def test_up_with_another_fleet_on_a_running_lab_says_so(infra_lab):
    out = kailab("up", "--runtime", "binary", "--fleet", "small", "--name", infra_lab.name,
                 *([] if stack_of(infra_lab).kai_inside else ["--without-kai"]), check=False)
    assert out.returncode == 2  # refused before anything ran
    assert "already up with fleet tiny (asked small)" in out.stderr and f"kailab down --name {infra_lab.name}" in out.stderr


def _bound_pod(kube: Kube, name: str, node: str, annotations: dict | None = None) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
           "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "main", "image": workloads.IMAGE,
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    kube.apply(pod)


def test_kwok_keeps_pods_running_until_deleted_and_finishes_deletion(infra_lab, kube):
    """The stages kailab installs: Running stays Running; deletion (an eviction) completes."""
    _bound_pod(kube, "stays-running", "a100-0")
    wait_until("pod Running", lambda: kube.core.read_namespaced_pod("stays-running", "default").status.phase
               == "Running", timeout=30)
    # 'stays' check: still Running well after KWOK's default pod-complete would have fired
    deadline = time.time() + 5
    while time.time() < deadline:
        assert kube.core.read_namespaced_pod("stays-running", "default").status.phase == "Running"
        time.sleep(0.5)
    kube.delete("v1", "Pod", "stays-running", "default")  # default grace: KWOK must finish it

    def gone() -> bool:
        return not any(p.metadata.name == "stays-running"
                       for p in kube.core.list_namespaced_pod("default").items)

    wait_until("pod deleted", gone, timeout=30)


def test_run_duration_annotation_completes_a_pod(infra_lab, kube):
    _bound_pod(kube, "short-job", "a100-1", {workloads.RUN_DURATION_ANNOTATION: "2s"})
    wait_until("pod Succeeded", lambda: kube.core.read_namespaced_pod("short-job", "default").status.phase
               == "Succeeded", timeout=30)
    kube.delete("v1", "Pod", "short-job", "default", grace=0)


def test_api_listens_on_loopback_only_and_refuses_anonymous(infra_lab):
    port = infra_lab.ports["kube-apiserver"]
    listening = _listening_addresses(port)
    assert listening == {"127.0.0.1"}, listening
    ctx = ssl.create_default_context(cafile=str(infra_lab.dir / "pki" / "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"https://127.0.0.1:{port}/api/v1/namespaces", context=ctx, timeout=5)
    assert err.value.code in (401, 403)


def test_service_account_tokens_are_issued_and_accepted(infra_lab, kube):
    """The lab signs service-account tokens with its own key (ECDSA): a token the API server issues
    authenticates as that service account; a tampered one does not."""
    from kubernetes import client

    token = kube.core.create_namespaced_service_account_token(
        "default", "default", client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token
    head, payload, signature = token.split(".")
    header = json.loads(base64.urlsafe_b64decode(head + "=="))
    assert header["alg"] == "ES256", header
    ctx = ssl.create_default_context(cafile=str(infra_lab.dir / "pki" / "ca.crt"))
    url = f"https://127.0.0.1:{infra_lab.ports['kube-apiserver']}/apis/authentication.k8s.io/v1/selfsubjectreviews"
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()

    def review(bearer: str) -> dict:
        req = urllib.request.Request(url, data=body, method="POST", headers={
            "Authorization": f"Bearer {bearer}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            return json.loads(resp.read())

    assert review(token)["status"]["userInfo"]["username"] == "system:serviceaccount:default:default"
    with pytest.raises(urllib.error.HTTPError) as err:
        review(f"{head}.{payload}.{signature[::-1]}")  # the same bytes, reversed: not the API server's signature
    assert err.value.code == 401


def _listening_addresses(port: int) -> set[str]:
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if state == "0A" and int(p, 16) == port:  # 0A = LISTEN
                if len(addr) == 8:
                    found.add(".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)))
                else:
                    found.add("::" if set(addr) == {"0"} else addr)
    return found


@pytest.mark.kai
def test_kai_binds_a_queued_gpu_pod_which_runs(kai_lab):
    kube = Kube(kai_lab.kubeconfig)
    ns = "lab-test-bind"
    for obj in [workloads.namespace(ns), workloads.queue("labtest-root", {"quota": -1, "limit": -1}),
                workloads.queue("labtest", {"quota": 2, "limit": -1}, parent="labtest-root")]:
        kube.apply(obj)
    wait_until("default ServiceAccount", lambda: kube.core.read_namespaced_service_account("default", ns),
               timeout=60)
    for pod in workloads.pods("bind-me", ns, "labtest", 1, gpus=1):
        kube.apply(pod)
    pod = wait_until("KAI binds and KWOK runs the pod",
                     lambda: (p := kube.core.read_namespaced_pod("bind-me-0", ns)).status.phase == "Running" and p,
                     timeout=60)
    assert pod.spec.node_name in {"a100-0", "a100-1"}
    assert pod.spec.scheduler_name == "kai-scheduler"
    kube.delete("v1", "Namespace", ns)


@pytest.mark.kai
def test_pod_larger_than_any_node_stays_pending_with_kai_reason(kai_lab):
    kube = Kube(kai_lab.kubeconfig)
    ns = "lab-test-toobig"
    for obj in [workloads.namespace(ns), workloads.queue("labtest2-root", {"quota": -1, "limit": -1}),
                workloads.queue("labtest2", {"quota": -1, "limit": -1}, parent="labtest2-root")]:
        kube.apply(obj)
    wait_until("default ServiceAccount", lambda: kube.core.read_namespaced_service_account("default", ns),
               timeout=60)
    for pod in workloads.pods("too-big", ns, "labtest2", 1, gpus=16):
        kube.apply(pod)

    def kai_reason():
        events = kube.core.list_namespaced_event(ns).items
        return [e for e in events if e.involved_object.name == "too-big-0" and e.reason == "Unschedulable"
                and e.source and "kai" in (e.source.component or e.reporting_component or "kai")]

    events = wait_until("KAI's Unschedulable event", kai_reason, timeout=60)
    assert "gpu" in events[0].message.lower()
    assert kube.core.read_namespaced_pod("too-big-0", ns).spec.node_name is None
    kube.delete("v1", "Namespace", ns)


def test_an_object_the_api_refuses_surfaces_with_the_servers_message(kube):
    from kailab.kube import ApiRefused

    bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "refused", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "-1"}}}]}}
    with pytest.raises(ApiRefused) as err:
        kube.apply(bad)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("the API server refused Pod default/refused: ")
    assert 'Invalid value: "-1": must be greater than or equal to 0' in text


def test_run_refuses_a_lab_without_kai_before_applying_anything(kailab_labs):
    bare = kailab_labs.get("tiny", stack="none")
    out = kailab("run", "reclaim", "--name", bare.name, check=False)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1] == (
        f"kailab: error: lab {bare.name!r} runs without KAI (--without-kai): exercises need KAI "
        f"(`kailab down --name {bare.name}` then `kailab up --fleet ...`)")


CONDITIONLESS_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.retry.kailab.test}
spec:
  group: retry.kailab.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def test_a_kubectl_wait_on_an_object_without_conditions_yet_waits_for_them(infra_lab, tmp_path):
    # the CI's kind lab: `kubectl wait --for=condition=Established` on a CRD created a moment before
    # failed at once ("accessor error: <nil>"); run_logged asks again until the conditions come
    import threading

    from kailab.runtimes.shell import run_logged

    kubectl = ["kubectl", "--kubeconfig", infra_lab.kubeconfig]

    def k(*args: str, stdin: str | None = None) -> None:
        out = subprocess.run([*kubectl, *args], input=stdin, text=True, capture_output=True)
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"

    k("apply", "-f", "-", stdin=CONDITIONLESS_CRD)
    try:
        k("wait", "--for=condition=Established", "crd/widgets.retry.kailab.test", "--timeout=30s")
        k("apply", "-f", "-", stdin="apiVersion: retry.kailab.test/v1\nkind: Widget\n"
                                    "metadata: {name: w, namespace: default}\n")
        # a status whose conditions are null, as a CRD's is the moment it is created
        widget = json.loads(subprocess.run([*kubectl, "-n", "default", "get", "widget", "w", "-o", "json"],
                                           capture_output=True, text=True, check=True).stdout)
        k("replace", "--subresource=status", "-f", "-",
          stdin=json.dumps({**widget, "status": {"conditions": None, "phase": "new"}}))
        condition = {"status": {"conditions": [{"type": "Done", "status": "True"}]}}
        later = threading.Timer(3, k, ("-n", "default", "patch", "widget", "w", "--subresource=status",
                                       "--type=merge", "-p", json.dumps(condition)))
        later.start()
        log = tmp_path / "run.log"
        argv = [*kubectl, "-n", "default", "wait", "--for=condition=Done", "widget/w", "--timeout=20s"]
        run_logged(argv, log, shown=argv, what="wait for the widget")
        later.join()
        text = log.read_text()
        assert "accessor error: <nil>" in text, text  # the case happened: kubectl failed before the patch
        assert "condition met" in text, text
    finally:
        subprocess.run([*kubectl, "delete", "crd", "widgets.retry.kailab.test", "--wait=false"],
                       capture_output=True)
