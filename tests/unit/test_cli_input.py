"""Bad input on the command line: `kailab up` and `kailab validate` refuse it with one
`kailab: error:` line and a non-zero exit, before any lab directory is made. Runs the real entry
point (`main`, as the console script does) in a subprocess; no cluster, no builds."""

from __future__ import annotations

import subprocess

import pytest

from helpers import kailab_cli
import yaml
from click.testing import CliRunner

from kailab.cli import cli
from kailab.errors import InputError, KailabError
from kailab.inputs import read_yaml
from kailab.paths import PROJECT_ROOT

ERROR = "kailab: error:"


@pytest.fixture
def state(tmp_path):
    return tmp_path / "state"


@pytest.fixture
def kailab(tmp_path, state):
    """Run `python -m kailab.cli ARGS` with its own state and cache dirs and no lab env overrides."""
    env = {"KAILAB_STATE": str(state), "KAILAB_CACHE": str(tmp_path / "cache")}
    work = tmp_path / "cwd"
    work.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess:
        return kailab_cli(*args, env=env, without=("RUNTIME", "FLEET", "KAI_VERSION", "KAILAB_KAI_SOURCE"), cwd=work)
    return run


def the_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """The run failed with exactly one error line, containing every fragment; return that line."""
    assert proc.returncode != 0, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith(ERROR)]
    assert len(errors) == 1, proc.stderr
    assert lines[-1] == errors[0], "the error is the last thing printed"
    # the only other line `up` may print first is its one-line banner
    assert all(line.startswith("kailab up:") for line in lines[:-1]), proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], f"{fragment!r} not in {errors[0]!r}"
    return errors[0]


def assert_no_lab(state) -> None:
    labs = state / "labs"
    made = [p.name for p in labs.iterdir() if p.is_dir()] if labs.exists() else []
    assert made == [], f"lab directories left behind: {made}"


def write_fleet(tmp_path, name: str, doc) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


# ----------------------------------------------------------------------------- kailab up
@pytest.mark.parametrize("doc, fragments", [
    ({"name": "neg", "pools": [{"name": "a", "count": -2, "gpus": 8}]},
     ["pools[0].count", "greater than or equal to 1"]),
    ({"name": "neg", "pools": [{"name": "a", "count": 2, "gpus": -8}]},
     ["pools[0].gpus", "greater than or equal to 0"]),
    ({"name": "unk", "pools": [{"name": "a", "count": 2, "gpus": 8, "gpu": 8}]},
     ["pools[0].gpu", "unknown field"]),
], ids=["negative-count", "negative-gpus", "unknown-field"])
def test_up_refuses_bad_fleet_file(tmp_path, state, kailab, doc, fragments):
    path = write_fleet(tmp_path, "bad-fleet.yaml", doc)
    line = the_error(kailab("up", "--runtime", "binary", "--fleet", path), *fragments)
    assert path in line
    assert_no_lab(state)


def test_up_refuses_missing_fleet_file(tmp_path, state, kailab):
    missing = str(tmp_path / "no-such-fleet.yaml")
    line = the_error(kailab("up", "--runtime", "binary", "--fleet", missing), missing, "not found")
    assert "tiny" in line and "small" in line  # names the fleets that do exist
    assert_no_lab(state)


def test_up_refuses_unknown_fleet_name(state, kailab):
    the_error(kailab("up", "--runtime", "binary", "--fleet", "enormous"), "enormous.yaml", "not found")
    assert_no_lab(state)


def test_up_refuses_unknown_kai_version(state, kailab):
    line = the_error(kailab("up", "--runtime", "binary", "--fleet", "tiny", "--kai-version", "v0.99.0"),
                     "unknown KAI version v0.99.0")
    assert "v0.17.0" in line  # lists what is known
    assert_no_lab(state)


def test_up_refuses_kai_version_before_support(state, kailab):
    the_error(kailab("up", "--runtime", "binary", "--fleet", "tiny", "--kai-version", "v0.14.0"),
              "v0.14.0", "predates")
    assert_no_lab(state)


def test_up_refuses_malformed_kai_version(state, kailab):
    the_error(kailab("up", "--runtime", "binary", "--fleet", "tiny", "--kai-version", "latest"),
              "'latest'", "vX.Y.Z")
    assert_no_lab(state)


