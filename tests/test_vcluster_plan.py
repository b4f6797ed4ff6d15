"""The kind-host version trial's plan (one vCluster per KAI version), checked without Docker.

`trial_plan` is pure, so every vcluster.yaml, node pool, command and clean-up step a trial on a
kind host would use is inspected here as data; the CLI's dry run is checked as a subprocess.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import yaml

from kailab import versions
from kailab.fleet import load_fleet
from kailab.runtimes import kind as kind_rt
from kailab.stacks.kai import kind as kai_kind, vcluster as vc

VERSIONS = ["v0.16.8", "v0.17.0"]
PAIRS = [("tiny", ["v0.16.8", "v0.17.0"]), ("small", ["v0.15.0", "v0.17.0"]),
         ("tiny", ["v0.15.2", "v0.16.0", "v0.17.0"])]


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    """Plans name files under a temporary state dir, never the user's."""
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))


def plan_for(fleet: str = "tiny", version_list=VERSIONS, host: str = "t"):
    return vc.trial_plan(list(version_list), load_fleet(fleet), host)


def selects(selector: dict, labels: dict) -> bool:
    """vCluster's node sync: `all` selects every node, else every selector label must match."""
    return selector["all"] or all(labels.get(k) == v for k, v in selector["labels"].items())


def find(commands, *words):
    """The commands containing every word as an argv item."""
    return [argv for argv in commands if all(w in argv for w in words)]


def arg(argv, flag):
    return argv[argv.index(flag) + 1]


def strip_trial(node: dict, version_slug: str) -> dict:
    """A trial node back as the fleet made it: no prefix, no trial label, its own hostname."""
    node = copy.deepcopy(node)
    prefix = f"{version_slug}-"
    assert node["metadata"]["name"].startswith(prefix)
    name = node["metadata"]["name"][len(prefix):]
    node["metadata"]["name"] = name
    assert node["metadata"]["labels"].pop(vc.TRIAL_LABEL) == version_slug
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == prefix + name
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return node


# ------------------------------------------------------------------ per-version vcluster.yaml
@pytest.mark.parametrize("fleet, version_list", PAIRS)
def test_every_version_runs_the_virtual_scheduler_and_syncs_only_its_own_nodes(fleet, version_list):
    plan = plan_for(fleet, version_list)
    assert [v.version for v in plan.versions] == version_list
    for vp in plan.versions:
        values = vp.values
        assert values["controlPlane"]["advanced"]["virtualScheduler"] == {"enabled": True}
        assert values["sync"]["toHost"]["pods"]["enabled"] is True
        nodes = values["sync"]["fromHost"]["nodes"]
        assert nodes["enabled"] is True
        # `all: true` would make vCluster ignore the labels
        assert nodes["selector"] == {"all": False, "labels": {vc.TRIAL_LABEL: vp.slug}}
        # what vcluster create reads is what was checked
        assert yaml.safe_load(vp.files[f"{vp.slug}/vcluster.yaml"]) == values
        for other in plan.versions:
            for node in other.node_manifests:
                assert selects(nodes["selector"], node["metadata"]["labels"]) == (other is vp)


def test_each_version_has_one_real_kind_worker_in_its_selection():
    """KAI's own pods run only on a synced node: each vCluster must see exactly one real node."""
    plan = plan_for(version_list=["v0.15.0", "v0.16.8", "v0.17.0"])
    roles = [n["role"] for n in plan.kind_config["nodes"]]
    assert roles == ["control-plane", "worker", "worker", "worker"]
    workers = plan.kind_config["nodes"][1:]
    for vp in plan.versions:
        selector = vp.values["sync"]["fromHost"]["nodes"]["selector"]
        mine = [w for w in workers if selects(selector, w["labels"])]
        assert mine == [vp.worker] and vp.worker["labels"][vc.INFRA_LABEL] == "true"
        # the control plane, CoreDNS and KAI are pinned to it, never to a fake KWOK node
        sts = vp.values["controlPlane"]["statefulSet"]["scheduling"]["nodeSelector"]
        assert [w for w in workers if all(w["labels"].get(k) == v for k, v in sts.items())] == [vp.worker]
        assert vp.values["controlPlane"]["coredns"]["deployment"]["nodeSelector"] == {vc.INFRA_LABEL: "true"}
        kai_values = yaml.safe_load(vp.files[f"{vp.slug}/kai-values.yaml"])
        assert kai_values["global"]["nodeSelector"] == {vc.INFRA_LABEL: "true"}
        for node in vp.node_manifests:
            assert vc.INFRA_LABEL not in node["metadata"]["labels"]
    assert yaml.safe_load(plan.host_files["kind-config.yaml"]) == plan.kind_config


