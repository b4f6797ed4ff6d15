"""Installing KAI into a lab: CRDs, priority classes, namespaces, and its processes' arguments.

The CRDs come from the same KAI module the binaries are built from (deployments/kai-scheduler/crds),
so a lab never mixes one version's binaries with another's CRDs.
"""

from __future__ import annotations

from dataclasses import dataclass

import re
import sys
from pathlib import Path

import yaml

from ... import toolchain, yamlfast
from ...errors import BuildError
from ...workloads import SCHEDULER_NAME  # one name for workloads and KAI's flags
from . import render as kai_render

KAI_NAMESPACE = "kai-scheduler"
RESERVATION_NAMESPACE = "kai-resource-reservation"
# where KAI's podgroupcontroller really listens for metrics, whatever its flag says
PODGROUPCONTROLLER_METRICS_PORT = 8080
# ... and where it serves KAI's PodGroup validation webhook (controller-runtime's default port)
PODGROUPCONTROLLER_WEBHOOK_PORT = 9443
# how often the scheduler runs a cycle: KAI's default, as a kind lab runs it. It was 500ms, for
# decisions sooner; but each cycle writes the status and events of every pending pod, and at 500ms
# quota, starvation and gang cost the machine 111 CPU-s against 94 at 1s, in about the same wall
# time (2026-11-27): labs side by side are bound by CPU
SCHEDULE_PERIOD = "1s"



# The operator's own kinds: only the operator reads them (it is not run; its five components are),
# and the Config CRD alone is 430 kB of schema the API server would build OpenAPI for at every `up`.
OPERATOR_ONLY_CRDS = {"configs.kai.scheduler", "schedulingshards.kai.scheduler"}


def crd_documents(tree: Path) -> list[dict]:
    """KAI's CRDs from a source tree that the five components use, patched for a lab without
    webhooks."""
    folder = tree / "deployments" / "kai-scheduler" / "crds"
    docs = []
    for f in sorted(folder.glob("*.yaml")):
        # libyaml: the pure-Python loader takes over a second on KAI's 430 kB Config CRD
        docs.extend(d for d in yamlfast.load_all(f.read_text())
                    if d and d["metadata"]["name"] not in OPERATOR_ONLY_CRDS)
    if not docs:
        raise BuildError(f"no CRDs found in {folder}: is this a KAI source tree?")
    for doc in docs:
        # a binary lab runs no webhooks: no conversion webhook either (clients use one version)
        doc["spec"]["conversion"] = {"strategy": "None"}
        if doc["metadata"]["name"] == "queues.scheduling.run.ai":
            # ... so store v2, the version everything uses (as KAI's own env-tests do)
            for v in doc["spec"]["versions"]:
                v["storage"] = v["name"] == "v2"
    return docs


