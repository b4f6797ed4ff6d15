"""Pure pieces of the toolchain and the KAI install: wrapper go.mod text, recipes, CRD patching,
process flags. (The builds themselves run for real in every lab test.)"""

from __future__ import annotations

import json

import pytest
import yaml

from kailab import toolchain, versions, yamlfast
from kailab.stacks.kai import install as kai


def test_wrapper_gomod_repeats_replaces_and_pins_local_ones():
    upstream = {"Go": "1.25.0", "Replace": [
        {"Old": {"Path": "k8s.io/api"}, "New": {"Path": "./staging/src/k8s.io/api"}},
        {"Old": {"Path": "go.etcd.io/etcd"}, "New": {"Path": "./FORBIDDEN_DEPENDENCY"}},
        {"Old": {"Path": "golang.org/x/oauth2"}, "New": {"Path": "golang.org/x/oauth2", "Version": "v0.28.0"}},
        {"Old": {"Path": "example.com/x", "Version": "v1.0.0"}, "New": {"Path": "example.com/y", "Version": "v1.2.0"}},
    ]}
    k8s = next(r for r in toolchain.recipes_for("v0.17.0") if r.component == "kubernetes-node")
    text = toolchain.wrapper_gomod(k8s, upstream)
    lines = text.splitlines()
    assert "go 1.25.0" in lines
    assert "require k8s.io/kubernetes v1.36.3" in lines
    assert "replace k8s.io/api => k8s.io/api v0.36.3" in lines  # staging module at the matching v0
    assert "replace golang.org/x/oauth2 => golang.org/x/oauth2 v0.28.0" in lines
    assert "replace example.com/x v1.0.0 => example.com/y v1.2.0" in lines
    assert not any("FORBIDDEN" in line for line in lines)


def test_etcd_local_replaces_take_the_same_version():
    etcd = next(r for r in toolchain.recipes_for("v0.17.0") if r.component == "etcd")
    upstream = {"Replace": [{"Old": {"Path": "go.etcd.io/etcd/api/v3"}, "New": {"Path": "../api"}}]}
    assert f"replace go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 {versions.ETCD_VERSION}" in \
        toolchain.wrapper_gomod(etcd, upstream)


def test_recipes_pin_kubernetes_by_kai_release_and_key_local_kai_builds_apart(monkeypatch, tmp_path):
    monkeypatch.delenv("KAILAB_KAI_SOURCE", raising=False)  # the user's own setting must not leak in
    keys = {r.component: r.version for r in toolchain.recipes_for("v0.15.2")}
    assert keys == {"etcd": versions.ETCD_VERSION, "kubernetes-node": "v1.36.3", "kwok": versions.KWOK_VERSION,
                    "kai": "v0.15.2"}
    kai_recipe = toolchain.kai_recipe(versions.kai_release("v0.17.0"))
    assert kai_recipe.module == "github.com/kai-scheduler/KAI-scheduler"
    assert set(kai_recipe.binaries) == set(versions.KAI_BINARIES)
    monkeypatch.setenv("KAILAB_KAI_SOURCE", str(tmp_path))
    local = toolchain.kai_recipe(versions.kai_release("v0.17.0"))
    assert local.version.startswith("v0.17.0-src-") and local.source == tmp_path.resolve()


def test_crds_lose_conversion_webhooks_and_queues_store_v2(monkeypatch, tmp_path):
    crds = tmp_path / "deployments" / "kai-scheduler" / "crds"
    crds.mkdir(parents=True)
    (crds / "scheduling.run.ai_queues.yaml").write_text(yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "queues.scheduling.run.ai"},
        "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {}}},
                 "versions": [{"name": "v1", "storage": True}, {"name": "v2", "storage": False}]}}))
    (doc,) = kai.crd_documents(tmp_path)
    assert doc["spec"]["conversion"] == {"strategy": "None"}
    assert {v["name"]: v["storage"] for v in doc["spec"]["versions"]} == {"v1": False, "v2": True}


@pytest.mark.kai
def test_the_operators_own_crds_are_not_installed():
    """Config and SchedulingShard are read by KAI's operator alone, which a lab does not run."""
    tree = toolchain.kai_tree(toolchain.kai_recipe(versions.kai_release(versions.DEFAULT_KAI)))
    names = {d["metadata"]["name"] for d in kai.crd_documents(tree)}
    assert names.isdisjoint(kai.OPERATOR_ONLY_CRDS)
    assert {"queues.scheduling.run.ai", "podgroups.scheduling.run.ai", "bindrequests.scheduling.run.ai",
            "topologies.kai.scheduler"} <= names
    shipped = {yamlfast.load(f.read_text())["metadata"]["name"]
               for f in (tree / "deployments" / "kai-scheduler" / "crds").glob("*.yaml")}
    assert kai.OPERATOR_ONLY_CRDS <= shipped  # still KAI's names: a rename would show up here


