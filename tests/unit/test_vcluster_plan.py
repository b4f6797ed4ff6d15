"""A vCluster trial's plan (one vCluster per KAI version on one host), checked as data without Docker.

`version_plan` is pure, so every vcluster.yaml, node pool, label, command and clean-up step a trial
uses is inspected here; the CLI's dry run and its refusals are checked as subprocesses. The trial
itself runs in tests/live/test_kind_host_vcluster_trial.py.
"""

from __future__ import annotations

import copy
import os
import subprocess

import pytest
import yaml

from kailab.fleet import load_fleet
from kailab.images import image_set
from kailab.images import vcluster as vc_images
from kailab.vcluster import plan as vc
from kailab.vcluster import host as host_mod
from kailab.vcluster import snapshot
from kailab.vcluster.tools import resolve

from helpers import kailab_cli

VERSIONS = ["v0.16.8", "v0.17.0"]
HOST = vc.TrialHost(kubeconfig="/h/kubeconfig", infra_node="kailab-t-control-plane", infra_ip="172.18.0.2",
                    lab_dir="/w", kind_cluster="kailab-t", kubernetes="v1.36.3")
INFRA = {"metadata": {"name": HOST.infra_node, "labels": {"kubernetes.io/hostname": HOST.infra_node,
                                                          "node-role.kubernetes.io/control-plane": ""}}}


def plans(fleet: str = "small", version_list=VERSIONS):
    return vc.trial_plans(list(version_list), load_fleet(fleet), HOST, "t", "registry.k8s.io/coredns/coredns:v1.13.1")


def selects(selector: dict, labels: dict) -> bool:
    """vCluster's node sync: `all` selects every node, else every selector label must match."""
    return selector["all"] or all(labels.get(k) == v for k, v in selector["labels"].items())


def labelled_infra(version_plans) -> dict:
    """The infra node as the plans' label steps leave it: every version's sync and infra labels."""
    node = copy.deepcopy(INFRA)
    for p in version_plans:
        step = next(argv for what, argv in p.steps if argv[-1] == "--overwrite" and HOST.infra_node in argv)
        node["metadata"]["labels"].update(dict(kv.split("=") for kv in step if "=" in kv and "kailab.io/" in kv))
    return node


def arg(argv, flag):
    return argv[argv.index(flag) + 1]


def test_each_vcluster_syncs_its_own_pool_and_the_infra_node_only():
    ps = plans()
    infra = labelled_infra(ps)
    for p in ps:
        sel = p.values["sync"]["fromHost"]["nodes"]["selector"]
        assert sel == {"all": False, "labels": {vc.sync_label(p.slug): "true"}}  # `all` would ignore the labels
        assert selects(sel, infra["metadata"]["labels"])
        for other in ps:
            for node in other.node_manifests:
                assert selects(sel, node["metadata"]["labels"]) == (other is p)
        # its own pods (the control plane, CoreDNS, KAI's) on the infra node, never on a KWOK node
        infra_sel = {vc.infra_label(p.slug): "true"}
        assert p.values["controlPlane"]["statefulSet"]["scheduling"]["nodeSelector"] == infra_sel
        assert p.values["controlPlane"]["coredns"]["deployment"]["nodeSelector"] == infra_sel
        kai_values = yaml.safe_load(p.files[f"{p.slug}/kai-values.yaml"])
        assert kai_values["global"]["nodeSelector"] == infra_sel and kai_values["global"]["gpuSharing"] is True
        assert all(not selects({"all": False, "labels": infra_sel}, n["metadata"]["labels"]) for n in p.node_manifests)
        assert yaml.safe_load(p.files[f"{p.slug}/vcluster.yaml"]) == p.values