@pytest.mark.parametrize("version, minor", [("v0.15.0", "1.35"), ("v0.16.8", "1.35"), ("v0.17.0", "1.35")])
def test_virtual_kubernetes_follows_each_kai_release(version, minor):
    vp = plan_for(version_list=[version, "v0.16.0"]).versions[0]
    tag = vp.values["controlPlane"]["distro"]["k8s"]["image"]["tag"]
    assert tag == kind_rt.pins()["vcluster"]["kubernetes_images"][minor]
    assert tag.startswith(f"v{minor}.")
    # the release's own minor, or the one below it where kind.yaml has no image for it yet
    lab_minor = int(versions.kai_release(version).kubernetes.split(".")[1])
    assert int(minor.split(".")[1]) in (lab_minor, lab_minor - 1)


# ------------------------------------------------------------------ node pools
@pytest.mark.parametrize("fleet, version_list", PAIRS)
def test_node_pools_are_disjoint_copies_of_the_fleet(fleet, version_list):
    fleet_ = load_fleet(fleet)
    plan = plan_for(fleet, version_list)
    names = [n["metadata"]["name"] for vp in plan.versions for n in vp.node_manifests]
    assert len(names) == len(set(names)) == len(version_list) * fleet_.nodes_total
    hostnames = [n["metadata"]["labels"]["kubernetes.io/hostname"] for vp in plan.versions for n in vp.node_manifests]
    assert hostnames == names
    for vp in plan.versions:
        assert {n["metadata"]["labels"][vc.TRIAL_LABEL] for n in vp.node_manifests} == {vp.slug}
        assert [strip_trial(n, vp.slug) for n in vp.node_manifests] == fleet_.node_manifests()
        gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in vp.node_manifests)
        assert gpus == fleet_.gpus_total
        assert list(yaml.safe_load_all(vp.files[f"{vp.slug}/fleet-nodes.yaml"])) == vp.node_manifests
    assert len({vp.slug for vp in plan.versions}) == len(version_list)


def test_version_nodes_are_created_on_the_host_and_waited_for():
    plan = plan_for()
    for vp in plan.versions:
        fleet_file = os.path.join(plan.lab_dir, vp.slug, "fleet-nodes.yaml")
        applies = find(vp.commands, "apply", fleet_file)
        assert len(applies) == 2 and all(arg(a, "--kubeconfig") == plan.host_kubeconfig for a in applies)
        assert "--subresource=status" in applies[1]
        waits = find(vp.commands, "wait", "--for=condition=Ready", f"{vc.TRIAL_LABEL}={vp.slug},type=kwok")
        assert {arg(w, "--kubeconfig") for w in waits} == {plan.host_kubeconfig, vp.kubeconfig}