def base_objects() -> list[dict]:
    """The namespaces KAI's processes use, and the service account the binder's GPU reservation
    pods run as (fractional GPUs): its chart makes both."""
    return [*({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
              for ns in (KAI_NAMESPACE, RESERVATION_NAMESPACE)),
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": RESERVATION_NAMESPACE, "namespace": RESERVATION_NAMESPACE}}]


def chart_objects(tree: Path) -> list[dict]:
    """What KAI's helm chart creates by default, read from the chart in the source tree (so it
    follows the version): its priority classes and its default queue pair, as its values say."""
    chart = tree / "deployments" / "kai-scheduler"
    values = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    objs: list[dict] = []
    if (values.get("defaultPriorityClasses") or {"enabled": True}).get("enabled", True):
        for f in sorted((chart / "templates" / "priorityclasses").glob("*.yaml")):
            # the templates are plain manifests inside one {{- if }} … {{- end }}
            text = "\n".join(line for line in f.read_text().splitlines() if not line.lstrip().startswith("{{"))
            for doc in yaml.safe_load_all(text):
                if doc:
                    doc["metadata"].setdefault("labels", {})["app.kubernetes.io/managed-by"] = "kailab"
                    objs.append(doc)
    queues = values.get("defaultQueue") or {}
    if queues.get("createDefaultQueue"):
        parent, child = queues["parentName"], queues["childName"]
        objs.append({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": parent},
                     "spec": {"resources": queues["parentResources"]}})
        objs.append({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": child},
                     "spec": {"parentQueue": parent, "resources": queues["childResources"]}})
    return objs


def component_ports() -> dict[str, list[str]]:
    """Which loopback ports each KAI process needs (all distinct: defaults collide on 8080/8081)."""
    return {
        "scheduler": ["metrics", "plugins"],
        "binder": ["metrics", "probe"],
        "podgrouper": ["metrics", "probe"],
        "queuecontroller": ["metrics"],
        "podgroupcontroller": ["metrics", "probe", "webhook"],
        "admission": ["webhook", "metrics", "probe"],
    }


def component_argv(name: str, binary: Path, ports: dict[str, int], scheduler_conf: Path | None = None) -> list[str]:
    """Flags per KAI process. The kubeconfig comes from KUBECONFIG in the environment, which all
    of them read (a --kubeconfig flag is not defined by every one of them). The scheduler reads
    `scheduler_conf` (the operator's rendering) as an installed scheduler reads its ConfigMap."""
    addr = lambda key: f"127.0.0.1:{ports[key]}"  # noqa: E731
    common = [str(binary)]
    if name == "scheduler":
        return common + [f"--scheduler-name={SCHEDULER_NAME}", f"--namespace={KAI_NAMESPACE}",
                         f"--schedule-period={SCHEDULE_PERIOD}", f"--listen-address={addr('scheduler.metrics')}",
                         f"--plugin-server-port={ports['scheduler.plugins']}"] + \
            ([f"--scheduler-conf={scheduler_conf}"] if scheduler_conf else [])
    if name == "binder":
        return common + [f"--metrics-bind-address={addr('binder.metrics')}",
                         f"--health-probe-bind-address={addr('binder.probe')}",
                         f"--scheduler-name={SCHEDULER_NAME}",
                         f"--resource-reservation-namespace={RESERVATION_NAMESPACE}"]
    if name == "podgrouper":
        return common + [f"--metrics-bind-address={addr('podgrouper.metrics')}",
                         f"--health-probe-bind-address={addr('podgrouper.probe')}",
                         f"--scheduler-name={SCHEDULER_NAME}"]
    if name == "queuecontroller":
        return common + [f"--metrics-listen-address={addr('queuecontroller.metrics')}",
                         "--enable-webhook=false"]
    if name == "podgroupcontroller":
        # it ignores --metrics-bind-address and listens on :8080, and serves KAI's PodGroup validation
        # on :9443, all interfaces: run it in a network namespace of its own, bridged to the API
        # server, its probe, its metrics and its webhook
        probe, metrics = ports["podgroupcontroller.probe"], ports["podgroupcontroller.metrics"]
        shim = [sys.executable, "-m", "kailab.runtimes.netns", f"--connect={ports['kube-apiserver']}",
                f"--expose={probe}={probe}", f"--expose={metrics}={PODGROUPCONTROLLER_METRICS_PORT}",
                f"--expose={ports['podgroupcontroller.webhook']}={PODGROUPCONTROLLER_WEBHOOK_PORT}", "--"]
        return shim + common + [f"--metrics-bind-address={addr('podgroupcontroller.metrics')}",
                                f"--health-probe-bind-address={addr('podgroupcontroller.probe')}",
                                "--enable-podgroup-webhook=true", f"--scheduler-name={SCHEDULER_NAME}"]
    if name == "admission":
        # its webhook server listens on every interface (--webhook-addr is a port): its own
        # network namespace too. Flags as KAI's operator passes them, GPU sharing on as the lab's
        # kind install sets it (global.gpuSharing); leader election off (one replica)
        hook, metrics, probe = (ports[f"admission.{k}"] for k in ("webhook", "metrics", "probe"))
        shim = [sys.executable, "-m", "kailab.runtimes.netns", f"--connect={ports['kube-apiserver']}",
                f"--expose={hook}={hook}", f"--expose={metrics}={metrics}", f"--expose={probe}={probe}", "--"]
        return shim + common + [f"--scheduler-name={SCHEDULER_NAME}", f"--webhook-addr={hook}",
                                f"--metrics-bind-address={addr('admission.metrics')}",
                                f"--health-probe-bind-address={addr('admission.probe')}",
                                "--gpu-sharing-enabled=true", "--leader-elect=false"]
    raise ValueError(name)


# the processes that serve webhooks: controller-runtime reads their serving certificate from
# $TMPDIR/k8s-webhook-server/serving-certs/tls.{crt,key} (no flag names it)
WEBHOOK_SERVERS = ("admission", "podgroupcontroller")


def webhook_cert_dir(tmpdir: Path) -> Path:
    return tmpdir / "k8s-webhook-server" / "serving-certs"


TOPOLOGY_WEBHOOK_PATH = "/validate-kai-scheduler-v1alpha1-topology"


def admission_validates_topologies(tree: Path) -> bool:
    """Whether this KAI version's admission serves Topology validation (v0.17 on): its operator
    registers that webhook only then, and a registration nothing serves would refuse every Topology."""
    app = tree / "cmd" / "admission" / "app" / "app.go"
    return app.is_file() and TOPOLOGY_WEBHOOK_PATH.lstrip("/") in app.read_text()


def webhook_configurations(ports: dict[str, int], ca_bundle_b64: str, topologies: bool = True) -> list[dict]:
    """KAI's webhook registrations as its operator makes them (pkg/operator/operands/admission and
    pod_group_controller: names, rules, failure policy, selectors, match conditions), reaching the
    lab's processes by `url` on loopback instead of a Service, with the lab's CA as caBundle.
    `topologies`: whether the version's admission validates Topologies (admission_validates_topologies)."""
    hook = lambda port, path: {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle_b64}  # noqa: E731
    pods = lambda ops: [{"operations": ops, "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],  # noqa: E731
                         "scope": "Namespaced"}]
    common = {"failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    pod_scope = {"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                              "values": ["kube-system", KAI_NAMESPACE]}]},
                 "matchConditions": [{"name": "scheduler-name-match",
                                      "expression": f"object.spec.schedulerName == '{SCHEDULER_NAME}'"}]}
    adm, pg = ports["admission.webhook"], ports["podgroupcontroller.webhook"]
    name = f"admission.{KAI_NAMESPACE}.svc"
    labels = {"app.kubernetes.io/managed-by": "kailab"}
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "mutating-kai-admission", "labels": {"app": "admission", **labels}},
         "webhooks": [{"name": name, "clientConfig": hook(adm, "/mutate--v1-pod"), "rules": pods(["CREATE"]),
                       "reinvocationPolicy": "IfNeeded", **common, **pod_scope}]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "validating-kai-admission", "labels": {"app": "admission", **labels}},
         "webhooks": [{"name": name, "clientConfig": hook(adm, "/validate--v1-pod"),
                       "rules": pods(["CREATE", "UPDATE"]), **common, **pod_scope},
                      *([{"name": f"topology.{name}", "clientConfig": hook(adm, TOPOLOGY_WEBHOOK_PATH),
                          "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["kai.scheduler"],
                                     "apiVersions": ["v1alpha1"], "resources": ["topologies"], "scope": "Cluster"}],
                          **common}] if topologies else [])]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "kai-podgroup-validation-v2alpha2", "labels": {"app": "podgroup-controller", **labels}},
         "webhooks": [{"name": "podgroup-validation.kai.scheduler",
                       "clientConfig": hook(pg, "/validate-scheduling-run-ai-v2alpha2-podgroup"),
                       "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["scheduling.run.ai"],
                                  "apiVersions": ["v2alpha2"], "resources": ["podgroups"], "scope": "Namespaced"}],
                       **common}]},
    ]


