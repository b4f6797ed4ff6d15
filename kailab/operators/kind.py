"""A workload operator on a cluster kailab made (kind): one Deployment on the real node, from an image
built here from its cached binary, with its CRDs, its own RBAC and its webhooks as its release runs them.

- image: `kailab.local/<component>:<version>` (a name no registry serves: built here, never pulled),
  /manager and USER 65532 as the operators' Dockerfiles lay it out (`kailab tools images --operators`);
- CRDs: the module's, applied server-side (KubeRay's are 2 MB, over the client-side annotation limit);
- RBAC: the module's kubebuilder role.yaml, renamed per operator, bound to a ServiceAccount of its own;
  leader election off (one replica);
- webhooks: a Service, the module's registrations pointing at it, and the operator's OWN certificate
  management, as in-cluster users have it: the training-operator's cert-controller (Secret
  training-operator-webhook-cert, configuration validator.training-operator.kubeflow.org), JobSet's and
  LWS's internalCertManagement (their Configuration in a ConfigMap; the Service, Secret and webhook
  configuration names their pkg cert code expects). KubeRay serves none.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from .. import yamlfast
from ..runtimes.addon import InstallsFromCharts
from ..runtimes.waits import wait_until
from . import MANAGED

IMAGE_REPO = "kailab.local"
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
WEBHOOK_PORT, METRICS_PORT, PROBE_PORT = 9443, 8080, 8081
NONROOT = 65532

# per operator, what its certificate code expects (pkg/cert, pkg/util/cert at the pinned versions)
WEBHOOKS = {
    "kubeflow": {"service": "training-operator", "secret": "training-operator-webhook-cert",
                 "configurations": {"ValidatingWebhookConfiguration": "validator.training-operator.kubeflow.org"}},
    "jobset": {"service": "jobset-webhook-service", "secret": "jobset-webhook-server-cert",
               "configurations": {"ValidatingWebhookConfiguration": "jobset-validating-webhook-configuration",
                                  "MutatingWebhookConfiguration": "jobset-mutating-webhook-configuration"}},
    "lws": {"service": "lws-webhook-service", "secret": "lws-webhook-server-cert",
            "configurations": {"ValidatingWebhookConfiguration": "lws-validating-webhook-configuration",
                               "MutatingWebhookConfiguration": "lws-mutating-webhook-configuration"}},
}
CONFIG_GROUPS = {"jobset": "config.jobset.x-k8s.io", "lws": "config.lws.x-k8s.io"}


def image(op: "OnKind") -> str:
    return f"{IMAGE_REPO}/{op.pin.component}:{op.version}"


def deployment(op: "OnKind") -> str:
    return op.pin.process


def _labels(op: "OnKind") -> dict:
    return {"app.kubernetes.io/name": op.pin.process, **MANAGED}


def _meta(op: "OnKind", name: str, namespaced: bool = True) -> dict:
    meta = {"name": name, "labels": _labels(op)}
    if namespaced:
        meta["namespace"] = op.pin.namespace
    return meta


def rbac(op: "OnKind") -> list[dict]:
    """Its ServiceAccount and the module's role.yaml, each role renamed `kailab-<name>-<role>` and bound."""
    ns, sa = op.pin.namespace, op.pin.process
    out = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(op, sa)}]
    for doc in yamlfast.load_all((op.tree() / op.pin.role).read_text()):
        if not doc or doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        name = f"kailab-{op.name}-{doc['metadata']['name']}"
        cluster = doc["kind"] == "ClusterRole"
        out.append({**doc, "metadata": _meta(op, name, namespaced=not cluster)})
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{doc['kind']}Binding",
                    "metadata": _meta(op, name, namespaced=not cluster),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": doc["kind"], "name": name},
                    "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})
    return out


def webhook_configurations(op: "OnKind") -> list[dict]:
    """The module's registrations under the names its certificate code injects its CA into, pointing at
    its Service; its pod webhooks see only its own pods (its kustomize patch)."""
    if not op.pin.webhooks:
        return []
    names = WEBHOOKS[op.name]
    return op.registrations(lambda path: {"service": {"name": names["service"], "namespace": op.pin.namespace,
                                                      "path": path, "port": 443}},
                            lambda doc: names["configurations"][doc["kind"]])


