"""KAI schedules ResourceClaims on a DRA fleet's devices; claims show in the evidence and the report."""

from __future__ import annotations

import pytest

from kailab import workloads
from kailab.fleet import DRA_DRIVER
from kailab.kube import Kube
from kailab.runtimes.clusterinfo import ready_nodes_and_gpus
from kailab.runtimes.waits import wait_until

NS, QUEUE = "dra-test", "dra-test"


def _claim_pod(name: str, template: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {workloads.QUEUE_LABEL: QUEUE}},
            "spec": {"schedulerName": "kai-scheduler", "terminationGracePeriodSeconds": 0,
                     "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
                     "containers": [{"name": "main", "image": "ubuntu", "resources": {"claims": [{"name": "gpus"}]}}]}}


def _template(name: str, count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": DRA_DRIVER, "allocationMode": "ExactCount", "count": count}}]}}}}


@pytest.mark.lab
@pytest.mark.kai
@pytest.mark.xdist_group("other_fleets")
def test_kai_schedules_resource_claims_on_dra_devices(kailab_labs):
    lab = kailab_labs.get("dra")
    kube = Kube(lab.kubeconfig)
    try:
        assert ready_nodes_and_gpus(kube) == (3, 12)  # the DRA devices count as GPUs, as in KAI
        kube.apply(workloads.namespace(NS))
        kube.apply(workloads.queue(f"{QUEUE}-root", {"quota": -1, "limit": -1}))
        kube.apply(workloads.queue(QUEUE, {"quota": 8, "limit": -1}, parent=f"{QUEUE}-root"))
        wait_until("default ServiceAccount", lambda: kube.core.read_namespaced_service_account("default", NS),
                   timeout=60)
        for obj in (_template("two-gpus", 2), _template("five-gpus", 5)):
            kube.apply(obj)
        kube.apply(_claim_pod("two", "two-gpus"))
        kube.apply(_claim_pod("five", "five-gpus"))
        pod = wait_until("KAI binds the pod that claims 2 DRA GPUs",
                         lambda: (p := kube.get("v1", "Pod", "two", NS)) and p["spec"].get("nodeName") and p,
                         timeout=90)
        assert pod["spec"]["nodeName"] in ("dra-h100-0", "dra-l40s-0")
        (status,) = pod["status"]["resourceClaimStatuses"]
        claim = kube.get("resource.k8s.io/v1", "ResourceClaim", status["resourceClaimName"], NS)
        results = claim["status"]["allocation"]["devices"]["results"]
        assert len(results) == 2 and {r["driver"] for r in results} == {DRA_DRIVER}
        assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}  # devices of the node it runs on
        assert [r["name"] for r in claim["status"]["reservedFor"]] == ["two"]
        # KAI's queue status charges the claim's GPUs, keyed by the DeviceClass (as its own e2e asserts)
        allocated = wait_until("KAI's queue status to show the claimed GPUs",
                               lambda: ((kube.get("scheduling.run.ai/v2", "Queue", QUEUE) or {}).get("status") or {})
                               .get("allocated", {}).get(DRA_DRIVER), timeout=60)
        assert str(allocated) == "2", allocated
        # 5 GPUs on one node: no DRA node has them; the pod stays unscheduled with KAI's reason
        five = wait_until("KAI to mark the 5-GPU claim's pod unschedulable",
                          lambda: next((c for c in ((kube.get("v1", "Pod", "five", NS) or {}).get("status") or {})
                                        .get("conditions") or [] if c["type"] == "PodScheduled"
                                        and c["status"] == "False"), None), timeout=90)
        assert five["reason"] == "Unschedulable", five
        assert not kube.get("v1", "Pod", "five", NS)["spec"].get("nodeName")
    finally:  # the next test on this lab must find its fleet empty: pods gone, not just deleted
        kube.delete_pods(NS)
        kube.delete("v1", "Namespace", NS)
        wait_until("the test's pods to be gone", lambda: not kube.list("v1", "Pod", NS), timeout=60)
        for q in (QUEUE, f"{QUEUE}-root"):
            kube.delete("scheduling.run.ai/v2", "Queue", q)
        kube.close()


@pytest.mark.lab
@pytest.mark.kai
@pytest.mark.xdist_group("other_fleets")
def test_claims_are_in_the_evidence_and_the_report(kailab_labs, tmp_path):
    """Each snapshot of a run with claims lists them: pods, node, devices; the report shows them."""
    import yaml

    from kailab.exercise.runner import ExerciseRun
    from kailab.exercise.load import load_exercise
    from kailab.paths import exercises_dir
    from kailab.report import write_report

    path = exercises_dir() / "dra-claims.yaml"
    ex = load_exercise(path)
    outcome = ExerciseRun(ex, path, kailab_labs.get(ex.fleet), tmp_path).run()
    assert outcome.verdict == "passed", outcome.report()
    from pathlib import Path

    root = Path(outcome.evidence)
    step2 = sorted((root / "steps").iterdir())[1]
    claims = {c["pods"][0]: c for c in yaml.safe_load((step2 / "claims.yaml").read_text()) if c["pods"]}
    assert claims["l40s"]["node"] == "dra-l40s-0" and len(claims["l40s"]["devices"]) == 1
    assert claims["two"]["devices"] and all(d.startswith(f"gpu.nvidia.com/{claims['two']['node']}/")
                                            for d in claims["two"]["devices"])
    page = write_report([root]).read_text()
    assert "ResourceClaims (DRA) per step" in page and "gpu.nvidia.com/dra-l40s-0/" in page
