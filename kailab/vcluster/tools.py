"""The commands a vCluster trial runs, and where each comes from: kubectl, helm and kind as the kind
runtime finds them (KAILAB_*, PATH, kailab's cache), the vcluster CLI from KAILAB_VCLUSTER, PATH or
kailab's cache (`kailab tools images --vcluster` builds it). The CLI runs with a home of the
trial's own (its config, with telemetry off; nothing written to the user's ~/.vcluster), helm on its
PATH (it installs charts through helm) and its version check off (air-gapped)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from ..errors import KailabError, LabError
from ..images import vcluster as vc_images
from ..runtimes.base import docker_answers
from ..runtimes.kind.host import check_kubectl, find_tool, find_tools
from .plan import VCLUSTER_ENV

DOCKER_NEEDED = ("a version trial with --runtime kind needs a Docker engine, and none answers "
                 "(DOCKER_HOST or /var/run/docker.sock): use --runtime binary, --runtime existing --kubeconfig F, "
                 "or --dry-run to print the plan")


def find_vcluster() -> str:
    configured = os.environ.get(VCLUSTER_ENV)
    if configured:
        found = shutil.which(configured)
        if not found:
            raise LabError(f"vcluster not found at {configured} (from {VCLUSTER_ENV}): point it at the CLI, or unset it")
        return found
    found = shutil.which("vcluster") or vc_images.cli_path()
    if not found:
        raise LabError(f"the vcluster CLI {vc_images.pins()['version']} is not here: build it with "
                       f"`kailab tools images --vcluster` (from the registered repository), or set {VCLUSTER_ENV}")
    return str(found)


def need_docker(runtime: str) -> None:
    """A kind host needs a Docker engine: said first, before versions are resolved from their sources."""
    if runtime == "kind" and not docker_answers():
        raise KailabError(DOCKER_NEEDED)


def tools_for(runtime: str) -> dict[str, str]:
    """Every tool the trial needs, checked before anything is made (one line naming all missing)."""
    need_docker(runtime)
    problems, tools = [], {}
    try:
        tools.update(find_tools(["kubectl", "helm"] + (["kind"] if runtime == "kind" else [])))
    except LabError as err:
        problems.append(str(err))
    try:
        tools["vcluster"] = find_vcluster()
    except LabError as err:
        problems.append(str(err))
    if problems:
        raise LabError("; ".join(problems))
    if "kind" not in tools:
        try:  # an existing host whose nodes are kind's gets its images with `kind load`
            tools["kind"] = find_tool("kind")
        except LabError:
            pass
    check_kubectl(tools["kubectl"])
    return tools


def resolve(argv: list[str], tools: dict[str, str], work: Path) -> list[str]:
    """The argv with its tool's path (`env VAR=… tool …` too); the vcluster CLI with its home, helm
    and no version check."""
    head = 0
    while head < len(argv) and (argv[head] == "env" or "=" in argv[head]):
        head += 1
    tool = argv[head]
    out = [*argv[:head], tools.get(tool, tool), *argv[head + 1:]]
    if tool == "vcluster":
        home = work / "cli-home"
        config = home / ".vcluster" / "config.json"
        if not config.is_file():
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(json.dumps({"telemetryDisabled": True}))
        path = os.pathsep.join([str(Path(tools["helm"]).parent), os.environ.get("PATH", "")])
        env = [f"HOME={home}", f"PATH={path}", "VCLUSTER_SKIP_VERSION_CHECK=true"]
        out = ["env", *env, *out[1:]] if out[0] == "env" else ["env", *env, *out]
    if tool == "kailab":
        out = [*argv[:head], sys.executable, "-m", "kailab.cli", *argv[head + 1:]]
    return out