def test_every_kai_process_gets_its_own_loopback_ports():
    names = [f"{c}.{p}" for c, ps in kai.component_ports().items() for p in ps]
    ports = {n: 20000 + i for i, n in enumerate(names)}
    ports["kube-apiserver"] = 6443
    seen = set()
    for comp in versions.KAI_COMPONENTS:
        argv = kai.component_argv(comp, toolchain.binary_path("kai", "v0.17.0", comp), ports)
        addrs = [a.split("=", 1)[1] for a in argv if a.startswith("--") and "127.0.0.1:" in a]
        assert addrs, comp
        for a in addrs:
            assert a.startswith("127.0.0.1:") and a not in seen
            seen.add(a)
        assert kai.health_url(comp, ports).startswith("http://127.0.0.1:")
    assert kai.snapshot_url(ports) == f"http://127.0.0.1:{ports['scheduler.plugins']}/get-snapshot"


def test_podgroupcontroller_runs_in_its_own_network_namespace_bridged_to_the_lab():
    """It listens on :8080 and :9443 whatever its flags say: the shim keeps that private (see netns.py)."""
    ports = {"podgroupcontroller.metrics": 20001, "podgroupcontroller.probe": 20002,
             "podgroupcontroller.webhook": 20003, "kube-apiserver": 6443}
    argv = kai.component_argv("podgroupcontroller", toolchain.binary_path("kai", "v0.17.0", "podgroupcontroller"),
                              ports)
    sep = argv.index("--")
    assert argv[1:3] == ["-m", "kailab.runtimes.netns"]
    assert set(argv[3:sep]) == {"--connect=6443", "--expose=20002=20002",
                                f"--expose=20001={kai.PODGROUPCONTROLLER_METRICS_PORT}",
                                f"--expose=20003={kai.PODGROUPCONTROLLER_WEBHOOK_PORT}"}
    assert argv[sep + 1].endswith("/podgroupcontroller")
    assert "--enable-podgroup-webhook=true" in argv


def test_admission_runs_in_its_own_network_namespace_with_gpu_sharing_on():
    """Its webhook server listens on every interface (--webhook-addr is a port): the shim bridges it."""
    ports = {"admission.webhook": 20011, "admission.metrics": 20012, "admission.probe": 20013, "kube-apiserver": 6443}
    argv = kai.component_argv("admission", toolchain.binary_path("kai", "v0.17.0", "admission"), ports)
    sep = argv.index("--")
    assert set(argv[3:sep]) == {"--connect=6443", "--expose=20011=20011", "--expose=20012=20012",
                                "--expose=20013=20013"}
    assert {"--webhook-addr=20011", "--gpu-sharing-enabled=true", "--leader-elect=false"} <= set(argv[sep + 1:])


