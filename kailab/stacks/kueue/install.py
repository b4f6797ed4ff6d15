"""Kueue's pieces for a lab, read from its own source tree at the pinned release: CRDs, webhook
registrations (for the integrations a lab turns on), its Configuration, and the flags of its
controller manager and of kube-scheduler (which places the pods Kueue admits)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from ... import toolchain, versions, yamlfast
from ...errors import BuildError

API = "kueue.x-k8s.io/v1beta2"


@lru_cache(maxsize=1)
def pins() -> dict:
    return yaml.safe_load(resources.files("kailab").joinpath("data/kueue.yaml").read_text())


def kueue_recipe(version: str | None = None) -> toolchain.Recipe:
    v = version or pins()["version"]
    return toolchain.Recipe("kueue", v, "sigs.k8s.io/kueue", {"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
                            repository="kueue")


def scheduler_recipe(kubernetes: str) -> toolchain.Recipe:
    """kube-scheduler at the lab's own Kubernetes version: the build the control plane comes from."""
    return toolchain.kubernetes_recipe(kubernetes)


def tree(recipe: toolchain.Recipe) -> Path:
    """The source tree the cached kueue binary was built in (its manifest says)."""
    return toolchain.repository_tree(recipe)


def crd_documents(src: Path) -> list[dict]:
    folder = src / "config" / "components" / "crd" / "bases"
    docs = [d for f in sorted(folder.glob("*.yaml")) for d in yamlfast.load_all(f.read_text()) if d]
    if not docs:
        raise BuildError(f"no CRDs in {folder}: is this a Kueue source tree?")
    return docs


def _wanted(path: str, integrations: list[str]) -> bool:
    """Kueue's own kinds' webhooks, and those of the integrations turned on."""
    if "kueue-x-k8s-io" in path:
        return True
    slugs = {"batch/job": "-batch-v1-job", "pod": "--v1-pod", "deployment": "-apps-v1-deployment",
             "statefulset": "-apps-v1-statefulset"}
    return any(path.endswith(slugs.get(i, "\0")) for i in integrations)


def webhook_configurations(src: Path, port: int, ca_bundle_b64: str, integrations: list[str]) -> list[dict]:
    """Kueue's webhook registrations (config/components/webhook/manifests.yaml) reaching the lab's
    process by `url` on loopback instead of its Service, with the lab's CA."""
    docs = [d for d in yaml.safe_load_all((src / "config/components/webhook/manifests.yaml").read_text()) if d]
    out = []
    for doc in docs:
        hooks = []
        for hook in doc.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            if _wanted(path, integrations):
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle_b64}
                if "kueue-x-k8s-io" not in path:  # Kueue's kustomization: never the system namespaces
                    hook["namespaceSelector"] = {"matchExpressions": [{
                        "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                        "values": ["kube-system", pins()["namespace"]]}]}
                hooks.append(hook)
        if hooks:
            doc["metadata"] = {"name": f"kailab-kueue-{doc['metadata']['name']}",
                               "labels": {"app.kubernetes.io/managed-by": "kailab"}}
            doc["webhooks"] = hooks
            out.append(doc)
    return out


def priority_classes() -> list[dict]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "kailab"}},
             "value": value, "preemptionPolicy": "PreemptLowerPriority", "globalDefault": False}
            for name, value in pins()["priority_classes"].items()]


def decisions() -> dict:
    """What Kueue decides by, the same wherever it runs: the pinned integrations and fair sharing."""
    return {"clientConnection": {"qps": 300, "burst": 500},
            "integrations": {"frameworks": list(pins()["integrations"])},
            # an exercise's overQuotaWeight is a ClusterQueue's fair-sharing weight: on, as KAI's is
            "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}


def configuration(ports: dict[str, int], cert_dir: Path) -> dict:
    """Kueue's Configuration as a lab runs it: loopback ports, no leader election, no internal
    certificate management (the lab's CA signs the webhook certificate), the pinned integrations."""
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": pins()["namespace"],
            "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue.probe']}"},
            "metrics": {"bindAddress": f"127.0.0.1:{ports['kueue.metrics']}"},
            "webhook": {"port": ports["kueue.webhook"], "host": "127.0.0.1", "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            **decisions()}


def argv(name: str, binary: Path, ports: dict[str, int], lab: Path) -> list[str]:
    kubeconfig = lab / "kubeconfig"
    if name == "kube-scheduler":
        return [str(binary), f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1",
                f"--secure-port={ports['kube-scheduler.secure']}", f"--cert-dir={lab / 'kube-scheduler-certs'}",
                "--leader-elect=false", "--kube-api-qps=200", "--kube-api-burst=400", "--v=1"]
    if name == "kueue":
        # Kueue reads its metrics serving certificate from the fixed path /etc/kueue/metrics/certs when
        # its internal certificate management is off (cmd/kueue/main.go): it runs in a mount namespace
        # of its own where an overlay over /etc holds the lab CA's certificate there; the host's /etc
        # never changes, and the namespace goes with the process
        etc = lab / "kueue-etc"
        mount = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={etc / 'upper'},workdir={etc / 'work'} /etc"
                 ' && exec "$@"')
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "kueue",
                str(binary), f"--config={lab / 'kueue-config.yaml'}", "--zap-log-level=2",
                # its on-demand visibility API server listens on every interface (port 8082) and reads
                # its certificate from /visibility: a lab needs neither
                "--feature-gates=VisibilityOnDemand=false"]
    raise ValueError(name)


def prepare_etc(lab: Path, cert: Path, key: Path) -> None:
    """The overlay's upper layer: kueue/metrics/certs/tls.{crt,key} (see argv)."""
    certs = lab / "kueue-etc" / "upper" / "kueue" / "metrics" / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    (lab / "kueue-etc" / "work").mkdir(exist_ok=True)
    (certs / "tls.crt").write_bytes(cert.read_bytes())
    (certs / "tls.key").write_bytes(key.read_bytes())


def health_url(name: str, ports: dict[str, int]) -> str:
    if name == "kube-scheduler":
        return f"https://127.0.0.1:{ports['kube-scheduler.secure']}/healthz"
    return f"http://127.0.0.1:{ports['kueue.probe']}/readyz"


def kubernetes_of(kai_version: str) -> str:
    """The lab's Kubernetes: the version its control plane runs (pinned per release line in versions.yaml)."""
    return versions.kai_release(kai_version or versions.DEFAULT_KAI).kubernetes