def test_every_vcluster_schedules_inside_keeps_nothing_and_uses_images_built_here():
    vs = vc_images.vcluster_set("v1.36.3")
    for p in plans():
        cp = p.values["controlPlane"]
        assert cp["distro"]["k8s"]["scheduler"]["enabled"] is True
        # one replica of each: no leader election whose missed lease renewal stops the control plane
        for part in ("scheduler", "controllerManager"):
            assert "--leader-elect=false" in cp["distro"]["k8s"][part]["extraArgs"]
        # a CPU weight of its own (cpu.shares follow the request): KAI's binder gives up a bind on
        # one watch error, and a starved virtual API server's watch cache answers with one
        assert cp["statefulSet"]["resources"]["requests"]["cpu"] == vc.CONTROL_PLANE_CPU == "150m"
        assert p.values["sync"]["toHost"]["pods"]["enabled"] is True
        assert cp["statefulSet"]["persistence"]["volumeClaim"]["enabled"] is False  # no PVC to outlive it
        k8s, sts = cp["distro"]["k8s"]["image"], cp["statefulSet"]["image"]
        assert f"{k8s['registry']}/{k8s['repository']}:{k8s['tag']}" == vs.kubernetes_image == "ghcr.io/loft-sh/kubernetes:v1.36.3"
        assert f"{sts['registry']}/{sts['repository']}:{sts['tag']}" == vs.syncer_image
        assert p.values["telemetry"] == {"enabled": False}
        assert p.values["sync"]["fromHost"]["runtimeClasses"] == {"enabled": True}  # fractional pods' `nvidia`
        assert cp["coredns"]["deployment"]["image"] == "registry.k8s.io/coredns/coredns:v1.13.1"
        # synced pods own nothing on the host: a host's own KAI then leaves them to the vCluster's
        assert p.values["experimental"]["syncSettings"]["setOwner"] is False


def test_each_api_server_has_its_own_node_port_named_by_its_certificate():
    ps = plans(version_list=["v0.15.0", "v0.15.2", "v0.16.8", "v0.17.0"])
    ports = [p.values["controlPlane"]["service"]["httpsNodePort"] for p in ps]
    assert len(set(ports)) == len(ports) and all(30000 <= x <= 32767 for x in ports)
    for p, port in zip(ps, ports):
        assert p.values["controlPlane"]["service"]["spec"]["type"] == "NodePort"
        assert p.values["controlPlane"]["proxy"]["extraSANs"] == [HOST.infra_ip]
        assert p.server == f"https://{HOST.infra_ip}:{port}"
        connect = next(argv for _, argv in p.steps if "connect" in argv)
        assert arg(connect, "--server") == p.server and "--print" in connect
        assert p.stdout_files == {p.commands.index(connect): p.kubeconfig}


@pytest.mark.parametrize("fleet", ["tiny", "small"])
def test_pools_are_disjoint_copies_of_the_fleet(fleet):
    f = load_fleet(fleet)
    ps = plans(fleet)
    names = [n["metadata"]["name"] for p in ps for n in p.node_manifests]
    assert len(names) == len(set(names)) == len(ps) * f.nodes_total
    for p in ps:
        assert all(n["metadata"]["labels"]["kubernetes.io/hostname"] == n["metadata"]["name"] for n in p.node_manifests)
        stripped = copy.deepcopy(p.node_manifests)
        for n in stripped:
            n["metadata"]["name"] = n["metadata"]["name"].removeprefix(f"{p.slug}-")
            n["metadata"]["labels"]["kubernetes.io/hostname"] = n["metadata"]["name"]
            assert n["metadata"]["labels"].pop(vc.sync_label(p.slug)) == "true"
        assert stripped == f.node_manifests()
        assert list(yaml.safe_load_all(p.files[f"{p.slug}/pool-nodes.yaml"])) == p.node_manifests


def test_the_fleet_check_sees_a_pool_as_its_fleet_by_prefix():
    from kailab.fleet import fleet_difference

    f = load_fleet("small")
    p = plans()[0]
    assert fleet_difference(f, p.node_manifests, f"{p.slug}-") is None
    assert "no node" in fleet_difference(f, p.node_manifests)  # without the prefix it is another fleet
    assert "no node" in fleet_difference(f, p.node_manifests[1:], f"{p.slug}-")


def test_commands_create_connect_install_kai_into_each_vcluster():
    for p in plans():
        cmds = p.commands
        create = next(a for a in cmds if "create" in a and "vcluster" in a)
        assert create[:3] == ["env", f"KUBECONFIG={HOST.kubeconfig}", "vcluster"] and create[4] == p.vcluster_name
        assert arg(create, "-n") == p.namespace and arg(create, "--values") == f"/w/{p.slug}/vcluster.yaml"
        assert arg(create, "--local-chart-dir") == str(vc_images.vcluster_set().chart)
        assert {"--connect=false", "--add=false"} <= set(create)
        helm = next(a for a in cmds if a[0] == "helm")
        assert helm[4] == str(image_set(p.version).kai_chart)  # KAI's chart packaged here, this version's
        assert arg(helm, "--kubeconfig") == p.kubeconfig and arg(helm, "--values") == f"/w/{p.slug}/kai-values.yaml"
        connect = next(a for a in cmds if "connect" in a)
        assert cmds.index(create) < cmds.index(connect) < cmds.index(helm)
        label = next(a for a in cmds if a[3:5] == ["label", "node"])
        assert label[5] == HOST.infra_node and cmds.index(label) < cmds.index(create)
        owner = next(a for a in cmds if a[3:5] == ["label", "namespace"])
        assert owner[5] == p.namespace and f"{vc.OWNER_LABEL}=t" in owner