@pytest.mark.parametrize("grace", ["5x", "-1s", "soon"])
def test_up_refuses_a_termination_grace_that_is_no_duration(state, kailab, grace):
    the_error(kailab("up", "--runtime", "binary", "--fleet", "tiny", "--termination-grace", grace),
              "--termination-grace", repr(grace), "500ms")
    assert_no_lab(state)


def test_up_raises_input_error_in_process(tmp_path, monkeypatch):
    """The same refusal seen from inside: `up` raises InputError before the runtime does anything."""
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))
    path = write_fleet(tmp_path, "bad.yaml", {"name": "bad", "pools": [{"name": "a", "count": 0, "gpus": 8}]})
    result = CliRunner().invoke(cli, ["up", "--runtime", "binary", "--fleet", path], standalone_mode=False)
    assert isinstance(result.exception, InputError), result.exception
    assert result.exception.field == "pools[0].count"
    assert_no_lab(tmp_path / "state")


# ----------------------------------------------------------------------------- kailab validate
def test_validate_shipped_exercises(kailab):
    proc = kailab("validate")
    assert proc.returncode == 0, proc.stderr
    for path in sorted((PROJECT_ROOT / "exercises").glob("*.yaml")):
        assert f"{path}: ok" in proc.stdout, proc.stdout


def test_validate_refuses_broken_exercise(tmp_path, kailab):
    doc = yaml.safe_load((PROJECT_ROOT / "exercises" / "reclaim.yaml").read_text())
    doc["steps"][0]["apply"][0]["pods"]["queue"] = "nope"
    path = tmp_path / "reclaim.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    the_error(kailab("validate", str(path)), str(path), "steps[0] (", "apply[0].pods.queue", "'nope'")


@pytest.mark.parametrize("item, fragments", [
    ({"object": "PodGroup", "of": "prod-train", "match": {"spec": {"queue": "${queue:nope}"}}},
     ["expect[4]", "unknown name ${queue:nope}"]),
    ({"object": "BindRequest", "of": "prod-train", "match": {"spec": {"selectedNode": {"regex": "["}}}},
     ["expect[4]", "selectedNode.regex: not a regular expression"]),
    ({"workload": "prod-train", "bound": 1, "on": {"node": "z-9"}}, ["expect[4].on.node", "'z-9'"]),
], ids=["placeholder", "regex", "on-node"])
def test_validate_refuses_new_fields_with_one_line(tmp_path, kailab, item, fragments):
    doc = read_yaml(PROJECT_ROOT / "exercises" / "reclaim.yaml")
    doc["steps"][1]["expect"].append(item)
    path = tmp_path / "reclaim.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    the_error(kailab("validate", str(path)), str(path), *fragments)


def test_validate_refuses_a_node_step_on_a_reserved_label(tmp_path, kailab):
    doc = read_yaml(PROJECT_ROOT / "exercises" / "reclaim.yaml")
    doc["steps"][1]["nodes"] = [{"node": "a100-0", "label": {"kubernetes.io/hostname": "x"}}]
    path = tmp_path / "reclaim.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    the_error(kailab("validate", str(path)), str(path), "nodes[0]", "reserved: true")


def test_validate_refuses_invalid_yaml(tmp_path, kailab):
    path = tmp_path / "broken.yaml"
    path.write_text("exercise: broken\nsteps: [\n")
    the_error(kailab("validate", str(path)), str(path), "not valid YAML")


def test_validate_refuses_missing_file(tmp_path, kailab):
    missing = str(tmp_path / "gone.yaml")
    the_error(kailab("validate", missing), missing, "not found")


def test_validate_stops_at_the_first_broken_file(tmp_path, kailab):
    good = PROJECT_ROOT / "exercises" / "reclaim.yaml"
    bad = tmp_path / "other.yaml"
    bad.write_text(good.read_text())  # exercise: reclaim in a file named other
    proc = kailab("validate", str(good), str(bad))
    the_error(proc, str(bad), "differs from the file name")
    assert "reclaim.yaml: ok" in proc.stdout


def test_kailab_error_exit_code_is_not_zero():
    assert InputError("f", "x", "y").exit_code != 0
    assert issubclass(InputError, KailabError)


def test_tools_build_refuses_an_unknown_stack_before_building_anything(kailab, tmp_path):
    the_error(kailab("tools", "build", "--without-kai", "--stack", "volcan"),
              "unknown scheduler stack 'volcan'", "volcano")
    assert not (tmp_path / "cache" / "bin").exists()


def test_run_names_an_unknown_exercise_before_it_looks_for_a_lab(tmp_path):
    """`kailab run no-such-exercise --name X` with no lab: the exercise is the first thing wrong (it said
    "no lab named X" before)."""
    done = kailab_cli("run", "no-such-exercise", "--name", "nolab", env={"KAILAB_STATE": str(tmp_path / "state")})
    assert done.returncode == 2 and "no-such-exercise: no exercise of that name in" in done.stderr, done.stderr
    assert "no lab" not in done.stderr and done.stderr.count("\n") == 1


def test_a_misspelt_exercise_name_gets_the_names_it_is_close_to():
    done = kailab_cli("run", "quotta")
    assert done.returncode == 2 and "(did you mean quota? A file of your own goes by its path)" in done.stderr, done.stderr


# ----------------------------------------------------------------------------- what a new user mistypes
def _invoke(monkeypatch, tmp_path, *args):
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))
    monkeypatch.delenv("KAILAB_LAB", raising=False)
    return CliRunner().invoke(cli, list(args), standalone_mode=False)


