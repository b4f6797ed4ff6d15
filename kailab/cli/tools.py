"""`kailab tools …`: building the lab's binaries and images, registering sources."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.table import Table

from .. import toolchain, versions
from ..errors import KailabError
from ..runtimes.addon import InstallsFromCharts, RunsAsProcesses, need
from .base import cli, console, out


@cli.group()
def tools() -> None:
    """Build and list the lab's binaries (cached by component and version)."""


@tools.command("build")
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI)
@click.option("--without-kai", is_flag=True, help="Build only etcd, Kubernetes and kwok.")
@click.option("--stack", "stacks", multiple=True, metavar="NAME",
              help="Also what this scheduler stack's labs run (e.g. kueue, volcano: from their registered "
                   "repositories); repeatable.")
@click.option("--operators", default="", metavar="NAME[@VERSION],...",
              help="Also these workload operators (kubeflow, jobset, lws, ray; `all` for every one), as "
                   "`kailab up --operators` runs them.")
def tools_build(kai_version, without_kai, stacks, operators) -> None:
    """Build whatever is missing from the cache (never rebuilds a cached binary).

    KAI's source, first that applies: KAILAB_KAI_SOURCE (a work tree, e.g. a patched KAI: cached
    apart), the Go module proxy where it serves KAI, else the repository registered with
    `kailab tools kai-source PATH` (exactly the tag --kai-version names).
    """
    recipes = toolchain.recipes_for(versions.normalise(kai_version)) + toolchain.metrics_recipes()
    if without_kai:
        recipes = [r for r in recipes if r.component != "kai"]
    if stacks:
        from ..labs import LabSpec, with_addon

        for name in stacks:  # an unknown name: one line naming the choices
            spec = with_addon(LabSpec(name="build", runtime="binary", fleet="tiny", kai_version=kai_version,
                                      stack=name))
            addon = need(spec.addon, RunsAsProcesses, "binary")
            recipes += [r for r in addon.recipes() if r.key not in {x.key for x in recipes}]
    if operators:
        from .. import operators as ops

        wanted = list(ops.OPERATORS) if operators.strip() == "all" else operators
        recipes += [ops.get(item).recipe() for item in ops.parse(wanted)]
    built = toolchain.build_all(recipes, console)
    for key, path in built.items():
        out.print(f"{key}: {path}")
    if not without_kai:  # KAI's operator rendering of the scheduler configuration (kai_render)
        from ..stacks.kai import render as kai_render

        recipe = next(r for r in recipes if r.component == "kai")
        out.print(f"kai-render: {kai_render.ensure(recipe, toolchain.kai_tree(recipe), out.print)}")


@tools.command("images")
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI)
@click.option("--vcluster", "with_vcluster", is_flag=True,
              help="Also vCluster's CLI, syncer image, virtual control plane image and chart (version trials "
                   "in vClusters), from the registered repository `vcluster`.")
@click.option("--stack", "stacks", multiple=True, metavar="NAME",
              help="Also this scheduler stack's images and chart for kind labs (kueue, kueue+kai, volcano: from "
                   "their registered repositories); repeatable.")
@click.option("--operators", default="", metavar="NAME[@VERSION],...",
              help="Also these workload operators' images for kind labs (kubeflow, jobset, lws, ray; `all` for "
                   "every one): kailab.local/<component>:<version>, from their cached binaries.")
def tools_images(kai_version, with_vcluster, stacks, operators) -> None:
    """Build every image a kind lab needs from source, for hosts that reach no registry.

    The node image (Debian rootfs by mmdebstrap, kind's base files, Kubernetes, containerd, runc,
    CNI plugins and crictl built from source, the control-plane images preloaded), KWOK's, KAI's and
    fake-gpu-operator's images under their upstream names, and the charts. Needs a Docker engine,
    Go, gcc, mmdebstrap, the registered KAI repository and `kailab tools source` for
    fake-gpu-operator and cri-tools. Cached: nothing made from the same inputs is made again.
    `kailab up --runtime kind --images local` uses them. `--stack kueue|volcano` adds that stack's
    images and chart (its kind labs', from its registered repository).
    """
    from ..images import vcluster as vcluster_images
    from ..images.build import build_images
    from ..runtimes.kind.host import require_host_packages

    require_host_packages("`kailab tools images`")  # before anything is built: runc needs libseccomp, the node mmdebstrap

    def phase(text: str) -> None:
        console.print(f"[kailab images] {text}", markup=False, highlight=False)

    if with_vcluster:  # its source before minutes of building the rest
        from .. import sources

        missing = sources.missing_for([vcluster_images.vcluster_recipe()])
        if missing:
            raise KailabError(sources.missing_message(missing, "`kailab tools images --vcluster`"))
    addons = _stack_addons(stacks, kai_version)  # unknown names and missing sources: before anything builds
    if operators:
        from .. import operators as ops

        wanted = ",".join(ops.OPERATORS) if operators.strip() == "all" else operators
        addons += [ops.get(o) for o in ops.parse(wanted)]  # an unknown name: one line, before anything builds
    s = build_images(versions.normalise(kai_version), console, phase)
    for ref in s.built_images:
        out.print(ref, markup=False, highlight=False)
    out.print(f"charts: {s.kai_chart}, {s.fgo_chart}; KWOK manifest: {s.kwok_manifest}", markup=False,
              highlight=False)
    for addon in addons:
        addon.build_local(s, console, phase)
        for ref in addon.local_images(s):
            out.print(ref, markup=False, highlight=False)
        if addon.local_files(s):
            out.print(f"{addon.name}: {', '.join(str(f) for f in addon.local_files(s))}", markup=False, highlight=False)
    if with_vcluster:
        vs = vcluster_images.build_vcluster(s.kubernetes, console, phase)
        for ref in vs.images:
            out.print(ref, markup=False, highlight=False)
        out.print(f"vCluster {vs.version}: CLI {vcluster_images.cli_path()}, chart {vs.chart}", markup=False,
                  highlight=False)