def configuration(op: "OnKind") -> dict:
    """JobSet's and LWS's Configuration: listeners in the pod, leader election off, their own
    certificate management with the Service and Secret their cert code expects."""
    names = WEBHOOKS[op.name]
    return {"apiVersion": f"{CONFIG_GROUPS[op.name]}/v1alpha1", "kind": "Configuration",
            "health": {"healthProbeBindAddress": f":{PROBE_PORT}"},
            "metrics": {"bindAddress": f":{METRICS_PORT}"},
            "webhook": {"port": WEBHOOK_PORT, "certDir": CERT_DIR},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": True, "webhookServiceName": names["service"],
                                       "webhookSecretName": names["secret"]},
            "clientConnection": {"qps": 100, "burst": 200}}


def _args(op: "OnKind") -> list[str]:
    if op.name == "kubeflow":
        names = WEBHOOKS[op.name]
        return [f"--metrics-bind-address=:{METRICS_PORT}", f"--health-probe-bind-address=:{PROBE_PORT}",
                f"--webhook-server-port={WEBHOOK_PORT}", f"--webhook-service-name={names['service']}",
                f"--webhook-secret-name={names['secret']}", "--kube-api-qps=100", "--kube-api-burst=200",
                "--zap-log-level=info"]
    if op.name in CONFIG_GROUPS:
        extra = ["--leader-elect=false"] if op.name == "lws" else []  # its flag's default (true) wins over the file
        return ["--config=/etc/kailab/configuration.yaml", "--zap-log-level=info", *extra]
    return [f"--metrics-addr=:{METRICS_PORT}", f"--health-probe-bind-address=:{PROBE_PORT}",
            "--enable-leader-election=false", "--qps=100", "--burst=200", "--log-stdout-encoder=console"]


def workload(op: "OnKind", node_selector: dict) -> list[dict]:
    """Its Service, Secret and ConfigMap (as it needs them) and its Deployment on `node_selector`."""
    ns, name = op.pin.namespace, deployment(op)
    out: list[dict] = []
    volumes, mounts = [], []
    env = [{"name": "MY_POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
           {"name": "MY_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    ports = [{"name": "metrics", "containerPort": METRICS_PORT}, {"name": "probe", "containerPort": PROBE_PORT}]
    if op.pin.webhooks:
        names = WEBHOOKS[op.name]
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": _meta(op, names["service"]),
                    "spec": {"selector": {"app.kubernetes.io/name": name},
                             "ports": [{"port": 443, "targetPort": WEBHOOK_PORT, "protocol": "TCP"}]}})
        # empty: its certificate code fills it (and keeps what it finds there)
        out.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": _meta(op, names["secret"])})
        volumes.append({"name": "cert", "secret": {"secretName": names["secret"], "defaultMode": 420}})
        mounts.append({"name": "cert", "mountPath": CERT_DIR, "readOnly": True})
        ports.append({"name": "webhook-server", "containerPort": WEBHOOK_PORT})
    if op.name in CONFIG_GROUPS:
        cm = f"{name}-config"
        out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(op, cm),
                    "data": {"configuration.yaml": yaml.safe_dump(configuration(op), sort_keys=False)}})
        volumes.append({"name": "config", "configMap": {"name": cm}})
        mounts.append({"name": "config", "mountPath": "/etc/kailab"})
    container = {"name": "manager", "image": image(op), "imagePullPolicy": "IfNotPresent",
                 "command": ["/manager"], "args": _args(op), "env": env, "ports": ports,
                 "volumeMounts": mounts,
                 "readinessProbe": {"httpGet": {"path": "/readyz", "port": PROBE_PORT}, "periodSeconds": 2},
                 "livenessProbe": {"httpGet": {"path": "/healthz", "port": PROBE_PORT},
                                   "initialDelaySeconds": 15, "periodSeconds": 20},
                 "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
                 "securityContext": {"allowPrivilegeEscalation": False}}
    out.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(op, name),
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                         "template": {"metadata": {"labels": _labels(op)},
                                      "spec": {"serviceAccountName": name, "nodeSelector": dict(node_selector),
                                               "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                                                                "operator": "Exists", "effect": "NoSchedule"}],
                                               "terminationGracePeriodSeconds": 10,
                                               "containers": [container], "volumes": volumes}}}})
    return out


