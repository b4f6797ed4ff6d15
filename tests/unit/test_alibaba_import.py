"""`kailab trace import alibaba-gpu-2023`: small files of the trace's own format (the real data is
never copied into kailab), read from a clone's layout or a bare mirror, become a fleet, a trace and
two designs that kailab's own loaders accept; a bad row is one line naming file, row and field, and
nothing is written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kailab.errors import InputError
from kailab.fleet import load_fleet
from kailab.replay.alibaba import import_trace
from kailab.replay.design import load_designs
from kailab.replay.trace import check_against, load_trace

from alibaba_sample import HEADER, PODS, clone

from helpers import kailab_cli

def test_an_import_is_a_fleet_a_trace_and_designs_kailab_reads(tmp_path):
    s = import_trace(clone(tmp_path / "clusterdata"), tmp_path / "out")
    fleet = load_fleet(str(tmp_path / "out" / "fleet.yaml"))
    assert fleet.nodes_total == 3 and fleet.gpus_total == 8 and fleet.products == {"T4", "V100M32"}
    assert {p.name: (p.count, p.gpus, p.cpu, p.memory_gib) for p in fleet.pools} == {
        "t4-2g-32c-128g": (2, 2, 32, 128), "v100m32-4g-96c-768g": (1, 4, 96, 768)}
    trace = load_trace(tmp_path / "out" / "trace.csv")
    jobs = {j.name: j for j in trace.jobs}
    assert [j.arrival_s for j in trace.jobs] == [0, 10, 20, 30, 40, 50]  # from the first creation
    assert jobs["openb-pod-0000"].gpu_models == "V100M32" and jobs["openb-pod-0000"].priority == "inference"
    assert jobs["openb-pod-0001"].gpus == 0.5 and jobs["openb-pod-0001"].priority == "train"
    assert jobs["openb-pod-0001"].duration_s == 58  # deletion - scheduled
    assert jobs["openb-pod-0002"].gpus == 0 and jobs["openb-pod-0002"].memory_mib == 0
    assert jobs["openb-pod-0003"].cpu_milli == 16000 and jobs["openb-pod-0003"].gpus == 2
    assert jobs["openb-pod-0005"].duration_s == 50  # never scheduled: from its creation
    designs = load_designs(f"{tmp_path}/out/design-binpack.yaml,{tmp_path}/out/design-spread.yaml")
    for d in designs:
        check_against(trace, d.leaf_queues(), str(d.path), fleet.gpus_total, products=fleet.products)
    assert [d.spec.scheduler.placement for d in designs] == ["binpack", "spread"]
    counts = json.loads((tmp_path / "out" / "import.json").read_text())["counts"]
    assert counts["never scheduled in the cluster: run from creation"] == 1
    assert counts["still running at the trace's end: cut there"] == 2
    assert counts["a fraction of one GPU"] == 1 and counts["pods"] == 6 == s["counts"]["pods"]
    # at 50 s: pods 0 (1 GPU), 1 (0.5), 3 (2), 4 (1) and 5 (1) all running; pod 0 leaves at 60
    assert (s["gpus_at_once_peak"], s["gpus_at_once_peak_at_s"]) == (5.5, 50)


def test_the_peak_load_counts_a_job_that_ends_as_another_starts_as_gone(tmp_path):
    from kailab.replay.trace import Trace, TraceJob

    jobs = [TraceJob(arrival_s=100, queue="q", pods=1, gpus=2, duration_s=10, name="a"),
            TraceJob(arrival_s=110, queue="q", pods=2, gpus=1, duration_s=5, name="b"),
            TraceJob(arrival_s=112, queue="q", pods=1, gpus=0.25, duration_s=1, name="c")]
    assert Trace(tmp_path, jobs).peak_gpus_at_once() == (2.25, 12)
    assert Trace(tmp_path, []).peak_gpus_at_once() == (0.0, 0.0)


def git_clone(work: Path) -> Path:
    """`work` made a git work tree with its files committed."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "t"]):
        subprocess.run(cmd, cwd=work, check=True, env=env)
    return work


def test_a_bare_mirror_reads_as_a_clone_does(tmp_path):
    work = git_clone(clone(tmp_path / "work"))
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(tmp_path / "mirror.git")], check=True)
    s = import_trace(tmp_path / "mirror.git", tmp_path / "out")
    assert s["nodes"] == 3 and s["counts"]["pods"] == 6


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return kailab_cli(*args, env=env, timeout=60)