def fake_node_objects() -> list[dict]:
    """What KAI's admission expects of GPU nodes that only a node provides: the `nvidia`
    RuntimeClass its mutator puts on fractional pods (on a real fleet NVIDIA's operator makes it;
    in KAI's own kind setup fake-gpu-operator does, with handler runc — KWOK runs nothing)."""
    return [{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
             "metadata": {"name": "nvidia", "labels": {"app.kubernetes.io/managed-by": "kailab-fake-nodes"}},
             "handler": "runc"}]


def health_url(name: str, ports: dict[str, int]) -> str:
    """A URL that answers once the component is serving (any HTTP status counts: a health
    endpoint with no checks registered may 404, but the server is up)."""
    if name == "scheduler":
        return f"http://127.0.0.1:{ports['scheduler.metrics']}/metrics"
    if name == "queuecontroller":
        return f"http://127.0.0.1:{ports['queuecontroller.metrics']}/metrics"
    return f"http://127.0.0.1:{ports[name + '.probe']}/healthz"


def snapshot_url(ports: dict[str, int]) -> str:
    return f"http://127.0.0.1:{ports['scheduler.plugins']}/get-snapshot"


_DEFAULT_CONF = re.compile(r"const defaultSchedulerConf = `(.*?)`", re.S)


def default_scheduler_conf(tree: Path) -> dict:
    """KAI's built-in scheduler configuration (actions and plugin tiers), read from its source."""
    src = tree / "pkg" / "scheduler" / "conf_util" / "scheduler_conf_util.go"
    m = _DEFAULT_CONF.search(src.read_text()) if src.is_file() else None
    if not m:
        raise BuildError(f"no defaultSchedulerConf in {src}: this KAI source cannot be reconfigured by kailab")
    return yaml.safe_load(m.group(1))


