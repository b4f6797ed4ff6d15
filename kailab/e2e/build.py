"""KAI's e2e suites compiled into test binaries, from the same KAI source as the lab's binaries.

`go test -c` inside KAI's own module (its go.mod and go.sum, Ginkgo at the version KAI's go.mod
pins), one binary per suite, into kailab's binary cache keyed by KAI version: compiled once, never
again. A KAI work tree (KAILAB_KAI_SOURCE, a patched KAI) is recompiled on every run, since its
code changes under the same version; Go's build cache keeps that to seconds.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .. import toolchain, versions
from ..errors import BuildError
from ..paths import cache_dir, cache_lock
from .suites import Suite

COMPONENT = "kai-e2e"
GINKGO = "github.com/onsi/ginkgo/v2"


def ginkgo_version(tree: Path) -> str:
    """The Ginkgo KAI's go.mod pins (the library compiled into every suite)."""
    m = re.search(rf"^\s*{re.escape(GINKGO)}\s+(v\S+)", (tree / "go.mod").read_text(), re.M)
    return m.group(1) if m else "unknown"


def binary(recipe: toolchain.Recipe, suite: Suite) -> Path:
    return cache_dir() / "bin" / COMPONENT / recipe.version / f"{suite.name}.test"


def ensure(kai_version: str, suites: list[Suite], on_phase=lambda s: None) -> tuple[Path, dict[str, Path]]:
    """(KAI's source tree, {suite: test binary}); missing binaries are compiled first."""
    recipe = toolchain.kai_recipe(versions.kai_release(kai_version))
    tree = toolchain.kai_tree(recipe)
    fresh = recipe.source is not None  # a work tree: its code may have changed since
    out: dict[str, Path] = {}
    work = cache_dir() / "build" / f"{COMPONENT}-{recipe.version}"
    work.mkdir(parents=True, exist_ok=True)
    for i, suite in enumerate(suites, 1):
        target = binary(recipe, suite)
        out[suite.name] = target
        if target.is_file() and not fresh:
            continue
        if not (tree / suite.path).is_dir():
            raise BuildError(f"KAI {kai_version} has no e2e suite {suite.name} ({suite.path} is not in {tree})")
        with cache_lock(f"{COMPONENT}-{recipe.version}-{suite.name}"):  # once, whoever asks at the same time
            if target.is_file() and not fresh:
                continue
            on_phase(f"compiling KAI {recipe.version}'s e2e suite {suite.name} ({i}/{len(suites)}; once per version)")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            cpu = toolchain.go_cpu_seconds()
            with open(work / f"{suite.name}.log", "w") as log:
                toolchain.run_go(["test", "-c", *toolchain.TEST_COMPILE_FLAGS, "-o", str(partial), "./" + suite.path], tree, log,
                                 readonly=True)
            os.replace(partial, target)
            on_phase(f"compiled KAI {recipe.version}'s e2e suite {suite.name}: {toolchain.go_cpu_seconds() - cpu:.0f} CPU-s")
    return tree, out
