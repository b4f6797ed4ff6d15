"""`kailab up --runtime kind --workers N`: real worker nodes beside the lab's control plane (a fan-out
host of several nodes), checked as data: the kind config, the steps after `kind create cluster`, the
workers as the lab's components; and runtimes that cannot add workers refuse in one line."""

from __future__ import annotations

import ipaddress
import json
import subprocess

import pytest
from click.testing import CliRunner

from kailab.cli import cli
from kailab.fleet import load_fleet
from kailab.labs import AddsWorkers, with_addon
from kailab import labs
from kailab.runtimes import RUNTIMES
from kailab.runtimes.kind import workers as kind_workers
from kailab.runtimes.base import LabRecord, LabSpec
from kailab.runtimes.kind.runtime import build_plan, HostFacts


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))


def _plan(workers: int, local: bool):
    from kailab.images import image_set

    s = LabSpec(name="w", runtime="kind", fleet="tiny", kai_version="v0.17.0", stack="none",
                metrics=False, workers=workers)
    return build_plan(with_addon(s), load_fleet("tiny"), "v0.17.0", HostFacts(), image_set("v0.17.0") if local else None)


def _steps(plan) -> list[tuple[str, list[str]]]:
    return list(zip(plan.descriptions, plan.commands))


def test_workers_join_the_kind_config_on_the_lab_s_node_image():
    plan = _plan(2, local=True)
    nodes = plan.kind_config["nodes"]
    assert [n["role"] for n in nodes] == ["control-plane", "worker", "worker"]
    assert {n["image"] for n in nodes} == {nodes[0]["image"]}
    assert "2 worker(s)" in plan.descriptions[0]
    assert [n["role"] for n in _plan(0, local=True).kind_config["nodes"]] == ["control-plane"]


def test_with_the_static_cni_each_worker_gets_a_subnet_of_its_own_and_every_node_routes_to_the_others():
    plan = _plan(2, local=True)
    steps = _steps(plan)
    cp, w1, w2 = "kailab-w-control-plane", "kailab-w-worker", "kailab-w-worker2"
    # right after the cluster exists, before anything is installed (its pods may land on any node)
    after_create = [argv for _, argv in steps[1:10]]
    assert after_create[0][-3:] == ["nodes", cp, "node-role.kubernetes.io/control-plane:NoSchedule-"]
    nets = kind_workers.subnets("kailab-w", 2)
    assert nets == {cp: "10.244.0.0/24", w1: "10.244.1.0/24", w2: "10.244.2.0/24"}
    assert all(not ipaddress.ip_network(a).overlaps(ipaddress.ip_network(b))
               for a in nets.values() for b in nets.values() if a != b)
    cni = {argv[2]: argv[-1] for argv in after_create if argv[:2] == ["docker", "exec"] and kind_workers.CNI_FILE in argv[-1]}
    assert set(cni) == {w1, w2}  # the control plane keeps the node image's subnet
    for node, script in cni.items():
        body = script.split("'")[3]  # printf '%s\n' '<conflist>' > file
        conf = json.loads(body)
        assert conf["plugins"][0]["ipam"]["ranges"] == [[{"subnet": nets[node]}]]
    routes = {argv[2]: argv[-1] for argv in after_create if argv[:2] == ["docker", "exec"] and "ip route" in argv[-1]}
    assert set(routes) == {cp, w1, w2}
    for node, script in routes.items():
        others = [n for n in nets if n != node]
        assert [nets[o] in script for o in others] == [True, True] and nets[node] not in script
        assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0  # it parses
    again = [argv for argv in after_create if "delete" in argv]  # a pod that got a control-plane address
    assert [a[-1] for a in again] == [f"spec.nodeName={w},spec.hostNetwork=false" for w in (w1, w2)]
    assert after_create.index(again[0]) > max(after_create.index(["docker", "exec", n, "sh", "-c", s]) for n, s in routes.items())
    wait = after_create[-1]
    assert "wait" in wait and f"node/{w1}" in wait and f"node/{w2}" in wait
    assert "Install the KWOK" in plan.descriptions[len(after_create) + 1]


def test_with_published_images_kindnet_routes_and_only_the_taint_and_the_wait_are_added():
    plan = _plan(1, local=False)
    added = [argv for _, argv in _steps(plan)[1:3]]
    assert "taint" in added[0] and "wait" in added[1]
    assert not any(argv[0] == "docker" for argv in plan.commands)
    assert _steps(_plan(0, local=False))[1][0].startswith("Install the KWOK")


def test_workers_are_the_lab_s_components_running_while_their_node_is_ready():
    def node(name, status, reason=""):
        return {"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Ready", "status": status, "reason": reason, "message": "kubelet stopped posting"}]}}

    got = kind_workers.states([node("kailab-w-control-plane", "True"), node("kailab-w-worker", "True"),
                               node("kailab-w-worker2", "Unknown", "NodeStatusUnknown")], "kailab-w", 3)
    assert {k: v["state"] for k, v in got.items()} == {"worker kailab-w-worker": "running",
                                                        "worker kailab-w-worker2": "not ready",
                                                        "worker kailab-w-worker3": "missing"}
    assert got["worker kailab-w-worker2"]["reason"] == "NodeStatusUnknown: kubelet stopped posting"


def test_only_runtimes_that_add_workers_take_workers_and_a_record_from_before_loads():
    adders = [n for n in RUNTIMES if labs.can(n, AddsWorkers)]
    assert adders == ["kind"]
    for name in RUNTIMES:
        if name in adders:
            continue
        res = CliRunner().invoke(cli, ["up", "--runtime", name, "--workers", "2", "--name", "x"])
        said = res.output + str(res.exception)  # KailabError: main() prints it as one line
        assert res.exit_code != 0
        assert f"--workers 2: the {name} runtime adds no worker nodes" in said and "use kind" in said
    res = CliRunner().invoke(cli, ["up", "--runtime", "kind", "--workers", "9", "--name", "x"])
    assert res.exit_code != 0 and "--workers" in res.output
    rec = LabRecord(name="old", runtime="kind", kai_version="none", fleet="tiny", nodes=2, gpus=8,
                    stack={"name": "none"}, kubeconfig="/x")
    rec.save()
    data = json.loads((rec.dir / "lab.json").read_text())
    data.pop("workers")  # written before workers existed
    (rec.dir / "lab.json").write_text(json.dumps(data))
    assert LabRecord.load("old").workers == 0