def test_webhook_configurations_are_kais_with_loopback_urls():
    ports = {"admission.webhook": 20011, "podgroupcontroller.webhook": 20003}
    confs = {c["metadata"]["name"]: c for c in kai.webhook_configurations(ports, "Q0E=")}
    assert set(confs) == {"mutating-kai-admission", "validating-kai-admission", "kai-podgroup-validation-v2alpha2"}
    (mutate,) = confs["mutating-kai-admission"]["webhooks"]
    assert mutate["clientConfig"] == {"url": "https://127.0.0.1:20011/mutate--v1-pod", "caBundle": "Q0E="}
    assert mutate["failurePolicy"] == "Fail" and mutate["rules"][0]["operations"] == ["CREATE"]
    assert mutate["matchConditions"][0]["expression"] == "object.spec.schedulerName == 'kai-scheduler'"
    pod_check, topology = confs["validating-kai-admission"]["webhooks"]
    assert pod_check["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert topology["clientConfig"]["url"].endswith("/validate-kai-scheduler-v1alpha1-topology")
    (pg,) = confs["kai-podgroup-validation-v2alpha2"]["webhooks"]
    # a version whose admission validates no Topologies (before v0.17) registers no such webhook
    older = {c["metadata"]["name"]: c for c in kai.webhook_configurations(ports, "Q0E=", topologies=False)}
    assert [w["name"] for w in older["validating-kai-admission"]["webhooks"]] == [pod_check["name"]]
    assert pg["clientConfig"]["url"] == "https://127.0.0.1:20003/validate-scheduling-run-ai-v2alpha2-podgroup"


def _chart_tree(tmp_path, values: dict):
    chart = tmp_path / "deployments" / "kai-scheduler"
    (chart / "templates" / "priorityclasses").mkdir(parents=True)
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    (chart / "templates" / "priorityclasses" / "train.yaml").write_text(
        "{{- if .Values.defaultPriorityClasses.enabled }}\napiVersion: scheduling.k8s.io/v1\n"
        "kind: PriorityClass\nmetadata:\n  name: train\nvalue: 50\n{{- end }}\n")
    return tmp_path


def test_chart_objects_follow_the_charts_values(tmp_path):
    res = {"gpu": {"quota": 0, "limit": -1, "overQuotaWeight": 1}}
    tree = _chart_tree(tmp_path, {"defaultPriorityClasses": {"enabled": True}, "defaultQueue": {
        "createDefaultQueue": True, "parentName": "p", "childName": "c",
        "parentResources": res, "childResources": res}})
    objs = {(o["kind"], o["metadata"]["name"]): o for o in kai.chart_objects(tree)}
    assert set(objs) == {("PriorityClass", "train"), ("Queue", "p"), ("Queue", "c")}
    assert objs[("PriorityClass", "train")]["value"] == 50
    assert objs[("Queue", "c")]["spec"] == {"parentQueue": "p", "resources": res}
    off = _chart_tree(tmp_path / "off", {"defaultPriorityClasses": {"enabled": False},
                                         "defaultQueue": {"createDefaultQueue": False}})
    assert kai.chart_objects(off) == []


def test_recent_log_is_plain_text_while_the_log_file_stays_raw(tmp_path):
    from kailab.runtimes import processes

    raw = "2026-11-22 \x1b[34mINFO\x1b[0m scheduler started\n\x1b[31mERROR\x1b[0m boom\n"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "scheduler.log").write_text(raw)
    assert processes.recent_log(tmp_path, "scheduler", 5) == "2026-11-22 INFO scheduler started\nERROR boom"
    assert (tmp_path / "logs" / "scheduler.log").read_text() == raw


def test_placement_is_validated_exactly():
    """KAI takes any word but `spread` as binpack without a word: the format refuses it."""
    import pydantic

    from kailab.exercise.spec import SchedulerSetting

    assert SchedulerSetting.model_validate({"placement": "spread"}).placement == "spread"
    for bad in ("Spread", "spreading", "pack"):
        with pytest.raises(pydantic.ValidationError):
            SchedulerSetting.model_validate({"placement": bad})


def test_a_binary_lab_builds_no_node_binaries_and_a_kind_node_adds_only_those(tmp_path, monkeypatch):
    """A binary lab compiles Kubernetes' control plane only; kind's node image asks for kubeadm, kubelet
    and kube-proxy too, and a folder holding the control plane gets just those three, its manifest
    listing all seven."""
    from kailab.images.recipes import node_recipes

    k8s = versions.kai_release(versions.DEFAULT_KAI).kubernetes
    lab = {b for r in toolchain.recipes_for(versions.DEFAULT_KAI) for b in r.binaries}
    assert not lab & set(toolchain.NODE_ONLY) and set(toolchain.CONTROL_PLANE) <= lab
    node = next(r for r in node_recipes(k8s) if r.component == "kubernetes-node")
    assert set(toolchain.NODE_ONLY) | set(toolchain.CONTROL_PLANE) == set(node.binaries)

    monkeypatch.setenv("KAILAB_CACHE", str(tmp_path))
    asked: list[set[str]] = []

    def fake_build(recipe, work, dest, on_phase):  # stands in for the Go build: records what it was asked
        asked.append(set(recipe.binaries))
        dest.mkdir(parents=True, exist_ok=True)
        for name in recipe.binaries:
            (dest / name).write_text(name)
        (dest / "manifest.json").write_text(json.dumps({"binaries": {n: "sha-" + n for n in recipe.binaries},
                                                        "build_cpu_seconds": 10.0 * len(recipe.binaries)}))
        return dest

    monkeypatch.setattr(toolchain, "_build_locked", fake_build)
    toolchain.build(toolchain.kubernetes_recipe(k8s))
    toolchain.build(node)
    toolchain.build(node)  # cached now: nothing asked
    assert asked == [set(toolchain.CONTROL_PLANE), set(toolchain.NODE_ONLY)]
    assert set(toolchain.manifest("kubernetes-node", k8s)["binaries"]) == set(node.binaries)
    # and what the folder's binaries cost, both builds (`kailab tools list`'s CPU-s)
    assert toolchain.manifest("kubernetes-node", k8s)["build_cpu_seconds"] == 10.0 * len(node.binaries)


