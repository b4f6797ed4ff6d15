"""The Go kailab asks for is the Go its pinned builds need: README's requirement, the data's, and the
toolchain's refusal agree, and none is below the `go` line of a pinned KAI release's go.mod (read from
the registered KAI repository: `kailab tools source --from DIR`)."""

from __future__ import annotations

import re
import subprocess

import pytest

from kailab import kai_source, toolchain, versions
from kailab.errors import BuildError
from kailab.paths import PROJECT_ROOT


def _v(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def test_readme_asks_for_the_go_the_data_pins():
    stated = re.search(r"Go ≥ (\d+\.\d+(?:\.\d+)?)", (PROJECT_ROOT / "README.md").read_text())
    assert stated and stated.group(1) == versions.go_minimum()
    started = (PROJECT_ROOT / "docs" / "getting-started.md").read_text()
    assert f"Go ≥ {versions.go_minimum()}" in started


def test_no_pinned_kai_release_asks_for_a_newer_go_than_readme():
    mirror = kai_source.mirror()
    assert kai_source.registered() is not None and mirror.exists(), \
        "register KAI's repository first: kailab tools source --from DIR (docs/getting-started.md)"
    lines = {}
    for release in versions.known_kai_releases():
        gomod = subprocess.run(["git", "--git-dir", str(mirror), "show", f"{release}:go.mod"],
                               capture_output=True, text=True, check=True).stdout
        lines[release] = re.search(r"^go (\S+)$", gomod, re.M).group(1)
    newest = max(lines.values(), key=_v)
    assert _v(versions.go_minimum()) >= _v(newest), lines
    assert versions.go_minimum() == newest, f"README asks for more than any pinned release needs: {lines}"


def test_an_older_go_is_refused_in_one_line_naming_how_to_get_the_right_one(tmp_path, monkeypatch):
    old = tmp_path / "go"
    old.write_text("#!/bin/sh\necho go1.25.4\n")
    old.chmod(0o755)
    monkeypatch.setenv("KAILAB_GO", str(old))
    with pytest.raises(BuildError) as err:
        toolchain.go_binary()
    said = str(err.value)
    assert "\n" not in said and f"is go1.25.4: install Go >= {versions.go_minimum()}, which kailab's builds need" in said
    assert f"GOTOOLCHAIN=go{versions.go_minimum()} go version" in said