def test_a_registered_clone_outlives_it_and_its_name_stands_for_a_path(tmp_path):
    env = {**os.environ, "NO_COLOR": "1", "KAILAB_CACHE": str(tmp_path / "cache")}
    work = git_clone(clone(tmp_path / "work"))
    missing = _cli("trace", "import", "alibaba-gpu-2023", "alibaba-gpu-2023", "--out", str(tmp_path / "o"), env=env)
    assert missing.returncode != 0 and not (tmp_path / "o").exists()
    [line] = missing.stderr.strip().splitlines()
    assert "kailab trace source alibaba-gpu-2023 PATH" in line, line
    shown = _cli("trace", "source", "alibaba-gpu-2023", env=env)
    assert shown.returncode != 0 and "kailab trace source alibaba-gpu-2023 PATH" in shown.stderr
    reg = _cli("trace", "source", "alibaba-gpu-2023", str(work), env=env)
    assert reg.returncode == 0 and str(work) in reg.stdout, reg.stderr
    subprocess.run(["rm", "-rf", str(work)], check=True)  # the cache's copy is what is read from now on
    imp = _cli("trace", "import", "alibaba-gpu-2023", "alibaba-gpu-2023", "--out", str(tmp_path / "o"), env=env)
    assert imp.returncode == 0, imp.stderr
    summary = json.loads((tmp_path / "o" / "import.json").read_text())
    assert summary["nodes"] == 3 and summary["counts"]["pods"] == 6 and len(summary["commit"]) == 40
    assert str(tmp_path / "cache") in summary["source"]
    listed = _cli("tools", "list", env=env)
    assert f"trace alibaba-gpu-2023: registered from {work}" in listed.stdout, listed.stdout[-2000:]


def test_only_a_repository_holding_the_trace_registers(tmp_path):
    env = {**os.environ, "NO_COLOR": "1", "KAILAB_CACHE": str(tmp_path / "cache")}
    plain = clone(tmp_path / "plain")  # the files, but no git: read in place, not registered
    run = _cli("trace", "source", "alibaba-gpu-2023", str(plain), env=env)
    assert run.returncode != 0 and "not a git repository" in run.stderr and "trace import" in run.stderr, run.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "README").write_text("not the trace\n")
    run = _cli("trace", "source", "alibaba-gpu-2023", str(git_clone(other)), env=env)
    assert run.returncode != 0 and "cluster-trace-gpu-v2023/csv/openb_node_list_gpu_node.csv" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not (tmp_path / "cache" / "traces" / "alibaba-gpu-2023" / "repo.git").exists()


def test_a_sample_keeps_every_model_and_is_seeded(tmp_path):
    pods = HEADER + "".join(f"openb-pod-{i:04d},1000,1024,1,1000,,BE,Running,{i},{i + 100},{i}\n" for i in range(80))
    src = clone(tmp_path / "c", pods)
    a = import_trace(src, tmp_path / "a", sample=4, seed=3)
    b = import_trace(src, tmp_path / "b", sample=4, seed=3)
    assert a["counts"]["pods"] == 20
    assert (tmp_path / "a" / "trace.csv").read_text() == (tmp_path / "b" / "trace.csv").read_text()
    assert load_fleet(str(tmp_path / "a" / "fleet.yaml")).products == {"T4", "V100M32"}  # 1/4 of 1 node: kept


@pytest.mark.parametrize("row, field", [
    ("openb-pod-0009,4000,16384,1,abc,,LS,Running,1,2,1", "row 7, field gpu_milli"),
    ("openb-pod-0009,4000,16384,1,1000,,Gold,Running,1,2,1", "row 7, field qos"),
    ("openb-pod-0009,4000,16384,1,1000,,LS,Running,9,2,9", "row 7, field deletion_time"),
    ("openb-pod-0009,4000,16384,1,1000,A100,LS,Running,160,200,160", "row 7, field gpu_spec"),
])
def test_a_bad_row_is_one_line_and_nothing_is_written(tmp_path, row, field):
    src = clone(tmp_path / "c", PODS + row + "\n")
    with pytest.raises(InputError) as err:
        import_trace(src, tmp_path / "out")
    text = str(err.value)
    assert "\n" not in text and "openb_pod_list_default.csv" in text and field in text, text
    assert not (tmp_path / "out").exists()


def test_the_cli_names_what_is_missing(tmp_path):
    run = kailab_cli("trace", "import", "alibaba-gpu-2023", str(clone(tmp_path / "c")), "--out", str(tmp_path / "o"),
                     "--tasks", "gpuspec33", timeout=60)
    assert run.returncode != 0 and "no task list 'gpuspec33'" in run.stderr and "default" in run.stderr, run.stderr
    assert not (tmp_path / "o").exists()
    run = kailab_cli("trace", "import", "alibaba-gpu-2023", str(tmp_path), "--out", str(tmp_path / "o"))
    assert run.returncode != 0 and "cluster-trace-gpu-v2023" in run.stderr.strip().splitlines()[-1]
