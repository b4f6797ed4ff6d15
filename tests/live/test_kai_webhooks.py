"""KAI's admission webhooks run in a binary lab as on an install (#24): KAI's own admission binary
mutates and validates pods (GPU sharing), KAI's podgroupcontroller validates PodGroups, both
registered as KAI's operator registers them, reached by the API server on 127.0.0.1.

On main before this change a user's own fractional-GPU Deployment stayed Pending (KAI's binder:
"no desired configmap name found in pod annotations") and an invalid PodGroup was accepted."""

from __future__ import annotations

import re

import pytest

from kailab import toolchain, versions, workloads
from kailab.stacks.kai import install as kai
from kailab.kube import ApiRefused, Kube
from kailab import labs
from kailab.runtimes.waits import wait_until

pytestmark = [pytest.mark.lab, pytest.mark.kai]

QUEUE = "webhook-test"


@pytest.fixture
def ns(request) -> str:
    """Each test's own namespace (a deleted one lingers while it terminates)."""
    return f"webhook-{request.node.name.split('_')[2]}-{len(request.node.name)}"


@pytest.fixture
def kube(kai_lab, ns):
    k = Kube(kai_lab.kubeconfig)
    k.apply(workloads.namespace(ns))
    k.apply(workloads.queue(f"{QUEUE}-root", {"quota": -1, "limit": -1}))
    k.apply(workloads.queue(QUEUE, {"quota": 4, "limit": -1}, parent=f"{QUEUE}-root"))
    wait_until("default ServiceAccount", lambda: k.core.read_namespaced_service_account("default", ns), timeout=60)
    yield k
    k.delete("v1", "Namespace", ns)
    for q in (QUEUE, f"{QUEUE}-root"):
        k.delete("scheduling.run.ai/v2", "Queue", q)
    k.close()


def test_a_users_fractional_deployment_is_mutated_by_kais_webhook_and_binds(kai_lab, kube, ns):
    """A Deployment as a KAI user writes it (KAI's docs: gpu-fraction on the pod template), created
    with no help from kailab: KAI's webhook names its GPU-sharing ConfigMap, adds the env and the
    RuntimeClass, and KAI's binder binds it and writes the ConfigMaps."""
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "half-gpu", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "half-gpu"}},
                 "template": {"metadata": {"labels": {"app": "half-gpu", workloads.QUEUE_LABEL: QUEUE},
                                           "annotations": {"gpu-fraction": "0.5"}},
                              "spec": {"schedulerName": "kai-scheduler",
                                       "containers": [{"name": "main", "image": "ubuntu"}]}}}}
    kube.apply(deployment)
    pod = wait_until("KAI binds the user's fractional pod",
                     lambda: next((p for p in kube.list("v1", "Pod", ns) if p["spec"].get("nodeName")), None),
                     timeout=90)
    name = pod["metadata"]["annotations"].get(workloads.SHARED_GPU_CONFIGMAP, "")
    # the webhook's name: <owner (the ReplicaSet)>-<7 random>-shared-gpu
    owner = pod["metadata"]["ownerReferences"][0]["name"]
    assert re.fullmatch(rf"{re.escape(owner)}-[a-z0-9]{{7}}-shared-gpu", name), name
    assert pod["spec"].get("runtimeClassName") == "nvidia"
    env = {e["name"]: e for e in pod["spec"]["containers"][0].get("env") or []}
    assert env["GPU_PORTION"]["valueFrom"]["configMapKeyRef"]["name"] == f"{name}-0"
    cm = wait_until("KAI's binder writes the pod's GPU-sharing ConfigMap",
                    lambda: kube.get("v1", "ConfigMap", f"{name}-0", ns), timeout=30)
    assert cm["data"].get("GPU_PORTION") == "0.50" or float(cm["data"]["GPU_PORTION"]) == 0.5


def test_kailabs_own_fractional_pods_get_the_webhooks_env_and_runtime_class(kai_lab, kube, ns):
    """kailab writes its own fractional pods as a user would: the GPU-sharing ConfigMap's name, the
    env and the RuntimeClass are KAI's webhook's doing (kailab only creates the maps under that name
    right after the pod, a workaround for KAI #2016)."""
    (obj,) = workloads.pods("frac", ns, QUEUE, 1, gpus=0, share={workloads.GPU_FRACTION: "0.5"})
    assert workloads.SHARED_GPU_CONFIGMAP not in obj["metadata"]["annotations"]
    made = kube.apply(obj)
    name = made["metadata"]["annotations"][workloads.SHARED_GPU_CONFIGMAP]
    assert re.fullmatch(r"frac-0-[a-z0-9]{7}-shared-gpu", name), name  # the webhook's own pattern
    for cm in workloads.sharing_config_maps(made):
        kube.apply(cm)
    pod = wait_until("KAI binds kailab's fractional pod",
                     lambda: (p := kube.get("v1", "Pod", "frac-0", ns)) and p["spec"].get("nodeName") and p,
                     timeout=90)
    assert pod["spec"].get("runtimeClassName") == "nvidia"
    assert any(e.get("configMapRef", {}).get("name") == f"{name}-0-evar"
               for e in pod["spec"]["containers"][0].get("envFrom") or [])


def test_an_invalid_podgroup_is_refused_with_kais_message(kai_lab, kube, ns):
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "both", "namespace": ns},
             "spec": {"minMember": 2, "minSubGroup": 1, "queue": QUEUE}}
    with pytest.raises(ApiRefused) as info:
        kube.apply(group)
    msg = str(info.value)
    assert 'admission webhook "podgroup-validation.kai.scheduler" denied the request' in msg, msg
    assert "minMember and minSubGroup are mutually exclusive" in msg, msg
    assert kube.get("scheduling.run.ai/v2alpha2", "PodGroup", "both", ns) is None


def test_a_fraction_pod_with_a_whole_gpu_limit_is_refused_by_kais_validator(kai_lab, kube, ns):
    pod = workloads.pods("mixed", ns, QUEUE, 1, gpus=1)[0]
    pod["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    with pytest.raises(ApiRefused, match='admission webhook "admission.kai-scheduler.svc" denied the request'):
        kube.apply(pod)


def test_webhooks_are_registered_on_loopback_and_admission_is_a_lab_component(kai_lab):
    kube = Kube(kai_lab.kubeconfig)
    try:
        urls = [w["clientConfig"]["url"]
                for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
                for c in kube.list("admissionregistration.k8s.io/v1", kind)
                if (c["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "kailab"
                for w in c["webhooks"]]
    finally:
        kube.close()
    topologies = kai.admission_validates_topologies(toolchain.kai_tree(toolchain.kai_recipe(
        versions.kai_release(kai_lab.kai_version))))
    assert len(urls) == (4 if topologies else 3) and all(u.startswith("https://127.0.0.1:") for u in urls), urls
    status = labs.open(kai_lab).status()
    assert status["components"]["admission"]["state"] == "running"
    assert "admission" in kai.component_ports()
