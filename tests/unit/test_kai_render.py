"""KAI's scheduler configuration as KAI's operator renders it (kailab/kai_render.py), from the lab's
KAI source: the operator's own Go code compiled into a test binary of its package, run here."""

from __future__ import annotations

import pytest

from kailab import toolchain, versions
from kailab.stacks.kai import install as kai
from kailab.stacks.kai import render as kai_render
from kailab.errors import BuildError

from helpers import kailab_cli

pytestmark = pytest.mark.kai


@pytest.fixture(scope="module")
def kai_tree():
    reason = toolchain.kai_unavailable_reason()
    if reason:
        pytest.fail(f"this test needs KAI's source: {reason}", pytrace=False)
    recipe = toolchain.kai_recipe(versions.kai_release(versions.DEFAULT_KAI))
    return recipe, toolchain.kai_tree(recipe)


def _plugins(conf: dict) -> list[str]:
    return [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]


def test_an_installed_scheduler_has_the_plugins_the_built_in_default_lacks(kai_tree):
    """KAI #24's first finding: the scheduler without --scheduler-conf has no podaffinity plugin, so
    preferred pod anti-affinity is ignored; the operator's rendering (what a chart install runs) has it."""
    recipe, tree = kai_tree
    installed = kai.installed_default(recipe, tree)
    assert "podaffinity" in _plugins(installed)
    assert "podaffinity" not in _plugins(kai.default_scheduler_conf(tree))
    assert installed["actions"].startswith("allocate, consolidation, reclaim, preempt")
    placement = next(p for t in installed["tiers"] for p in t["plugins"] if p["name"] == "nodeplacement")
    assert placement["arguments"] == {"cpu": "binpack", "gpu": "binpack"}  # the chart's placementStrategy


def test_spread_and_usage_as_the_operator_renders_them(kai_tree):
    recipe, tree = kai_tree
    fragment = {"placementStrategy": {"gpu": "spread", "cpu": "spread"}}
    spread = kai.scheduler_change(recipe, tree, fragment)
    assert spread.shard == fragment
    names = _plugins(spread.conf)
    assert "gpuspread" in names and "gpupack" not in names and "consolidation" not in spread.conf["actions"]
    db, k_value = kai.usage_db_config("http://127.0.0.1:9", {"windowSize": "90s", "fetchInterval": "2s",
                                                             "queryResolution": "2s", "kValue": 1})
    usage = kai.scheduler_change(recipe, tree, {**fragment, "usageDBConfig": db, "kValue": float(k_value)})
    assert usage.conf["usageDBConfig"] == db
    proportion = next(p for t in usage.conf["tiers"] for p in t["plugins"] if p["name"] == "proportion")
    assert float(proportion["arguments"]["kValue"]) == 1.0


def test_any_shard_fragment_is_rendered_over_the_charts_shard(kai_tree):
    """Scheduler configuration as data: plugins' arguments and actions switched off, as the
    SchedulingShard says them, merged over the chart's shard (binpack stays)."""
    recipe, tree = kai_tree
    out = kai.scheduler_change(recipe, tree, {"actions": {"consolidation": {"enabled": False}},
                                              "plugins": {"proportion": {"arguments": {"kValue": "2"}}}})
    assert "consolidation" not in out.conf["actions"] and out.conf["actions"].startswith("allocate, reclaim")
    proportion = next(p for t in out.conf["tiers"] for p in t["plugins"] if p["name"] == "proportion")
    assert proportion["arguments"] == {"kValue": "2"} and "gpupack" in _plugins(out.conf)


def test_a_shards_args_become_scheduler_flags_as_the_operator_passes_them(kai_tree):
    """SchedulingShard.spec.args (e.g. the client's qps and burst, which no other field sets): the
    operator passes those the scheduler defines as flags and drops any other."""
    recipe, tree = kai_tree
    out = kai.scheduler_change(recipe, tree, {"args": {"qps": "300", "burst": "600", "no-such-flag": "1"}})
    assert sorted(out.args) == ["--burst=600", "--qps=300"]
    assert kai.scheduler_change(recipe, tree, {}).args == ()


def test_what_the_operator_refuses_is_one_line(kai_tree):
    recipe, tree = kai_tree
    with pytest.raises(BuildError) as err:
        kai.scheduler_change(recipe, tree, {"queueDepthPerAction": {"nosuchaction": 3}})
    assert "\n" not in str(err.value) and "nosuchaction" in str(err.value)
    # a field this version's SchedulingShard does not have is refused, not silently dropped
    with pytest.raises(BuildError) as err:
        kai.scheduler_change(recipe, tree, {"placementStrategyy": {"gpu": "spread"}})
    assert "\n" not in str(err.value) and "placementStrategyy" in str(err.value)


def test_the_renderer_is_compiled_once_and_writes_nothing_into_kais_tree(kai_tree):
    recipe, tree = kai_tree
    first = kai_render.ensure(recipe, tree)
    assert kai_render.ensure(recipe, tree) == first and first.is_file()
    assert not (tree / kai_render.PACKAGE / kai_render.DRIVER).exists()  # an -overlay, never a file there


BAD_SHARD = """\
exercise: badshard
title: t
concept: c
fleet: tiny
queues:
  q: {gpu: {quota: 8}}
steps:
  - name: s
    scheduler: {shard: FRAGMENT}
    apply: [{pods: {name: p, queue: q, count: 1, gpus: 1}}]
    expect: [{workload: p, bound: 1}]
"""


@pytest.mark.parametrize("fragment, ok", [("{actions: {allocate: {enabled: false}}}", True),
                                          ("{actionz: {allocate: {enabled: false}}}", False)])
def test_validate_checks_shard_fragments_with_kais_operator_code(kai_tree, tmp_path, fragment, ok):
    path = tmp_path / "badshard.yaml"
    path.write_text(BAD_SHARD.replace("FRAGMENT", fragment))
    proc = kailab_cli("validate", str(path))
    if ok:
        assert proc.returncode == 0 and f"{path}: ok" in proc.stdout, proc.stdout + proc.stderr
    else:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode != 0 and len(lines) == 1, proc.stderr
        assert str(path) in lines[0] and "step 1 scheduler.shard" in lines[0] and 'unknown field "actionz"' in lines[0]
        assert f"{path}: ok" not in proc.stdout
