"""A registered KAI repository: registration, its one-line refusals, and where a KAI build's
source comes from. Real git repositories throughout; the module proxy's answer is the only thing
stood in for (so the tests hold on machines whose proxy does or does not serve KAI)."""

from __future__ import annotations

import json
import subprocess

import pytest

from kailab import kai_source, toolchain, versions
from kailab.errors import BuildError, KailabError

from helpers import kailab_cli


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def _repo(path, module: str, tags: list[str]):
    path.mkdir(parents=True)
    _git(path, "init", "-q")
    (path / "go.mod").write_text(f"module {module}\n\ngo 1.25\n")
    (path / "README.md").write_text("x\n")
    _git(path, "add", ".")
    _git(path, "commit", "-q", "-m", "one")
    for t in tags:
        _git(path, "tag", t)
    return path


def kailab(*args, env=None):
    return kailab_cli(*args, env=env)


@pytest.mark.parametrize("case, fragment", [
    ("missing", "no such directory"),
    ("plain-dir", "not a git repository"),
    ("no-tags", "no release tags"),
    ("not-kai", "not a KAI repository"),
])
def test_registering_something_that_is_not_a_kai_repository_is_one_line(cache, tmp_path, case, fragment):
    path = tmp_path / case
    if case == "plain-dir":
        path.mkdir()
    elif case == "no-tags":
        _repo(path, "github.com/kai-scheduler/KAI-scheduler", [])
    elif case == "not-kai":
        _repo(path, "example.com/not-kai", ["v1.0.0"])
    with pytest.raises(KailabError) as err:
        kai_source.register(str(path))
    assert "\n" not in str(err.value) and fragment in str(err.value) and str(path) in str(err.value)
    assert kai_source.registered() is None  # nothing half-made
    assert not (cache / "kai" / "repo.git").exists()


def test_cli_refusal_is_one_line_with_nonzero_exit(cache, tmp_path):
    import os

    out = kailab("tools", "kai-source", str(tmp_path / "nope"), env={**os.environ})
    assert out.returncode != 0
    assert out.stderr.strip().count("\n") == 0 and "no such directory" in out.stderr


def test_registration_is_a_mirror_that_outlives_the_path_and_exports_exact_tags(cache, tmp_path):
    import shutil

    src = _repo(tmp_path / "kai", "github.com/kai-scheduler/KAI-scheduler", ["v0.99.0"])
    (src / "later.txt").write_text("after the tag\n")
    _git(src, "add", ".")
    _git(src, "commit", "-q", "-m", "two")
    _git(src, "tag", "v0.99.1")
    record = kai_source.register(str(src))
    assert record["tags"] == 2 and record["newest"] == "v0.99.1"
    shutil.rmtree(src)  # the user's clone goes away: the registration stays usable
    tree = kai_source.export_tree("v0.99.0")
    assert (tree / "go.mod").is_file() and not (tree / "later.txt").exists()
    assert (kai_source.export_tree("v0.99.1") / "later.txt").is_file()
    assert kai_source.export_tree("v0.99.0") == tree  # reused, not exported again
    with pytest.raises(BuildError) as err:
        kai_source.commit_of("v0.17.0")
    assert "has no tag v0.17.0" in str(err.value) and "v0.99.0 … v0.99.1" in str(err.value)


def _proxy_refuses(monkeypatch):
    def refuse(module, version):
        raise BuildError(f"Go module {module}@{version} is not available: 403 Forbidden")

    monkeypatch.setattr(toolchain, "check_module_available", refuse)


def test_without_proxy_or_repository_the_error_names_both_fixes(cache, monkeypatch):
    _proxy_refuses(monkeypatch)
    recipe = toolchain.kai_recipe(versions.kai_release("v0.17.0"))
    with pytest.raises(BuildError) as err:
        toolchain.kai_origin(recipe)
    msg = str(err.value)
    assert "\n" not in msg and "kailab tools kai-source PATH" in msg and "403 Forbidden" in msg


def test_where_the_proxy_refuses_a_registered_repository_with_the_tag_is_used(cache, tmp_path, monkeypatch):
    _proxy_refuses(monkeypatch)
    kai_source.register(str(_repo(tmp_path / "kai", "github.com/kai-scheduler/KAI-scheduler", ["v0.17.0"])))
    recipe = toolchain.kai_recipe(versions.kai_release("v0.17.0"))
    assert toolchain.kai_origin(recipe) == "repository"
    other = toolchain.kai_recipe(versions.kai_release("v0.16.8"))
    with pytest.raises(BuildError, match="has no tag v0.16.8"):
        toolchain.kai_origin(other)


def test_a_work_tree_is_cached_apart_and_refused_for_multi_version_trials(cache, tmp_path, monkeypatch):
    from kailab import trial

    monkeypatch.setenv("KAILAB_KAI_SOURCE", str(tmp_path))
    recipe = toolchain.kai_recipe(versions.kai_release("v0.17.0"))
    assert toolchain.kai_origin(recipe) == "work-tree" and recipe.version.startswith("v0.17.0-src-")
    with pytest.raises(KailabError, match="one KAI work tree and cannot serve several versions"):
        trial.parse_versions("v0.16.8,v0.17.0")
