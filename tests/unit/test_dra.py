"""DRA on the fake fleet (#29, first part): a pool with `dra: true` publishes its GPUs as
ResourceSlice devices under driver gpu.nvidia.com, with a DeviceClass of that name, and KAI v0.17
schedules pods whose ResourceClaims ask for them: the scheduler allocates, the binder writes the
allocation and reservedFor, the queue is charged."""

from __future__ import annotations

import pytest

from kailab.errors import InputError
from kailab.fleet import DRA_DRIVER, Fleet, load_fleet

from helpers import assert_one_line_input_error



def test_a_dra_pool_needs_gpus(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text("name: f\npools:\n  - {name: d, count: 1, gpus: 0, dra: true}\n")
    assert_one_line_input_error(load_fleet, p, "pools[0].dra", "give it gpus >= 1")


def test_dra_pool_objects_are_what_a_dra_driver_publishes():
    fleet = load_fleet("dra")
    objs = fleet.dra_objects()
    assert [o["kind"] for o in objs] == ["DeviceClass", "ResourceSlice", "ResourceSlice"]
    slice_ = objs[1]["spec"]
    assert slice_["driver"] == DRA_DRIVER and slice_["nodeName"] == "dra-h100-0" and len(slice_["devices"]) == 4
    nodes = {n["metadata"]["name"]: n for n in fleet.node_manifests()}
    assert "nvidia.com/gpu" not in nodes["dra-h100-0"]["status"]["allocatable"]  # KAI would count it twice
    assert nodes["plugin-0"]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert fleet.gpus_total == 12 and fleet.dra_gpus == 8
    assert Fleet.model_validate({"name": "x", "pools": [{"name": "a", "count": 1, "gpus": 2}]}).dra_objects() == []


@pytest.mark.parametrize("fleet, klass, fragments", [
    ("dra", "gpu.nvidai.com", ["deviceClassName", "'gpu.nvidai.com' is not published by fleet 'dra'", "use gpu.nvidia.com"]),
    ("small", "gpu.nvidia.com", ["deviceClassName", "fleet 'small'", "give a pool dra: true"]),
])
def test_a_claim_template_for_an_unknown_class_is_one_line(tmp_path, fleet, klass, fragments):
    import yaml

    from kailab.exercise.load import load_exercise
    from kailab.inputs import read_yaml
    from kailab.paths import exercises_dir

    doc = read_yaml(exercises_dir() / "dra-claims.yaml")
    doc["fleet"] = fleet
    doc["steps"][0]["apply"][1]["manifest"]["object"]["spec"]["spec"]["devices"]["requests"][0]["exactly"][
        "deviceClassName"] = klass
    p = tmp_path / "dra-claims.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InputError) as raised:  # on fleet small every claim is refused: a line each
        load_exercise(p)
    lines = [str(e) for e in getattr(raised.value, "errors", [raised.value])]
    assert str(raised.value).splitlines() == lines
    for msg in lines:
        assert str(p) in msg and all(f in msg for f in fragments), msg
    assert "steps[0] (claims for one and for two GPUs).apply[" in lines[0] and \
        ".manifest.object.spec.spec.devices.requests[0].exactly.deviceClassName:" in lines[0], lines