@dataclass(frozen=True)
class SchedulerChange:
    """A change to KAI's scheduler configuration, said two ways: `conf`, the scheduler's whole
    configuration (a runtime that runs the scheduler itself passes it as --scheduler-conf), and
    `shard`, the same change as a SchedulingShard `spec` fragment (a runtime where KAI's operator
    renders the configuration patches its SchedulingShard), or None when no SchedulingShard field
    says it."""

    conf: dict
    shard: dict | None
    # scheduler flags from the shard's `args` (`--qps=300`), as KAI's operator passes them
    args: tuple[str, ...] = ()


def chart_shard_spec(tree: Path) -> dict:
    """The spec fields of the SchedulingShard `default` KAI's chart creates that shape the scheduler's
    configuration (its templates/default-shard.yaml from values.yaml: placement, plugins, actions)."""
    values = yaml.safe_load((tree / "deployments" / "kai-scheduler" / "values.yaml").read_text()) or {}
    sched = values.get("scheduler") or {}
    spec: dict = {}
    if sched.get("placementStrategy"):
        spec["placementStrategy"] = {"gpu": sched["placementStrategy"], "cpu": sched["placementStrategy"]}
    for key in ("plugins", "actions"):
        if sched.get(key):
            spec[key] = sched[key]
    return spec


def merged(base: dict, fragment: dict) -> dict:
    """`fragment` over `base`, maps merged key by key (a JSON merge patch without deletions)."""
    out = dict(base)
    for key, value in fragment.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def scheduler_change(recipe: toolchain.Recipe, tree: Path, fragment: dict) -> SchedulerChange:
    """A SchedulingShard change, and the configuration KAI's operator renders from the chart's shard
    with that change over it (kai_render: KAI's own operator code, for the lab's KAI version)."""
    conf, args = kai_render.render(recipe, tree, merged(chart_shard_spec(tree), fragment))
    return SchedulerChange(conf, fragment, tuple(args))


def installed_default(recipe: toolchain.Recipe, tree: Path) -> dict:
    """The scheduler configuration of a chart install with no change: what a lab's scheduler runs."""
    return scheduler_change(recipe, tree, {}).conf


def usage_db_config(prometheus: str, usage: dict) -> tuple[dict, float]:
    """KAI's `usageDBConfig` reading `prometheus` over a sliding window, and the kValue, from an
    exercise's usage setting. (`extraParams` sits under `usageParams` in KAI's code, not beside it
    as its docs show.)"""
    usage = dict(usage)
    k_value = usage.pop("kValue")
    params = {"windowType": "sliding", "extraParams": {"queryResolution": usage.pop("queryResolution")}, **usage}
    return {"clientType": "prometheus", "connectionString": prometheus, "usageParams": params}, k_value
