"""Fan-out's pure parts: a unit's objects (what a pod is given and asks for), bad input refused before
anything reaches a cluster, and a unit's evidence brought back without writing outside the evidence
folder. The Jobs themselves run on a kind lab in tests/live/test_fanout_live.py."""

from __future__ import annotations

import io
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kailab.errors import InputError
from kailab.exercise.load import resolve_exercise
from kailab.fanout.run import _extract
from kailab.fanout.unit import CAPABILITIES, DONE, RUN_LABEL, SCRIPT, exercise_unit, objects


def test_an_exercise_unit_ships_its_file_and_its_fleet_and_asks_for_what_a_lab_in_a_pod_needs():
    u = exercise_unit(resolve_exercise("borrow"), 3, "v0.17.0")
    assert u.name == "u03-borrow" and u.title == "borrow.yaml" and u.kind.name == "exercise" and not u.kind.own_folder
    files = dict(u.files)
    assert set(files) == {"borrow.yaml", "fleets/small.yaml"} and "fleet: small" in files["borrow.yaml"]
    # a lab of the exercise's fleet and the version asked, then the exercise on it
    up, run = (shlex.split(part) for part in u.command.split(" && "))
    assert up[3:] == ["up", "--fleet", "small", "--kai-version", "v0.17.0", "--name", "unit"]
    assert run[3:] == ["run", "/unit/borrow.yaml", "--name", "unit"]
    config, job = objects(u, "kailab-fanout-x", "x", "kailab/lab:kai-v0.17.0", "250m", "1Gi")
    assert config["kind"] == "ConfigMap" and set(config["data"].values()) == set(files.values())
    assert job["kind"] == "Job" and job["spec"]["backoffLimit"] == 0
    for obj in (config, job):
        assert obj["metadata"]["namespace"] == "kailab-fanout-x" and obj["metadata"]["labels"][RUN_LABEL] == "x"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["terminationGracePeriodSeconds"] == 2
    c = pod["containers"][0]
    assert c["image"] == "kailab/lab:kai-v0.17.0" and c["imagePullPolicy"] == "IfNotPresent"
    assert c["resources"]["requests"] == {"cpu": "250m", "memory": "1Gi"}
    # the capabilities a lab's network namespace needs, stated; never a privileged pod
    assert c["securityContext"] == {"capabilities": {"add": CAPABILITIES}} and set(CAPABILITIES) == {"SYS_ADMIN", "NET_ADMIN"}
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["KAILAB_UNIT_COMMAND"] == u.command and env["KAILAB_UNIT_KAI"] == "v0.17.0"
    assert env["KAILAB_FLEETS"] == "/unit/fleets"
    items = pod["volumes"][0]["configMap"]["items"]
    assert {i["path"] for i in items} == {"borrow.yaml", "fleets/small.yaml"}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}]
    assert 'eval "$KAILAB_UNIT_COMMAND"' in SCRIPT and f'echo "{DONE} $rc"' in SCRIPT


