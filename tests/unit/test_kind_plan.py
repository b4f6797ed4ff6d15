"""The kind runtime's plan, checked without Docker, kind or a cluster.

`build_plan` is pure, so everything `kailab up --runtime kind` would run or write is inspected
here as data: the kind config, the helm values, the chart refs, the KWOK stages and the fleet's
nodes (which must be exactly the binary runtime's).
"""

from __future__ import annotations

import os
import stat
from importlib import resources

import pytest
import yaml
from click.testing import CliRunner

from kailab import versions
from kailab.stacks.kai import install as kai
from kailab.cli import cli
from kailab.errors import KailabError, LabError
from kailab.fleet import FLEET_LABEL, SIMULATED_POOL_LABEL, load_fleet
from kailab.runtimes.kind import metrics as kind_metrics, runtime as kind_rt
from kailab.runtimes.base import LabSpec
from kailab.runtimes.labkit import create_fleet, kwok_config_text
from kailab.labs import with_addon
from kailab.runtimes.kind.runtime import KindRuntime, build_plan
from kailab.runtimes.kind.plan import RESERVATION_STAGE
from kailab.stacks.kai.kind import kai_chart_ref, kai_images, kai_values

NEW_CHART = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
OLD_CHART = "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler"


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    """Labs of these tests live in a temporary state dir, never the user's."""
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))


def plan_for(fleet: str = "tiny", kai: str = versions.DEFAULT_KAI, **spec):
    s = LabSpec(name=spec.pop("name", "t"), runtime="kind", fleet=fleet, kai_version=kai, **spec)
    return build_plan(with_addon(s), load_fleet(fleet), kai)


def index_of(plan, *words: str) -> int:
    """The position of the first command containing every word (consecutive argv items allowed)."""
    for i, argv in enumerate(plan.commands):
        if all(w in argv for w in words):
            return i
    raise AssertionError(f"no command with {words}: {plan.commands}")


def stage_docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "Stage"]


# ------------------------------------------------------------------ kind cluster config
@pytest.mark.parametrize("kai, image_prefix", [
    ("v0.17.0", "kindest/node:v1.35."),
    ("v0.16.0", "kindest/node:v1.35."),
    ("v0.15.2", "kindest/node:v1.35."),
    ("v0.15.0", "kindest/node:v1.35."),
])
def test_kind_config_pins_node_image_per_kai_version(kai, image_prefix):
    plan = plan_for(kai=kai, name="cfg")
    cfg = plan.kind_config
    assert cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4" and cfg["kind"] == "Cluster"
    assert cfg["name"] == "kailab-cfg"
    assert [n["role"] for n in cfg["nodes"]] == ["control-plane"]  # one node: KWOK provides the fleet
    image = cfg["nodes"][0]["image"]
    assert image.startswith(image_prefix) and "@sha256:" in image  # exact image, digest pinned
    assert yaml.safe_load(plan.files["kind-config.yaml"]) == cfg  # what up writes is what we checked
    create = plan.commands[0]
    assert create[:3] == ["kind", "create", "cluster"]
    assert create[create.index("--name") + 1] == "kailab-cfg"
    assert create[create.index("--config") + 1].endswith("/cfg/kind-config.yaml")


def test_every_known_kai_release_has_a_node_image():
    for v in versions.known_kai_releases():
        assert kind_rt.node_image(versions.kai_release(v).kubernetes).startswith("kindest/node:v1.")


def test_kind_config_api_port_and_bad_lab_name():
    assert plan_for(api_port=7443).kind_config["networking"] == {"apiServerAddress": "127.0.0.1",
                                                                 "apiServerPort": 7443}
    assert "networking" not in plan_for().kind_config
    with pytest.raises(KailabError, match="cannot name a kind cluster"):
        plan_for(name="Not_A_DNS_Name")


