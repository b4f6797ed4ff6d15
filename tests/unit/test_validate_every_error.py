"""`kailab validate` lists every problem of a file at once, one `kailab: error:` line each naming the
file and the field (and the fix where there is one), and exits non-zero: a file with three independent
mistakes prints three lines, whether they are mistakes of shape (pydantic's), of references (a queue,
a node, a name the file does not have) or unknown step fields. Runs the real entry point in a
subprocess; no cluster."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from kailab.errors import InputError, InputErrors
from kailab.exercise.load import load_exercise
from kailab.inputs import read_yaml
from kailab.paths import PROJECT_ROOT
from helpers import kailab_cli

ERROR = "kailab: error: "


def _validate(tmp_path, *paths) -> subprocess.CompletedProcess:
    env = {"KAILAB_STATE": str(tmp_path / "state"), "KAILAB_CACHE": str(tmp_path / "cache")}
    return kailab_cli("validate", *map(str, paths), env=env, cwd=tmp_path, timeout=120)


def _reclaim(tmp_path, change, name: str = "reclaim"):
    doc = read_yaml(PROJECT_ROOT / "exercises" / "reclaim.yaml")
    change(doc)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _shape(doc):
    doc["steps"][0]["apply"][0]["pods"]["gpus"] = -1           # below the minimum
    doc["steps"][0]["settle"] = "forever"                      # no duration
    doc["steps"][1]["expect"][0]["colour"] = "red"             # an unknown field


def _references(doc):
    doc["steps"][0]["apply"][0]["pods"]["queue"] = "nope"      # no such queue
    doc["steps"][1]["faults"] = [{"nodeDown": "z-9"}]          # no such node
    doc["exercise"] = "other"                                  # not the file's name


def _mixed(doc):
    doc["steps"][0]["colour"] = "red"                          # an unknown step field
    doc["steps"][1]["colour"] = "blue"                         # another, in another step
    doc["steps"][1]["expect"][0]["bound"] = "many"             # no count


@pytest.mark.parametrize("change, fields", [
    (_shape, ["steps[0] (", ").apply[0].pods.gpus", ").settle", "steps[1] (", ").expect[0].colour"]),
    (_references, [").apply[0].pods.queue", ").faults[0]", "exercise"]),
    (_mixed, ["steps[0] (prod borrows research's idle share).colour", ").colour", ").expect[0].bound"]),
], ids=["shape", "references", "mixed"])
def test_three_mistakes_are_three_lines(tmp_path, change, fields):
    path = _reclaim(tmp_path, change)
    proc = _validate(tmp_path, path)
    assert proc.returncode != 0, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith(f"{ERROR}{path}: ") for line in lines), proc.stderr
    for field in fields:
        assert any(field in line for line in lines), f"{field!r} in no line of:\n{proc.stderr}"


def test_each_line_names_its_fix_where_kailab_knows_one(tmp_path):
    lines = _validate(tmp_path, _reclaim(tmp_path, _references)).stderr.splitlines()
    assert all(line.endswith(")") and " (" in line for line in lines), lines
    assert any("(define it under queues (have: " in line for line in lines), lines


def test_every_broken_file_is_listed(tmp_path):
    good = PROJECT_ROOT / "exercises" / "quota.yaml"
    one = _reclaim(tmp_path, _shape)
    (tmp_path / "b").mkdir()
    two = _reclaim(tmp_path / "b", _references)
    proc = _validate(tmp_path, one, good, two)
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert [line.split(": ")[2] for line in lines] == [str(one)] * 3 + [str(two)] * 3, proc.stderr
    assert f"{good}: ok" in proc.stdout


def test_in_process_the_errors_are_one_input_error_reading_as_its_first(tmp_path):
    with pytest.raises(InputErrors) as raised:
        load_exercise(_reclaim(tmp_path, _references))
    err = raised.value
    assert isinstance(err, InputError) and len(err.errors) == 3
    assert str(err).splitlines() == [str(e) for e in err.errors]
    assert (err.field, err.problem) == (err.errors[0].field, err.errors[0].problem)


def test_one_mistake_is_still_one_plain_input_error(tmp_path):
    path = _reclaim(tmp_path, lambda doc: doc.update(exercise="other"))
    with pytest.raises(InputError) as raised:
        load_exercise(path)
    assert not isinstance(raised.value, InputErrors)
