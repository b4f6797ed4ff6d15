"""KAI's scheduler configuration as KAI's operator renders it, from the lab's own KAI source.

A helm or operator install never runs KAI's scheduler on its built-in default: the operator turns
the SchedulingShard (defaults filled in by `SetDefaultsWhereNeeded`: plugins, actions, placement
strategy, kValue, usageDBConfig) into the scheduler's ConfigMap. That code is Go, unexported
(`configMapForShard` in pkg/operator/operands/scheduler), and changes between versions, so kailab
does not keep a copy: it compiles a small test file of its own (data/kai_render_test.go.tmpl) into
a test binary of that very package — `go test -c -overlay`, nothing written into KAI's tree — once
per KAI version into the binary cache, and runs it with a shard spec.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

import yaml

from . import toolchain
from .errors import BuildError
from .paths import cache_dir

PACKAGE = "pkg/operator/operands/scheduler"
COMPONENT = "kai-render"
DRIVER = "kailab_render_test.go"


def _driver_text(recipe: toolchain.Recipe) -> str:
    return (resources.files("kailab").joinpath("data/kai_render_test.go.tmpl").read_text()
            .replace("{{MODULE}}", recipe.module))


def binary(recipe: toolchain.Recipe) -> Path:
    """Keyed by KAI version and by the driver's text: a changed driver is compiled anew."""
    digest = hashlib.sha256(_driver_text(recipe).encode()).hexdigest()[:12]
    return cache_dir() / "bin" / COMPONENT / recipe.version / digest / "render.test"


def ensure(recipe: toolchain.Recipe, tree: Path, on_phase=lambda s: None) -> Path:
    """The renderer for `recipe`'s KAI version, compiled into the cache unless it is there."""
    out = binary(recipe)
    if out.is_file():
        return out
    if not (tree / PACKAGE).is_dir():
        raise BuildError(f"{tree / PACKAGE}: no such package in this KAI source, so the operator's scheduler "
                         "configuration cannot be rendered (KAI's operator appeared in v0.10)")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = cache_dir() / "build" / f"{COMPONENT}-{recipe.version}"
    work.mkdir(parents=True, exist_ok=True)
    driver = work / DRIVER
    driver.write_text(_driver_text(recipe))
    overlay = work / "overlay.json"
    overlay.write_text(json.dumps({"Replace": {str(tree / PACKAGE / DRIVER): str(driver)}}))
    on_phase(f"compiling KAI {recipe.version}'s operator rendering (once per version)")
    partial = out.with_name(out.name + ".partial")
    with open(work / "build.log", "w") as log:
        toolchain.run_go(["test", "-c", "-trimpath", f"-overlay={overlay}", "-o", str(partial), "./" + PACKAGE],
                         tree, log, readonly=True)
    os.replace(partial, out)
    return out


def render(recipe: toolchain.Recipe, tree: Path, shard_spec: dict) -> dict:
    """The scheduler configuration KAI's operator writes for a SchedulingShard with `shard_spec`."""
    renderer = ensure(recipe, tree)
    # the same spec renders the same way for a given renderer: kept, so `up` does not pay for it
    key = hashlib.sha256(json.dumps(shard_spec, sort_keys=True).encode()).hexdigest()[:16]
    kept = renderer.parent / "rendered" / f"{key}.yaml"
    if kept.is_file():
        return yaml.safe_load(kept.read_text())
    with tempfile.TemporaryDirectory(prefix="kailab-render-") as tmp:
        spec, out = Path(tmp, "spec.json"), Path(tmp, "config.yaml")
        spec.write_text(json.dumps(shard_spec))
        proc = subprocess.run([str(renderer), "-test.run", "^TestKailabRenderSchedulerConfig$"],
                              env={**os.environ, "KAILAB_SHARD_SPEC": str(spec), "KAILAB_OUT": str(out)},
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 or not out.is_file():
            text = proc.stdout + proc.stderr
            why = next((line.split(": ", 1)[1].strip() for line in text.splitlines()
                        if DRIVER in line and ": " in line), text.strip()[-200:].replace("\n", " "))
            raise BuildError(f"KAI {recipe.version}'s operator refused the SchedulingShard spec "
                             f"{json.dumps(shard_spec)}: {why}")
        kept.parent.mkdir(exist_ok=True)
        os.replace(out, kept)
        return yaml.safe_load(kept.read_text())
