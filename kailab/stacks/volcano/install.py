"""Volcano's pieces for a lab, read from its own source tree at the pinned release: the recipe of
its three binaries, its CRDs, its webhook registrations (as its chart renders them, reaching the
lab's process on loopback), the scheduler's configuration and the processes' flags.

Every listener is pinned to 127.0.0.1 on the lab's ports: each binary's defaults listen on every
interface (scheduler metrics :8080, controller metrics :8081, every healthz :11251, the webhook
server on all addresses), checked in cmd/*/app/options at v1.15.1.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from ... import toolchain, yamlfast
from ...errors import BuildError

MODULE = "volcano.sh/volcano"
API = "scheduling.volcano.sh/v1beta1"
SCHEDULER, CONTROLLERS, WEBHOOKS = "vc-scheduler", "vc-controller-manager", "vc-webhook-manager"
BINARIES = {SCHEDULER: f"{MODULE}/cmd/scheduler", CONTROLLERS: f"{MODULE}/cmd/controller-manager",
            WEBHOOKS: f"{MODULE}/cmd/webhook-manager"}
PORTS = {SCHEDULER: ["metrics", "healthz"], CONTROLLERS: ["metrics", "healthz"], WEBHOOKS: ["webhook", "healthz"]}
CONF = "volcano-scheduler.conf"  # the scheduler's configuration in the lab dir (it re-reads it on change)
ADMISSION_CONF = "volcano-admission.conf"
# the chart's rendering of its manifests, shipped in the tree at each release
DEVELOPMENT = "installer/volcano-development.yaml"


@lru_cache(maxsize=1)
def pins() -> dict:
    return yaml.safe_load(resources.files("kailab").joinpath("data/volcano.yaml").read_text())


def recipe(version: str | None = None) -> toolchain.Recipe:
    """Built in the registered repository's tree, inside Volcano's own module (its go.sum; its
    volcano.sh/apis from staging/), with the version its Makefile stamps."""
    v = version or pins()["version"]
    return toolchain.Recipe("volcano", v, MODULE, dict(BINARIES), repository="volcano",
                            stamp=((f"{MODULE}/pkg/version.Version", v),))


def tree(r: toolchain.Recipe) -> Path:
    """The source tree the cached binaries were built in (their manifest says)."""
    return toolchain.repository_tree(r)


def crd_documents(src: Path) -> list[dict]:
    """Every kind the chart installs (config/crd/{volcano,jobflow}/bases): the scheduler and the
    controllers watch HyperNodes, NodeShards and the rest, and wait for their informers."""
    files = sorted((src / "config" / "crd" / "volcano" / "bases").glob("*.yaml")) + sorted(
        (src / "config" / "crd" / "jobflow" / "bases").glob("*.yaml"))
    docs = [d for f in files for d in yamlfast.load_all(f.read_text()) if d]
    if not docs:
        raise BuildError(f"no CRDs under {src / 'config' / 'crd'}: is this a Volcano source tree?")
    return docs


def _development(src: Path) -> list[dict]:
    return [d for d in yamlfast.load_all((src / DEVELOPMENT).read_text()) if d]


def webhook_configurations(src: Path, port: int, ca_bundle_b64: str) -> list[dict]:
    """The chart's webhook registrations (names kept: the webhook manager looks them up by name to
    set their CA), each reaching the lab's process by `url` on loopback instead of its Service."""
    out = []
    for doc in _development(src):
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        doc = copy.deepcopy(doc)
        for hook in doc.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle_b64}
        doc["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "kailab"}
        out.append(doc)
    if not out:
        raise BuildError(f"no webhook configurations in {src / DEVELOPMENT}: is this a Volcano source tree?")
    return out


def admissions(src: Path) -> list[str]:
    """The admission paths the chart's registrations name: what the webhook manager serves."""
    return [h["clientConfig"]["service"]["path"] for d in _development(src)
            if d.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
            for h in d.get("webhooks") or []]


def chart_config_maps(src: Path) -> list[dict]:
    """The chart's ConfigMaps the controller manager reads from the API (its HyperNode discovery
    looks for volcano-controller-configmap); the scheduler's and the admission's become files in
    the lab dir instead (scheduler_conf, admission_conf)."""
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": d["metadata"]["name"],
             "namespace": d["metadata"]["namespace"], "labels": {"app.kubernetes.io/managed-by": "kailab"}},
             "data": d.get("data") or {}}
            for d in _development(src) if d.get("kind") == "ConfigMap" and d["metadata"]["name"] not in (
                "volcano-scheduler-configmap", "volcano-admission-configmap")]


