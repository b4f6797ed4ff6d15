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

from ... import toolchain
from ...errors import BuildError
from ...paths import cache_dir, cache_lock

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
    with cache_lock(f"{COMPONENT}-{recipe.version}"):  # two labs starting at once compile it once
        return out if out.is_file() else _compile(recipe, tree, out, on_phase)


def _compile(recipe: toolchain.Recipe, tree: Path, out: Path, on_phase) -> Path:
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
        toolchain.run_go(["test", "-c", *toolchain.TEST_COMPILE_FLAGS, f"-overlay={overlay}", "-o", str(partial), "./" + PACKAGE],
                         tree, log, readonly=True)
    os.replace(partial, out)
    return out


def render(recipe: toolchain.Recipe, tree: Path, shard_spec: dict) -> tuple[dict, list[str]]:
    """What KAI's operator makes of a SchedulingShard with `shard_spec`: the scheduler's configuration
    (its ConfigMap's config.yaml) and the scheduler flags the shard's `args` become — only the flags
    KAI's scheduler defines, as the operator passes them (`--qps=300`); it drops any other."""
    renderer = ensure(recipe, tree)
    # the same spec renders the same way for a given renderer: kept, so `up` does not pay for it
    key = hashlib.sha256(json.dumps(shard_spec, sort_keys=True).encode()).hexdigest()[:16]
    kept, kept_args = renderer.parent / "rendered" / f"{key}.yaml", renderer.parent / "rendered" / f"{key}.args.json"
    if not (kept.is_file() and kept_args.is_file()):
        with tempfile.TemporaryDirectory(prefix="kailab-render-") as tmp:
            spec, out, out_args = Path(tmp, "spec.json"), Path(tmp, "config.yaml"), Path(tmp, "args.json")
            spec.write_text(json.dumps(shard_spec))
            proc = subprocess.run([str(renderer), "-test.run", "^TestKailabRenderSchedulerConfig$"],
                                  env={**os.environ, "KAILAB_SHARD_SPEC": str(spec), "KAILAB_OUT": str(out),
                                       "KAILAB_OUT_ARGS": str(out_args)},
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode != 0 or not out.is_file() or not out_args.is_file():
                text = proc.stdout + proc.stderr
                why = next((line.split(": ", 1)[1].strip() for line in text.splitlines()
                            if DRIVER in line and ": " in line), text.strip()[-200:].replace("\n", " "))
                raise BuildError(f"KAI {recipe.version}'s operator refused the SchedulingShard spec "
                                 f"{json.dumps(shard_spec)}: {why}")
            kept.parent.mkdir(exist_ok=True)
            os.replace(out_args, kept_args)
            os.replace(out, kept)
    return yaml.safe_load(kept.read_text()), shard_args(json.loads(kept_args.read_text()), shard_spec)


def shard_args(operator_args: list[str], shard_spec: dict) -> list[str]:
    """Of the scheduler flags the operator built, those that come from the shard's `args` (the rest —
    names, namespace, its ConfigMap's path, ports — a lab sets for itself)."""
    names = set((shard_spec.get("args") or {}))
    return [a for a in operator_args if a.startswith("--") and a[2:].split("=", 1)[0] in names]
