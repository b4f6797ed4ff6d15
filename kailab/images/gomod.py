"""Where a Go module's source is, through the module proxy (`go mod download`, cached by Go): the
builder reads kind's base files, KWOK's kustomize tree and Kubernetes' pause.c from there."""

from __future__ import annotations

import json
import os
import subprocess
from functools import lru_cache
from pathlib import Path

from ..errors import BuildError
from ..paths import cache_dir


@lru_cache(maxsize=None)
def module_dir(module: str, version: str) -> Path:
    work = cache_dir() / "build" / "probe"
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text("module kailab.local/probe\n\ngo 1.25\n")
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=work,
                         capture_output=True, text=True, env={**os.environ, "GOFLAGS": "-mod=mod"})
    if out.returncode != 0:
        try:
            detail = json.loads(out.stdout).get("Error", "")
        except ValueError:
            detail = (out.stderr or out.stdout).strip()[-200:]
        raise BuildError(f"cannot download Go module {module}@{version}: {detail} (the Go module proxy must serve it)")
    return Path(json.loads(out.stdout)["Dir"])
