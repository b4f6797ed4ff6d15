"""Fill files (exercises/fills/*.yaml): the fill experiment as data, checked before any lab; an
unregistered trace fails the item in one line naming the command that registers it, never a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kailab.errors import InputError
from kailab.paths import PROJECT_ROOT, cache_dir
from kailab.replay.fill_spec import load_fill

FILE = """fill: tiny-copy
trace: alibaba-gpu-2023
sample: 64
seeds: [1, 2]
step: 0.05
designs: [binpack, spread]
expect:
  - binpack/arrived-100.allocated_pct >= 50
  - binpack/arrived-100.allocated_pct >= spread/arrived-100.allocated_pct
"""


def fill_file(root: Path, text: str = FILE) -> Path:
    (root / "fills").mkdir(parents=True, exist_ok=True)  # where pytest collects fill files
    path = root / "fills" / "tiny-copy.yaml"
    path.write_text(text)
    return path


def test_a_fill_file_reads_with_its_defaults(tmp_path):
    spec = load_fill(fill_file(tmp_path))
    assert (spec.trace, spec.tasks, spec.sample, spec.sample_seed, spec.seeds) == ("alibaba-gpu-2023", "default", 64, 1, [1, 2])
    assert (spec.step, spec.target, spec.designs, len(spec.expect)) == (0.05, 1.3, ["binpack", "spread"], 2)


@pytest.mark.parametrize("change, field", [
    ({"designs": ["binpack", "tight"]}, "designs[1]"),
    ({"trace": "google-2019"}, "trace"),
    ({"expect": ["binpack/arrived-100.allocated_pct ~ 3"]}, "expect[0]"),
    ({"seeds": []}, "seeds"),
    ({"step": 0}, "step"),
])
def test_a_bad_fill_file_is_one_line_naming_its_field(tmp_path, change, field):
    import yaml

    path = fill_file(tmp_path, yaml.safe_dump({**yaml.safe_load(FILE), **change}))
    with pytest.raises(InputError) as err:
        load_fill(path)
    text = str(err.value)
    assert "\n" not in text and str(path) in text and field in text, text


def test_an_unregistered_trace_refuses_the_run_naming_the_command(tmp_path):
    """A kailab cache with KAI's build (linked) but no trace registered: the run is refused at
    collection, before any lab, in one line naming `kailab trace source`; never a skip or a pass."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for part in ("bin", "kai", "src"):  # KAI is cached, so only the trace is missing
        if (cache_dir() / part).exists():
            (cache / part).symlink_to(cache_dir() / part)
    env = {**os.environ, "KAILAB_CACHE": str(cache), "NO_COLOR": "1", "KAILAB_EVIDENCE": str(tmp_path / "ev")}
    run = subprocess.run([sys.executable, "-m", "pytest", str(fill_file(tmp_path)), "-p", "no:cacheprovider", "-q",
                          "-o", "addopts=", "--rootdir", str(PROJECT_ROOT)],
                         capture_output=True, text=True, env=env, timeout=120, cwd=PROJECT_ROOT)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout[-3000:] + run.stderr[-3000:]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "kailab trace source alibaba-gpu-2023 PATH" in lines[0], run.stderr[-2000:]
    assert "no alibaba-gpu-2023 trace is registered" in lines[0]
    assert not (tmp_path / "ev").exists() or not any((tmp_path / "ev").glob("fill-*"))


def test_the_shipped_1of8_item_reads_and_judges_both_designs():
    """exercises/fills/alibaba-1of8.yaml checks without a lab: a bad edit to it fails here in a second,
    not minutes into `make exercises`. Its thresholds are judged live (test_fill_exercise_live)."""
    spec = load_fill(PROJECT_ROOT / "exercises" / "fills" / "alibaba-1of8.yaml")
    assert (spec.trace, spec.sample, spec.designs) == ("alibaba-gpu-2023", 8, ["binpack", "spread"])
    named = " ".join(spec.expect)
    assert "binpack/" in named and "spread/" in named and len(spec.expect) >= 2, spec.expect
