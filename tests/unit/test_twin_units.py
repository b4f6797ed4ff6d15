"""A twin's snapshot is read, kept and planned before any lab: bad input is one line naming the file and
the field (nothing made), unknown fields are tolerated and listed, only what scheduling needs is kept (no
env value, pull secret or token annotation survives), and the plan puts parents before children and
each bound pod on its node."""

from __future__ import annotations

import json
import os
import zipfile

import pytest
import yaml

from kailab.errors import InputError
from kailab.paths import lab_dir
from kailab.twin.plan import make_plan
from kailab.twin.snapshot import load_snapshot
from twin_sample import TOKEN, as_zip as _zip, node as _node, pod as _pod, snapshot

from helpers import kailab_cli



def test_a_zip_and_its_json_read_the_same_and_unknown_fields_are_listed(tmp_path):
    data = snapshot(newTopLevel={"a": 1})
    data["rawObjects"]["newKind"] = []
    from_zip = load_snapshot(_zip(tmp_path, data))
    (tmp_path / "snapshot.json").write_text(json.dumps(data))
    from_json = load_snapshot(tmp_path / "snapshot.json")
    assert from_zip.objects == from_json.objects and from_zip.config == from_json.config
    assert from_zip.unknown == ["newTopLevel", "rawObjects.newKind"]
    plan = make_plan(from_zip, "t")
    assert "schedulerParams.someFutureParam" in plan.unknown


@pytest.mark.parametrize("write, field, fragment", [
    (lambda p: p.write_text("hello"), "", "neither a zip nor a JSON object"),
    (lambda p: p.write_text("{not json"), "", "not valid JSON"),
    (lambda p: p.write_text("[1, 2]"), "", "neither a zip nor a JSON object"),
    (lambda p: p.write_text(json.dumps({"config": {}})), "rawObjects", "not a KAI scheduler snapshot"),
    (lambda p: p.write_text(json.dumps(snapshot(config=None))), "config", "not a KAI scheduler snapshot"),
    (lambda p: p.write_text(json.dumps(snapshot(rawObjects={"nodes": [], "pods": [], "queues": []}))),
     "rawObjects.nodes", "no nodes"),
    (lambda p: p.write_text(json.dumps(snapshot(rawObjects={"nodes": "x", "pods": [], "queues": []}))),
     "rawObjects.nodes", "is not a list"),
])
def test_bad_input_is_one_line_naming_the_file_and_field(tmp_path, write, field, fragment):
    path = tmp_path / "snap.json"
    write(path)
    with pytest.raises(InputError) as err:
        load_snapshot(path)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and fragment in msg and err.value.field == field, msg


def test_a_zip_without_the_snapshot_and_a_missing_file_are_named(tmp_path):
    with pytest.raises(InputError, match="the zip holds no snapshot.json"):
        load_snapshot(_zip(tmp_path, snapshot(), member="other.json"))
    with pytest.raises(InputError, match="no such file"):
        load_snapshot(tmp_path / "absent.zip")


def test_a_pod_on_a_node_the_snapshot_lacks_is_refused_naming_it(tmp_path):
    data = snapshot()
    data["rawObjects"]["pods"].append(_pod("lost", "gpu-z"))
    with pytest.raises(InputError) as err:
        make_plan(load_snapshot(_zip(tmp_path, data)), "t")
    assert "rawObjects.pods[2] (ml/lost) spec.nodeName" in str(err.value) and "'gpu-z'" in str(err.value)


def test_more_nodes_than_a_lab_holds_is_refused(tmp_path):
    data = snapshot()
    data["rawObjects"]["nodes"] = [_node(f"n-{i}", 1) for i in range(5001)]
    with pytest.raises(InputError, match="5001 nodes is more than the 5000"):
        make_plan(load_snapshot(_zip(tmp_path, data)), "t")


def test_only_what_scheduling_needs_is_kept(tmp_path):
    plan = make_plan(load_snapshot(_zip(tmp_path, snapshot())), "t")
    text = yaml.safe_dump_all(plan.objects + plan.bound + plan.pending) + json.dumps(plan.fleet.model_dump())
    for secret in (TOKEN, "regcred", "robot", "registry.example.com", "train.py", "API_TOKEN", "data-pvc"):
        assert secret not in text, secret
    pod = plan.bound[0]
    assert pod["spec"]["nodeName"] == "gpu-a" and pod["spec"]["tolerations"] and "priority" not in pod["spec"]
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert pod["metadata"]["annotations"] == {"pod-group-name": "pg-run-0"}
    assert "nodeName" not in plan.pending[0]["spec"]
    # what is not reproduced is named, never dropped silently
    notes = plan.not_reproduced
    assert any("volume claims not reproduced: data-pvc" in n for n in notes["pod/ml/run-0"])
    assert any("owner not reproduced" in n for n in notes["pod/ml/run-0"])
    assert "persistentVolumeClaims/data-pvc" in notes and "node/gpu-b" in notes


def test_the_plan_orders_parents_first_and_takes_the_schedulers_configuration(tmp_path):
    plan = make_plan(load_snapshot(_zip(tmp_path, snapshot())), "t")
    queues = [o["metadata"]["name"] for o in plan.objects if o["kind"] == "Queue"]
    assert queues == ["org", "team-a"]
    assert all("status" not in o for o in plan.objects)
    assert [o["metadata"]["name"] for o in plan.objects if o["kind"] == "PriorityClass"] == ["train"]
    assert plan.conf["actions"] == "allocate, reclaim"
    assert plan.args == ["--update-pod-eviction-condition=true", "--schedule-period=1s"]
    node = plan.fleet.node_manifests()[0]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8" and node["spec"]["taints"][0]["key"] == "dedicated"
    assert node["metadata"]["labels"]["zone"] == "z1" and plan.fleet.gpus_total == 16
    assert plan.counts()["pods_bound"] == 1 and plan.counts()["pods_pending"] == 1


def test_anonymise_renames_consistently(tmp_path):
    plan = make_plan(load_snapshot(_zip(tmp_path, snapshot())), "t", anonymise=True)
    pod, group = plan.bound[0], next(o for o in plan.objects if o["kind"] == "PodGroup")
    nodes = {n["metadata"]["name"] for n in plan.fleet.node_manifests()}
    assert pod["spec"]["nodeName"] in nodes and "gpu-a" not in nodes
    assert pod["metadata"]["namespace"] != "ml" and pod["metadata"]["namespace"] == group["metadata"]["namespace"]
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == group["spec"]["queue"] != "team-a"
    text = yaml.safe_dump_all(plan.objects + plan.bound + plan.pending)
    assert "team-a" not in text and "run-0" not in text


def test_the_cli_refuses_a_bad_snapshot_in_one_line_and_makes_nothing(tmp_path):
    bad = tmp_path / "snap.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("other.json", "{}")
    name = f"badtwin-{os.getpid()}"
    out = kailab_cli("twin", str(bad), "--name", name, env={"KAILAB_EVIDENCE": str(tmp_path / "ev")})
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "snapshot.json" in lines[0] and str(bad) in lines[0], out.stderr
    assert not lab_dir(name).exists() and not (tmp_path / "ev").exists()
