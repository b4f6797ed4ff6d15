"""Registered git repositories: where source comes from when the Go module proxy refuses a project.

One mechanism for every such project (KAI, fake-gpu-operator, cri-tools, kube-state-metrics, Kueue,
Volcano, vCluster):
`kailab tools source NAME PATH` checks PATH is a git repository of that project with release tags,
mirrors it into kailab's cache (so it outlives PATH), and any tag can then be exported next to it
(one tree per version, never re-exported) and built inside the project's own module.

Nothing of these projects is ever copied into kailab: mirrors and trees live in the cache.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
import threading

from .errors import BuildError, KailabError
from .paths import cache_dir, cache_lock


@dataclass(frozen=True)
class Project:
    """A project kailab may build from a registered repository."""

    name: str
    title: str             # how messages name it
    repository: str        # where its public repository is, for messages
    module: re.Pattern     # its go.mod's module line
    tag: re.Pattern        # which tags are releases
    needed_for: str        # what kailab builds from it

    def tag_key(self, tag: str) -> tuple:
        return tuple(int(x) for x in re.findall(r"\d+", tag))


def _module(path: str) -> re.Pattern:
    return re.compile(rf"^module\s+{path}\s*$", re.M | re.I)


PROJECTS: dict[str, Project] = {p.name: p for p in [
    Project("kai", "KAI", "github.com/kai-scheduler/KAI-scheduler",
            _module(r"github\.com/(kai-scheduler|NVIDIA)/KAI-scheduler"), re.compile(r"^v\d+\.\d+\.\d+$"),
            "KAI's components, CRDs and chart"),
    Project("fake-gpu-operator", "fake-gpu-operator", "github.com/run-ai/fake-gpu-operator",
            _module(r"github\.com/run-ai/fake-gpu-operator"), re.compile(r"^v?\d+\.\d+\.\d+$"),
            "fake-gpu-operator's images and chart (kind labs built here)"),
    Project("cri-tools", "cri-tools", "github.com/kubernetes-sigs/cri-tools",
            _module(r"sigs\.k8s\.io/cri-tools"), re.compile(r"^v\d+\.\d+\.\d+$"),
            "crictl for the kind node image (`kind load` needs it)"),
    Project("kube-state-metrics", "kube-state-metrics", "github.com/kubernetes/kube-state-metrics",
            _module(r"k8s\.io/kube-state-metrics(/v\d+)?"), re.compile(r"^v\d+\.\d+\.\d+$"),
            "kube-state-metrics for a lab's metrics"),
    Project("kueue", "Kueue", "github.com/kubernetes-sigs/kueue",
            _module(r"sigs\.k8s\.io/kueue"), re.compile(r"^v\d+\.\d+\.\d+$"),
            "Kueue's controller manager, CRDs and webhooks (the kueue stack)"),
    Project("volcano", "Volcano", "github.com/volcano-sh/volcano",
            _module(r"volcano\.sh/volcano"), re.compile(r"^v\d+\.\d+\.\d+$"),
            "Volcano's scheduler, controller manager, webhook manager and CRDs (the volcano stack)"),
    Project("vcluster", "vCluster", "github.com/loft-sh/vcluster",
            _module(r"github\.com/loft-sh/vcluster"), re.compile(r"^v\d+\.\d+\.\d+$"),
            "the vcluster CLI, its syncer and chart (version trials in vClusters)"),
]}


def project(name: str) -> Project:
    try:
        return PROJECTS[name]
    except KeyError:
        raise KailabError(f"unknown source {name!r}: choose one of {', '.join(PROJECTS)}") from None


def home(name: str) -> Path:
    # KAI's registration predates this module and keeps its place in the cache
    return cache_dir() / "kai" if name == "kai" else cache_dir() / "sources" / name


def mirror(name: str) -> Path:
    return home(name) / "repo.git"


def _record_path(name: str) -> Path:
    return home(name) / "source.json"


def git(git_dir: Path, *args: str, check: bool = True) -> str:
    out = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise KailabError(f"git {' '.join(args)} failed in {git_dir}: "
                          f"{(out.stderr or out.stdout).strip().splitlines()[-1:] or ['no output']}")
    return out.stdout


def _git_dir_of(path: Path, p: Project) -> Path:
    """The git directory of a bare repository or of a work tree."""
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path
    if (path / ".git").exists():
        return path / ".git"
    raise KailabError(f"{path}: not a git repository (give a clone or bare mirror of {p.repository})")


def release_tags(git_dir: Path, p: Project) -> list[str]:
    tags = [t for t in git(git_dir, "tag", "--list").split() if p.tag.match(t)]
    return sorted(tags, key=p.tag_key)


def copy_mirror(git_dir: Path, dest: Path, src: Path) -> None:
    """A bare mirror of `git_dir` at `dest`, replacing an earlier one only once the copy is whole
    (a data repository, such as a public trace's, is registered the same way)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    out = subprocess.run(["git", "clone", "--mirror", "--quiet", str(git_dir), str(partial)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise KailabError(f"could not copy {src} into kailab's cache: {out.stderr.strip()}")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)


def register(name: str, path: str) -> dict:
    """Mirror project `name`'s repository at `path` into the cache (replacing an earlier one)."""
    p = project(name)
    src = Path(path).expanduser()
    if not src.exists():
        raise KailabError(f"{path}: no such directory (give a clone or bare mirror of {p.repository})")
    src = src.resolve()
    git_dir = _git_dir_of(src, p)
    tags = release_tags(git_dir, p)
    if not tags:
        raise KailabError(f"{src}: a git repository with no release tags: fetch {p.title}'s tags "
                          "into it (git fetch --tags) or give a full mirror")
    gomod = git(git_dir, "show", f"{tags[-1]}:go.mod", check=False)
    if not p.module.search(gomod):
        raise KailabError(f"{src}: not a {p.title} repository (its {tags[-1]}:go.mod is not the module of "
                          f"{p.repository})")
    copy_mirror(git_dir, mirror(name), src)
    record = {"project": name, "origin": str(src),
              "registered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "tags": len(tags), "oldest": tags[0], "newest": tags[-1]}
    _record_path(name).write_text(json.dumps(record, indent=2))
    return record


def registered(name: str) -> dict | None:
    """The registration record, or None when no repository is registered (or its copy is gone)."""
    try:
        record = json.loads(_record_path(name).read_text())
    except (OSError, ValueError):
        return None
    return record if (mirror(name) / "HEAD").is_file() else None


def register_command(name: str) -> str:
    return "kailab tools kai-source" if name == "kai" else f"kailab tools source {name}"


def no_source_message(name: str, version: str) -> str:
    p = project(name)
    return (f"{p.title} {version} has no source here: the Go module proxy does not serve it and no "
            f"{p.title} repository is registered. Register one with `{register_command(name)} PATH` "
            f"(a clone or bare mirror of {p.repository}); it is needed for {p.needed_for}")


def commit_of(name: str, version: str) -> str:
    """The commit a release tag names in the registered repository; one-line error otherwise."""
    rec = registered(name)
    if rec is None:
        raise BuildError(no_source_message(name, version))
    out = git(mirror(name), "rev-parse", "--verify", "--quiet", f"refs/tags/{version}^{{commit}}", check=False)
    if not out.strip():
        tags = release_tags(mirror(name), project(name))
        raise BuildError(f"the registered {project(name).title} repository ({rec['origin']}) has no tag {version} "
                         f"(it has {tags[0]} … {tags[-1]}): fetch the tag there and run "
                         f"`{register_command(name)} PATH` again")
    return out.strip()


def export_tree(name: str, version: str) -> Path:
    """The tag's tree under the cache (exported once; an existing complete export is reused)."""
    commit = commit_of(name, version)
    dest = cache_dir() / "src" / name / version
    stamp = dest / ".kailab-commit"
    if stamp.is_file() and stamp.read_text().strip() == commit:
        return dest
    with cache_lock(f"export-{name}-{version}"):  # another kailab may be exporting it right now
        if stamp.is_file() and stamp.read_text().strip() == commit:
            return dest
        return _export(name, version, commit, dest)


MISSING = ".kailab-missing"  # beside an export: the files its repository lacked, one path a line


def _export(name: str, version: str, commit: str, dest: Path) -> Path:
    partial = dest.with_name(version + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    archive = subprocess.Popen(["git", f"--git-dir={mirror(name)}", "archive", commit], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(partial)], stdin=archive.stdout, capture_output=True)
    said = archive.stderr.read().decode(errors="replace") if archive.stderr else ""
    missing: list[str] = []
    if archive.wait() != 0 or untar.returncode != 0:
        if "cannot read" not in said and "invalid object" not in said:
            shutil.rmtree(partial, ignore_errors=True)
            raise BuildError(f"could not export {name} {version} from {mirror(name)}: "
                             f"{(said or untar.stderr.decode()).strip().splitlines()[-1:]}")
        # a snapshot without some blobs (a shallow or partial fetch): export what exists, file by
        # file, and record what is not there; whether a build needs those is for its builder to say
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        missing = _export_present(mirror(name), commit, partial)
        (partial / MISSING).write_text("".join(f"{p}\n" for p in missing))
    (partial / ".kailab-commit").write_text(commit + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return dest


def _export_present(git_dir: Path, commit: str, dest: Path) -> list[str]:
    """Write every file of `commit` whose blob the repository has into `dest`; return the paths of
    those it lacks. One `git cat-file --batch` reads them all."""
    listing = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", "--full-tree", commit],
                             capture_output=True, check=True).stdout
    entries = []  # (mode, sha, path)
    for item in listing.split(b"\0"):
        if not item:
            continue
        meta, path = item.split(b"\t", 1)
        mode, kind, sha = meta.split(b" ")
        if kind == b"blob":  # a submodule (commit) is an empty folder, as `git archive` leaves it
            entries.append((mode.decode(), sha.decode(), path.decode()))
        else:
            (dest / path.decode()).mkdir(parents=True, exist_ok=True)
    missing: list[str] = []
    batch = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    assert batch.stdin is not None and batch.stdout is not None
    # requests go in from a thread while answers are read here: a pipe holds only so much

    def feed() -> None:
        for _, sha, _ in entries:
            batch.stdin.write(sha.encode() + b"\n")
        batch.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    for mode, sha, path in entries:
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            missing.append(path)
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)  # the newline after each object
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            target.symlink_to(data.decode())
        else:
            target.write_bytes(data)
            target.chmod(0o755 if mode == "100755" else 0o644)
    if batch.wait() != 0:
        raise BuildError(f"git cat-file failed reading {commit} in {git_dir}")
    return missing


def missing_in(tree: Path) -> list[str]:
    """The files an export lacks because its repository lacks them ([] for a complete export)."""
    try:
        return (tree / MISSING).read_text().split()
    except OSError:
        return []


def needed_but_missing(name: str, version: str, tree: Path, read: list[str]) -> None:
    """One line naming the first missing file under any of the folders a build reads (`read`, relative
    to the tree), and how to get a complete repository; nothing when none of them is missing."""
    hit = [p for p in missing_in(tree) if any(p == r or p.startswith(r.rstrip("/") + "/") for r in read)]
    if hit:
        p = project(name)
        raise BuildError(f"{p.title} {version}: the registered repository ({(registered(name) or {}).get('origin')}) "
                         f"lacks {hit[0]}{f' and {len(hit) - 1} more file(s)' if len(hit) > 1 else ''}, which the "
                         f"build needs: register a complete clone of {p.repository} (`{register_command(name)} PATH`)")


# ------------------------------------------------------------------ a folder of repositories
def _git_dirs(root: Path, depth: int = 3):
    """Git directories under `root` (bare mirrors and work trees), `depth` levels down at most."""
    if (root / "HEAD").is_file() and (root / "objects").is_dir():
        yield root
        return
    if (root / ".git").exists():
        yield root / ".git"
        return
    if depth == 0:
        return
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for child in children:
        yield from _git_dirs(child, depth - 1)


def identify(git_dir: Path) -> str | None:
    """Which known project a repository is, by the module line of its go.mod (newest release tag, else HEAD)."""
    for p in PROJECTS.values():
        tags = [t for t in git(git_dir, "tag", "--list", check=False).split() if p.tag.match(t)]
        ref = max(tags, key=p.tag_key) if tags else "HEAD"
        if p.module.search(git(git_dir, "show", f"{ref}:go.mod", check=False)):
            return p.name
    return None


def register_from(folder: str) -> tuple[dict[str, dict], list[str]]:
    """Register every known project found under `folder`; returns what was registered and what
    under it is no known project (paths)."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise KailabError(f"{folder}: no such directory (give a folder holding clones or bare mirrors)")
    done: dict[str, dict] = {}
    unknown: list[str] = []
    for git_dir in _git_dirs(root.resolve()):
        name = identify(git_dir)
        if name is None:
            unknown.append(str(git_dir))
        elif name not in done:
            done[name] = register(name, str(git_dir.parent if git_dir.name == ".git" else git_dir))
    return done, unknown


def missing_for(recipes) -> list[tuple[str, str]]:
    """(project, version) of every recipe that must be built from a registered repository that is
    not registered (a cached build needs none); KAI also counts when the module proxy serves it
    (toolchain.kai_origin asks the proxy)."""
    out: list[tuple[str, str]] = []
    for r in recipes:
        if r.repository and r.repository != "kai" and registered(r.repository) is None:
            out.append((r.repository, r.version))
    return out


def missing_message(missing: list[tuple[str, str]], what: str) -> str:
    named = "; ".join(f"{project(n).title} {v} (`{register_command(n)} PATH`, a clone of {project(n).repository})"
                      for n, v in missing)
    return (f"{what} needs sources the Go module proxy does not serve and no repository is registered for: "
            f"{named}. Register them one by one, or all at once from a folder holding them: "
            "`kailab tools source --from DIR`")