def test_kind_version_and_pins_live_in_data_file():
    pins = yaml.safe_load(resources.files("kailab").joinpath("data/kind.yaml").read_text())
    assert pins["kind"]["version"] == "v0.31.0"
    assert set(pins["kind"]["node_images"]) >= {"1.34", "1.35"}
    assert pins["fake_gpu_operator"]["version"] and pins["timeouts"]["helm"]


# ------------------------------------------------------------------ fake-gpu-operator values
@pytest.mark.parametrize("fleet_name", ["tiny", "small"])
def test_fake_gpu_operator_values_follow_the_fleet(fleet_name):
    fleet = load_fleet(fleet_name)
    plan = plan_for(fleet_name)
    values = yaml.safe_load(plan.files["fake-gpu-operator-values.yaml"])
    topo = values["topology"]
    assert topo["nodePoolLabelKey"] == SIMULATED_POOL_LABEL == "run.ai/simulated-gpu-node-pool"
    assert topo["nodePools"] == {p.name: {"gpuProduct": p.product, "gpuCount": p.gpus,
                                          "gpuMemory": p.gpu_memory_mib} for p in fleet.pools if p.gpus}
    # each GPU node is in the topology pool of its fleet pool, and the GPUs add up
    pools = topo["nodePools"]
    assert sum(pools[n["metadata"]["labels"][SIMULATED_POOL_LABEL]]["gpuCount"]
               for n in plan.node_manifests if SIMULATED_POOL_LABEL in n["metadata"]["labels"]) == fleet.gpus_total
    assert values["environment"]["resourceReservationNamespace"] == "kai-resource-reservation"
    helm = plan.commands[index_of(plan, "oci://ghcr.io/run-ai/fake-gpu-operator/fake-gpu-operator")]
    assert helm[:3] == ["helm", "upgrade", "--install"] and "--wait" in helm
    assert helm[helm.index("--version") + 1] == kind_rt.pins()["fake_gpu_operator"]["version"]
    assert helm[helm.index("--values") + 1].endswith("fake-gpu-operator-values.yaml")


def test_a_cpu_node_is_in_no_fake_gpu_operator_pool():
    """Its status-exporter labels every node of a pool it knows: a CPU node in one became
    nvidia.com/gpu.present=true with gpu.count=0, and KAI's e2e (predicates' Restrict node scheduling)
    took it for a GPU node."""
    fleet = load_fleet("kai-e2e")
    plan = plan_for("kai-e2e")
    cpu = [n for n in plan.node_manifests if not int(n["status"]["capacity"].get("nvidia.com/gpu", "0"))]
    assert cpu and all(SIMULATED_POOL_LABEL not in n["metadata"]["labels"] for n in cpu)
    assert all(not k.startswith("nvidia.com/gpu.") for n in cpu for k in n["metadata"]["labels"])
    pools = yaml.safe_load(plan.files["fake-gpu-operator-values.yaml"])["topology"]["nodePools"]
    assert set(pools) == {p.name for p in fleet.pools if p.gpus} and "cpu" not in pools


def test_tiny_and_small_values_concretely():
    tiny = yaml.safe_load(plan_for("tiny").files["fake-gpu-operator-values.yaml"])["topology"]["nodePools"]
    assert tiny == {"a100": {"gpuProduct": "NVIDIA-A100-SXM4-40GB", "gpuCount": 4, "gpuMemory": 40960}}
    small = yaml.safe_load(plan_for("small").files["fake-gpu-operator-values.yaml"])["topology"]["nodePools"]
    assert {k: (v["gpuProduct"], v["gpuCount"]) for k, v in small.items()} == {
        "a100": ("NVIDIA-A100-SXM4-80GB", 8), "h100": ("NVIDIA-H100-80GB-HBM3", 8), "l40s": ("NVIDIA-L40S", 4)}