def manifests(op: "OnKind", node_selector: dict) -> list[dict]:
    """Everything but its CRDs, in the order they apply: namespace, RBAC, webhooks' registrations, workload."""
    return ([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": op.pin.namespace, "labels": dict(MANAGED)}}]
            + rbac(op) + workload(op, node_selector) + webhook_configurations(op))


def files_and_steps(op: "OnKind", kubeconfig: str, path, node_selector: dict, rollout: str = "180s"
                    ) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    kubectl = ["kubectl", "--kubeconfig", kubeconfig]
    crds, rest = f"operator-{op.name}-crds.yaml", f"operator-{op.name}.yaml"
    # libyaml: the pure-Python dumper took ~5 s of CPU on KubeRay's 2 MB of CRDs
    files = {crds: yamlfast.dump_all(op.crd_documents(), sort_keys=False),
             rest: yamlfast.dump_all(manifests(op, node_selector), sort_keys=False)}
    steps = [(f"{op.pin.title} {op.version}'s CRDs (server-side: over the client-side annotation's limit, KubeRay's)",
              [*kubectl, "apply", "--server-side", "--force-conflicts", "-f", path(crds)]),
             (f"{op.pin.title}: its RBAC, " + ("Service, webhook registrations and " if op.pin.webhooks else "")
              + "Deployment on the real node",
              [*kubectl, "apply", "--server-side", "--force-conflicts", "-f", path(rest)]),
             (f"Wait for {op.pin.title}'s {deployment(op)} to roll out"
              + (" (ready once its own certificates are in place)" if op.pin.webhooks else ""),
              [*kubectl, "-n", op.pin.namespace, "rollout", "status", f"deployment/{deployment(op)}",
               f"--timeout={rollout}"])]
    return files, steps


def image_specs(op: "OnKind") -> list:
    from ..images.assemble import ImageSpec
    from ..images.extra import binary

    return [ImageSpec(image(op), (("/manager", binary(op.recipe(), op.pin.process), 0o755),),
                      entrypoint=("/manager",), user=f"{NONROOT}:{NONROOT}", workdir="/")]


def build_local(op: "OnKind", console=None, phase=print) -> list[str]:
    from ..images import extra

    extra.build_binaries([op.recipe()], console)
    return extra.make(image_specs(op), [], phase)


def local_files(op: "OnKind") -> list[Path]:
    return []


class OnKind(InstallsFromCharts):
    """An operator's capability on kind: a Deployment on the real node, its manifests made here (below)."""

    pin: object
    version: str

    image_stack = None  # built by `kailab tools images --operators`

    def kind_files_and_steps(self, kubeconfig: str, path, local, node_selector: dict | None = None):
        return files_and_steps(self, kubeconfig, path, node_selector or {"node-role.kubernetes.io/control-plane": ""})

    def images(self, local) -> list[str]:
        return [image(self)]  # built here under a local name whichever images the lab uses: none is published

    def local_images(self, local) -> list[str]:
        return [image(self)]

    def local_files(self, local) -> list[Path]:
        return []

    def build_local(self, local, console=None, phase=print) -> list[str]:
        return build_local(self, console, phase)

    def plan_lines(self) -> list[str]:
        return [f"{self.pin.title} {self.version} (image {image(self)}, built here), its CRDs, RBAC and "
                + ("webhooks with its own certificate management" if self.pin.webhooks else "no webhooks")]

    def probe_text(self) -> str:
        return ""

    def await_ready(self, kube) -> None:
        """Its rollout (a step) proved its pod ready once its certificates are in place; the API server reaches
        its webhooks through its Service once kube-proxy has that pod among the Service's endpoints. A test
        creating an LWS just after `up`, on a loaded machine, was refused so ("failed calling webhook ...
        connection refused"): `up` waits until a dry run of its first kind is answered by its webhooks."""
        if not self.pin.webhooks:
            return
        ns = self.pin.namespace
        wait_until(f"{self.pin.title}'s webhooks to answer through their Service", lambda: webhooks_answer(self.pin, kube),
                   timeout="operator-ready",
                   hint=f"kubectl -n {ns} get endpointslices; kubectl -n {ns} logs deployment/{deployment(self)}")


def webhooks_answer(pin, kube) -> bool:
    """A dry-run object of its first kind came back without failing to call a webhook: created, denied by its
    webhook or refused by the schema after its mutating webhook ran (each pin's `webhook_probe` passes the
    schema, so its validating webhooks are called too)."""
    from kubernetes.client.exceptions import ApiException

    kind, api = next(iter(pin.kinds.items()))
    body = {"apiVersion": api, "kind": kind, "metadata": {"name": "kailab-webhook-probe", "namespace": "default"},
            "spec": dict(pin.webhook_probe or {})}
    try:
        kube.resource(api, kind).create(body=body, namespace="default", dry_run="All")
    except ApiException as err:
        return "failed calling webhook" not in str(err.body)
    except Exception:  # noqa: BLE001 - the kind not served yet, the API server not answering: not yet
        return False
    return True