def test_run_with_no_lab_suggests_the_up_its_exercise_needs_by_fleet_and_name(monkeypatch, tmp_path):
    """`kailab up` alone would make a `small` lab: topology's fleet is `racks`, and a lab named X is
    made with --name X."""
    for args, up in ((["run", "topology"], "`kailab up --fleet racks`"),
                     (["run", "quota", "--name", "mine"], "`kailab up --fleet small --name mine`"),
                     (["run", "quota", "topology"], "`kailab up`")):
        result = _invoke(monkeypatch, tmp_path, *args)
        assert isinstance(result.exception, KailabError), result.exception
        assert str(result.exception).endswith(f"is up: bring one up with {up}"), result.exception
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())


def test_down_of_a_name_no_lab_has_says_so_and_names_the_labs_there(monkeypatch, tmp_path):
    result = _invoke(monkeypatch, tmp_path, "down", "--name", "nosuch")
    assert result.exception is None and "no lab named 'nosuch': nothing to take down" in result.output, result.output
    assert "is down" not in result.output
    result = _invoke(monkeypatch, tmp_path, "status", "--all")
    assert result.exception is None and "no labs on this machine" in result.output, result.output


def test_what_a_runtime_cannot_do_is_refused_with_exit_2_before_anything_ran(monkeypatch, tmp_path):
    result = _invoke(monkeypatch, tmp_path, "up", "--runtime", "binary", "--fleet", "tiny", "--dry-run")
    assert isinstance(result.exception, KailabError) and result.exception.exit_code == 2, result.exception
    assert "--dry-run is not supported by the binary runtime" in str(result.exception)
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())


def test_validate_names_a_copied_exercises_name_with_its_other_problems(tmp_path):
    """A copy keeps the original's `exercise:` name: that problem is listed with the file's others, not
    only once they are mended."""
    text = (PROJECT_ROOT / "exercises" / "quota.yaml").read_text().replace("priorityClass: train", "priorityClas: train")
    (tmp_path / "mine.yaml").write_text(text)
    result = CliRunner().invoke(cli, ["validate", str(tmp_path / "mine.yaml")], standalone_mode=False)
    lines = str(result.exception).splitlines()
    assert lines[0].endswith("exercise: name 'quota' differs from the file name 'mine' (make them equal)"), lines
    assert len(lines) == 3 and all("priorityClas: unknown field" in line for line in lines[1:]), lines


def test_validate_checks_a_fleet_file_as_a_fleet(tmp_path):
    result = CliRunner().invoke(cli, ["validate", str(PROJECT_ROOT / "fleets" / "tiny.yaml")], standalone_mode=False)
    assert result.exception is None and "tiny.yaml: ok (a fleet: 2 nodes, 8 GPUs)" in result.output, result.output
    (tmp_path / "f.yaml").write_text("name: f\npools: [{name: a, count: 0, gpus: 8}]\n")
    result = CliRunner().invoke(cli, ["validate", str(tmp_path / "f.yaml")], standalone_mode=False)
    assert isinstance(result.exception, InputError) and result.exception.field == "pools[0].count", result.exception


def test_top_watches_the_lab_kailab_lab_names_as_every_command_does(monkeypatch, tmp_path):
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("KAILAB_LAB", "mine")
    result = CliRunner().invoke(cli, ["top", "--once"], standalone_mode=False)
    assert isinstance(result.exception, KailabError) and "no lab named 'mine' is up" in str(result.exception), result.exception
