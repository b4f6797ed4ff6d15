"""A registered repository that lacks some blobs (a snapshot fetched without them): the export takes
what exists and records what does not; a build whose vendored copy lacks a file it compiles takes
that module from elsewhere (here: the tree's own replace, so no network), and a missing file the
build compiles is one line naming it. Real git repositories and real Go builds; no network
(GOPROXY=off)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kailab import sources, toolchain
from kailab.errors import BuildError

MODULE = "example.com/holes"


@pytest.fixture
def cache(cache, monkeypatch):
    monkeypatch.setenv("GOPROXY", "off")
    monkeypatch.setenv("GOFLAGS", "")
    monkeypatch.setitem(sources.PROJECTS, "holes", sources.Project(
        "holes", "Holes", "example.com/holes", re.compile(rf"^module\s+{re.escape(MODULE)}\s*$", re.M),
        re.compile(r"^v\d+\.\d+\.\d+$"), "a test"))
    return cache


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def _repo(path: Path, lose: list[str]) -> Path:
    """A module with a dependency it replaces by a folder of its own and also vendors, a binary, docs;
    then the blobs of `lose` (paths) are deleted from the repository's objects."""
    (path / "dep").mkdir(parents=True)
    (path / "dep" / "go.mod").write_text("module example.com/dep\n\ngo 1.25\n")
    (path / "dep" / "dep.go").write_text('package dep\n\nfunc Say() string { return "from dep" }\n')
    (path / "go.mod").write_text(f"module {MODULE}\n\ngo 1.25\n\nrequire example.com/dep v0.0.0\n\n"
                                 "replace example.com/dep => ./dep\n")
    (path / "cmd" / "holes").mkdir(parents=True)
    (path / "cmd" / "holes" / "main.go").write_text(
        'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/dep"\n)\n\nfunc main() { fmt.Println(dep.Say(), extra) }\n')
    (path / "cmd" / "holes" / "extra.go").write_text('package main\n\nconst extra = "and extra"\n')
    (path / "docs").mkdir()
    (path / "docs" / "big.gif").write_bytes(b"GIF89a" + bytes(range(256)))
    (path / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (path / "run.sh").chmod(0o755)
    _git(path, "init", "-q")
    _git(path, "add", ".")
    _git(path, "commit", "-q", "-m", "one")
    subprocess.run(["go", "mod", "vendor"], cwd=path, check=True, capture_output=True,
                   env={**__import__("os").environ, "GOPROXY": "off", "GOFLAGS": ""})
    # the vendored copy differs by a comment, so its blob is its own (a lost blob is lost everywhere)
    with open(path / "vendor" / "example.com" / "dep" / "dep.go", "a") as f:
        f.write("// vendored\n")
    _git(path, "add", ".")
    _git(path, "commit", "-q", "-m", "vendor")
    _git(path, "tag", "v1.0.0")
    for rel in lose:
        sha = _git(path, "rev-parse", f"v1.0.0:{rel}").strip()
        (path / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
    return path


def _recipe() -> toolchain.Recipe:
    return toolchain.Recipe("holes", "v1.0.0", MODULE, {"holes": f"{MODULE}/cmd/holes"}, repository="holes",
                            vendor=True)


def _built_says(cache: Path) -> str:
    return subprocess.run([str(cache / "bin" / "holes" / "v1.0.0" / "holes")], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_export_takes_what_exists_and_records_what_does_not(cache, tmp_path):
    assert subprocess.run(["git", "-C", str(_repo(tmp_path / "r", ["docs/big.gif"])), "archive", "v1.0.0"],
                          capture_output=True).returncode != 0  # what `git archive` alone does
    sources.register("holes", str(tmp_path / "r"))
    tree = sources.export_tree("holes", "v1.0.0")
    assert sources.missing_in(tree) == ["docs/big.gif"]
    assert not (tree / "docs" / "big.gif").exists()
    assert (tree / "cmd" / "holes" / "main.go").read_text().startswith("package main")
    assert (tree / "run.sh").stat().st_mode & 0o111 and not (tree / "go.mod").stat().st_mode & 0o111
    # a folder a build reads is checked by name; one that lacks nothing passes
    sources.needed_but_missing("holes", "v1.0.0", tree, ["cmd", "vendor"])
    with pytest.raises(BuildError) as err:
        sources.needed_but_missing("holes", "v1.0.0", tree, ["docs"])
    assert "\n" not in str(err.value) and "lacks docs/big.gif" in str(err.value)
    assert "kailab tools source holes PATH" in str(err.value)


def test_a_file_nothing_compiles_leaves_the_vendored_build_offline(cache, tmp_path):
    sources.register("holes", str(_repo(tmp_path / "r", ["docs/big.gif"])))
    toolchain.build(_recipe())
    assert _built_says(cache) == "from dep and extra"
    assert toolchain.manifest("holes", "v1.0.0")["source"]["mode"] == "vendor"


def test_a_vendored_file_missing_takes_the_module_from_elsewhere(cache, tmp_path):
    sources.register("holes", str(_repo(tmp_path / "r", ["vendor/example.com/dep/dep.go"])))
    toolchain.build(_recipe())
    assert _built_says(cache) == "from dep and extra"
    source = toolchain.manifest("holes", "v1.0.0")["source"]
    assert source["mode"] == "modules" and source["missing_files"] == 1


def test_a_missing_file_the_build_compiles_is_one_line(cache, tmp_path):
    sources.register("holes", str(_repo(tmp_path / "r", ["cmd/holes/extra.go"])))
    with pytest.raises(BuildError) as err:
        toolchain.build(_recipe())
    msg = str(err.value)
    assert "\n" not in msg and "lacks cmd/holes/extra.go" in msg and "which the build needs" in msg
    assert not toolchain.is_cached(_recipe())


def test_a_build_says_and_records_its_own_cpu_and_a_cached_one_none(cache, tmp_path):
    """What a cold CI's CPU went to, per build: its `built` line and its manifest carry the CPU-seconds of
    the Go commands it ran; a build already cached costs nothing and says nothing."""
    import io

    from rich.console import Console

    sources.register("holes", str(_repo(tmp_path / "r", [])))
    shown = io.StringIO()
    toolchain.build_all([_recipe()], Console(file=shown, width=200))
    spent = toolchain.manifest("holes", "v1.0.0")["build_cpu_seconds"]
    assert spent > 0 and re.search(r"holes/v1\.0\.0\s+built, \d+ CPU-s", shown.getvalue())
    again = io.StringIO()
    toolchain.build_all([_recipe()], Console(file=again, width=200))
    assert again.getvalue() == "" and toolchain.manifest("holes", "v1.0.0")["build_cpu_seconds"] == spent