@tools.command("lab-image")
@click.option("--kai-version", default=lambda: os.environ.get("KAI_VERSION") or versions.DEFAULT_KAI,
              show_default=versions.DEFAULT_KAI)
def tools_lab_image(kai_version) -> None:
    """Build the lab image: kailab and a binary lab's binaries in one image, so a pod can bring a lab
    up inside itself (a cluster's nodes running labs side by side: docs/dev/fan-out-design.md).

    Debian with Python (mmdebstrap), kailab, its fleets, exercises and Python dependencies, and the
    binaries a binary lab of KAI `--kai-version` runs, from kailab's cache (build them first:
    `kailab tools build`). Needs a Docker engine; cached: nothing made from the same inputs is made
    again. Prints the image's name (`kind load docker-image NAME` puts it on a kind cluster).
    """
    from ..images import docker, lab

    if not docker.answers():
        raise KailabError("no Docker engine answers (DOCKER_HOST or /var/run/docker.sock): the lab image is built "
                          "into one; on a host without a Docker service: eval \"$(kailab/data/docker-host.sh start)\"")

    def phase(text: str) -> None:
        console.print(f"[kailab lab-image] {text}", markup=False, highlight=False)

    ref, made = lab.ensure(kai_version, phase)
    phase(f"{ref}: {'made' if made else 'already made from the same inputs'}")
    out.print(ref, markup=False, highlight=False)


def _stack_addons(stacks, kai_version) -> list:
    """The Addons of the stacks named (`--stack`), as a kind lab of each would run them; an unknown
    name is one line naming the choices, a source not registered one line naming the command."""
    if not stacks:
        return []
    from .. import sources
    from ..labs import LabSpec, with_addon

    addons = [need(with_addon(LabSpec(name="images", runtime="kind", fleet="tiny", kai_version=kai_version,
                                      stack=name)).addon, InstallsFromCharts, "kind") for name in stacks]
    # their images build from the sources their processes do
    missing = sources.missing_for([r for a in addons if isinstance(a, RunsAsProcesses) for r in a.recipes()])
    if missing:
        raise KailabError(sources.missing_message(missing, f"`kailab tools images --stack {' --stack '.join(stacks)}`"))
    return addons


@tools.command("kai-source")
@click.argument("path", required=False)
def tools_kai_source(path) -> None:
    """Register a KAI git repository (a clone or bare mirror) to build KAI from.

    It is copied into kailab's cache as a bare mirror, so it outlives PATH; every release tag it
    holds can then be built (`kailab tools build --kai-version vX.Y.Z`). Without PATH: show the
    registered one. Use this where the Go module proxy does not serve KAI's module.
    """
    from .. import kai_source

    record = kai_source.register(path) if path else kai_source.registered()
    if record is None:
        raise KailabError("no KAI repository is registered: `kailab tools kai-source PATH`")
    out.print(f"KAI repository: {record['origin']} ({record['tags']} release tags, {record['oldest']} … "
              f"{record['newest']}), mirrored at {kai_source.mirror()}", markup=False, highlight=False)


@tools.command("source")
@click.argument("project", required=False)
@click.argument("path", required=False)
@click.option("--from", "folder", default=None, metavar="DIR",
              help="Register every known project found under DIR (clones or bare mirrors, up to 3 levels down).")