# ------------------------------------------------------------------ KAI chart
@pytest.mark.parametrize("version, ref", [
    ("v0.12.0", OLD_CHART), ("v0.13.3", OLD_CHART),  # before KAI moved to its own organisation
    ("v0.13.4", NEW_CHART), ("v0.15.0", NEW_CHART), ("v0.17.0", NEW_CHART),
])
def test_kai_chart_ref_switches_registry_path_at_v0_13_4(version, ref):
    assert kai_chart_ref(version) == ref
    registry = ref.removeprefix("oci://").rsplit("/", 1)[0]
    assert all(img.startswith(registry + "/") and img.endswith(":" + version) for img in kai_images(version))


def test_kai_install_command_and_rollouts():
    plan = plan_for(kai="v0.17.0")
    i = index_of(plan, NEW_CHART)
    helm = plan.commands[i]
    assert helm[:4] == ["helm", "upgrade", "--install", "kai-scheduler"]
    assert helm[helm.index("--version") + 1] == "v0.17.0"
    assert helm[helm.index("--namespace") + 1] == "kai-scheduler"
    assert {"--wait", "--create-namespace"} <= set(helm)
    assert helm[helm.index("--kubeconfig") + 1] == plan.kubeconfig  # never the user's default context
    for dep in kind_rt.pins()["kai"]["deployments"]:
        created = index_of(plan, "--for=create", f"deployment/{dep}")
        rolled = index_of(plan, "rollout", f"deployment/{dep}")
        assert i < created < rolled
    assert yaml.safe_load(plan.files["kai-values.yaml"])["global"]["nodeSelector"] == \
        kind_rt.CONTROL_PLANE_SELECTOR


def test_without_kai_installs_no_kai():
    plan = plan_for(stack="none")
    assert "kai-values.yaml" not in plan.files
    assert not any(NEW_CHART in argv for argv in plan.commands)
    assert not any(img.startswith("ghcr.io/kai-scheduler/") for img in plan.preload_images)
    index_of(plan, "oci://ghcr.io/run-ai/fake-gpu-operator/fake-gpu-operator")  # GPUs still come


def test_order_kwok_then_kai_then_gpus_then_fleet():
    plan = plan_for()
    kwok = index_of(plan, "apply", "-f", kind_rt.pins()["kwok"]["manifest"].format(version=versions.KWOK_VERSION))
    stages = index_of(plan, "apply", "-f", f"{plan.lab_dir}/kwok-stages.yaml")
    kai = index_of(plan, NEW_CHART)
    fgo = index_of(plan, "oci://ghcr.io/run-ai/fake-gpu-operator/fake-gpu-operator")
    nodes = index_of(plan, "--field-manager=kailab", "-f", f"{plan.lab_dir}/fleet-nodes.yaml")
    ready = index_of(plan, "--for=condition=Ready", "node")
    # fleet nodes last: infrastructure pods must already sit on the real node
    assert 0 < kwok < stages < kai < fgo < nodes < ready == len(plan.commands) - 1
    assert len(plan.descriptions) == len(plan.commands)


# ------------------------------------------------------------------ KWOK
def test_kwok_stages_are_the_data_files_and_the_binary_runtimes_but_the_gpu_reservation():
    """fake-gpu-operator writes a reservation pod's GPU on a kind lab: kailab's stage for it is left out
    (both writing raced: a fraction pod and its partner could be told different GPUs)."""
    plan = plan_for()
    data = resources.files("kailab").joinpath("data/kwok-stages.yaml").read_text()
    planned = list(yaml.safe_load_all(plan.files["kwok-stages.yaml"]))
    # the data file's documents, the termination grace being the lab's (1 s unless `up` says otherwise)
    every = list(yaml.safe_load_all(data.replace('duration("1s")', 'duration("1000ms")')))
    assert RESERVATION_STAGE in {d["metadata"]["name"] for d in every}
    assert planned == [d for d in every if d["metadata"]["name"] != RESERVATION_STAGE]
    assert planned and all(d["apiVersion"] == "kwok.x-k8s.io/v1alpha1" and d["kind"] == "Stage"
                           for d in planned)  # applied as Stage CRs
    binary = stage_docs(kwok_config_text())  # the binary runtime's, which keeps it (no fake-gpu-operator there)
    assert RESERVATION_STAGE in {d["metadata"]["name"] for d in binary}
    assert stage_docs(plan.files["kwok-stages.yaml"]) == [d for d in binary if d["metadata"]["name"] != RESERVATION_STAGE]
    index_of(plan, "apply", "-f", f"{plan.lab_dir}/kwok-stages.yaml")


