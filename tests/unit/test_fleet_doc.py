"""docs/fleet-format.md against the fleet schema (kailab.fleet.Fleet): a `## <Model>` section for the
fleet and every model inside it, whose table names exactly the model's fields as a file spells them,
says `required` for exactly the required ones and gives the others their real defaults; the doc's
example is a valid fleet."""

from __future__ import annotations

import re

import yaml

from kailab.fleet import Fleet, load_fleet
from kailab.paths import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "fleet-format.md"


def _sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", DOC.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _rows(section: str) -> dict[str, str]:
    """field -> its default cell, from the section's table rows (| `field` | type | default | what |)."""
    rows = [r.split("|") for r in section.splitlines() if r.startswith("| `")]
    return {re.fullmatch(r" `([\w]+)` ", r[1]).group(1): r[3].strip() for r in rows}


def _models() -> dict[str, dict]:
    schema = Fleet.model_json_schema(by_alias=True)
    return {schema["title"]: schema, **schema["$defs"]}


def test_every_model_has_its_section():
    missing = sorted(set(_models()) - set(_sections()))
    assert not missing, f"docs/fleet-format.md has no `## <model>` section for: {missing}"


def test_each_sections_table_names_exactly_its_models_fields():
    sections = _sections()
    wrong = []
    for name, model in _models().items():
        documented, real = set(_rows(sections.get(name, ""))), set(model["properties"])
        wrong += [f"{name}.{f}: not in the doc" for f in sorted(real - documented)]
        wrong += [f"{name}.{f}: not in the schema" for f in sorted(documented - real)]
    assert not wrong, "docs/fleet-format.md and the fleet schema differ:\n" + "\n".join(wrong)


def test_required_fields_and_defaults_are_the_schemas():
    sections = _sections()
    wrong = []
    for name, model in _models().items():
        required = set(model.get("required", []))
        if name == "Fleet":
            required.add("pools")  # the schema fills an empty `pools` in only when `nodes` is given
        for field, default in _rows(sections.get(name, "")).items():
            if field not in model["properties"]:
                continue
            if (default == "required") != (field in required):
                wrong.append(f"{name}.{field}: the doc says {default!r}, the schema "
                             f"{'requires it' if field in required else 'does not require it'}")
            elif default != "required":
                said = yaml.safe_load(default.strip("`"))
                if said != model["properties"][field].get("default"):
                    wrong.append(f"{name}.{field}: default {said!r} in the doc, "
                                 f"{model['properties'][field].get('default')!r} in the schema")
    assert not wrong, "\n".join(wrong)


def test_the_example_is_a_valid_fleet(tmp_path):
    example = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S).group(1)
    path = tmp_path / "example.yaml"
    path.write_text(example)
    fleet = load_fleet(str(path))
    used = {k for pool in yaml.safe_load(example)["pools"] for k in pool}
    assert {"count", "gpus", "product", "gpuMemoryMiB", "cpu", "memoryGiB", "labels", "taints", "topology"} <= used
    racks = [n["metadata"]["labels"].get("kailab.io/rack") for n in fleet.node_manifests()]
    assert racks[:2] == ["rack-a", "rack-b"], "the example's comment says where its topology puts each node"