def tools_source(project, path, folder) -> None:
    """Register a git repository of PROJECT to build from where the Go module proxy refuses it.

    PROJECT: kai, fake-gpu-operator, cri-tools, kube-state-metrics, kueue, volcano, vcluster. The repository is copied
    into kailab's cache as a bare mirror (it outlives PATH); its release tags can then be built.
    Without PATH: show the registered one. With --from DIR: every project found under DIR, known by
    its go.mod's module, and what is still missing.
    """
    from .. import sources

    if folder:
        from ..replay import alibaba

        done, unknown = sources.register_from(folder)
        for name, record in done.items():
            out.print(f"registered {sources.project(name).title}: {record['origin']} ({record['tags']} release tags, "
                      f"{record['oldest']} … {record['newest']})", markup=False, highlight=False)
        # a clone of the public trace sits in the same folder on a fresh machine: one command registers it too
        trace = next((g for g in unknown if alibaba.holds_trace(Path(g))), None)
        if trace is not None:  # one registration per format: a second clone stays listed below
            record = alibaba.register(Path(trace).parent if Path(trace).name == ".git" else trace)
            out.print(f"registered trace {alibaba.FORMAT}: {record['origin']} ({len(record['task_lists'])} task lists)",
                      markup=False, highlight=False)
            unknown.remove(trace)
        if unknown:
            out.print(f"not a project kailab builds (left alone): {', '.join(unknown)}", markup=False, highlight=False)
        still = [f"{n} ({sources.project(n).needed_for})" for n in sources.PROJECTS if sources.registered(n) is None]
        if alibaba.registered() is None:
            still.append(f"trace {alibaba.FORMAT} (the fill exercise item and `bench fill`)")
        out.print("still not registered: " + (", ".join(still) if still else "none"), markup=False, highlight=False)
        return
    if not project:
        raise KailabError("name a PROJECT (and its PATH), or give --from DIR")

    record = sources.register(project, path) if path else sources.registered(project)
    if record is None:
        raise KailabError(f"no {project} repository is registered: "
                          f"`{sources.register_command(sources.project(project).name)} PATH`")
    out.print(f"{sources.project(project).title} repository: {record['origin']} ({record['tags']} release "
              f"tags, {record['oldest']} … {record['newest']}), mirrored at {sources.mirror(project)}",
              markup=False, highlight=False)


def _source_text(entry: dict) -> str:
    src = entry.get("source") or {"kind": "module-proxy"}
    if src["kind"] == "repository":
        return f"repository {src['origin']} @ {src['commit'][:12]}"
    if src["kind"] == "work-tree":
        return f"work tree {src['tree']}"
    return "module proxy"


@tools.command("list")
def tools_list() -> None:
    """Show what the binary cache holds, and where each build's source came from."""
    entries = toolchain.cached()
    table = Table(title=f"binary cache {toolchain.cache_dir() / 'bin'}")
    for col in ("component", "version", "binaries", "source", "built", "seconds", "CPU-s"):
        table.add_column(col)
    for e in entries:
        table.add_row(e["component"], e["version"], ", ".join(e["binaries"]), _source_text(e),
                      e["built_at"], str(e.get("build_seconds", "")), str(e.get("build_cpu_seconds", "")))
    out.print(table if entries else "the binary cache is empty: run `kailab tools build`")
    out.print(f"Go build cache {toolchain.go_cache()}: {_size(toolchain.go_cache_bytes())} of compiled packages "
              "(`kailab tools clean-go-cache` empties it; the binaries stay)", markup=False, highlight=False)
    from .. import sources
    from ..runtimes.kind.host import install_line, missing_host_packages

    for name, proj in sources.PROJECTS.items():
        rec = sources.registered(name)
        out.print(f"source {name}: " + (f"registered from {rec['origin']} ({rec['oldest']} … {rec['newest']})" if rec
                                        else f"not registered (needed for {proj.needed_for}: "
                                             f"`{sources.register_command(name)} PATH`)"),
                  markup=False, highlight=False)

    from ..replay import alibaba

    trace = alibaba.registered()  # a public trace's repository (data, not source), registered the same way
    out.print(f"trace {alibaba.FORMAT}: " + (f"registered from {trace['origin']} @ {trace['commit'][:12]}" if trace
                                             else f"not registered (the fill exercise item: `{alibaba.REGISTER}`)"),
              markup=False, highlight=False)

    lacking = missing_host_packages()
    out.print("kind labs (images built here): " + (f"this host lacks {', '.join(p['name'] for p in lacking)}: "
                                                   f"`{install_line(lacking)}`" if lacking
                                                   else "every host package is here"), markup=False, highlight=False)


@tools.command("clean-seeds")
def tools_clean_seeds() -> None:
    """Forget the baked etcd seeds labs start from (the next `up` bakes a fresh one, ~5 s)."""
    from ..runtimes import seed

    n = seed.remove_all()
    console.print(f"removed {n} seed(s) from {seed.seeds_dir()}")


@tools.command("clean-go-cache")
def tools_clean_go_cache() -> None:
    """Empty kailab's Go build cache (the packages its builds compiled, ~18 GB after a cold build of
    everything); every binary and image it built stays, and only a new build compiles again."""
    freed = toolchain.clean_go_cache()
    out.print(f"removed {_size(freed)} of compiled packages from {toolchain.go_cache()}",
              markup=False, highlight=False)


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"
