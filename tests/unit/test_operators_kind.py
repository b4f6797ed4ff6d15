"""Workload operators on kind: the manifests kailab generates from each module's own tree (needs the
pinned modules in Go's module cache, as the binary runtime's operator tests do)."""

from __future__ import annotations

import pytest

from kailab import operators
from kailab.labs import WithOperatorsOnKind, _with_operators
from kailab.operators import kind
from kailab.runtimes.addon import InstallsFromCharts, RunsAsProcesses
from kailab.stacks import get_stack
from kailab.runtimes import LabSpec

NODE = {"node-role.kubernetes.io/control-plane": ""}


def _tree_or_skip(op):
    try:
        return op.tree()
    except Exception as e:  # noqa: BLE001 - no module cache and no proxy: nothing to read
        pytest.skip(f"{op.name}'s module is not here: {e}")


def _by_kind(docs, k):
    return [d for d in docs if d["kind"] == k]


@pytest.mark.parametrize("name", list(operators.OPERATORS))
def test_each_operator_is_a_deployment_on_the_node_given_from_a_local_image_with_its_rbac(name):
    op = operators.get(name)
    _tree_or_skip(op)
    assert isinstance(op, InstallsFromCharts) and isinstance(op, RunsAsProcesses)
    docs = kind.manifests(op, NODE)
    (dep,) = _by_kind(docs, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    assert dep["metadata"]["namespace"] == op.pin.namespace and spec["nodeSelector"] == NODE
    (c,) = spec["containers"]
    assert c["image"] == f"kailab.local/{op.pin.component}:{op.version}" == op.local_images(None)[0]
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert op.deployments() == {op.pin.namespace: [dep["metadata"]["name"]]}
    roles = _by_kind(docs, "ClusterRole")
    assert roles and all(r["metadata"]["name"].startswith(f"kailab-{name}-") for r in roles)
    bound = {b["roleRef"]["name"] for b in _by_kind(docs, "ClusterRoleBinding")}
    assert bound == {r["metadata"]["name"] for r in roles}
    assert all(b["subjects"][0]["name"] == spec["serviceAccountName"] for b in _by_kind(docs, "ClusterRoleBinding"))
    assert not any("leader-elect=true" in a for a in c["args"])


def test_training_operator_runs_its_cert_controller_as_its_release_does():
    op = operators.get("kubeflow")
    _tree_or_skip(op)
    docs = kind.manifests(op, NODE)
    (dep,) = _by_kind(docs, "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert "--webhook-secret-name=training-operator-webhook-cert" in c["args"]
    assert "--webhook-service-name=training-operator" in c["args"]
    assert any(e["name"] == "MY_POD_NAMESPACE" for e in c["env"])
    assert {"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs", "readOnly": True} in c["volumeMounts"]
    (vwc,) = _by_kind(docs, "ValidatingWebhookConfiguration")
    assert vwc["metadata"]["name"] == "validator.training-operator.kubeflow.org"
    assert all(h["clientConfig"]["service"]["name"] == "training-operator"
               and h["clientConfig"]["service"]["namespace"] == "kubeflow" for h in vwc["webhooks"])
    assert _by_kind(docs, "Secret")[0]["metadata"]["name"] == "training-operator-webhook-cert"
    assert _by_kind(docs, "Service")[0]["metadata"]["name"] == "training-operator"


@pytest.mark.parametrize("name,prefix", [("jobset", "jobset"), ("lws", "lws")])
def test_jobset_and_lws_manage_their_own_certificates_from_their_configuration(name, prefix):
    op = operators.get(name)
    _tree_or_skip(op)
    docs = kind.manifests(op, NODE)
    cfg = kind.configuration(op)
    assert cfg["internalCertManagement"] == {"enable": True, "webhookServiceName": f"{prefix}-webhook-service",
                                             "webhookSecretName": f"{prefix}-webhook-server-cert"}
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert _by_kind(docs, "ConfigMap")
    assert {d["metadata"]["name"] for d in docs if d["kind"].endswith("WebhookConfiguration")} == \
        {f"{prefix}-validating-webhook-configuration", f"{prefix}-mutating-webhook-configuration"}
    pod_hooks = [h for d in docs if d["kind"].endswith("WebhookConfiguration") for h in d["webhooks"]
                 if h["clientConfig"]["service"]["path"].endswith("--v1-pod")]
    assert pod_hooks and all(h["objectSelector"]["matchExpressions"][0]["key"] == op.pin.pod_label for h in pod_hooks)
    assert _by_kind(docs, "Service")[0]["metadata"]["name"] == f"{prefix}-webhook-service"


def test_kuberay_has_no_webhooks_and_its_crds_apply_server_side(tmp_path):
    op = operators.get("ray")
    _tree_or_skip(op)
    files, steps = op.kind_files_and_steps("/kc", lambda n: str(tmp_path / n), None, NODE)
    assert not [d for d in kind.manifests(op, NODE) if d["kind"].endswith("WebhookConfiguration") or d["kind"] == "Service"]
    assert set(files) == {"operator-ray-crds.yaml", "operator-ray.yaml"}
    assert all("--server-side" in argv for _, argv in steps if "apply" in argv)
    assert "rollout" in steps[-1][1]


def test_a_stack_with_operators_installs_on_kind_as_well_and_names_the_operators_images_build():
    spec = LabSpec(name="x", fleet="tiny")
    stack = get_stack("kai").addon(spec) if hasattr(get_stack("kai"), "addon") else None
    if not isinstance(stack, InstallsFromCharts):
        pytest.skip("kai's addon does not install on kind here")
    addon = _with_operators(stack, [operators.get("ray"), operators.get("lws")])
    assert isinstance(addon, WithOperatorsOnKind) and isinstance(addon, RunsAsProcesses)
    assert addon.image_operators == "ray,lws"
    rec = addon.record()
    assert rec["deployments"]["ray-system"] == ["ray-operator"] and rec["operators"] == {"ray": "v1.5.1", "lws": "v0.7.0"}
