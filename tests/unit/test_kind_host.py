"""A kind lab's host packages: one list (kailab/data/kind-host.yaml), checked before anything is
built, named with the line that installs them; .ci/run and docker-host.sh read the same list."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from kailab.runtimes.kind.host import host_packages, install_line, missing_host_packages

from helpers import kailab_cli

ROOT = Path(__file__).resolve().parents[2]


def _shell_list() -> list[str]:
    """The list as .ci/run and docker-host.sh read it."""
    out = subprocess.run(["awk", "/^  - name:/{print $3}", str(ROOT / "kailab/data/kind-host.yaml")],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_the_shell_readers_and_kailab_read_one_list():
    assert _shell_list() == [p["name"] for p in host_packages()]
    assert {"docker.io", "iptables", "mmdebstrap", "libseccomp-dev"} <= set(_shell_list())
    for reader in (ROOT / ".ci/run", ROOT / "kailab/data/docker-host.sh"):
        text = reader.read_text()
        assert "kind-host.yaml" in text, reader
        assert "mmdebstrap" not in text.replace("kind-host.yaml", ""), f"{reader} names a package itself"


def test_a_host_without_them_is_refused_in_seconds_naming_each_and_nothing_is_built(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty), "PKG_CONFIG_PATH": "", "KAILAB_CACHE": str(tmp_path / "cache"),
           "KAILAB_STATE": str(tmp_path / "state")}
    start = time.monotonic()
    out = kailab_cli("tools", "images", env=env, timeout=60)
    took = time.monotonic() - start
    assert out.returncode != 0
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kailab: error: `kailab tools images` needs host packages"), out.stderr
    for name in ("docker.io", "mmdebstrap", "libseccomp-dev", "pkg-config"):  # iptables may be in /usr/sbin, which is always searched
        assert name in err[0]
    assert "apt-get install -y " in err[0]
    assert not (tmp_path / "cache" / "bin").exists()  # nothing compiled
    assert took < 30, took  # refused before any build (a build takes minutes)


def test_the_check_follows_the_host(tmp_path, monkeypatch):
    """Missing exactly what the PATH lacks: with a fake mmdebstrap on it, mmdebstrap is not named."""
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "mmdebstrap"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    names = [p["name"] for p in missing_host_packages()]
    assert "mmdebstrap" not in names and "libseccomp-dev" in names and "docker.io" in names
    assert install_line([p for p in host_packages() if p["name"] in ("iptables", "mmdebstrap")]) == \
        "apt-get install -y iptables mmdebstrap"


def test_down_deletes_the_cluster_in_the_engine_the_lab_was_made_in(tmp_path, monkeypatch):
    """A private engine's DOCKER_HOST is set in the shell that started it: `down` from another shell (or
    with another engine set) still talks to the lab's, as its record says — kind would delete nothing
    elsewhere and say nothing, and the lab's containers would stay."""
    from kailab.runtimes.base import LabRecord
    from kailab.runtimes.kind.runtime import KindRuntime

    seen = tmp_path / "seen"
    fake = tmp_path / "kind"
    fake.write_text(f"#!/bin/sh\necho \"$DOCKER_HOST $*\" >> {seen}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("KAILAB_KIND", str(fake))
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker client: only kind's call is made
    monkeypatch.setenv("DOCKER_HOST", "unix:///elsewhere.sock")
    LabRecord(name="k", runtime="kind", kai_version="v0.17.0", fleet="tiny", nodes=2, gpus=8, kubeconfig="",
              docker_host="unix:///run/private.sock").save()
    assert KindRuntime().down("k") == ["kind cluster kailab-k"]
    assert seen.read_text() == "unix:///run/private.sock delete cluster --name kailab-k\n"
    assert LabRecord.load("k") is None