def admission_conf(src: Path) -> str:
    """The chart's admission configuration (its resource groups, all commented out at v1.15.1)."""
    for d in _development(src):
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "volcano-admission-configmap":
            return (d.get("data") or {}).get("volcano-admission.conf", "")
    return ""


def priority_classes() -> list[dict]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "kailab"}},
             "value": value, "preemptionPolicy": "PreemptLowerPriority", "globalDefault": False}
            for name, value in pins()["priority_classes"].items()]


def argv(name: str, binary: Path, ports: dict[str, int], lab: Path, src: Path) -> list[str]:
    """Each process's flags: the chart's (its Deployments' args), with every listener on loopback,
    no leader election, and the lab's files instead of mounted config maps and secrets."""
    kubeconfig = lab / "kubeconfig"
    common = [str(binary), f"--kubeconfig={kubeconfig}", "--logtostderr", "--enable-healthz=true",
              f"--healthz-address=127.0.0.1:{ports[name + '.healthz']}"]
    if name == SCHEDULER:
        return common + [
            f"--scheduler-conf={lab / CONF}", f"--scheduler-name={pins()['scheduler_name']}",
            "--enable-metrics=true", f"--listen-address=127.0.0.1:{ports[name + '.metrics']}",
            "--leader-elect=false", "--kube-api-qps=2000", "--kube-api-burst=2000", "--schedule-period=1s",
            "--node-worker-threads=20",
            # its cache dumper writes to /tmp on a signal: into the lab instead
            f"--cache-dump-dir={lab / 'volcano-cache-dump'}", "-v=3"]
    if name == CONTROLLERS:
        return common + [
            "--enable-metrics=true", f"--listen-address=127.0.0.1:{ports[name + '.metrics']}",
            "--leader-elect=false", "--kube-api-qps=50", "--kube-api-burst=100", "--worker-threads=3",
            "--worker-threads-for-gc=5", "--worker-threads-for-podgroup=5", "-v=3"]
    if name == WEBHOOKS:
        certs = lab / "webhooks" / "volcano"
        return common + [
            f"--enabled-admission={','.join(admissions(src))}",
            f"--tls-cert-file={certs / 'tls.crt'}", f"--tls-private-key-file={certs / 'tls.key'}",
            f"--ca-cert-file={certs / 'ca.crt'}", f"--admission-conf={lab / ADMISSION_CONF}",
            "--listen-address=127.0.0.1",
            f"--port={ports[name + '.webhook']}",
            # its registrations are found by name; the url only answers its check that one is given
            f"--webhook-url=https://127.0.0.1:{ports[name + '.webhook']}", "-v=3"]
    raise ValueError(name)


def env(name: str, lab: Path, kubeconfig: Path) -> dict[str, str]:
    """The chart's environment, and the scheduler's klog socket in the lab (its default,
    /tmp/klog-socks/klog.sock, would be shared by every Volcano lab on the machine)."""
    out = {"KUBECONFIG": str(kubeconfig)}
    if name == SCHEDULER:
        out["DEBUG_SOCKET_DIR"] = str(lab / "volcano-socks")
    if name == CONTROLLERS:
        out.update(KUBE_POD_NAMESPACE=pins()["namespace"], HELM_RELEASE_NAME="volcano")
    return out


def health_url(name: str, ports: dict[str, int]) -> str:
    scheme = "https" if name == WEBHOOKS else "http"  # the webhook manager serves healthz with its certificate
    return f"{scheme}://127.0.0.1:{ports[name + '.healthz']}/healthz"


def scheduler_conf(name: str | None = None, binpack: bool = True) -> dict:
    """A scheduler configuration kailab ships (kailab/data/volcano.yaml `configurations`), as data,
    with the lab's binpack plugin (GPUs packed) in its last tier or without any."""
    conf = copy.deepcopy(pins()["configurations"][name or pins()["default_configuration"]])
    return with_binpack(conf, binpack)


def with_binpack(conf: dict, on: bool) -> dict:
    """The configuration with the lab's binpack plugin (a given one's arguments kept), or without it."""
    given = [p for t in conf["tiers"] for p in t.get("plugins") or [] if p.get("name") == "binpack"]
    tiers = [{**t, "plugins": [p for p in t.get("plugins") or [] if p.get("name") != "binpack"]} for t in conf["tiers"]]
    if on:
        tiers[-1]["plugins"].append(given[0] if given else copy.deepcopy(pins()["binpack"]))
    return {**conf, "tiers": tiers}


def conf_text(conf: dict) -> str:
    """Volcano's file format: `actions` one comma-separated string, then the tiers."""
    out = dict(conf)
    if isinstance(out.get("actions"), list):
        out["actions"] = ", ".join(out["actions"])
    return yaml.safe_dump(out, sort_keys=False)
