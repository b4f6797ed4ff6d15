"""`kailab top` on real labs with KAI running: its JSON against the API server's own objects, its
screen in a real terminal (tmux) while the reclaim exercise runs, and its refusal where there is
no KAI to show."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kailab.kube import Kube
from kailab.paths import exercises_dir
from kailab.runtimes.waits import wait_until

from helpers import KAILAB, kailab_cli
from top_scenario import EXPECTED, scene, shown, top_json

pytestmark = [pytest.mark.lab, pytest.mark.kai]
GPU = "nvidia.com/gpu"


def _gpus(pod: dict) -> float:
    return sum(float((c.get("resources") or {}).get("limits", {}).get(GPU) or 0) for c in pod["spec"]["containers"])


def _api_view(kube: Kube, q: str) -> dict:
    """What the API server's objects say, read here without kailab.top: GPUs per node, and per scene
    queue its spec, its pods bound and pending, and KAI's reason on the pending pod's PodGroup."""
    nodes = kube.list("v1", "Node")
    pods = [p for p in kube.list("v1", "Pod") if p["status"].get("phase") not in ("Succeeded", "Failed")]
    used: dict[str, float] = {n["metadata"]["name"]: 0.0 for n in nodes}
    for p in pods:
        if p["spec"].get("nodeName"):
            used[p["spec"]["nodeName"]] += _gpus(p)
    queues = {}
    for obj in kube.list("scheduling.run.ai/v2", "Queue"):
        name = obj["metadata"]["name"]
        if not name.startswith(q + "-") or name.endswith("-root"):
            continue
        mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("kai.scheduler/queue") == name]
        pending = [p for p in mine if not p["spec"].get("nodeName")]
        reason = None
        if pending:
            ns, group = pending[0]["metadata"]["namespace"], pending[0]["metadata"]["annotations"]["pod-group-name"]
            cond = kube.get("scheduling.run.ai/v2alpha2", "PodGroup", group, ns)["status"]["schedulingConditions"][-1]
            reason = cond["reasons"][0]["reason"]
        gpu = obj["spec"]["resources"]["gpu"]
        queues[name] = {"quota": float(gpu["quota"]), "limit": float(gpu["limit"]),
                        "gpus": sum(_gpus(p) for p in mine if p["spec"].get("nodeName")),
                        "running": len(mine) - len(pending), "pending": len(pending), "reason": reason,
                        "pending_pods": sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pending)}
    allocatable = sum(float(n["status"]["allocatable"].get(GPU, 0)) for n in nodes)
    return {"gpus": allocatable, "used": used, "queues": queues}


def _top_view(snap: dict, q: str) -> dict:
    queues = {}
    for r in snap["queues"]:
        if r["name"].startswith(q + "-") and not r["name"].endswith("-root"):
            old = r["oldest_pending"]
            queues[r["name"]] = {"quota": r["quota"], "limit": r["limit"], "gpus": r["gpus"], "running": r["running"],
                                 "pending": r["pending"], "reason": old and old["reason"],
                                 "pending_pods": [old["pod"]] if old else []}
    return {"gpus": snap["cluster"]["gpus"], "used": {n["name"]: n["gpus_used"] for n in snap["nodes"]},
            "queues": queues}


def test_top_json_shows_what_the_api_servers_objects_say(kai_lab):
    kube = Kube(kai_lab.kubeconfig)
    with scene(kube) as (_, q):
        seen: dict = {}

        def agree():
            # a pod of an earlier test may still be ending: both reads again until they agree
            seen["top"], seen["api"] = _top_view(top_json("--name", kai_lab.name), q), _api_view(kube, q)
            return seen["top"] == seen["api"]
        try:
            wait_until("kailab top --json to agree with the API server", agree, timeout=30)
        except Exception:
            pytest.fail(f"top: {seen.get('top')}\nAPI server: {seen.get('api')}")
        assert shown(top_json("--name", kai_lab.name), q) == EXPECTED
        # the same picture for any cluster, by its kubeconfig
        assert shown(top_json("--kubeconfig", kai_lab.kubeconfig), q) == EXPECTED


def test_top_once_prints_the_picture_and_refuses_what_it_cannot_show(kai_lab, kailab_labs):
    kube = Kube(kai_lab.kubeconfig)
    with scene(kube) as (_, q):
        done = kailab_cli("top", "--once", "--name", kai_lab.name)
        assert done.returncode == 0, done.stderr
        row = next(line for line in done.stdout.splitlines() if line.strip().startswith(f"{q}-a "))
        # queue, GPUs, fair share, quota, limit, weight, run, pend, waits, KAI's reason
        cells = row.split()
        assert cells[1] == "3" and cells[3:5] == ["2", "3"] and cells[6:8] == ["3", "1"], row
        assert "OverLimit" in row, row
        # not on a terminal and without --once: a picture every --interval, one after another (as `top -b`)
        try:
            kailab_cli("top", "--name", kai_lab.name, "--interval", "0.5", timeout=6)
        except subprocess.TimeoutExpired as cut:
            batch = (cut.stdout or b"").decode() if isinstance(cut.stdout, bytes) else (cut.stdout or "")
        else:
            raise AssertionError("kailab top ended by itself with no --once")
        assert sum(1 for line in batch.splitlines() if line.strip().startswith(f"{q}-a ")) >= 2, batch
    absent = kailab_cli("top", "--once", "--name", "no-such-lab")
    assert absent.returncode == 2 and absent.stderr.strip().startswith("kailab: error: no lab named 'no-such-lab'"), absent
    assert len(absent.stderr.strip().splitlines()) == 1, absent.stderr
    bare = kailab_labs.get("tiny", stack="none")
    refused = kailab_cli("top", "--once", "--name", bare.name)
    assert refused.returncode == 2 and "serves no KAI Queue" in refused.stderr, refused


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=30, check=True).stdout


QUEUE_ROW = re.compile(r"^\s*(\S+-(prod|research))\s+(\d+(?:\.\d+)?)\s")


def test_top_on_a_terminal_shows_reclaim_as_it_happens(kailab_labs):
    """The reclaim exercise on the small fleet while `kailab top` runs in tmux: read from the screen,
    prod (the borrower) falls from 32 GPUs to 16, research (the owner) rises from 0 to 16, and an
    eviction line names KAI's reclaim and the research pod group it made room for; `q` quits."""
    lab = kailab_labs.get("small")
    sock = f"kailab-top-{uuid.uuid4().hex[:6]}"
    top = shlex.join([*KAILAB, "top", "--name", lab.name, "--interval", "0.5"])
    env = {k: v for k, v in os.environ.items() if k != "KAILAB_LAB"}
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "top", "-x", "200", "-y", "60",
                    f"{top}; echo TOP-ENDED-$?; sleep 60"], check=True, env=env, timeout=30)
    try:
        wait_until("kailab top on the screen", lambda: "kailab top" in _tmux(sock, "capture-pane", "-p"), timeout=60)
        run = subprocess.Popen([*KAILAB, "run", str(exercises_dir() / "reclaim.yaml"),
                                "--name", lab.name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        samples: list[tuple[float, float]] = []  # (prod, research) GPUs as the screen showed them
        evicted_line = ""
        while run.poll() is None:
            screen = _tmux(sock, "capture-pane", "-p")
            rows = {m.group(2): float(m.group(3)) for line in screen.splitlines() if (m := QUEUE_ROW.match(line))}
            if len(rows) == 2:
                samples.append((rows["prod"], rows["research"]))
            evicted_line = evicted_line or next((line for line in screen.splitlines()
                                                 if " reclaim " in line and "research-train" in line), "")
            time.sleep(0.25)
        log = run.stdout.read()
        assert run.returncode == 0, log
        assert samples, "no screen showed both queues"
        top_prod = max(range(len(samples)), key=lambda i: samples[i][0])
        assert samples[top_prod][0] >= 24, samples  # prod borrowed research's idle share
        after = samples[top_prod:]
        assert any(p == 16 for p, _ in after), samples  # ... and fell back to its quota
        assert any(r == 16 for _, r in after) and min(r for _, r in samples[: top_prod + 1]) < 16, samples
        assert evicted_line, "no eviction line naming KAI's reclaim and the research pod group"
        _tmux(sock, "send-keys", "-t", "top", "q")
        wait_until("kailab top to quit on q", lambda: "TOP-ENDED-0" in _tmux(sock, "capture-pane", "-p"), timeout=15)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, timeout=30)


def test_run_watch_draws_the_picture_below_the_runs_lines(kailab_labs):
    lab = kailab_labs.get("small")
    done = kailab_cli("run", "reclaim", "--name", lab.name, "--watch")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reclaim: passed" in done.stdout, done.stdout
    # no terminal: the picture is drawn once, when the run ends (its queues and events gone with it)
    picture = done.stderr[done.stderr.rindex(f"kailab top · lab '{lab.name}'"):]
    assert re.search(r"queue\s+GPUs\s+fair\s+quota", picture), picture
    # the picture at each step is in the evidence and in report.html: after step 2, 16 GPUs each
    run_dir = Path(re.findall(r"evidence: ([^\s)]+)", done.stdout)[-1])
    step2 = json.loads(next((run_dir / "steps").glob("02-*/top.json")).read_text())
    held = {r["name"].rsplit("-", 1)[1]: r["gpus"] for r in step2["queues"] if r["name"].endswith(("-prod", "-research"))}
    assert held == {"prod": 16, "research": 16}, held
    assert [e["action"] for e in step2["evictions"]] and {e["action"] for e in step2["evictions"]} == {"reclaim"}
    report = kailab_cli("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    page = (run_dir / "report.html").read_text()
    assert page.count('<pre class="top">') == 3 and "kailab top · step 2: research comes back" in page
    refused = kailab_cli("run", "reclaim", "--name", lab.name, "--watch", "--labs", "2")
    assert refused.returncode == 2 and "--watch shows one lab" in refused.stderr, refused


def test_replay_watch_shows_each_variants_lab_and_a_closed_terminal_leaves_no_lab(tmp_path):
    """`kailab replay --watch` in tmux: the picture of the variant's lab (its design's queues) under the
    replay's lines while it plays; then the terminal is closed mid-replay (tmux gone: SIGHUP) and the
    replay takes its lab down as on Ctrl-C."""
    from kailab.paths import state_dir
    from kailab.testing.tiny_trace import two_teams

    trace, design = tmp_path / "t.csv", tmp_path / "even.yaml"
    design.write_text(two_teams())
    gen = kailab_cli("trace", "generate", str(trace), "--jobs", "40", "--hours", "0.5", "--fleet", "tiny",
                     "--load", "1.5", "--seed", "5")
    assert gen.returncode == 0, gen.stderr
    sock = f"kailab-replay-{uuid.uuid4().hex[:6]}"
    env = {**{k: v for k, v in os.environ.items() if k != "KAILAB_LAB"}, "KAILAB_EVIDENCE": str(tmp_path / "ev")}
    replay = shlex.join([*KAILAB, "replay", str(trace), "--designs", str(design),
                         "--fleet", "tiny", "--compress", "10", "--repeat", "1", "--watch"])
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "r", "-x", "160", "-y", "60", replay],
                   check=True, env=env, timeout=30)
    try:
        def playing():
            screen = _tmux(sock, "capture-pane", "-p")
            return "kailab top · even ·" in screen and re.search(r"^\s+team-a\s+\d", screen, re.M) and screen
        screen = wait_until("the variant's picture with its queues", playing, timeout=240)
        assert "playing" in screen, screen
        [out] = list((tmp_path / "ev").glob("replay-*"))
        labs = [f"{out.name.lower()}-even"]  # this replay's lab (session._variant names it so)
        assert (state_dir() / labs[0]).is_dir(), labs
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, timeout=30)
    wait_until("the replay's lab taken down after its terminal closed",
               lambda: not (state_dir() / labs[0]).exists(), timeout=120)
