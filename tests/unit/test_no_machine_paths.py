"""No tracked file outside tests/ names an absolute path of the machine it was written on: a doc, a
script or a bench record says where things are relative to the project, or through kailab's variables
($KAILAB_CACHE, $KAILAB_EVIDENCE, …), and a folder of clones is "a folder of clones", not one machine's.
Only the machine-specific roots are looked for (/work/, /root/, /home/<user>/, a temporary folder's
random name under /tmp/): /proc, /sys, /dev, /etc, /usr, /run and fixed paths a program uses inside
a container are paths of every machine."""

from __future__ import annotations

import re
import subprocess

from kailab.bench.common import portable
from kailab.paths import PROJECT_ROOT, cache_dir

_NOT_IN_A_PATH = r"(?<![\w./~$-])"  # the root starts the path: not .../x/work/, not a URL's path
MACHINE_PATH = re.compile(_NOT_IN_A_PATH + r"(/work/|/root/|/home/[a-z_][\w.-]*/"
                          r"|/tmp/(?:tmp|[A-Za-z][\w.-]*?-)?\w{8}(?=/|\b))")

# (file, the exact text on its line): why that path is every machine's, not the writer's
ALLOWED = {
    ("kailab/images/lab.py", 'IMAGE_CACHE = "/root/.cache/kailab"'): "the lab image's HOME, inside its container",
}


def machine_paths(name: str, text: str) -> list[str]:
    """file:line: the line, for each line of `text` naming a machine-specific absolute path."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        if MACHINE_PATH.search(line) and not any(f == name and t in line for f, t in ALLOWED):
            found.append(f"{name}:{n}: {line.strip()[:160]}")
    return found


def test_no_tracked_file_names_this_machines_paths():
    files = subprocess.run(["git", "-C", str(PROJECT_ROOT), "ls-files", "-z"], capture_output=True, text=True,
                           check=True).stdout.split("\0")
    found = []
    for name in files:
        path = PROJECT_ROOT / name
        if not name or name.startswith("tests/") or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:  # an image, an archive
            continue
        found += machine_paths(name, text)
    assert not found, ("absolute paths of one machine (write them relative to the project, as $KAILAB_… "
                       "variables, or as 'a folder of clones'):\n" + "\n".join(found))


def test_the_check_sees_what_it_looks_for_and_not_what_every_machine_has():
    assert machine_paths("docs/x.md", "Source: `/work/.mirror/kai/repo` at v0.17.0") == \
        ["docs/x.md:1: Source: `/work/.mirror/kai/repo` at v0.17.0"]
    assert machine_paths("a.json", '{\n  "evidence": "/root/.cache/kailab/twins/a.zip"\n}') != []
    assert machine_paths("a.md", "cloned into /home/alice/src/kai") != []
    assert machine_paths("a.md", "with /tmp/kailab-fill-bench-hvtfntxp/trace.csv") != []
    for every_machine in ("/proc/meminfo", "/sys/fs/cgroup", "/dev/null", "/etc/hosts", "/usr/bin/env",
                          "/var/run/docker.sock", "/run/containerd", "/tmp/k8s-webhook-server/serving-certs",
                          "/tmp/klog-socks/klog.sock", "https://example.com/work/x", "$KAILAB_CACHE/twins/a.zip",
                          "../replay-check/a.yaml", "~/.cache/kailab"):
        assert machine_paths("a.md", every_machine) == [], every_machine
    assert machine_paths("kailab/images/lab.py", 'IMAGE_CACHE = "/root/.cache/kailab"') == []


def test_a_bench_record_is_written_with_portable_paths():
    """What `kailab bench` records: the project's paths relative to it, the cache as $KAILAB_CACHE."""
    text = portable(f'"evidence": "{PROJECT_ROOT}/evidence/fill-1", "snapshot": "{cache_dir()}/twins/a.zip"')
    assert text == '"evidence": "evidence/fill-1", "snapshot": "$KAILAB_CACHE/twins/a.zip"'
    assert machine_paths("r.json", portable("/tmp/kailab-fill-bench-s_4ijgve/trace.csv")) == []
