"""Volcano on a cluster kailab made (kind): its own chart (installer/helm/chart/volcano of the pinned
release) with the lab's scheduler configuration as data (the chart's scheduler_config_override: the
same file a binary lab's scheduler reads, written into the lab dir too), its admission, controllers
and scheduler Deployments on kind's real node, pulled IfNotPresent.

Its images and chart are the published ones, or built here from the registered repository
(`kailab tools images --stack volcano`): vc-scheduler, vc-controller-manager and vc-webhook-manager
under their upstream names (docker.io/volcanosh/<name>:<version>) from the cached binaries, each at
/<name> as installer/dockerfile/*/Dockerfile puts it; the webhook manager's image also carries what
the chart's admission-init Job runs (gen-admission-secret.sh, openssl, kubectl).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ...runtimes.kind.pins import pins as kind_pins
from . import config, install
from ...images import extra
from ...images.assemble import ImageSpec
from ...images.extra import binary, chart_path

IMAGES = (install.SCHEDULER, install.CONTROLLERS, install.WEBHOOKS)  # the binaries' and the images' names


def _kind() -> dict:
    return install.pins()["kind"]


def deployments() -> list[str]:
    return list(_kind()["deployments"])


def images(version: str) -> list[str]:
    return [f"{_kind()['registry']}/{name}:{version}" for name in IMAGES]


def chart_ref() -> str:
    return f"{_kind()['chart']} from {_kind()['repository']}"


def local_chart(version: str) -> Path:
    return chart_path("volcano", version)


def values(version: str, node_selector: dict) -> dict:
    """The chart's values: images by their release names (IfNotPresent: preloaded images are used),
    every Volcano pod (the admission-init Job's too) on the real node (KWOK nodes never run
    containers), the scheduler's name and the lab's configuration, no leader election (one replica
    each, as a binary lab runs them)."""
    registry, repo = _kind()["registry"].split("/", 1)
    return {"basic": {"image_registry": registry, "image_tag_version": version, "image_pull_policy": "IfNotPresent",
                      **{f"{k}_image_name": f"{repo}/{n}" for k, n in
                         (("scheduler", install.SCHEDULER), ("controller", install.CONTROLLERS),
                          ("admission", install.WEBHOOKS))}},
            "custom": {"default_ns": node_selector, "scheduler_name": install.pins()["scheduler_name"],
                       "leader_elect_enable": False,
                       "scheduler_config_override": install.conf_text(install.scheduler_conf())}}


def files_and_steps(version: str, kubeconfig: str, path, local, node_selector: dict
                    ) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    t = kind_pins()["timeouts"]
    ns, release = install.pins()["namespace"], _kind()["release"]
    kubectl = ["kubectl", "--kubeconfig", kubeconfig]
    conf = install.conf_text(install.scheduler_conf())
    files = {"volcano-values.yaml": yaml.safe_dump(values(version, node_selector), sort_keys=False),
             "volcano-priority-classes.yaml": yaml.safe_dump_all(install.priority_classes(), sort_keys=False),
             # what the scheduler runs, where a binary lab keeps it (evidence: config.current)
             install.CONF: conf, config.DEFAULT: conf}
    chart, said = ([str(local_chart(version))], "its chart, packaged here from its source") if local else \
        ([_kind()["chart"], "--repo", _kind()["repository"], "--version", version.lstrip("v")], "its helm repository")
    steps = [("The priority classes exercises name (the values KAI's chart gives them)",
              [*kubectl, "apply", "-f", path("volcano-priority-classes.yaml")]),
             (f"Install Volcano {version} from {said}, the lab's scheduler configuration as its config override",
              ["helm", "upgrade", "--install", release, *chart, "--namespace", ns, "--create-namespace",
               "--values", path("volcano-values.yaml"), "--wait", "--timeout", t["helm"], "--kubeconfig", kubeconfig])]
    for dep in deployments():
        steps.append((f"Wait for Volcano's {dep} to roll out",
                      [*kubectl, "-n", ns, "rollout", "status", f"deployment/{dep}", f"--timeout={t['rollout']}"]))
    return files, steps


def image_specs(recipe, tree: Path, slim: Path, kubectl: Path) -> list:
    refs = dict(zip(IMAGES, images(recipe.version)))
    out = [ImageSpec(refs[name], ((f"/{name}", binary(recipe, name), 0o755),), entrypoint=(f"/{name}",))
           for name in (install.SCHEDULER, install.CONTROLLERS)]
    # the chart's admission-init Job runs ./gen-admission-secret.sh (openssl, base64, kubectl) in this
    # image; the script is written for Alpine's busybox sh ([[ ]], `function`): Debian's dash cannot run
    # it, so /bin/sh is bash here
    script = tree / "installer" / "dockerfile" / "webhook-manager" / "gen-admission-secret.sh"
    out.append(ImageSpec(refs[install.WEBHOOKS], (
        (f"/{install.WEBHOOKS}", binary(recipe, install.WEBHOOKS), 0o755),
        ("/gen-admission-secret.sh", script, 0o755),
        ("/usr/local/bin/kubectl", kubectl, 0o755)),
        base=slim, entrypoint=(f"/{install.WEBHOOKS}",), workdir="/", links=(("usr/bin/sh", "bash"),)))
    return out


def build_local(recipe, console=None, phase=print) -> list[str]:
    """Volcano's three images and its chart from the registered repository (its binaries built first)."""
    extra.build_binaries([recipe, extra.kubectl_recipe()], console)
    tree = install.tree(recipe)
    chart = extra.Chart(tree / _kind()["chart_dir"], recipe.version, recipe.version.lstrip("v"),
                        local_chart(recipe.version))
    return extra.make(image_specs(recipe, tree, extra.slim_rootfs(phase), extra.kubectl()), [chart], phase)
