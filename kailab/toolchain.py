"""Builds the lab's binaries from Go modules into one cache, keyed by component and version.

Each component is built through a small generated *wrapper module* that requires the upstream
module and repeats its `replace` directives: `go install pkg@version` refuses modules whose go.mod
has replaces (k8s.io/kubernetes, etcd's server, KAI >= v0.17.0). Local-path replaces such as
`k8s.io/api => ./staging/src/k8s.io/api` become the published module at the matching version.
Only the Go module proxy is contacted; nothing is downloaded from anywhere else.

KAI is the exception where the proxy refuses it: then it is built from a registered KAI git
repository (see kai_source), inside KAI's own module with its own go.sum. Every KAI build's
manifest says where its source came from (module proxy / repository + commit / work tree) and
where that source tree is, so a lab's CRDs always come from the same tree as its binaries.

Over 500 lines: a recipe, its cache key, its source check and its build are one contract (the
manifest a build writes is what the cache and the source check read back); kept in one place.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from . import versions
from .errors import BuildError
from .paths import cache_dir, cache_lock
from . import kai_source, sources


@dataclass(frozen=True)
class Recipe:
    """How to build one component at one version."""

    component: str  # cache key, e.g. "kubernetes", "kai", "kwok", "etcd"
    version: str
    module: str  # the upstream Go module
    binaries: dict[str, str]  # binary name -> package import path
    # maps a local-path replace target (module path) to the version to require instead
    local_replace_version: Callable[[str, str], str] = field(default=lambda mod, ver: ver)
    source: Path | None = None  # a local work tree of `module` to build instead of the proxy's copy
    # a project registered with `kailab tools source` (sources.py) to build in, for modules the
    # proxy refuses; "kai" also tries a work tree and the proxy first (kai_origin)
    repository: str | None = None
    cgo: bool = False  # e.g. runc (its nsenter is C) — then the host needs a C toolchain
    tags: tuple[str, ...] = ()
    vendor: bool = False  # build with the tree's vendor/ (a project whose go.sum is incomplete)
    # `-X package.var=value` link flags, e.g. the version Kubernetes' own build stamps (kubeadm
    # refuses to set up a control plane newer than it says it is)
    stamp: tuple[tuple[str, str], ...] = ()
    # False: resolve only what the tagged build imports (`go get -tags`), not every import under
    # every tag (`go mod tidy`) — for a module whose tag-excluded imports the proxy refuses
    tidy: bool = True
    # False: compiled without optimizations or inlining (QUICK_COMPILE_FLAGS), for a tool that does none of a
    # lab's steady work (a CLI run a few times, a plugin run per container) and shares no module version with
    # an optimized build (its shared packages would be compiled twice)
    optimize: bool = True
    # a main package of kailab's own (Go source), built as the recipe's one binary in place of the upstream
    # main: for a program whose own main links far more than a lab runs (CoreDNS: every plugin, cloud SDKs
    # among them); its import path is own_main(component, binary)
    main_source: str = ""

    @property
    def key(self) -> str:
        return f"{self.component}/{self.version}"


WRAPPER_MODULE = "kailab.local/build"  # the wrapper modules' path (+ /<component>)


def own_main(component: str, binary: str) -> str:
    """The import path of a Recipe.main_source main package, in the wrapper module kailab writes."""
    return f"{WRAPPER_MODULE}/{component}/cmd/{binary}"


def _k8s_staging_version(_module: str, version: str) -> str:
    # k8s.io/kubernetes v1.35.4 publishes its staging modules (k8s.io/api, ...) as v0.35.4
    return "v0" + version[2:]


def kubernetes_stamp(kubernetes: str) -> tuple[tuple[str, str], ...]:
    """The version variables Kubernetes' hack/lib/version.sh stamps into every binary."""
    major, minor = kubernetes.lstrip("v").split(".")[:2]
    values = {"gitVersion": kubernetes, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    return tuple((f"{pkg}.{var}", value) for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
                 for var, value in values.items())


CONTROL_PLANE = ("kubectl", "kube-scheduler", "kube-apiserver", "kube-controller-manager")
NODE_ONLY = ("kubeadm", "kubelet", "kube-proxy")  # kind's node image runs these; a binary lab never does


def kubernetes_recipe(kubernetes: str, node: bool = False) -> Recipe:
    """Kubernetes' binaries at one version, stamped as its own build stamps them (an API server that
    says `v0.0.0-master` is refused by clients that check the server's version, Kueue's among them):
    the binary runtime's control plane (and a stack's kube-scheduler), and with `node` also what kind's
    node image runs. Both share one cache folder ("kubernetes-node", the name caches already hold): a
    kind lab adds its three binaries to a binary lab's build, never rebuilding the others."""
    k8s = "k8s.io/kubernetes/cmd/"
    names = CONTROL_PLANE + (NODE_ONLY if node else ())
    return Recipe("kubernetes-node", kubernetes, "k8s.io/kubernetes", {n: k8s + n for n in names},
                  _k8s_staging_version, stamp=kubernetes_stamp(kubernetes))


def recipes_for(kai_version: str) -> list[Recipe]:
    """Everything a binary-runtime lab with KAI `kai_version` needs."""
    return cluster_recipes(kai_version) + [kai_recipe(versions.kai_release(kai_version))]


def etcd_recipe(version: str) -> Recipe:
    """etcd's server at `version`: a binary lab's store, and a kind node's etcd image at the tag kubeadm asks."""
    return Recipe("etcd", version, "go.etcd.io/etcd/server/v3", {"etcd": "go.etcd.io/etcd/server/v3"})


def cluster_recipes(kai_version: str) -> list[Recipe]:
    """A binary-runtime lab's control plane and fleet, at the Kubernetes version KAI `kai_version`
    pins (versions.yaml), whatever schedules in it."""
    release = versions.kai_release(kai_version)
    k8s = release.kubernetes
    return [
        etcd_recipe(versions.ETCD_VERSION),
        kubernetes_recipe(k8s),
        Recipe("kwok", versions.KWOK_VERSION, "sigs.k8s.io/kwok",
               {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
    ]


def metrics_recipes() -> list[Recipe]:
    """A lab's metrics processes: Prometheus (its module has upstream replaces: the wrapper
    handles them; the web UI's assets are not embedded without the `builtinassets` tag, so the
    server and its HTTP API run, the UI pages do not) and kube-state-metrics, which the proxy
    refuses: built in its registered repository (`kailab tools source kube-state-metrics`)."""
    return [Recipe("prometheus", versions.PROMETHEUS_VERSION, "github.com/prometheus/prometheus",
                   {"prometheus": "github.com/prometheus/prometheus/cmd/prometheus"},
                   # a lab scrapes static targets: no service discovery (cloud SDKs; the proxy
                   # refuses Nomad's), hence resolved for this tag alone
                   tags=("remove_all_sd",), tidy=False),
            Recipe("kube-state-metrics", versions.KSM_VERSION, "k8s.io/kube-state-metrics/v2",
                   {"kube-state-metrics": "k8s.io/kube-state-metrics/v2"}, repository="kube-state-metrics")]


def peer_recipes() -> list[Recipe]:
    """Benchmark peers only, never part of a lab: KWOK's own cluster tool, for the side-by-side
    `kailab bench peer` comparison (same control-plane binaries, its own supervision)."""
    return [Recipe("kwokctl", versions.KWOK_VERSION, "sigs.k8s.io/kwok",
                   {"kwokctl": "sigs.k8s.io/kwok/cmd/kwokctl"})]


def kai_recipe(release: versions.KaiRelease) -> Recipe:
    binaries = {name: f"{release.module}/cmd/{name}" for name in versions.KAI_BINARIES}
    local = os.environ.get("KAILAB_KAI_SOURCE")
    if local:
        # a work tree (a patched KAI): cached apart from the released build of the same version
        src = Path(local).resolve()
        tag = hashlib.sha256(str(src).encode()).hexdigest()[:8]
        return Recipe("kai", f"{release.version}-src-{tag}", release.module, binaries, source=src,
                      repository="kai")
    return Recipe("kai", release.version, release.module, binaries, repository="kai")


def kai_origin(recipe: Recipe) -> str:
    """Where an uncached KAI recipe's source will come from: 'work-tree', 'module-proxy' or
    'repository'. BuildError naming every way to fix it when there is none."""
    if recipe.source is not None:
        return "work-tree"
    try:
        check_module_available(recipe.module, recipe.version)
        return "module-proxy"
    except BuildError as refused:
        if kai_source.registered() is None:
            raise BuildError(f"{kai_source.no_source_message(recipe.version)} (the proxy said: {refused})") from None
        kai_source.commit_of(recipe.version)  # a tag the repository lacks: its own one-line error
        return "repository"


def manifest(component: str, version: str) -> dict | None:
    try:
        return json.loads((cache_dir() / "bin" / component / version / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def binary_path(component: str, version: str, binary: str) -> Path:
    return cache_dir() / "bin" / component / version / binary


def is_cached(recipe: Recipe) -> bool:
    folder = cache_dir() / "bin" / recipe.component / recipe.version
    return (folder / "manifest.json").is_file() and all(
        (folder / b).is_file() for b in recipe.binaries
    )


def cached() -> list[dict]:
    """What the cache holds: one record per component/version with its binaries."""
    out = []
    root = cache_dir() / "bin"
    for manifest in sorted(root.glob("*/*/manifest.json")):
        try:
            out.append(json.loads(manifest.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return out


def go_binary() -> str:
    go = os.environ.get("KAILAB_GO") or shutil.which("go")
    if not go or not os.access(go, os.X_OK):
        raise BuildError(f"Go toolchain not found: {_go_hint()}")
    _check_go_version(go)
    return go


def _go_hint() -> str:
    need = versions.go_minimum()
    return (f"install Go >= {need}, which kailab's builds need (the newest go.mod it builds; Debian 12's golang-go is 1.19): "
            f"the official archive, or the Go module proxy's toolchain - `GOTOOLCHAIN=go{need} go version` once, then "
            f"KAILAB_GO=$(go env GOMODCACHE)/golang.org/toolchain@v0.0.1-go{need}.linux-amd64/bin/go")


@functools.lru_cache(maxsize=None)
def _check_go_version(go: str) -> None:
    """One line when the Go found is older than the pinned builds need (they run with GOTOOLCHAIN=local)."""
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True,
                         env={**os.environ, "GOTOOLCHAIN": "local"}).stdout.strip()
    have = re.match(r"go(\d+)\.(\d+)(?:\.(\d+))?", out)
    if have is None:
        return  # a development build ("devel ..."): let the build say what it lacks
    if tuple(int(x or 0) for x in have.groups()) < tuple(int(x) for x in versions.go_minimum().split(".")):
        raise BuildError(f"{go} is {out}: {_go_hint()}")


def _go_env(go_dir: Path, readonly: bool = False, recipe: Recipe | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # never let Go fetch another toolchain, and never read a user's GOFLAGS like -mod=vendor;
    # inside a source's own module, its go.mod/go.sum are the truth and are never rewritten
    mode = "-mod=vendor" if recipe and recipe.vendor else "-mod=readonly" if readonly else "-mod=mod"
    env.update({"GOTOOLCHAIN": "local", "GOFLAGS": mode, "GOCACHE": str(go_cache()),
                "CGO_ENABLED": "1" if recipe and recipe.cgo else "0", "GOWORK": "off"})
    return env


def _run_go(args: list[str], cwd: Path, log, on_line: Callable[[str], None] | None = None,
            readonly: bool = False, recipe: Recipe | None = None) -> None:
    go = go_binary()
    proc = subprocess.Popen([go, *args], cwd=cwd, env=_go_env(cwd, readonly, recipe), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        log.write(line)
        tail = (tail + [line.rstrip()])[-15:]
        if on_line:
            on_line(line.rstrip())
    if _wait_counting_cpu(proc) != 0:
        text = "\n".join(tail)
        if "403 Forbidden" in text or "not available" in text or "410 Gone" in text:
            raise BuildError(f"the Go module proxy refused a module needed by `go {' '.join(args[:2])}`: "
                             f"{_first_error(tail)} (set GOPROXY to a proxy that serves it, "
                             "or register a KAI repository: `kailab tools kai-source --help`)")
        raise BuildError(f"`go {' '.join(args)}` failed in {cwd}: {_first_error(tail)} "
                         f"(full log: {log.name})")


run_go = _run_go  # for builds beside the recipes' (kai_render's test binary)

# The CPU-seconds of the `go` commands one thread's build ran (go and the compilers and linker it waited
# for): a cold CI is bound by its CPU, and each build's share is what says where a cut must be
class _GoCpu(threading.local):
    seconds = 0.0


_build_cpu = _GoCpu()


def _wait_counting_cpu(proc: subprocess.Popen) -> int:
    """Wait for `proc` as Popen.wait does, adding its tree's CPU (wait4's rusage) to this thread's build."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    _build_cpu.seconds += usage.ru_utime + usage.ru_stime
    return proc.returncode


def go_cpu_seconds() -> float:
    """The CPU-seconds of the `go` commands this thread has run (a running count: take a difference)."""
    return _build_cpu.seconds


def _first_error(lines: list[str]) -> str:
    for line in lines:
        if line.strip() and not line.startswith("go: downloading"):
            return line.strip()
    return lines[-1] if lines else "no output"


def check_module_available(module: str, version: str) -> None:
    """Ask the module proxy for module@version's metadata (cheap); BuildError when refused."""
    probe = cache_dir() / "build" / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    (probe / "go.mod").write_text("module kailab.local/probe\n\ngo 1.25\n")
    out = subprocess.run([go_binary(), "list", "-m", "-json", f"{module}@{version}"], cwd=probe,
                         env=_go_env(probe), capture_output=True, text=True)
    if out.returncode != 0:
        detail = " ".join((out.stderr or out.stdout).split())
        raise BuildError(f"Go module {module}@{version} is not available: {detail}")


def module_gomod(module: str, version: str, work: Path, log) -> dict:
    """The upstream go.mod as `go mod edit -json` sees it (downloaded through the module proxy)."""
    probe = work / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    (probe / "go.mod").write_text("module kailab.local/probe\n\ngo 1.25\n")
    out = subprocess.run([go_binary(), "mod", "download", "-json", f"{module}@{version}"],
                         cwd=probe, env=_go_env(probe), capture_output=True, text=True)
    log.write(out.stdout + out.stderr)
    if out.returncode != 0:
        try:
            err = json.loads(out.stdout).get("Error", "")
        except json.JSONDecodeError:
            err = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["unknown error"]
            err = err[0]
        hint = ("set GOPROXY to a proxy that serves it, or register a KAI repository with `kailab tools kai-source PATH`"
                if "KAI-scheduler" in module else "the Go module proxy must serve it; check GOPROXY")
        raise BuildError(f"cannot download Go module {module}@{version}: {' '.join(err.split())} ({hint})")
    gomod = json.loads(out.stdout)["GoMod"]
    parsed = subprocess.run([go_binary(), "mod", "edit", "-json", gomod], cwd=probe,
                            env=_go_env(probe), capture_output=True, text=True, check=True)
    return json.loads(parsed.stdout)



def wrapper_gomod(recipe: Recipe, upstream: dict) -> str:
    """go.mod text of the wrapper module: require the upstream, repeat its replaces."""
    lines = [f"module {WRAPPER_MODULE}/{recipe.component}", "",
             f"go {upstream.get('Go') or '1.25'}", "", f"require {recipe.module} {recipe.version}", ""]
    for rep in upstream.get("Replace") or []:
        old, new = rep["Old"], rep["New"]
        old_s = old["Path"] + (" " + old["Version"] if old.get("Version") else "")
        if new["Path"].startswith("."):
            if "FORBIDDEN" in new["Path"]:
                continue  # a guard against bad imports, not a real dependency
            target = f"{old['Path']} {recipe.local_replace_version(old['Path'], recipe.version)}"
        else:
            target = new["Path"] + (" " + new["Version"] if new.get("Version") else "")
        lines.append(f"replace {old_s} => {target}")
    return "\n".join(lines) + "\n"


# How every Go binary kailab makes is compiled: no paths of this machine in it, and no DWARF — the
# linker's -s -w drops it anyway, and not writing it cut a cold build's CPU by 13 % (kwok: 187 → 162 CPU-s)
COMPILE_FLAGS = ("-trimpath", "-gcflags=all=-dwarf=false")
# and a recipe with `optimize=False`: -N -l took a cold build of kwok from 248 to 184 CPU-s (-26 %)
QUICK_COMPILE_FLAGS = ("-trimpath", "-gcflags=all=-dwarf=false -N -l")
# and a test binary (KAI's e2e suites, its operator's rendering): without `go vet`, which `go test -c` runs
# first and which is a check for the code's authors — on a cold Go cache it cost 98 CPU-s more than
# compiling KAI's quota suite (383 CPU-s), computing facts for every package the suite imports
TEST_COMPILE_FLAGS = (*COMPILE_FLAGS, "-vet=off")


def go_cache() -> Path:
    """kailab's own Go build cache (compiled packages, shared by every build kailab makes): in its cache,
    apart from the user's, so `kailab tools clean-go-cache` can free it (a cold build fills ~18 GB) without
    touching anything else; the binaries it built stay. KAILAB_GO_CACHE puts it elsewhere."""
    return Path(os.environ.get("KAILAB_GO_CACHE") or cache_dir() / "go-build")


def go_cache_bytes() -> int:
    """What kailab's Go build cache holds on disk."""
    root = go_cache()
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0


def clean_go_cache() -> int:
    """Empty kailab's Go build cache with Go's own `go clean -cache`; the bytes it held."""
    root = go_cache()
    if not root.is_dir():
        return 0
    held = go_cache_bytes()
    proc = subprocess.run([go_binary(), "clean", "-cache"], cwd=root, env=_go_env(root), capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"`go clean -cache` of {root} failed: {proc.stderr.strip()[-200:]}")
    return held


def _version_ldflags(recipe: Recipe, commit: str) -> str:
    """Stamp the version KAI's own Makefile stamps, so `scheduler --version` tells the truth."""
    if recipe.repository != "kai":
        return " ".join(["-s -w", *(f"-X {var}={value}" for var, value in recipe.stamp)])
    pkg = f"{recipe.module}/pkg/scheduler/version"
    return (f"-s -w -X {pkg}.gitVersion={recipe.version.split('-src-')[0]} -X {pkg}.gitCommit={commit} "
            f"-X {pkg}.gitTreeState=clean -X {pkg}.buildDate={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")


def _build_wrapped(recipe: Recipe, work: Path, out: Path, log, on_phase) -> None:
    """Build through a generated wrapper module requiring the published module."""
    on_phase("reading upstream go.mod")
    upstream = module_gomod(recipe.module, recipe.version, work, log)
    (work / "go.mod").write_text(wrapper_gomod(recipe, upstream))
    if recipe.main_source:
        (name,) = recipe.binaries
        main = work / "cmd" / name / "main.go"
        main.parent.mkdir(parents=True, exist_ok=True)
        main.write_text(recipe.main_source)
    own = f"{WRAPPER_MODULE}/{recipe.component}/"
    imports = "\n".join(f'\t_ "{pkg}"' for pkg in recipe.binaries.values() if not pkg.startswith(own))
    tools = work / "tools.go"
    if imports:
        tools.write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n")
    else:
        tools.unlink(missing_ok=True)
    on_phase("resolving modules")
    resolve = ["mod", "tidy"] if recipe.tidy else ["get", *_tags(recipe), *recipe.binaries.values()]
    _run_go(resolve, work, log, lambda l: on_phase(l[:70]) if l.startswith("go: downloading") else None)
    on_phase("compiling " + ", ".join(recipe.binaries))
    _compile(recipe, list(recipe.binaries.values()), work, out, _version_ldflags(recipe, "module-proxy"), log)


def _tags(recipe: Recipe) -> list[str]:
    return [f"-tags={','.join(recipe.tags)}"] if recipe.tags else []


def _build_in_module(recipe: Recipe, tree: Path, commit: str, out: Path, log, on_phase) -> None:
    """Build inside the source tree's own module, trusting its go.sum (never rewriting it)."""
    if not (tree / "go.mod").is_file():
        raise BuildError(f"{tree}: no go.mod there (point KAILAB_KAI_SOURCE at a KAI work tree)")
    pkgs = ["./" + pkg.removeprefix(recipe.module).lstrip("/") for pkg in recipe.binaries.values()]
    on_phase("compiling " + ", ".join(recipe.binaries) + " (downloads what go.sum names first)")
    _compile(recipe, pkgs, tree, out, _version_ldflags(recipe, commit), log, readonly=True)


def _compile(recipe: Recipe, pkgs: list[str], cwd: Path, out: Path, ldflags: str, log, readonly: bool = False) -> None:
    """The recipe's binaries (`pkgs`, in its order) into `out`, named as the recipe names them: one `go build`
    for all of them where their folders' names differ — Go loads the package graph once (~3 CPU-s for
    Kubernetes' API server alone) and compiles what they share once; else one each."""
    build = ["build", *(COMPILE_FLAGS if recipe.optimize else QUICK_COMPILE_FLAGS), *_tags(recipe), f"-ldflags={ldflags}", "-o"]
    names = list(recipe.binaries)
    built = [out / _exec_name(pkg) for pkg in recipe.binaries.values()]  # import paths: `./` is a module's root
    if len({b.name for b in built}) < len(built):
        for name, pkg in zip(names, pkgs):
            _run_go([*build, str(out / name), pkg], cwd, log, readonly=readonly, recipe=recipe)
        return
    _run_go([*build, str(out) + "/", *pkgs], cwd, log, readonly=readonly, recipe=recipe)
    for name, path in zip(names, built):
        if name != path.name and path.exists():
            os.replace(path, out / name)
        if not (out / name).is_file():
            raise BuildError(f"`go build` made no {path.name} for {name} in {out} (full log: {log.name})")


def _exec_name(pkg: str) -> str:
    """The name `go build -o dir/` gives a main package's binary: its path's last element, or the one before
    a major-version suffix (go.etcd.io/etcd/server/v3 -> server), as cmd/go's DefaultExecName."""
    parts = pkg.rstrip("/").split("/")
    if len(parts) > 1 and re.fullmatch(r"v(?:[2-9]|[1-9][0-9]+)", parts[-1]):  # v1 is no suffix
        return parts[-2]
    return parts[-1]


def _package_dirs(recipe: Recipe, tree: Path, log) -> set[str]:
    """The folders (relative to `tree`) of every package the recipe's binaries import, as Go resolves
    them in the recipe's mode (vendor: offline)."""
    go = go_binary()
    pkgs = ["./" + pkg.removeprefix(recipe.module).lstrip("/") for pkg in recipe.binaries.values()]
    out = subprocess.run([go, "list", "-deps", *_tags(recipe), "-f", "{{.Dir}}", *pkgs], cwd=tree,
                         env=_go_env(tree, readonly=True, recipe=recipe), capture_output=True, text=True)
    log.write(out.stderr)
    if out.returncode != 0:
        raise BuildError(f"`go list -deps` failed in {tree}: {_first_error(out.stderr.splitlines())} "
                         f"(full log: {log.name})")
    root = str(tree.resolve())
    return {str(Path(d).resolve().relative_to(root)) for d in out.stdout.split() if d.startswith(root)}


def _despite_missing(recipe: Recipe, tree: Path, log, on_phase) -> Recipe:
    """A tree exported from a repository that lacks some files (sources.missing_in): vendored
    dependencies it lacks come from the module proxy instead (the tree's go.sum, never rewritten);
    a missing file of a package the build compiles is one line naming it."""
    from dataclasses import replace

    def hit(dirs: set[str]) -> list[str]:
        return [p for p in sources.missing_in(tree) if str(Path(p).parent) in dirs]

    if recipe.vendor:
        on_phase("checking which packages the missing files belong to")
        try:
            if not hit(_package_dirs(recipe, tree, log)):
                return recipe
        except BuildError:  # a vendored package lost all its files: Go cannot even list it
            if not any(p.startswith("vendor/") for p in sources.missing_in(tree)):
                raise
        on_phase("vendor/ is incomplete here: modules through the proxy instead")
        recipe = replace(recipe, vendor=False)
    name = recipe.repository or recipe.component
    needed = hit(_package_dirs(recipe, tree, log))
    if needed:
        sources.needed_but_missing(name, recipe.version, tree, needed)
    return recipe


def _source_of(recipe: Recipe) -> tuple[Path | None, dict]:
    """(tree to build in, or None for the proxy's module; the manifest's 'source' record)."""
    if recipe.repository is None:
        return None, {"kind": "module-proxy", "module": f"{recipe.module}@{recipe.version}"}
    if recipe.repository != "kai":
        from . import sources

        tree = sources.export_tree(recipe.repository, recipe.version)
        record = {"kind": "repository", "origin": sources.registered(recipe.repository)["origin"],
                  "commit": sources.commit_of(recipe.repository, recipe.version), "tree": str(tree)}
        if sources.missing_in(tree):
            record["missing_files"] = len(sources.missing_in(tree))
        return tree, record
    origin = kai_origin(recipe)
    if origin == "work-tree":
        return recipe.source, {"kind": origin, "tree": str(recipe.source)}
    if origin == "repository":
        from . import kai_source

        tree = kai_source.export_tree(recipe.version)
        return tree, {"kind": origin, "origin": kai_source.registered()["origin"],
                      "commit": kai_source.commit_of(recipe.version), "tree": str(tree)}
    return None, {"kind": origin, "module": f"{recipe.module}@{recipe.version}"}


def build(recipe: Recipe, on_phase: Callable[[str], None] = lambda s: None) -> Path:
    """Build one recipe into the cache unless it is already there. Returns its folder. A folder that
    holds some of the recipe's binaries (a binary lab's Kubernetes, asked for kind's node binaries
    too) gets only the missing ones, built from the same source."""
    dest = cache_dir() / "bin" / recipe.component / recipe.version
    if is_cached(recipe):
        return dest
    work = cache_dir() / "build" / f"{recipe.component}-{recipe.version}"
    work.mkdir(parents=True, exist_ok=True)
    # another kailab building the same thing: wait for it, then reuse
    with cache_lock(work.name, lambda: on_phase("waiting for another kailab building this")):
        if is_cached(recipe):
            return dest
        before = manifest(recipe.component, recipe.version) or {}
        have = {b for b in before.get("binaries", {}) if (dest / b).is_file()}
        missing = replace(recipe, binaries={n: pkg for n, pkg in recipe.binaries.items() if n not in have})
        _build_locked(missing, work, dest, on_phase)
        if have:  # the manifest lists every binary the folder holds
            record = json.loads((dest / "manifest.json").read_text())
            record["binaries"] = {**{b: before["binaries"][b] for b in have}, **record["binaries"]}
            for cost in ("build_seconds", "build_cpu_seconds"):  # what the folder's binaries cost, both builds
                record[cost] = round(record.get(cost, 0) + before.get(cost, 0), 1)
            (dest / "manifest.json").write_text(json.dumps(record, indent=2))
        return dest


def _build_locked(recipe: Recipe, work: Path, dest: Path, on_phase: Callable[[str], None]) -> Path:
    started, cpu = time.time(), go_cpu_seconds()
    with open(work / "build.log", "a") as log:
        on_phase("finding the source")
        tree, source = _source_of(recipe)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=work))
        try:
            if tree is None:
                _build_wrapped(recipe, work, tmp, log, on_phase)
            else:
                if source.get("missing_files"):
                    recipe = _despite_missing(recipe, tree, log, on_phase)
                    source["mode"] = "vendor" if recipe.vendor else "modules"
                _build_in_module(recipe, tree, source.get("commit", "work-tree"), tmp, log, on_phase)
            dest.mkdir(parents=True, exist_ok=True)
            for name in recipe.binaries:
                os.replace(tmp / name, dest / name)  # same filesystem: atomic
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        record = {
            "component": recipe.component, "version": recipe.version, "module": recipe.module,
            "source": source,
            "binaries": {n: _sha256(dest / n) for n in recipe.binaries},
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.time() - started, 1),
            "build_cpu_seconds": round(go_cpu_seconds() - cpu, 1),
            "go": subprocess.run([go_binary(), "env", "GOVERSION"], capture_output=True,
                                 text=True).stdout.strip(),
        }
        (dest / "manifest.json").write_text(json.dumps(record, indent=2))
    return dest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _require_go_and_sources(missing: list[Recipe]) -> None:
    """Everything a build lacks, in one refusal, before anything compiles: Go first, then sources."""
    problems: list[str] = []
    for check in (go_binary, lambda: require_sources(missing)):
        try:
            check()
        except BuildError as e:
            problems.append(str(e))
    if problems:
        raise BuildError(" Also: ".join(problems))


def build_all(recipes: list[Recipe], console=None) -> dict[str, Path]:
    """Build what is missing, with a progress display; cached recipes are not touched."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    missing = [r for r in recipes if not is_cached(r)]
    if missing:
        _require_go_and_sources(missing)
    done: dict[str, Path] = {r.key: cache_dir() / "bin" / r.component / r.version
                             for r in recipes if r not in missing}
    if not missing:
        return done
    with Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[name]}"),
                  TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        for recipe in missing:
            task = progress.add_task("queued", name=recipe.key, total=None)
            last_plain = [0.0]

            def phase(text: str, task=task, recipe=recipe) -> None:
                progress.update(task, description=text)
                # without a terminal rich prints nothing live: keep CI logs informative
                if not console.is_terminal and time.time() - last_plain[0] > 20:
                    last_plain[0] = time.time()
                    print(f"[kailab tools] {recipe.key}: {text}", flush=True)

            heartbeat = _Heartbeat(lambda: phase(progress.tasks[task].description))
            heartbeat.start()
            cpu = go_cpu_seconds()
            try:
                done[recipe.key] = build(recipe, phase)
            finally:
                heartbeat.stop()
            # another kailab may have built it while this one waited for its lock: then it cost nothing here
            spent = go_cpu_seconds() - cpu
            progress.update(task, description=f"[green]built, {spent:.0f} CPU-s" if spent else "[green]built by another kailab",
                            total=1, completed=1)
    return done


class _Heartbeat(threading.Thread):
    """Re-reports the current phase every few seconds so a long compile never looks hung."""

    def __init__(self, tick: Callable[[], None]):
        super().__init__(daemon=True)
        self._tick, self._stop = tick, threading.Event()

    def run(self) -> None:
        while not self._stop.wait(5):
            self._tick()

    def stop(self) -> None:
        self._stop.set()


@functools.lru_cache(maxsize=1)
def kai_unavailable_reason() -> str | None:
    """None when KAI's binaries are cached or can be built; else why not (asked once a session)."""
    release = versions.kai_release(os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI)
    recipe = kai_recipe(release)
    if is_cached(recipe):
        return None
    try:
        kai_origin(recipe)  # a work tree, the module proxy or a registered repository
    except BuildError as err:
        return str(err)
    return None


def repository_tree(recipe: Recipe) -> Path:
    """The source tree a registered repository's cached build was made in (its manifest says), so a
    stack's CRDs and manifests come from the same tree as its binaries; exported again if removed."""
    info = (manifest(recipe.component, recipe.version) or {}).get("source") or {}
    if info.get("tree") and Path(info["tree"], "go.mod").is_file():
        return Path(info["tree"])

    return sources.export_tree(recipe.repository or recipe.component, recipe.version)


def kai_tree(recipe: Recipe) -> Path:
    """The source tree KAI's cached binaries were built from (its manifest says), so the lab's
    CRDs match its binaries; for a module-proxy build, the module cache's copy."""
    if recipe.source is not None:
        return recipe.source
    tree = ((manifest(recipe.component, recipe.version) or {}).get("source") or {}).get("tree")
    if tree and Path(tree, "go.mod").is_file():
        return Path(tree)
    if tree or kai_source.registered() is not None:  # nothing built yet, or its tree removed: from the repository
        return kai_source.export_tree(recipe.version)
    release = versions.kai_release(recipe.version)
    probe = cache_dir() / "build" / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    (probe / "go.mod").write_text("module kailab.local/probe\n\ngo 1.25\n")
    out = subprocess.run([go_binary(), "mod", "download", "-json",
                          f"{release.module}@{release.version}"], cwd=probe, capture_output=True,
                         text=True, env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"})
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Dir" not in info:
        raise BuildError(f"cannot fetch KAI {recipe.version} source ({info.get('Error', out.stderr.strip())}); "
                         "register a KAI repository with `kailab tools kai-source PATH`")
    return Path(info["Dir"])


def require_sources(recipes: list[Recipe], what: str = "this build") -> None:
    """One BuildError naming every source these uncached recipes lack (KAI: neither the module proxy
    nor a registered repository), so a fresh machine learns them all at once, not one per build."""
    missing = sources.missing_for([r for r in recipes if r.repository != "kai"])
    for r in recipes:
        if r.repository == "kai" and not is_cached(r):
            try:
                kai_origin(r)
            except BuildError:
                missing.insert(0, ("kai", r.version))
    missing = list(dict.fromkeys(missing))
    if missing:
        raise BuildError(sources.missing_message(missing, what))