def test_a_labs_termination_grace_bounds_its_kwok_stage():
    """`up --termination-grace 30s` gives deleted pods up to 30 s (their own grace period, if shorter)."""
    def terminate(text: str) -> str:
        stage = next(d for d in yaml.safe_load_all(text) if d and d.get("kind") == "Stage" and d["metadata"]["name"] == "kailab-pod-terminate")
        return stage["spec"]["delay"]["durationFrom"]["cel"]["expression"]

    plan = plan_for(termination_grace=30.0)
    assert terminate(plan.files["kwok-stages.yaml"]).count('duration("30000ms")') == 2
    assert terminate(kwok_config_text(5, 0.5)).count('duration("500ms")') == 2


def test_kwok_release_manifest_options_and_patch():
    plan = plan_for()
    url = f"https://github.com/kubernetes-sigs/kwok/releases/download/{versions.KWOK_VERSION}/kwok.yaml"
    index_of(plan, "apply", "-f", url)
    index_of(plan, "--for=condition=Established", "crd/stages.kwok.x-k8s.io")
    cm = yaml.safe_load(plan.files["kwok-config.yaml"])
    options = yaml.safe_load(cm["data"]["kwok.yaml"])
    binary_options = next(d for d in yaml.safe_load_all(kwok_config_text()) if d["kind"] == "KwokConfiguration")
    # the binary runtime's kwok options, merged over the release's (kwok reads only one
    # KwokConfiguration: replacing the release's dropped Stage CRs and kwok crash-looped)
    assert binary_options["options"].items() <= options["options"].items()
    release = kind_rt.kwok_release_config()["options"]
    assert "Stage" in release["enableCRDs"] and options["options"]["enableCRDs"] == release["enableCRDs"]
    selector = release["manageNodesWithAnnotationSelector"]
    assert options["options"]["manageNodesWithAnnotationSelector"] == selector == "kwok.x-k8s.io/node=fake"
    for node in load_fleet("small").node_manifests():  # and the fleet's nodes answer to it
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    patch = plan.commands[index_of(plan, "patch", "deployment", "kwok-controller")]
    ops = yaml.safe_load(patch[patch.index("-p") + 1])  # JSON is YAML
    assert {"op": "add", "path": "/spec/template/spec/nodeSelector",
            "value": kind_rt.CONTROL_PLANE_SELECTOR} in ops
    args = [op["value"] for op in ops if op["path"].endswith("/args/-")]
    assert f"--config={kind_rt.KWOK_CONFIG_DIR}/kwok.yaml" in args


# ------------------------------------------------------------------ the fleet's nodes
class RecordingKube:
    """Stands in for kailab.kube.Kube: records what the binary runtime would send."""

    def __init__(self):
        self.applied, self.statuses = [], []

    def apply(self, obj):
        self.applied.append(obj)

    def apply_status(self, obj):
        self.statuses.append(obj)


@pytest.mark.parametrize("fleet_name", ["tiny", "small"])
def test_fleet_nodes_identical_to_binary_runtime(fleet_name):
    fleet = load_fleet(fleet_name)
    plan = plan_for(fleet_name)
    assert plan.node_manifests == fleet.node_manifests()
    assert list(yaml.safe_load_all(plan.files["fleet-nodes.yaml"])) == fleet.node_manifests()

    kube = RecordingKube()
    create_fleet(kube, fleet)  # what the binary runtime creates, captured
    by_name = lambda objs: sorted(objs, key=lambda o: o["metadata"]["name"])  # noqa: E731
    assert by_name(kube.statuses) == by_name(plan.node_manifests)
    assert by_name(kube.applied) == by_name([{k: v for k, v in n.items() if k != "status"}
                                             for n in plan.node_manifests])

    # applied the same way: the object, then its status (GPU capacity) through the subresource
    main = plan.commands[index_of(plan, "--field-manager=kailab", "-f", f"{plan.lab_dir}/fleet-nodes.yaml")]
    status = plan.commands[index_of(plan, "--field-manager=kailab-status", "--subresource=status")]
    assert "--server-side" in main and "--server-side" in status
    ready = plan.commands[-1]
    assert ready[ready.index("-l") + 1] == f"{FLEET_LABEL}={fleet_name}"


