"""A fresh machine learns every source it lacks at once, before anything compiles, and registers a
folder of repositories with one command (no network: GOPROXY=off, an empty cache)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from helpers import kailab_cli


def kailab(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"KAILAB_CACHE": str(tmp_path / "cache"), "KAILAB_STATE": str(tmp_path / "state"),
           "GOPROXY": "off", "GOFLAGS": "-mod=mod"}
    return kailab_cli(*args, env=env)


def repo(path: Path, module: str, tag: str) -> Path:
    """A small git repository of a project: its go.mod's module line and one release tag."""
    path.mkdir(parents=True)
    (path / "go.mod").write_text(f"module {module}\n\ngo 1.25\n")
    git = ["git", "-C", str(path), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "go.mod"], check=True)
    subprocess.run([*git, "commit", "-qm", "go.mod"], check=True)
    subprocess.run([*git, "tag", tag], check=True)
    return path


def test_an_empty_cache_is_told_every_missing_source_at_once_and_nothing_compiles(tmp_path):
    start = time.monotonic()
    out = kailab(tmp_path, "tools", "build")
    took = time.monotonic() - start
    assert out.returncode != 0
    err = out.stderr.strip().splitlines()[-1]
    assert err.startswith("kailab: error: this build needs sources"), out.stderr
    for named in ("KAI v0.17.0", "kailab tools kai-source PATH", "kube-state-metrics v2.20.0",
                  "kailab tools source kube-state-metrics PATH", "kailab tools source --from DIR"):
        assert named in err
    assert not (tmp_path / "cache" / "bin").exists() or not any((tmp_path / "cache" / "bin").iterdir())
    assert took < 60, took


def test_without_metrics_nothing_but_kai_is_asked_for(tmp_path):
    out = kailab(tmp_path, "up", "--runtime", "binary", "--fleet", "tiny", "--without-metrics", "--name", "fresh")
    assert out.returncode != 0
    err = out.stderr.strip().splitlines()[-1]
    assert "KAI v0.17.0" in err and "kube-state-metrics" not in err, out.stderr
    assert not (tmp_path / "state" / "labs" / "fresh").exists()


def test_a_folder_of_repositories_is_registered_in_one_command(tmp_path):
    folder = tmp_path / "mirrors"
    repo(folder / "kubernetes+kube-state-metrics" / "repo", "k8s.io/kube-state-metrics/v2", "v2.20.0")
    repo(folder / "nested" / "kueue", "sigs.k8s.io/kueue", "v0.19.2")
    repo(folder / "something-else", "example.com/other", "v1.0.0")
    out = kailab(tmp_path, "tools", "source", "--from", str(folder))
    assert out.returncode == 0, out.stderr
    assert "registered kube-state-metrics" in out.stdout and "registered Kueue" in out.stdout
    assert "something-else" in out.stdout  # named as not a project kailab builds
    still = next(line for line in out.stdout.splitlines() if line.startswith("still not registered"))
    assert "kai (" in still and "fake-gpu-operator" in still and "kueue" not in still
    shown = kailab(tmp_path, "tools", "source", "kube-state-metrics")
    assert shown.returncode == 0 and "v2.20.0" in shown.stdout


def test_a_clone_of_the_public_trace_in_the_folder_is_registered_by_the_same_command(tmp_path):
    folder = tmp_path / "mirrors"
    trace = folder / "alibaba+clusterdata" / "repo"
    (trace / "cluster-trace-gpu-v2023" / "csv").mkdir(parents=True)
    (trace / "cluster-trace-gpu-v2023" / "csv" / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,32000,131072,2,T4\n")
    (trace / "cluster-trace-gpu-v2023" / "csv" / "openb_pod_list_default.csv").write_text("name\n")
    git = ["git", "-C", str(trace), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "trace"], check=True)
    (tmp_path / "empty").mkdir()
    before = kailab(tmp_path, "tools", "source", "--from", str(tmp_path / "empty"))
    assert "trace alibaba-gpu-2023" in before.stdout.splitlines()[-1], before.stdout  # named as missing
    out = kailab(tmp_path, "tools", "source", "--from", str(folder))
    assert out.returncode == 0, out.stderr
    assert "registered trace alibaba-gpu-2023" in out.stdout and "left alone" not in out.stdout, out.stdout
    assert "trace" not in out.stdout.splitlines()[-1], out.stdout  # no longer missing
    shown = kailab(tmp_path, "trace", "source", "alibaba-gpu-2023")
    assert shown.returncode == 0 and "1 task lists" in shown.stdout, shown.stdout


@pytest.mark.parametrize("args", [["--from", "/no/such/dir"], []])
def test_bad_input_is_one_line(tmp_path, args):
    out = kailab(tmp_path, "tools", "source", *args)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_volcano_lab_on_a_fresh_machine_names_volcanos_repository_before_anything_is_made(tmp_path):
    out = kailab(tmp_path, "up", "--runtime", "binary", "--fleet", "tiny", "--without-metrics", "--scheduler",
                 "volcano", "--name", "fresh")
    assert out.returncode != 0
    err = out.stderr.strip().splitlines()[-1]
    assert "Volcano v1.15.1" in err and "kailab tools source volcano PATH" in err and "KAI" not in err, out.stderr
    assert not (tmp_path / "state" / "labs" / "fresh").exists()