def test_cleanup_runs_first_too_and_never_deletes_a_real_node():
    ps = plans()
    infra = labelled_infra(ps)
    for p in ps:
        assert [a for _, a in p.steps[:len(p.cleanup)]] == [a for _, a in p.cleanup]
        delete = next(a for _, a in p.cleanup if a[3:5] == ["delete", "nodes"])
        selector = dict(kv.split("=") for kv in arg(delete, "-l").split(","))
        assert not all(infra["metadata"]["labels"].get(k) == v for k, v in selector.items())
        assert all(all(n["metadata"]["labels"].get(k) == v for k, v in selector.items()) for n in p.node_manifests)
        unlabel = next(a for _, a in p.cleanup if a[3:5] == ["label", "nodes"])
        assert f"{vc.sync_label(p.slug)}-" in unlabel and f"{vc.infra_label(p.slug)}-" in unlabel
        assert all("--ignore-not-found" in a for _, a in p.cleanup if "delete" in a)
        vdelete = next(a for _, a in p.cleanup if "vcluster" in a)
        assert "--delete-namespace" in vdelete and arg(vdelete, "-n") == p.namespace


def test_a_version_twice_is_refused():
    with pytest.raises(vc.KailabError, match="twice"):
        plans(version_list=["v0.17.0", "0.17.0"])


def test_the_trial_stages_are_kailabs_for_the_pods_vcluster_syncs():
    stages = list(yaml.safe_load_all(open(os.path.join(os.path.dirname(host_mod.__file__), "..", "data", "kwok-stages.yaml"))))
    ours = next(s for s in stages if s and s["metadata"]["name"] == host_mod.RESERVATION_STAGE)
    reservation, ends, goes = host_mod.trial_stages()
    assert reservation["spec"]["next"] == ours["spec"]["next"]
    annotation = f'.metadata.annotations["{host_mod.VCLUSTER_NAMESPACE_ANNOTATION}"]'
    exprs = {e["key"]: e for e in reservation["spec"]["selector"]["matchExpressions"]}
    assert exprs[annotation]["values"] == ["kai-resource-reservation"] and ".metadata.namespace" not in exprs
    for stage in (ends, goes):  # only pods vCluster synced, only once deleted
        keys = {e["key"]: e["operator"] for e in stage["spec"]["selector"]["matchExpressions"]}
        assert keys[annotation] == "Exists" and keys[".metadata.deletionTimestamp"] == "Exists"
        assert stage["spec"]["weight"] > 0  # over kailab's unweighted delete stage
    assert "phase: Failed" in ends["spec"]["next"]["statusTemplate"] and "delete" not in ends["spec"]["next"]
    assert goes["spec"]["next"] == {"finalizers": {"empty": True}, "delete": True} and goes["spec"]["delay"]
    assert all(s["metadata"]["name"].startswith(host_mod.TRIAL_STAGES) for s in (reservation, ends, goes))


def test_snapshot_difference_names_each_object():
    before = {"namespaces": {"a": {}}, "crds": ["x"], "nodes": {"n": {"labels": {"k": "1"}, "taints": []}}}
    after = {"namespaces": {"a": {}, "vcluster-kai-v0-17-0": {}}, "crds": [],
             "nodes": {"n": {"labels": {"k": "1", "trial.kailab.io/v0-17-0": "true"}, "taints": []}}}
    lines = snapshot.diff(before, after)
    assert lines == ["- crds x", "+ namespaces vcluster-kai-v0-17-0",
                     "~ nodes n: labels trial.kailab.io/v0-17-0: (none) -> true"]
    assert snapshot.diff(before, copy.deepcopy(before)) == []
    assert [x for x in lines if snapshot.mentions(x, ["v0-17-0"])] == lines[1:]