def test_build_plan_writes_nothing():
    plan = plan_for(name="pure")
    assert not os.path.exists(plan.lab_dir)


# ------------------------------------------------------------------ tools
@pytest.fixture
def no_tools(tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("KAILAB_CACHE", str(tmp_path / "empty-cache"))  # nor built by `kailab tools images`
    for var in kind_rt.TOOL_ENV.values():
        monkeypatch.delenv(var, raising=False)
    return empty


def fake_tool(folder, name):
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_missing_kind_names_the_tool(no_tools):
    fake_tool(no_tools, "kubectl")
    fake_tool(no_tools, "helm")
    with pytest.raises(LabError) as err:
        kind_rt.find_tools(["kind", "kubectl", "helm"])
    msg = str(err.value)
    assert msg == ("kind not found: install it (go install sigs.k8s.io/kind@v0.31.0), set KAILAB_KIND, "
                   "or build it with `kailab tools images`")


def test_every_missing_tool_is_named_on_one_line(no_tools):
    with pytest.raises(LabError) as err:
        kind_rt.find_tools(["kind", "kubectl", "helm"])
    msg = str(err.value)
    assert "\n" not in msg
    for tool, var in kind_rt.TOOL_ENV.items():
        assert f"{tool} not found" in msg and var in msg


def test_up_fails_first_on_a_missing_tool(no_tools):
    fake_tool(no_tools, "kind")
    fake_tool(no_tools, "kubectl")
    spec = LabSpec(name="t", runtime="kind", fleet="tiny", kai_version=versions.DEFAULT_KAI)
    with pytest.raises(LabError, match="^helm not found: .* set KAILAB_HELM, or build it with `kailab tools images`$"):
        KindRuntime().up(with_addon(spec))


def test_tools_from_env_vars_or_path(no_tools, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    kind = fake_tool(elsewhere, "my-kind")
    monkeypatch.setenv("KAILAB_KIND", str(kind))
    assert kind_rt.find_tool("kind") == str(kind)
    monkeypatch.setenv("KAILAB_KIND", str(elsewhere / "nope"))
    with pytest.raises(LabError, match="KAILAB_KIND"):
        kind_rt.find_tool("kind")
    helm = fake_tool(no_tools, "helm")
    assert kind_rt.find_tool("helm") == str(helm)


# ------------------------------------------------------------------ the CLI dry run
def test_cli_dry_run_prints_the_plan(tmp_path, monkeypatch):
    monkeypatch.delenv("KAI_VERSION", raising=False)
    result = CliRunner().invoke(cli, ["up", "--runtime", "kind", "--dry-run", "--fleet", "tiny",
                                      "--name", "dry"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the console may wrap long lines
    for expected in ("kind create cluster --name kailab-dry", "helm upgrade --install kai-scheduler",
                     "helm upgrade --install gpu-operator", "kubectl --kubeconfig", "apply -f",
                     "kind: Stage", "kind: Node", "run.ai/simulated-gpu-node-pool: a100",
                     "gpuProduct: NVIDIA-A100-SXM4-40GB"):
        assert expected in text, expected
    assert not (tmp_path / "state" / "labs" / "dry").exists()  # a dry run changes nothing


# ------------------------------------------------------------------ what broke kind labs for everyone
def test_kai_values_turn_gpu_sharing_on():
    """Without it KAI's admission webhook refuses fractional pods ("GPU sharing is disabled")."""
    assert kai_values()["global"]["gpuSharing"] is True
    plan = plan_for()
    assert yaml.safe_load(plan.files["kai-values.yaml"])["global"]["gpuSharing"] is True


def test_fake_gpu_operator_never_pulls_always():
    """The chart's default `Always` ignores preloaded images (ImagePullBackOff without a registry)."""
    values = kind_rt.fake_gpu_operator_values(load_fleet("small"), "kai-resource-reservation")
    for component in ("devicePlugin", "statusUpdater", "topologyServer", "statusExporter",
                      "kwokGpuDevicePlugin", "migFaker"):
        assert values[component]["image"]["pullPolicy"] == "IfNotPresent", component
    assert values["statusUpdater"]["disableNodeLabeling"] is True


def test_fake_gpu_operators_idle_helpers_leave_room_for_a_trials_vclusters():
    """A 2-core kind node's allocatable is 2 CPUs: the chart's 250m for helpers that idle once the
    fleet is up would leave no room for two vCluster control planes' CPU weight."""
    values = kind_rt.fake_gpu_operator_values(load_fleet("small"), "kai-resource-reservation")
    for helper in (values["topologyServer"], values["kwokGpuDevicePlugin"], values["statusExporter"]["kwok"]):
        assert helper["resources"] == {"requests": {"cpu": "10m"}}  # merged into the chart's: its limits stay
    assert "resources" not in values["statusUpdater"]  # it labels every GPU reservation pod: the chart's 200m


@pytest.mark.parametrize("host, patched", [
    (kind_rt.HostFacts(cgroup_v1=True, cap_sys_resource=False), {"kubeadm", "containerd"}),
    (kind_rt.HostFacts(cgroup_v1=True, cap_sys_resource=True), {"kubeadm"}),
    (kind_rt.HostFacts(cgroup_v1=False, cap_sys_resource=True), set()),
])
def test_host_adaptations_in_the_kind_config(host, patched):
    s = LabSpec(name="h", runtime="kind", fleet="tiny", kai_version="v0.17.0")
    plan = build_plan(with_addon(s), load_fleet("tiny"), "v0.17.0", host)
    cfg = plan.kind_config
    kubelet = [yaml.safe_load(p) for p in cfg.get("kubeadmConfigPatches", [])]
    assert ("kubeadm" in patched) == any(p.get("failCgroupV1") is False and p["kind"] == "KubeletConfiguration"
                                         for p in kubelet)
    assert ("containerd" in patched) == any("restrict_oom_score_adj = true" in p
                                            for p in cfg.get("containerdConfigPatches", []))
    assert len(plan.notes) == len(patched)  # each adaptation said once, with its reason


def _local_set():
    from kailab.images import image_set
    return image_set("v0.17.0")


def test_a_plan_with_images_built_here_uses_them_all():
    local = _local_set()
    s = LabSpec(name="air", runtime="kind", fleet="small", kai_version="v0.17.0")
    plan = build_plan(with_addon(s), load_fleet("small"), "v0.17.0", kind_rt.HostFacts(), local)
    assert plan.kind_config["nodes"][0]["image"] == "kailab/node:v1.36.3"
    assert plan.kind_config["networking"]["disableDefaultCNI"] is True  # no kindnetd image here
    assert plan.kind_config["networking"]["apiServerAddress"] == "127.0.0.1"
    metrics = set(versions.metrics_images().values())  # no metrics here: their images are not loaded
    assert sorted(plan.preload_images) == sorted(r for r in local.images if r not in metrics) and plan.local
    index_of(plan, "apply", "-f", str(local.kwok_manifest))
    helm_kai = plan.commands[index_of(plan, "helm", "upgrade", "--install", "kai-scheduler")]
    assert str(local.kai_chart) in helm_kai and "--version" not in helm_kai
    index_of(plan, "helm", "upgrade", "--install", str(local.fgo_chart))
    values = yaml.safe_load(plan.files["kai-values.yaml"])
    assert values["global"]["registry"] == "ghcr.io/kai-scheduler/kai-scheduler"
    assert not any("oci://" in a or a.startswith("https://") for argv in plan.commands for a in argv)


def test_published_plan_keeps_the_online_pins():
    plan = plan_for()
    assert plan.kind_config["nodes"][0]["image"].startswith("kindest/node:") and not plan.local
    assert any(a.startswith("oci://") for argv in plan.commands for a in argv)


def test_image_choice():
    with pytest.raises(LabError) as err:
        kind_rt.choose_images("local", "v0.17.0", ["kailab/node:v1.36.3"])
    assert "\n" not in str(err.value) and "kailab tools images --kai-version v0.17.0" in str(err.value)
    local, said = kind_rt.choose_images("auto", "v0.17.0", [])
    assert local is not None and "built here" in said
    local, said = kind_rt.choose_images("auto", "v0.17.0", ["x"])
    assert local is None and "published" in said and "1 of the set" in said
    assert kind_rt.choose_images("published", "v0.17.0", [])[0] is None


def test_host_problems_each_with_its_fix():
    no_cap = kind_rt.HostFacts(cgroup_v1=True, cap_sys_resource=False)
    [msg] = kind_rt.host_problems(no_cap, "runc", 50.0, "/var/lib/docker")
    assert "CAP_SYS_RESOURCE" in msg and "docker-host.sh" in msg and "\n" not in msg
    assert kind_rt.host_problems(no_cap, "kailab-runc", 50.0, "/x") == []  # the wrapper is in place
    [low] = kind_rt.host_problems(kind_rt.HostFacts(), "runc", 1.5, "/var/lib/docker")
    assert "1.5 GiB free" in low and "/var/lib/docker" in low and "kailab tools clean-go-cache" in low
    assert kind_rt.host_problems(kind_rt.HostFacts(), "runc", None, "") == []  # a remote engine: unknown


def test_shard_fragments_merge_over_the_charts_spec():
    base = {"placementStrategy": {"gpu": "binpack", "cpu": "binpack"}, "goMemLimitRatio": 0.9}
    out = kai.merged(base, {"placementStrategy": {"gpu": "spread"}})
    assert out == {"placementStrategy": {"gpu": "spread", "cpu": "binpack"}, "goMemLimitRatio": 0.9}
    assert base["placementStrategy"]["gpu"] == "binpack"  # not changed in place


def test_cached_tools_are_found_when_path_has_none(no_tools, tmp_path, monkeypatch):
    """`kailab tools images` builds kind, helm and kubectl into the cache: the runtime finds them there."""
    from kailab.images import recipes

    cache = tmp_path / "cache"
    monkeypatch.setenv("KAILAB_CACHE", str(cache))
    kind = next(r for r in recipes.host_tools() if r.component == "kind")
    built = cache / "bin" / "kind" / kind.version
    built.mkdir(parents=True)
    fake_tool(built, "kind")
    assert kind_rt.find_tool("kind") == str(built / "kind")


# ------------------------------------------------------------------ the lab's metrics on kind
def test_prometheus_is_mapped_to_the_hosts_loopback_and_its_images_loaded():
    s = LabSpec(name="m", runtime="kind", fleet="tiny", kai_version="v0.17.0")
    plan = build_plan(with_addon(s), load_fleet("tiny"), "v0.17.0", metrics_port=41234)
    assert plan.kind_config["nodes"][0]["extraPortMappings"] == [
        {"containerPort": kind_metrics.NODE_PORT, "hostPort": 41234, "listenAddress": "127.0.0.1", "protocol": "TCP"}]
    assert set(versions.metrics_images().values()) <= set(plan.preload_images) and plan.metrics_port == 41234
    off = build_plan(with_addon(LabSpec(name="m", runtime="kind", fleet="tiny", kai_version="v0.17.0", metrics=False)),
                     load_fleet("tiny"), "v0.17.0", metrics_port=41234)
    assert "extraPortMappings" not in off.kind_config["nodes"][0] and off.metrics_port is None
    assert not set(versions.metrics_images().values()) & set(off.preload_images)


def test_prometheus_scrapes_every_kai_service_with_a_metrics_port_and_kube_state_metrics():
    services = [
        {"metadata": {"name": "queue-controller", "namespace": "kai-scheduler"},
         "spec": {"ports": [{"name": "metrics", "port": 8080}]}},
        {"metadata": {"name": "kai-scheduler-default", "namespace": "kai-scheduler"},
         "spec": {"ports": [{"name": "http-metrics", "port": 8080}]}},
        {"metadata": {"name": "admission", "namespace": "kai-scheduler"},
         "spec": {"ports": [{"name": "webhook", "port": 443}]}},
    ]
    kai = kind_metrics.service_targets(services)
    assert kai == {"kai-scheduler-default": "kai-scheduler-default.kai-scheduler.svc:8080",
                   "queue-controller": "queue-controller.kai-scheduler.svc:8080"}
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in kind_metrics.scrape_config(kai)["scrape_configs"]}
    assert jobs["kube-state-metrics"] == ["kube-state-metrics.monitoring.svc:8080"] and len(jobs) == 3


def test_metrics_manifests_sit_where_kais_operator_looks_and_on_the_real_node():
    docs = kind_metrics.manifests({"queue-controller": "queue-controller.kai-scheduler.svc:8080"},
                                  kind_rt.CONTROL_PLANE_SELECTOR)
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    # KAI's operator finds kube-state-metrics by this label in `monitoring` (KaiServicesForServiceMonitor)
    ksm = by[("Service", "kube-state-metrics")]
    assert ksm["metadata"]["namespace"] == "monitoring"
    assert ksm["metadata"]["labels"]["app.kubernetes.io/name"] == "kube-state-metrics"
    prom = by[("Service", "prometheus")]
    assert prom["spec"]["type"] == "NodePort" and prom["spec"]["ports"][0]["nodePort"] == kind_metrics.NODE_PORT
    assert kind_metrics.IN_CLUSTER_URL == "http://prometheus.monitoring.svc:9090"
    for name in kind_metrics.DEPLOYMENTS:
        pod = by[("Deployment", name)]["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == kind_rt.CONTROL_PLANE_SELECTOR  # never on a fake KWOK node
        assert pod["containers"][0]["image"] == versions.metrics_images()[name]
    config = yaml.safe_load(by[("ConfigMap", "prometheus")]["data"]["prometheus.yaml"])
    assert config["global"]["scrape_interval"] == "2s"
    assert docs[0]["kind"] == "Namespace"  # first: everything else lives in it


def test_prometheus_release_from_its_module_version():
    assert versions.prometheus_release("v0.316.0") == "v3.16.0"
    assert versions.prometheus_release("v0.300.1") == "v3.0.1"
    with pytest.raises(KailabError) as err:
        versions.prometheus_release("v2.53.0")
    assert "versions.yaml" in str(err.value) and "\n" not in str(err.value)


def test_a_kind_death_of_kais_deployments_is_named_as_kais():
    from kailab.runtimes.base import LabRecord

    from kailab.labs import Lab, with_addon

    addon = with_addon(LabSpec(name="k", kai_version="v0.17.0")).addon
    rec = LabRecord(name="k", runtime="kind", kai_version="v0.17.0", fleet="tiny", nodes=2, gpus=8, kubeconfig="", stack=addon.record())
    assert {"kai-scheduler-default", "binder", "kai-operator"} <= Lab(rec).scheduler_components()
    assert "prometheus" not in Lab(rec).scheduler_components()
    on_binary = LabRecord(**{**rec.__dict__, "runtime": "binary"})
    assert set(versions.KAI_COMPONENTS) <= Lab(on_binary).scheduler_components()
