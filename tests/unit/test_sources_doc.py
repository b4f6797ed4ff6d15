"""docs/getting-started.md's sources are commands a user can paste: `DIR` set before any use, a full
`git clone` (never shallow) of every repository kailab registers, each project in the table, and the
refusal of a clone without release tags quoted as the code writes it."""

from __future__ import annotations

import re
import subprocess

import pytest

from kailab import sources
from kailab.errors import KailabError
from kailab.paths import PROJECT_ROOT
from kailab.replay import alibaba

PAGE = PROJECT_ROOT / "docs" / "getting-started.md"


def _text() -> str:
    return PAGE.read_text()


def _clones() -> list[str]:
    return re.findall(r"^git clone (\S+)", _text(), re.M)


def test_every_registered_repository_has_its_full_clone_command():
    urls = {u.lower() for u in _clones()}
    wanted = [f"https://{p.repository}.git" for p in sources.PROJECTS.values()] + [f"https://{alibaba.REPOSITORY}.git"]
    missing = [w for w in wanted if w.lower() not in urls]
    assert not missing, f"docs/getting-started.md has no `git clone` for: {missing}"
    shallow = [line for line in _text().splitlines() if line.startswith("git clone") and "--depth" in line]
    assert not shallow, f"a clone command without release tags: {shallow}"


def test_dir_is_set_before_it_is_used():
    text = _text()
    first_use = min(m.start() for m in re.finditer(r"\bDIR\b", text))
    assert re.match(r"DIR=", text[first_use:]), "docs/getting-started.md uses DIR before `DIR=...` sets it"


def test_the_table_names_every_project_and_the_trace():
    text = _text()
    missing = [n for n in sources.PROJECTS if f"| `{n}` |" not in text]
    assert not missing and f"trace `{alibaba.FORMAT}`" in text, f"projects missing from the table: {missing}"
    assert "KAILAB_SOURCES_FROM" in text and "kailab tools source --from" in text


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_the_quoted_refusal_of_a_clone_without_tags_is_the_codes(tmp_path, monkeypatch):
    monkeypatch.setenv("KAILAB_CACHE", str(tmp_path / "cache"))
    full = tmp_path / "origin"
    full.mkdir()
    _git(full, "init", "-q")
    (full / "go.mod").write_text("module sigs.k8s.io/kueue\n\ngo 1.25\n")
    _git(full, "add", ".")
    _git(full, "commit", "-q", "-m", "one")
    _git(full, "tag", "v0.1.0")
    (full / "README.md").write_text("after the release\n")
    _git(full, "add", ".")
    _git(full, "commit", "-q", "-m", "two")  # the tag is behind HEAD, as a release is behind main
    _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{full}", "kueue")  # a shallow clone: no tags
    with pytest.raises(KailabError) as err:
        sources.register_from(str(tmp_path / "kueue"))
    written = str(err.value).replace(str((tmp_path / "kueue").resolve()), "DIR/kueue")
    quoted = re.search(r"^> kailab: error: (.+?)\n(?!>)", _text(), re.M | re.S)
    assert quoted, "docs/getting-started.md quotes no refusal"
    assert " ".join(quoted.group(1).replace("\n>", " ").split()) == written