def test_the_cli_runs_with_a_home_of_its_own_helm_and_no_version_check(tmp_path):
    tools = {"vcluster": "/b/vclusterctl", "helm": "/c/helm", "kubectl": "/k/kubectl"}
    out = resolve(["env", "KUBECONFIG=/h", "vcluster", "create", "x"], tools, tmp_path)
    assert out[0] == "env" and out[-3:] == ["/b/vclusterctl", "create", "x"] and "KUBECONFIG=/h" in out
    env = dict(a.split("=", 1) for a in out[1:-3])
    assert env["HOME"] == str(tmp_path / "cli-home") and env["PATH"].startswith("/c:")
    assert env["VCLUSTER_SKIP_VERSION_CHECK"] == "true"
    assert yaml.safe_load((tmp_path / "cli-home" / ".vcluster" / "config.json").read_text()) == {"telemetryDisabled": True}
    assert resolve(["kubectl", "get", "nodes"], tools, tmp_path) == ["/k/kubectl", "get", "nodes"]


# ------------------------------------------------------------------ the CLI
def kailab(*args: str, tmp_path, **env: str) -> subprocess.CompletedProcess:
    return kailab_cli(*args, env={"KAILAB_STATE": str(tmp_path / "state"), "KAILAB_EVIDENCE": str(tmp_path / "ev"), **env})


def test_cli_dry_run_prints_every_vcluster_and_helm_command(tmp_path):
    out = kailab("trial", "--runtime", "kind", "--dry-run", "--kai-versions", "v0.16.8,v0.17.0", "--fleet", "small",
                 tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    for v in VERSIONS:
        s = vc.slug(v)
        assert f"vcluster create kai-{s} -n vcluster-kai-{s} --values " in out.stdout
        assert f"vcluster delete kai-{s} -n vcluster-kai-{s} --delete-namespace" in out.stdout
        assert f"helm upgrade --install kai-scheduler {image_set(v).kai_chart} " in out.stdout
    assert out.stdout.count("helm upgrade --install kai-scheduler") == 2  # once per vCluster, never on the host
    assert not (tmp_path / "state").exists() and not (tmp_path / "ev").exists()  # started nothing


@pytest.mark.parametrize("args, says", [
    (["--runtime", "existing"], "--runtime existing needs --kubeconfig PATH"),
    (["--runtime", "kind", "--kubeconfig", "/x"], "add --runtime existing"),
    (["--runtime", "kind", "--kai-versions", "v0.16.8,v0.99.0"], "unknown KAI version v0.99.0"),
])
def test_cli_refusals_are_one_line_and_start_nothing(tmp_path, args, says):
    base = ["trial", "--dry-run", "--fleet", "small"]
    if "--kai-versions" not in args:
        base += ["--kai-versions", "v0.16.8,v0.17.0"]
    out = kailab(*base, *args, tmp_path=tmp_path)
    assert out.returncode != 0 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], out.stderr
    assert not (tmp_path / "state").exists()


def test_cli_kind_without_docker_fails_in_one_line(tmp_path):
    out = kailab("trial", "--runtime", "kind", "--kai-versions", "v0.16.8,v0.17.0", "--fleet", "small",
                 tmp_path=tmp_path, DOCKER_HOST=f"unix://{tmp_path}/no-docker.sock")
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Docker engine" in lines[0], out.stderr
    assert not (tmp_path / "ev").exists()


def test_a_scheduler_is_up_only_once_it_ran_a_while():
    """A container with no readiness probe is ready the moment it runs: one sampled between its start
    and its exit at start is not up (the blast radius's broken scheduler)."""
    from datetime import datetime, timedelta, timezone

    from kailab.vcluster.state import UP_S, _up_for

    now = datetime.now(timezone.utc)
    running = lambda ago: {"ready": True, "state": {"running": {"startedAt": (now - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")}}}  # noqa: E731
    assert _up_for(running(UP_S + 20), UP_S)
    assert not _up_for(running(1), UP_S)
    assert not _up_for({"ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}, UP_S)


def test_a_broken_scheduler_counts_as_broken_from_its_first_exit():
    """The blast radius waits for the flagged scheduler to exit once, not for the kubelet's back-off to
    restart it: the first exit shows as terminated or waiting to restart, before any restart count."""
    from kailab.vcluster.state import _exited_once

    pod = lambda *sts: {"status": {"containerStatuses": list(sts)}}  # noqa: E731
    assert _exited_once(pod({"restartCount": 0, "state": {"terminated": {"exitCode": 1}}}))
    assert _exited_once(pod({"restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}))
    assert _exited_once(pod({"restartCount": 2, "state": {"running": {}}}))
    assert not _exited_once(pod({"restartCount": 0, "state": {"running": {}}}))
    assert not _exited_once(pod({"restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}))
    assert not _exited_once({"status": {}})
