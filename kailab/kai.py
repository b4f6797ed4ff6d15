"""Installing KAI into a lab: CRDs, priority classes, namespaces, and its processes' arguments.

The CRDs come from the same KAI module the binaries are built from (deployments/kai-scheduler/crds),
so a lab never mixes one version's binaries with another's CRDs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from . import toolchain, versions
from .errors import BuildError

KAI_NAMESPACE = "kai-scheduler"
RESERVATION_NAMESPACE = "kai-resource-reservation"
SCHEDULER_NAME = "kai-scheduler"
# KAI's chart installs these; >= 100 means non-preemptible (docs/priority in KAI's repo)
PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
# how often the scheduler runs a cycle; KAI's default is 1s, labs want decisions sooner
SCHEDULE_PERIOD = "500ms"


def source_dir(version: str) -> Path:
    """KAI's module source: KAILAB_KAI_SOURCE (a checkout), else the Go module cache."""
    local = os.environ.get("KAILAB_KAI_SOURCE")
    if local:
        return Path(local)
    release = versions.kai_release(version)
    probe = toolchain.cache_dir() / "build" / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    (probe / "go.mod").write_text("module kailab.local/probe\n\ngo 1.25\n")
    out = subprocess.run([toolchain.go_binary(), "mod", "download", "-json",
                          f"{release.module}@{release.version}"], cwd=probe, capture_output=True,
                         text=True, env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"})
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Dir" not in info:
        raise BuildError(f"cannot fetch KAI {version} source ({info.get('Error', out.stderr.strip())}); "
                         "set KAILAB_KAI_SOURCE to a KAI checkout at that version")
    return Path(info["Dir"])


def crd_documents(version: str) -> list[dict]:
    folder = source_dir(version) / "deployments" / "kai-scheduler" / "crds"
    docs = []
    for f in sorted(folder.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    if not docs:
        raise BuildError(f"no CRDs found in {folder}: is this KAI {version}'s source?")
    for doc in docs:
        # a binary lab runs no webhooks: no conversion webhook either (clients use one version)
        doc["spec"]["conversion"] = {"strategy": "None"}
        if doc["metadata"]["name"] == "queues.scheduling.run.ai":
            # ... so store v2, the version everything uses (as KAI's own env-tests do)
            for v in doc["spec"]["versions"]:
                v["storage"] = v["name"] == "v2"
    return docs


def base_objects() -> list[dict]:
    """Namespaces and priority classes KAI's helm chart would create."""
    objs: list[dict] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        for ns in (KAI_NAMESPACE, RESERVATION_NAMESPACE)
    ]
    for name, value in PRIORITY_CLASSES.items():
        objs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "kailab"}},
                     "value": value, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority",
                     "description": f"KAI default priority class ({'non-' if value >= 100 else ''}preemptible)"})
    return objs


def component_ports() -> dict[str, list[str]]:
    """Which loopback ports each KAI process needs (all distinct: defaults collide on 8080/8081)."""
    return {
        "scheduler": ["metrics", "plugins"],
        "binder": ["metrics", "probe"],
        "podgrouper": ["metrics", "probe"],
        "queuecontroller": ["metrics"],
        "podgroupcontroller": ["metrics", "probe"],
    }


def component_argv(name: str, binary: Path, ports: dict[str, int]) -> list[str]:
    """Flags per KAI process. The kubeconfig comes from KUBECONFIG in the environment, which all
    of them read (a --kubeconfig flag is not defined by every one of them)."""
    addr = lambda key: f"127.0.0.1:{ports[key]}"  # noqa: E731
    common = [str(binary)]
    if name == "scheduler":
        return common + [f"--scheduler-name={SCHEDULER_NAME}", f"--namespace={KAI_NAMESPACE}",
                         f"--schedule-period={SCHEDULE_PERIOD}", f"--listen-address={addr('scheduler.metrics')}",
                         f"--plugin-server-port={ports['scheduler.plugins']}"]
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
        return common + [f"--metrics-bind-address={addr('podgroupcontroller.metrics')}",
                         f"--health-probe-bind-address={addr('podgroupcontroller.probe')}",
                         "--enable-podgroup-webhook=false", f"--scheduler-name={SCHEDULER_NAME}"]
    raise ValueError(name)


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