@pytest.mark.parametrize("pkg, name", [("go.etcd.io/etcd/server/v3", "server"), ("helm.sh/helm/v3/cmd/helm", "helm"),
                                       ("example.com/tool/v1", "v1"), ("./cmd/containerd-shim-runc-v2", "containerd-shim-runc-v2"),
                                       ("k8s.io/kubernetes/cmd/kube-apiserver/", "kube-apiserver"), ("example.com/x/v12", "x")])
def test_the_names_go_build_gives_binaries_in_a_folder(pkg, name):
    """One `go build -o dir/` makes a recipe's binaries; kailab renames them from the names Go gives."""
    assert toolchain._exec_name(pkg) == name


def test_builds_compile_into_kailabs_own_go_cache_and_clean_go_cache_empties_only_it(cache, tmp_path, monkeypatch):
    """A real `go build` through kailab's runner lands in kailab's Go build cache, never the user's;
    `kailab tools clean-go-cache` empties it and says how much it held, and a built binary stays."""
    from helpers import kailab_cli

    users = tmp_path / "users-go-cache"
    monkeypatch.setenv("GOCACHE", str(users))
    monkeypatch.delenv("KAILAB_GO_CACHE")  # the default: in kailab's cache
    mod = tmp_path / "m"
    mod.mkdir()
    (mod / "go.mod").write_text("module example.com/m\n\ngo 1.22\n")
    (mod / "m.go").write_text("package m\n\nfunc F() int { return 1 }\n")
    binary = cache / "bin" / "x" / "v1" / "x"
    binary.parent.mkdir(parents=True)
    binary.write_text("stays")
    cpu = toolchain.go_cpu_seconds()
    with open(tmp_path / "build.log", "w") as log:
        toolchain.run_go(["build", "./"], mod, log)
    assert toolchain.go_cpu_seconds() > cpu  # the build's CPU is counted (what `built` lines and manifests say)

    def entries(root):
        return [f for f in root.rglob("*-d")] if root.is_dir() else []

    assert entries(toolchain.go_cache()) and toolchain.go_cache() == cache / "go-build"
    assert not entries(users)
    held = toolchain.go_cache_bytes()
    assert held > 0
    listed = kailab_cli("tools", "list", check=True)
    assert f"Go build cache {cache / 'go-build'}: {held / 2**20:.0f} MiB of compiled packages" in listed.stdout
    run = kailab_cli("tools", "clean-go-cache", check=True)
    assert f"removed {held / 2**20:.0f} MiB of compiled packages from {cache / 'go-build'}" in run.stdout
    assert not entries(toolchain.go_cache()) and binary.read_text() == "stays"
    assert f"Go build cache {cache / 'go-build'}: 0 MiB" in kailab_cli("tools", "list", check=True).stdout


def test_only_tools_doing_none_of_a_labs_steady_work_compile_without_optimizations():
    from kailab.images import recipes

    quick = {r.component for r in recipes.all_recipes("v0.17.0") if not r.optimize}
    assert quick == {"kind", "runc", "cni-plugins", "crictl"}
    assert all(r.optimize for r in toolchain.recipes_for("v0.17.0") + toolchain.metrics_recipes())


def test_coredns_is_built_from_a_main_of_kailabs_own_with_the_plugins_of_the_labs_corefiles():
    from kailab.images.node import coredns_recipe

    dns = coredns_recipe("v1.14.2")
    assert not dns.optimize and dns.binaries == {"coredns": "kailab.local/build/coredns-lab/cmd/coredns"}
    # every directive of kubeadm's Corefile (a kind node's cluster DNS) and of vCluster's (its CoreDNS runs the
    # host's image); `prometheus` is the metrics plugin's directive, `import` caddy's own
    for plugin in ("errors", "health", "ready", "kubernetes", "metrics", "forward", "cache", "loop", "reload",
                   "loadbalance", "rewrite", "hosts"):
        assert f'_ "github.com/coredns/coredns/plugin/{plugin}"' in dns.main_source, plugin
    assert '"github.com/coredns/coredns/core/plugin"' not in dns.main_source  # the package linking every plugin