def test_a_units_command_runs_as_written_and_its_status_is_said(tmp_path):
    """The pod's script in a real shell: the command's quoting kept, its exit status the one said."""
    u = exercise_unit(resolve_exercise("borrow"), 0, "v0.17.0")
    script = SCRIPT.replace("sleep ", "true ")
    for command, rc in ((f"printf '%s|' {shlex.quote('a b')} c > {tmp_path}/out", 0), ("false && true", 1)):
        out = subprocess.run(["sh", "-c", script], env={"KAILAB_UNIT_COMMAND": command, "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True)
        assert out.stdout.strip().endswith(f"{DONE} {rc}"), out
    assert (tmp_path / "out").read_text() == "a b|c|"
    assert "&&" in u.command  # the exercise's own command chains its two steps the same way


def test_an_exercise_whose_fleet_is_a_path_is_refused_in_one_line(tmp_path):
    text = resolve_exercise("borrow").read_text().replace("fleet: small", f"fleet: {tmp_path}/small.yaml")
    (tmp_path / "small.yaml").write_text((resolve_exercise("borrow").parent.parent / "fleets" / "small.yaml").read_text())
    path = tmp_path / "borrow.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        exercise_unit(path, 0, "v0.17.0")
    assert str(e.value).startswith(f"{path}: fleet: ") and "name a fleet of fleets/" in str(e.value)
    assert "\n" not in str(e.value)


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_units_evidence_comes_back_under_the_evidence_folder_and_nowhere_else(tmp_path):
    root = tmp_path / "evidence"
    data = _tar({"./20261128T000000Z-borrow/verdict.json": b"{}", "../outside.txt": b"no",
                 "./20261128T000000Z-borrow/../../escape.txt": b"no"})
    assert _extract(data, root) == ["20261128T000000Z-borrow"]
    assert (root / "20261128T000000Z-borrow" / "verdict.json").is_file()
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "escape.txt").exists()


def test_a_run_folder_made_in_a_pod_reads_back_as_the_outcome_a_local_run_gives(tmp_path):
    """`pytest exercises/ --kailab-on`: an item's outcome is read from the verdict.json its pod wrote."""
    import json

    from kailab.testing.on_cluster import outcome_of_run

    run = tmp_path / "20261128T000000Z-borrow"
    run.mkdir()
    (run / "verdict.json").write_text(json.dumps({
        "exercise": "borrow", "verdict": "failed", "error": "", "kai_version": "v0.17.0", "lab": "unit",
        "runtime": "binary", "figures": {"bound": 3}, "wall_seconds": {"setup": 1.5}, "not_checked": ["x"],
        "expectations": [{"step": "s1", "kind": "expect", "what": "bound", "expected": "4", "observed": "3",
                          "passed": False, "offending": ["p1"], "at": 2.0}], "lab_start_retries": []}))
    o = outcome_of_run(run)
    assert (o.exercise, o.verdict, o.evidence, o.lab, o.figures) == ("borrow", "failed", str(run), "unit", {"bound": 3})
    assert [f.line() for f in o.failures] == ["[FAIL] s1: bound: expected 4, observed 3 (e.g. p1)"]
    assert o.not_checked == ["x"] and o.wall == {"setup": 1.5}


def test_pytest_on_a_cluster_refuses_a_local_lab_beside_it_in_one_line(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    out = subprocess.run([sys.executable, "-m", "pytest", str(resolve_exercise("borrow")), "--kailab-on", str(kubeconfig),
                          "--kailab-lab", "default", "-p", "no:cacheprovider", "-q"], capture_output=True, text=True)
    assert out.returncode != 0 and "--kailab-on runs every item on that cluster: drop --kailab-lab" in out.stderr


def test_an_image_the_node_cannot_get_is_named():
    from kailab.fanout.run import _image_refused

    waiting = lambda reason: {"containerStatuses": [{"image": "kailab/lab:kai-v0.16.8",  # noqa: E731
                                                     "state": {"waiting": {"reason": reason, "message": "not found"}}}]}
    assert _image_refused(waiting("ErrImageNeverPull")) == "ErrImageNeverPull: not found"
    assert _image_refused(waiting("ImagePullBackOff")).startswith("ImagePullBackOff")
    assert _image_refused(waiting("ContainerCreating")) == ""
    assert _image_refused({}) == ""


def test_a_units_cpu_seconds_and_memory_peak_are_read_from_what_its_pod_said():
    from kailab.fanout.run import _said
    from kailab.fanout.unit import CPU, MEMORY

    assert _said(f"lab up\n{CPU} 41.5\n{MEMORY} 1073741824\n{DONE} 0\n", CPU) == 41.5
    assert _said(f"lab up\n{CPU} 41.5\n{MEMORY} 1073741824\n{DONE} 0\n", MEMORY) == 2**30
    assert _said(f"{CPU} unknown\n{DONE} 0\n", CPU) is None and _said("no line", CPU) is None
    assert f'echo "{CPU} ${{cpu:-unknown}}"' in SCRIPT and "cpuacct.usage" in SCRIPT and "cpu.stat" in SCRIPT
    assert f'echo "{MEMORY} ${{mem:-unknown}}"' in SCRIPT and "memory.peak" in SCRIPT and "memory.max_usage_in_bytes" in SCRIPT


def test_a_units_requests_come_from_what_units_of_its_kind_cost_where_they_ran(monkeypatch):
    from kailab.fanout import costs

    assert costs.requests_for("exercise") == ("700m", "1280Mi")  # 24.8 CPU-s over 38 s; 764 MiB x 1.5
    assert costs.requests_for("fill", 7)[0] == "350m" and costs.requests_for("fill", 100)[0] == "1000m"
    assert costs.requests_for("fill", 5000)[0] == "1800m"  # beyond the biggest measured: the biggest
    assert costs.requests_for("never-measured") == costs.FALLBACK
    root = Path(__file__).parents[2]
    for kind, rows in costs.costs().items():  # every row names the record each figure comes from
        assert all(r["record"] and (root / r["record"]).is_file() for r in rows), kind
        assert all((root / r["memory_record"]).is_file() for r in rows if r.get("memory_peak_mib")), kind
    monkeypatch.setattr(costs, "costs", lambda: {"k": [{"cpu_seconds": 5, "seconds": 100, "memory_peak_mib": 900}]})
    assert costs.requests_for("k") == ("250m", "1536Mi")  # at least 250m; 900 x 1.5 rounded up to 256Mi
