"""The KAI a lab runs says where it came from: its cached build's manifest names its source (the registered
repository at a commit, the module proxy, or a work tree), `kailab tools list` says it, and the scheduler
itself reports the version it was built from. (The source's registration and refusals: tests/unit/test_kai_source.py.)"""

from __future__ import annotations

import json
import os

import pytest

from helpers import kailab_cli as kailab
from kailab import kai_source, toolchain, versions

pytestmark = [pytest.mark.lab, pytest.mark.kai]


def test_the_cached_kai_build_says_where_its_source_came_from(kai_lab):
    """The KAI the lab runs: its manifest names its source, and the scheduler itself reports the
    version and commit it was built from (stamped as KAI's own Makefile stamps them)."""
    from kailab.runtimes import processes

    record = toolchain.manifest("kai", kai_lab.kai_version)
    src = record["source"]
    assert src["kind"] in ("repository", "module-proxy", "work-tree")
    if src["kind"] == "repository":
        assert src["commit"] == kai_source.commit_of(kai_lab.kai_version)
        listed = kailab("tools", "list", env={**os.environ, "COLUMNS": "400"}).stdout  # one line per build
        assert f"repository {src['origin']} @ {src['commit'][:12]}" in " ".join(listed.split())
    log = processes.log_head(kai_lab.dir, "scheduler", 200)
    assert f"gitVersion: {kai_lab.kai_version}" in log
    # every component it runs (the same folder may also hold KAI's snapshot tool: `kailab twin --against-snapshot-tool`)
    assert set(versions.KAI_BINARIES) <= json.loads(json.dumps(record))["binaries"].keys()

