"""Kueue on a cluster kailab made (kind): its own chart (charts/kueue of the pinned release) with the
binary lab's decisions (the same integrations and fair sharing, install.decisions), its controller
manager on kind's real node, pulled IfNotPresent; kind's own kube-scheduler places what Kueue admits.

Its image and chart are the published ones, or built here from the registered repository
(`kailab tools images --stack kueue`): the controller manager under its upstream name
(registry.k8s.io/kueue/kueue:<version>) laid out as its Dockerfile lays it out (/manager, uid 65532),
from the cached kueue binary; the chart `helm package`d from the same tree.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ...runtimes.kind.pins import pins as kind_pins
from . import install
from ...images import extra
from ...images.assemble import ImageSpec, NONROOT
from ...images.extra import binary, chart_path


def _kind() -> dict:
    return install.pins()["kind"]


def deployment() -> str:
    return _kind()["deployment"]


def image(version: str) -> str:
    return f"{_kind()['image']}:{version}"


def chart_ref() -> str:
    return _kind()["chart"]


def local_chart(version: str) -> Path:
    return chart_path("kueue", version)


def configuration() -> dict:
    """Kueue's Configuration in the cluster: the chart's own listeners, leader election and
    certificate management (Kueue makes its webhook certificate and sets its registrations' CA), with
    what the binary lab decides by."""
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": install.pins()["namespace"],
            "health": {"healthProbeBindAddress": ":8081"}, "metrics": {"bindAddress": ":8443"},
            "webhook": {"port": 9443},
            "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
            **install.decisions()}


def values(version: str, node_selector: dict) -> dict:
    """The chart's values: the image (its release's name and tag, IfNotPresent: preloaded images are
    used), the controller manager on the real node (KWOK nodes never run containers) with a smaller CPU
    request (kueue.yaml says why), the configuration above."""
    resources = {"limits": {"cpu": "2", "memory": "512Mi"},  # the chart's, but the CPU request (kueue.yaml)
                 "requests": {"cpu": _kind()["cpu_request"], "memory": "512Mi"}}
    return {"controllerManager": {
                "manager": {"image": {"repository": _kind()["image"], "tag": version, "pullPolicy": "IfNotPresent"},
                            "resources": resources},
                "nodeSelector": node_selector},
            "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration(), sort_keys=False)}}


def files_and_steps(version: str, kubeconfig: str, path, local, node_selector: dict,
                    priorities: bool) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    t = kind_pins()["timeouts"]
    ns, release = install.pins()["namespace"], _kind()["release"]
    kubectl = ["kubectl", "--kubeconfig", kubeconfig]
    files = {"kueue-values.yaml": yaml.safe_dump(values(version, node_selector), sort_keys=False)}
    steps: list[tuple[str, list[str]]] = []
    if priorities:  # the priority classes exercises name (with KAI, its chart brings them)
        files["kueue-priority-classes.yaml"] = yaml.safe_dump_all(install.priority_classes(), sort_keys=False)
        steps.append(("The priority classes exercises name (the values KAI's chart gives them)",
                      [*kubectl, "apply", "-f", path("kueue-priority-classes.yaml")]))
    chart, said = ([str(local_chart(version))], "its chart, packaged here from its source") if local else \
        ([chart_ref(), "--version", version.lstrip("v")], "its OCI chart")
    steps.append((f"Install Kueue {version} from {said} (kind's kube-scheduler places what it admits)",
                  ["helm", "upgrade", "--install", release, *chart, "--namespace", ns, "--create-namespace",
                   "--values", path("kueue-values.yaml"), "--wait", "--timeout", t["helm"], "--kubeconfig", kubeconfig]))
    steps.append((f"Wait for Kueue's {deployment()} to roll out",
                  [*kubectl, "-n", ns, "rollout", "status", f"deployment/{deployment()}", f"--timeout={t['rollout']}"]))
    return files, steps


def image_specs(recipe) -> list:
    """The controller manager's image, as Kueue's Dockerfile lays it out: /manager, USER 65532."""
    return [ImageSpec(image(recipe.version), (("/manager", binary(recipe, "kueue"), 0o755),),
                      entrypoint=("/manager",), user=f"{NONROOT}:{NONROOT}", workdir="/")]


def build_local(recipe, console=None, phase=print) -> list[str]:
    """Kueue's image and chart from the registered repository (the kueue binary built first)."""
    extra.build_binaries([recipe], console)
    chart = extra.Chart(install.tree(recipe) / "charts" / "kueue", recipe.version, recipe.version,
                        local_chart(recipe.version))
    return extra.make(image_specs(recipe), [chart], phase)