# ------------------------------------------------------------------ commands
@pytest.mark.parametrize("version_list", [["v0.16.8", "v0.17.0"], ["v0.15.0", "v0.15.2", "v0.17.0"]])
def test_vcluster_create_connect_and_kai_install_per_version(version_list):
    plan = plan_for(version_list=version_list)
    pin = kind_rt.pins()["vcluster"]
    for vp in plan.versions:
        vcl = ["env", f"KUBECONFIG={plan.host_kubeconfig}", "vcluster"]
        create = find(vp.commands, "vcluster", "create", vp.vcluster_name)
        assert len(create) == 1
        create = create[0]
        assert create[:5] == [*vcl, "create", vp.vcluster_name]
        assert arg(create, "-n") == vp.namespace
        assert arg(create, "--values") == os.path.join(plan.lab_dir, vp.slug, "vcluster.yaml")
        assert arg(create, "--chart-version") == str(pin["chart_version"]) and "--connect=false" in create
        i = vp.commands.index(find(vp.commands, "vcluster", "connect", vp.vcluster_name)[0])
        assert vp.commands[i] == [*vcl, "connect", vp.vcluster_name, "-n", vp.namespace, "--print"]
        assert vp.stdout_files == {i: vp.kubeconfig}
        assert vp.kubeconfig == os.path.join(plan.lab_dir, vp.slug, "kubeconfig")
        # KAI at this version, INTO the vCluster, with the chart ref kind.py chooses
        helm = find(vp.commands, "helm", kai_kind.kai_chart_ref(vp.version))
        assert len(helm) == 1
        helm = helm[0]
        assert helm[:4] == ["helm", "upgrade", "--install", "kai-scheduler"]
        assert helm[4] == vp.kai_chart == kai_kind.kai_chart_ref(vp.version)
        assert arg(helm, "--version") == vp.version and arg(helm, "--kubeconfig") == vp.kubeconfig
        assert i < vp.commands.index(helm)  # the kubeconfig exists before helm needs it
        for dep in kind_rt.pins()["kai"]["deployments"]:
            rollout = find(vp.commands, "rollout", "status", f"deployment/{dep}")
            assert len(rollout) == 1 and arg(rollout[0], "--kubeconfig") == vp.kubeconfig
        # the exercises run through the existing runtime against the vCluster
        up = find(vp.commands, "up", "--runtime", "existing")[0]
        assert up == ["kailab", "up", "--runtime", "existing", "--kubeconfig", vp.kubeconfig, "--name", vp.lab_name]
        run = vp.commands[vp.run_step]
        assert run[:2] == ["kailab", "run"] and arg(run, "--name") == vp.lab_name
        assert arg(run, "--evidence").endswith(f"/{vp.version}")
        assert vp.commands.index(up) < vp.run_step == len(vp.commands) - 1
    assert vp.lab_name == f"t-{vp.slug}"
    assert len({vp.vcluster_name for vp in plan.versions}) == len({vp.namespace for vp in plan.versions}) \
        == len(version_list)


def test_cleanup_deletes_vcluster_namespace_pvcs_and_nodes():
    plan = plan_for()
    for vp in plan.versions:
        delete = find(vp.cleanup, "vcluster", "delete", vp.vcluster_name)
        assert len(delete) == 1 and "--delete-namespace" in delete[0] and arg(delete[0], "-n") == vp.namespace
        pvc = find(vp.cleanup, "delete", "pvc")
        assert len(pvc) == 1 and arg(pvc[0], "-n") == vp.namespace
        assert arg(pvc[0], "-l") == f"app=vcluster,release={vp.vcluster_name}"  # the StatefulSet's selector
        nodes = find(vp.cleanup, "delete", "nodes")
        assert len(nodes) == 1 and arg(nodes[0], "--kubeconfig") == plan.host_kubeconfig
        selector = arg(nodes[0], "-l")
        assert selector.startswith(f"{vc.TRIAL_LABEL}={vp.slug}")
        # every one of this version's nodes is deleted, its kind worker is not
        labels = dict(kv.split("=") for kv in selector.split(","))
        assert all(all(n["metadata"]["labels"].get(k) == v for k, v in labels.items()) for n in vp.node_manifests)
        assert not all(vp.worker["labels"].get(k) == v for k, v in labels.items())
        assert find(vp.cleanup, "delete", "namespace", vp.namespace)
        assert find(vp.cleanup, "kailab", "down", vp.lab_name)
        # PVC after the vCluster (its pod must be gone first), all idempotent
        assert vp.cleanup.index(delete[0]) < vp.cleanup.index(pvc[0])
        assert all("--ignore-not-found" in c for c in vp.cleanup if "delete" in c)
        # the same clean-up runs first, so a re-used name never finds old data
        pre = vp.commands[:vp.commands.index(find(vp.commands, "vcluster", "create")[0])]
        assert delete[0] in pre and pvc[0] in pre and nodes[0] in pre
        assert len(vp.cleanup_descriptions) == len(vp.cleanup) and len(vp.descriptions) == len(vp.commands)
    assert plan.host_cleanup == [["kind", "delete", "cluster", "--name", plan.cluster]]


