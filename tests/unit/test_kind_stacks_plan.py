"""Kueue's and Volcano's kind plans (issues #41, #43), built without running anything: each stack's own
chart and images (built here, or the published ones), its pods on kind's real node pulled
IfNotPresent, the configuration the binary lab decides by, and none of KAI's images in a lab without
KAI. The labs themselves: tests/live/test_kind_stacks.py."""

from __future__ import annotations

import pytest
import yaml

from kailab import versions
from kailab.fleet import load_fleet
from kailab.images import image_set
from kailab.labs import with_addon
from kailab.runtimes.kind import runtime as kind_rt
from kailab.runtimes.base import LabSpec
from kailab.runtimes.kind.runtime import build_plan
from kailab.runtimes.kind.images import build_command, needed_local
from kailab.stacks.kueue import install as kueue
from kailab.stacks.volcano import install as volcano

CONTROL_PLANE = {"node-role.kubernetes.io/control-plane": ""}


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))


def _plan(stack: str, local: bool):
    spec = with_addon(LabSpec(name="s", runtime="kind", fleet="tiny", kai_version="v0.17.0",
                              stack=stack))
    return spec, build_plan(spec, load_fleet("tiny"), "v0.17.0", kind_rt.HostFacts(),
                            image_set("v0.17.0") if local else None)


def _helm(plan, release: str) -> list[str]:
    [argv] = [a for a in plan.commands if a[:4] == ["helm", "upgrade", "--install", release]]
    return argv


def test_kueue_on_kind_installs_its_chart_built_here_with_the_binary_labs_decisions():
    spec, plan = _plan("kueue", local=True)
    s = image_set("v0.17.0")
    version = kueue.pins()["version"]
    assert f"registry.k8s.io/kueue/kueue:{version}" in plan.preload_images
    assert not set(s.kai_images) & set(plan.preload_images)  # no KAI in a Kueue lab
    assert str(spec.addon.local_files(s)[0]) in _helm(plan, "kueue")
    values = yaml.safe_load(plan.files["kueue-values.yaml"])
    manager = values["controllerManager"]
    assert manager["nodeSelector"] == CONTROL_PLANE
    assert manager["manager"]["image"] == {"repository": "registry.k8s.io/kueue/kueue", "tag": version,
                                           "pullPolicy": "IfNotPresent"}
    conf = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert conf["integrations"]["frameworks"] == kueue.pins()["integrations"]
    assert conf["fairSharing"] == kueue.decisions()["fairSharing"]
    assert "kueue-priority-classes.yaml" in plan.files
    assert spec.addon.deployments() == {"kueue-system": ["kueue-controller-manager"]}
    assert not any("oci://" in a for argv in plan.commands for a in argv)


def test_volcano_on_kind_runs_the_binary_labs_scheduler_configuration():
    spec, plan = _plan("volcano", local=True)
    version = volcano.pins()["version"]
    refs = [f"docker.io/volcanosh/{n}:{version}" for n in ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager")]
    assert set(refs) <= set(plan.preload_images)
    assert not set(image_set("v0.17.0").kai_images) & set(plan.preload_images)
    values = yaml.safe_load(plan.files["volcano-values.yaml"])
    assert values["basic"]["image_pull_policy"] == "IfNotPresent" and values["basic"]["image_tag_version"] == version
    assert values["custom"]["default_ns"] == CONTROL_PLANE  # every Volcano pod, the admission Job's too
    conf = volcano.conf_text(volcano.scheduler_conf())  # the text a binary lab's scheduler reads
    assert values["custom"]["scheduler_config_override"] == conf
    assert plan.files[volcano.CONF] == conf  # where config.current reads it
    assert spec.addon.deployments() == {"volcano-system": ["volcano-admission", "volcano-controllers",
                                                           "volcano-scheduler"]}
    assert str(spec.addon.local_files(image_set("v0.17.0"))[0]) in _helm(plan, "volcano")


def test_kueue_kai_on_kind_installs_both_charts_kai_first():
    spec, plan = _plan("kueue+kai", local=True)
    kai_at = plan.commands.index(_helm(plan, "kai-scheduler"))
    assert kai_at < plan.commands.index(_helm(plan, "kueue"))
    s = image_set("v0.17.0")
    assert set(s.kai_images) <= set(plan.preload_images)
    assert f"registry.k8s.io/kueue/kueue:{kueue.pins()['version']}" in plan.preload_images
    assert "kueue-priority-classes.yaml" not in plan.files  # KAI's chart brings them
    assert set(spec.addon.deployments()) == {"kai-scheduler", "kueue-system"}


@pytest.mark.parametrize("stack", ["kueue", "volcano"])
def test_published_images_and_charts_when_not_built_here(stack):
    spec, plan = _plan(stack, local=False)
    helm = _helm(plan, stack)
    assert "--version" in helm and not any(a.endswith(".tgz") for a in helm)
    assert set(spec.addon.images(None)) <= set(plan.preload_images)


@pytest.mark.parametrize("stack", ["kueue", "volcano", "kueue+kai"])
def test_a_lab_built_here_needs_the_stacks_images_and_names_the_command(stack):
    spec, _ = _plan(stack, local=True)
    s = image_set("v0.17.0")
    images, files = needed_local(s, spec.addon)
    assert set(spec.addon.local_images(s)) <= set(images) and set(spec.addon.local_files(s)) <= set(files)
    assert f"--stack {stack}`" in build_command("v0.17.0", spec.addon)
    with pytest.raises(Exception) as err:
        kind_rt.choose_images("local", "v0.17.0", ["x"], spec.addon)
    assert f"kailab tools images --kai-version v0.17.0 --stack {stack}" in str(err.value)


def test_the_kai_stack_loads_the_base_set_then_kais_images_and_the_metrics_only_with_metrics():
    local = image_set("v0.17.0")
    spec = with_addon(LabSpec(name="s", runtime="kind", fleet="tiny", kai_version="v0.17.0"))
    on = build_plan(spec, load_fleet("tiny"), "v0.17.0", kind_rt.HostFacts(), local, metrics_port=41234)
    assert on.preload_images == [*local.base_images, *local.kai_images]  # every image built here
    assert sorted(on.preload_images) == sorted(local.images)
    off = build_plan(spec, load_fleet("tiny"), "v0.17.0", kind_rt.HostFacts(), local)
    metrics = set(versions.metrics_images().values())
    assert metrics <= set(on.preload_images) and not metrics & set(off.preload_images)
