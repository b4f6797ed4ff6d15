"""A registered KAI git repository: where KAI's source comes from when the module proxy refuses it.

`kailab tools kai-source PATH` copies a KAI git repository (a bare mirror, an organisation's
internal clone, a work tree's .git) into kailab's cache as a bare mirror, so it outlives PATH.
Any release tag it holds can then be built: the tag's tree is exported next to it (one per
version, never rebuilt) and compiled inside KAI's own module, with KAI's own go.sum — a wrapper
module would start with an empty go.sum and ask the checksum database about pseudo-versions it
does not know.

Nothing of KAI is ever copied into the project: the mirror and the trees live in the cache.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

from .errors import BuildError, KailabError
from .paths import cache_dir

_MODULE_RE = re.compile(r"^module\s+github\.com/(kai-scheduler|NVIDIA)/KAI-scheduler\s*$", re.M | re.I)
_TAG_RE = re.compile(r"^v\d+\.\d+\.\d+$")


def home() -> Path:
    return cache_dir() / "kai"


def mirror() -> Path:
    return home() / "repo.git"


def _record_path() -> Path:
    return home() / "source.json"


def _git(git_dir: Path, *args: str, check: bool = True) -> str:
    out = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise KailabError(f"git {' '.join(args)} failed in {git_dir}: "
                          f"{(out.stderr or out.stdout).strip().splitlines()[-1:] or ['no output']}")
    return out.stdout


def _git_dir_of(path: Path) -> Path:
    """The git directory of a bare repository or of a work tree."""
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path
    if (path / ".git").exists():
        return path / ".git"
    raise KailabError(f"{path}: not a git repository (give a clone or bare mirror of "
                      "github.com/kai-scheduler/KAI-scheduler)")


def release_tags(git_dir: Path) -> list[str]:
    tags = [t for t in _git(git_dir, "tag", "--list", "v*").split() if _TAG_RE.match(t)]
    return sorted(tags, key=lambda t: tuple(int(x) for x in t[1:].split(".")))


def register(path: str) -> dict:
    """Mirror the KAI repository at `path` into the cache (replacing an earlier registration)."""
    src = Path(path).expanduser()
    if not src.exists():
        raise KailabError(f"{path}: no such directory (give a clone or bare mirror of KAI's repository)")
    src = src.resolve()
    git_dir = _git_dir_of(src)
    tags = release_tags(git_dir)
    if not tags:
        raise KailabError(f"{src}: a git repository with no release tags (vX.Y.Z): fetch KAI's tags "
                          "into it (git fetch --tags) or give a full mirror")
    gomod = _git(git_dir, "show", f"{tags[-1]}:go.mod", check=False)
    if not _MODULE_RE.search(gomod):
        raise KailabError(f"{src}: not a KAI repository (its {tags[-1]}:go.mod is not module "
                          "github.com/kai-scheduler/KAI-scheduler)")
    home().mkdir(parents=True, exist_ok=True)
    partial = home() / "repo.git.partial"
    shutil.rmtree(partial, ignore_errors=True)
    out = subprocess.run(["git", "clone", "--mirror", "--quiet", str(git_dir), str(partial)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise KailabError(f"could not copy {src} into kailab's cache: {out.stderr.strip()}")
    shutil.rmtree(mirror(), ignore_errors=True)
    partial.rename(mirror())
    record = {"origin": str(src), "registered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "tags": len(tags), "oldest": tags[0], "newest": tags[-1]}
    _record_path().write_text(json.dumps(record, indent=2))
    return record


def registered() -> dict | None:
    """The registration record, or None when no repository is registered (or its copy is gone)."""
    try:
        record = json.loads(_record_path().read_text())
    except (OSError, ValueError):
        return None
    return record if (mirror() / "HEAD").is_file() else None


def commit_of(version: str) -> str:
    """The commit a release tag names in the registered repository; one-line error otherwise."""
    if registered() is None:
        raise BuildError(no_source_message(version))
    out = _git(mirror(), "rev-parse", "--verify", "--quiet", f"refs/tags/{version}^{{commit}}", check=False)
    if not out.strip():
        tags = release_tags(mirror())
        raise BuildError(f"the registered KAI repository ({registered()['origin']}) has no tag {version} "
                         f"(it has {tags[0]} … {tags[-1]}): fetch the tag there and run "
                         "`kailab tools kai-source PATH` again")
    return out.strip()


def export_tree(version: str) -> Path:
    """The tag's tree under the cache (exported once; an existing complete export is reused)."""
    commit = commit_of(version)
    dest = cache_dir() / "src" / "kai" / version
    stamp = dest / ".kailab-commit"
    if stamp.is_file() and stamp.read_text().strip() == commit:
        return dest
    partial = dest.with_name(version + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    archive = subprocess.Popen(["git", f"--git-dir={mirror()}", "archive", commit], stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(partial)], stdin=archive.stdout, capture_output=True)
    if archive.wait() != 0 or untar.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise BuildError(f"could not export KAI {version} from {mirror()}: {untar.stderr.decode().strip()}")
    (partial / ".kailab-commit").write_text(commit + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return dest


def no_source_message(version: str) -> str:
    return (f"KAI {version} has no source here: the Go module proxy does not serve it and no KAI "
            "repository is registered. Register one with `kailab tools kai-source PATH` (a clone or "
            "bare mirror of github.com/kai-scheduler/KAI-scheduler), or set KAILAB_KAI_SOURCE to a KAI work tree")