# ------------------------------------------------------------------ host
def test_host_is_the_kind_plan_without_kai_and_without_the_fleet():
    plan = plan_for("small", ["v0.15.0", "v0.17.0"])
    flat = [" ".join(c) for c in plan.host_commands]
    assert plan.host_commands[0][:3] == ["kind", "create", "cluster"]
    assert arg(plan.host_commands[0], "--config").endswith("/kind-config.yaml")
    assert not any("kai-scheduler" in c for c in flat)  # no KAI on the host
    assert not any("fleet-nodes.yaml" in c or "kailab.io/fleet=" in c for c in flat)  # no shared fleet
    assert "fleet-nodes.yaml" not in plan.host_files
    assert any("kwok" in c and "apply -f https://" in c for c in flat)
    assert any("fake-gpu-operator" in c and c.startswith("helm upgrade --install") for c in flat)
    assert {"kwok-config.yaml", "kwok-stages.yaml", "fake-gpu-operator-values.yaml"} <= set(plan.host_files)
    # the kind runtime's pieces, not copies: same stages, same fake-gpu-operator values
    assert plan.host_files["kwok-stages.yaml"] == kind_rt.kwok_stages_text()
    assert yaml.safe_load(plan.host_files["fake-gpu-operator-values.yaml"]) == \
        kind_rt.fake_gpu_operator_values(load_fleet("small"))
    # the host runs the newest version's Kubernetes
    assert plan.kind_config["nodes"][0]["image"] == kind_rt.node_image(versions.kai_release("v0.17.0").kubernetes)
    assert plan.cluster == "kailab-t"


def test_plan_is_pure_and_rejects_duplicates(tmp_path):
    plan_for()
    assert not (tmp_path / "state").exists()  # nothing written, nothing started
    with pytest.raises(vc.KailabError, match="twice"):
        plan_for(version_list=["v0.17.0", "0.17.0"])
    with pytest.raises(vc.KailabError, match="unknown KAI version"):
        plan_for(version_list=["v0.16.8", "v0.99.0"])


def test_render_lists_every_command_and_file():
    plan = plan_for()
    text = vc.render(plan)
    for argv in plan.host_commands + plan.host_cleanup:
        assert vc._shown(argv) in text
    for vp in plan.versions:
        for i, argv in enumerate(vp.commands):
            assert vc._shown(argv, vp.stdout_files.get(i)) in text
        for argv in vp.cleanup:
            assert vc._shown(argv) in text
        for name in vp.files:
            assert f"# ---- {plan.lab_dir}/{name}" in text
    for name in plan.host_files:
        assert f"# ---- {plan.lab_dir}/{name}" in text
    assert "vcluster connect kai-v0-16-8 -n vcluster-kai-v0-16-8 --print > " in text


# ------------------------------------------------------------------ the CLI
def kailab(*args: str, tmp_path, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "KAILAB_STATE": str(tmp_path / "state"), "KAILAB_EVIDENCE": str(tmp_path / "ev"),
               **env}
    return subprocess.run([sys.executable, "-m", "kailab.cli", *args], capture_output=True, text=True,
                          timeout=120, env=environ)


