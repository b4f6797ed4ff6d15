"""A kind lab's metrics: the same Prometheus and kube-state-metrics a binary lab runs as processes,
here as Deployments in the cluster, so KAI's time-based fair share reads a real Prometheus and a
run's evidence gets KAI's own figures on kind too.

Where KAI looks for them decides the shape: kube-state-metrics sits in `monitoring` with the label
KAI's operator selects it by (pkg/operator/operands/common: KaiServicesForServiceMonitor), and the
scheduler reads usage from the URL the SchedulingShard's usageDBConfig names (IN_CLUSTER_URL).
Prometheus scrapes every KAI Service that has a metrics port — read from the cluster at `up`, not
kept here, so any KAI version's Services are found — with static targets (kailab's Prometheus is
built without service discovery), every SCRAPE_INTERVAL. The host reaches it on 127.0.0.1 through
kind's port mapping to a NodePort, so evidence collection is the binary lab's, unchanged.

`manifests` is pure; `install` applies them and waits for both Deployments.
"""

from __future__ import annotations

import yaml

from ... import versions
from ..metrics import KSM, PROMETHEUS, SCRAPE_INTERVAL
from ..clusterinfo import deployment_states
from ..waits import wait_until

NAMESPACE = "monitoring"
NODE_PORT = 30090  # the Service's NodePort, mapped by kind to a per-lab port on the host's 127.0.0.1
PROMETHEUS_PORT, KSM_PORT, KSM_TELEMETRY_PORT = 9090, 8080, 8081
IN_CLUSTER_URL = f"http://{PROMETHEUS}.{NAMESPACE}.svc:{PROMETHEUS_PORT}"
DEPLOYMENTS = [PROMETHEUS, KSM]
LABELS = {"app.kubernetes.io/managed-by": "kailab"}


def service_targets(services: list[dict]) -> dict[str, str]:
    """job name -> `service.namespace.svc:port` for every Service with a port named for metrics."""
    out = {}
    for svc in services:
        meta = svc["metadata"]
        for port in (svc.get("spec") or {}).get("ports") or []:
            if "metrics" in (port.get("name") or ""):
                out[meta["name"]] = f"{meta['name']}.{meta['namespace']}.svc:{port['port']}"
                break
    return dict(sorted(out.items()))


def scrape_config(targets: dict[str, str]) -> dict:
    jobs = [{"job_name": job, "static_configs": [{"targets": [target]}]} for job, target in targets.items()]
    jobs.append({"job_name": KSM, "static_configs": [{"targets": [f"{KSM}.{NAMESPACE}.svc:{KSM_PORT}"]}]})
    return {"global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL,
                       "scrape_timeout": SCRAPE_INTERVAL},
            "scrape_configs": jobs}


def _meta(name: str, namespaced: bool = True, labels: dict | None = None) -> dict:
    meta = {"name": name, "labels": {**LABELS, **(labels or {})}}
    if namespaced:
        meta["namespace"] = NAMESPACE
    return meta


def _deployment(name: str, image: str, args: list[str], port: int, selector: dict, *, sa: str | None = None,
                volumes: list[dict] | None = None, mounts: list[dict] | None = None, ready: str = "/") -> dict:
    labels = {"app.kubernetes.io/name": name}
    container = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "args": args,
                 "ports": [{"name": "http", "containerPort": port}],
                 "readinessProbe": {"httpGet": {"path": ready, "port": port}, "periodSeconds": 2}}
    if mounts:
        container["volumeMounts"] = mounts
    pod = {"nodeSelector": selector, "containers": [container]}
    if sa:
        pod["serviceAccountName"] = sa
    if volumes:
        pod["volumes"] = volumes
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, labels=labels),
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


def _service(name: str, port: int, node_port: int | None = None) -> dict:
    labels = {"app.kubernetes.io/name": name}
    spec: dict = {"selector": labels, "ports": [{"name": "http", "port": port, "targetPort": port}]}
    if node_port:
        spec["type"] = "NodePort"
        spec["ports"][0]["nodePort"] = node_port
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, labels=labels), "spec": spec}


def manifests(targets: dict[str, str], selector: dict[str, str]) -> list[dict]:
    """Everything `install` applies, in order: namespace, kube-state-metrics (with the read access
    it needs), Prometheus' configuration, Deployment and NodePort Service."""
    img = versions.metrics_images()
    ksm_rules = [{"apiGroups": [""], "resources": ["nodes", "pods", "namespaces"], "verbs": ["list", "watch"]}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(NAMESPACE, namespaced=False)},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(KSM)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": _meta(f"kailab-{KSM}", namespaced=False), "rules": ksm_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(f"kailab-{KSM}", namespaced=False),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"kailab-{KSM}"},
         "subjects": [{"kind": "ServiceAccount", "name": KSM, "namespace": NAMESPACE}]},
        # the binary lab's arguments: nodes' GPU capacity, pods' GPU requests
        _deployment(KSM, img[KSM], [f"--port={KSM_PORT}", f"--telemetry-port={KSM_TELEMETRY_PORT}",
                                    "--resources=nodes,pods,namespaces"], KSM_PORT, selector, sa=KSM,
                    ready="/healthz"),
        _service(KSM, KSM_PORT),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(PROMETHEUS),
         "data": {"prometheus.yaml": yaml.safe_dump(scrape_config(targets), sort_keys=False)}},
        _deployment(PROMETHEUS, img[PROMETHEUS],
                    ["--config.file=/etc/prometheus/prometheus.yaml", "--storage.tsdb.path=/prometheus",
                     f"--web.listen-address=:{PROMETHEUS_PORT}", "--storage.tsdb.retention.time=1d",
                     "--log.level=warn"], PROMETHEUS_PORT, selector,
                    volumes=[{"name": "config", "configMap": {"name": PROMETHEUS}},
                             {"name": "data", "emptyDir": {}}],
                    mounts=[{"name": "config", "mountPath": "/etc/prometheus", "readOnly": True},
                            {"name": "data", "mountPath": "/prometheus"}],
                    ready="/-/ready"),
        _service(PROMETHEUS, PROMETHEUS_PORT, NODE_PORT),
    ]


def install(kube, selector: dict[str, str], namespace: str | None, lab_dir) -> dict[str, str]:
    """Apply the manifests (the scheduler's metrics Services read from `namespace`; None: none) and wait
    for both Deployments; returns the scrape targets. The applied manifests go to the lab dir."""
    targets = service_targets(kube.list("v1", "Service", namespace)) if namespace else {}
    docs = manifests(targets, selector)
    (lab_dir / "metrics.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    for doc in docs:
        kube.apply(doc)

    def ready():
        states = deployment_states(kube, NAMESPACE, DEPLOYMENTS)
        return all(s["state"] == "running" for s in states.values())

    wait_until(f"the lab's {PROMETHEUS} and {KSM} to be ready", ready, timeout="metrics-healthy",
               hint=f"kubectl -n {NAMESPACE} get pods; kubectl -n {NAMESPACE} describe pods")
    return targets
