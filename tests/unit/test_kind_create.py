"""`kind create cluster` failing: the error names kind's own ERROR line, and one failure is retried once,
with the retry in the lab's record (a fake `kind` on disk stands in for the tool; no cluster is made)."""

from __future__ import annotations

import stat

import pytest

from kailab.errors import LabError
from kailab.paths import lab_dir
from kailab.runtimes.base import LabRecord
from kailab.runtimes.kind.runtime import create_cluster
from kailab.runtimes.shell import telling_line

# what kind v0.3x prints when kubeadm fails (-v 1): the ERROR line, the command's output, a stack trace
KIND_FAILURE = """Creating cluster "kailab-x" ...
 ✗ Starting control-plane 🕹️
ERROR: failed to create cluster: failed to init node with kubeadm: command "docker exec --privileged kailab-x-control-plane kubeadm init" failed with error: exit status 1
Command Output: I1129 22:40:01 initconfiguration.go:260] loading configuration
Stack Trace:
sigs.k8s.io/kind/pkg/errors.WithStack
	sigs.k8s.io/kind/pkg/errors/errors.go:59
runtime.goexit
	runtime/asm_amd64.s:1771
"""


def test_the_error_line_is_kinds_own_not_its_stack_traces_last():
    assert telling_line(KIND_FAILURE).startswith("ERROR: failed to create cluster: failed to init node")
    assert telling_line("all good\nthe last line\n") == "the last line"
    assert telling_line("") == "no output"


def _fake_kind(tmp_path, fail_times: int):
    count = tmp_path / "count"
    script = tmp_path / "kind"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/calls
[ "$1" = delete ] && exit 0
n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}
if [ "$n" -lt {fail_times} ]; then
  cat <<'OUT' >&2
{KIND_FAILURE}OUT
  exit 1
fi
echo created
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _record(tmp_path, monkeypatch) -> LabRecord:
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))
    lab_dir("x").mkdir(parents=True)
    rec = LabRecord(name="x", runtime="kind", kai_version="v0.17.0", fleet="small", nodes=1, gpus=8, kubeconfig=str(lab_dir("x") / "kubeconfig"))
    rec.save()
    return rec


def test_one_failed_create_is_deleted_and_retried_and_the_record_says_so(tmp_path, monkeypatch):
    rec = _record(tmp_path, monkeypatch)
    kind = _fake_kind(tmp_path, fail_times=1)
    create_cluster(rec, [str(kind), "create", "cluster", "--name", "kailab-x"], tmp_path / "log",
                   shown=["kind", "create", "cluster"], what="Create the kind cluster")
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["create", "delete", "create"], calls
    [retry] = LabRecord.load("x").start_retries
    assert retry["component"] == "kind cluster"
    assert "ERROR: failed to create cluster" in retry["reason"] and "attempt 1 of 2" in retry["reason"]


def test_a_second_failure_is_the_error_naming_kinds_line(tmp_path, monkeypatch):
    rec = _record(tmp_path, monkeypatch)
    kind = _fake_kind(tmp_path, fail_times=2)
    with pytest.raises(LabError, match="failed \\(exit 1\\): ERROR: failed to create cluster"):
        create_cluster(rec, [str(kind), "create", "cluster", "--name", "kailab-x"], tmp_path / "log",
                       shown=["kind", "create", "cluster"], what="Create the kind cluster")