def test_cli_dry_run_prints_every_vcluster_and_helm_command(tmp_path):
    out = kailab("trial", "--runtime", "kind", "--dry-run", "--versions", "v0.16.8,v0.17.0", "--fleet", "tiny",
                 tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for v in ["v0.16.8", "v0.17.0"]:
        s = vc.slug(v)
        name, ns = vc.vcluster_name(s), vc.vcluster_namespace(s)
        assert f"vcluster create {name} -n {ns} --values " in text
        assert f"vcluster delete {name} -n {ns} --delete-namespace" in text
        assert f"vcluster connect {name} -n {ns} --print > " in text
        assert (f"helm upgrade --install kai-scheduler {kai_kind.kai_chart_ref(v)} --version {v} " in text)
        assert f"delete pvc -l app=vcluster,release={name}" in text
        assert f"delete nodes -l {vc.TRIAL_LABEL}={s}" in text
    assert "helm upgrade --install gpu-operator oci://ghcr.io/run-ai/fake-gpu-operator/fake-gpu-operator" in text
    assert text.count("helm upgrade --install kai-scheduler") == 2  # once per vCluster, never on the host
    assert not (tmp_path / "state").exists() and not (tmp_path / "ev").exists()  # started nothing


def test_cli_unknown_version_fails_before_anything_is_rendered(tmp_path):
    out = kailab("trial", "--runtime", "kind", "--dry-run", "--versions", "v0.16.8,v0.99.0", "--fleet", "tiny",
                 tmp_path=tmp_path)
    assert out.returncode != 0
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown KAI version v0.99.0" in lines[0]


def test_cli_kind_without_docker_fails_in_one_line(tmp_path):
    out = kailab("trial", "--runtime", "kind", "--versions", "v0.16.8,v0.17.0", "--fleet", "small",
                 tmp_path=tmp_path, DOCKER_HOST=f"unix://{tmp_path}/no-docker.sock")
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Docker engine" in lines[0], out.stderr
    assert not (tmp_path / "state").exists() and not (tmp_path / "ev").exists()


def test_cli_dry_run_needs_the_kind_runtime(tmp_path):
    out = kailab("trial", "--dry-run", "--versions", "v0.16.8,v0.17.0", "--fleet", "small", tmp_path=tmp_path)
    assert out.returncode != 0 and "--runtime kind" in out.stderr and out.stdout == ""


def test_run_trial_runs_the_plan_in_order_and_always_cleans_up(tmp_path, monkeypatch):
    """The executor with stand-in kind/kubectl/helm/vcluster that only record their arguments."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    kubeconfig = "apiVersion: v1\nkind: Config\nclusters: [{name: v, cluster: {server: 'https://127.0.0.1:9'}}]\n" \
                 "users: [{name: v, user: {}}]\ncontexts: [{name: v, context: {cluster: v, user: v}}]\n" \
                 "current-context: v\n"
    for tool in ("kind", "kubectl", "helm", "vcluster"):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\necho \"{tool} $*\" >> {calls}\n"
                          f"if [ \"$1\" = connect ]; then printf '%s' \"{kubeconfig}\"; fi\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for var in ("KAILAB_KIND", "KAILAB_KUBECTL", "KAILAB_HELM", vc.VCLUSTER_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(vc, "docker_answers", lambda: True)

    from kailab.trial import run_trial

    trial_dir = run_trial(["v0.16.8", "v0.17.0"], ["quota"], "small", root=tmp_path / "ev", runtime="kind")
    log = [line for line in calls.read_text().splitlines() if line != "kubectl version --client -o json"]
    assert log[0].startswith("kind create cluster --name kailab-trial-")
    assert log[-1].startswith("kind delete cluster --name kailab-trial-")  # the host goes, whatever happened
    for v in ("v0.16.8", "v0.17.0"):
        s = vc.slug(v)
        create = log.index(next(line for line in log if line.startswith(f"vcluster create kai-{s} ")))
        helm = log.index(next(line for line in log if line.startswith("helm upgrade --install kai-scheduler")
                              and f"--version {v}" in line))
        deletes = [i for i, line in enumerate(log) if line.startswith(f"vcluster delete kai-{s} ")]
        assert len(deletes) == 2 and deletes[0] < create < helm < deletes[1]  # before and after
        assert any(f"delete pvc -l app=vcluster,release=kai-{s}" in line for line in log[deletes[1]:])
        # the stand-in vCluster has no KAI to adopt: the version's error is recorded, the trial goes on
        assert (trial_dir / v / "lab-error.txt").read_text().startswith("Adopt the vCluster as lab trial-")
    labs = tmp_path / "state" / "labs"
    # no lab left behind (host files, kubeconfigs, records); lab_lock's dot files are not labs
    assert not [p for p in labs.iterdir() if not p.name.startswith(".")]
    assert "vcluster connect" in (trial_dir / "kind-host.log").read_text()
    matrix = (trial_dir / "matrix.md").read_text()
    assert "| quota |" in matrix and "not run" in matrix
