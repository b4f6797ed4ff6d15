"""Local processes of a lab: start detached, record, check, stop, and reap stragglers.

Every process gets KAILAB_LAB=<lab dir> in its environment. `down` stops what the pid records
name and then scans /proc for that marker, so processes survive neither a lost pid file nor a
kailab crash half-way through `up`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
import fcntl
import random
from ..paths import state_dir

MARKER = "KAILAB_LAB"


@dataclass
class ProcessRecord:
    name: str
    pid: int
    argv: list[str]
    log: str
    start_ticks: int  # /proc/<pid>/stat field 22: tells a recycled pid apart
    ports: dict[str, int]
    env: dict[str, str] = field(default_factory=dict)  # what start() added to the environment

    def alive(self) -> bool:
        return _start_ticks(self.pid) == self.start_ticks

    def exit_hint(self) -> str:
        return "running" if self.alive() else "exited"


def pid_alive(pid: int) -> bool:
    """Whether a process of that pid exists (one not ours still counts: EPERM)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie is dead for our purposes
        return None
    return int(fields[19])


def pids_dir(lab: Path) -> Path:
    return lab / "pids"


def logs_dir(lab: Path) -> Path:
    return lab / "logs"


def start(lab: Path, name: str, argv: list[str], ports: dict[str, int] | None = None,
          env: dict[str, str] | None = None, cwd: Path | None = None) -> ProcessRecord:
    """Start `argv` detached in its own session; output goes to logs/<name>.log."""
    pids_dir(lab).mkdir(parents=True, exist_ok=True)
    logs_dir(lab).mkdir(parents=True, exist_ok=True)
    log_path = logs_dir(lab) / f"{name}.log"
    full_env = {**os.environ, **(env or {}), MARKER: str(lab.resolve())}
    _reap()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=full_env, cwd=cwd or lab, start_new_session=True)
    _CHILDREN[proc.pid] = proc
    ticks = None
    for _ in range(50):  # /proc entry appears immediately, but be safe
        ticks = _start_ticks(proc.pid)
        if ticks is not None:
            break
        time.sleep(0.01)
    rec = ProcessRecord(name, proc.pid, argv, str(log_path), ticks or -1, ports or {}, dict(env or {}))
    # written whole then renamed: a reader (status, a watcher, a test) never sees it half-written
    path = pids_dir(lab) / f"{name}.json"
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(asdict(rec), indent=2))
    os.replace(tmp, path)
    return rec


RETRIES_FILE = "start-retries.jsonl"


def note_start_retry(lab: Path, name: str, reason: str) -> None:
    """A component `up` started again (a retry that is the right answer, e.g. kube-state-metrics giving
    up on a slow API server): kept beside the lab, so its record, status and every run's evidence say it."""
    with open(lab / RETRIES_FILE, "a") as f:
        f.write(json.dumps({"component": name, "reason": reason,
                            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")


def start_retries(lab: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in (lab / RETRIES_FILE).read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def how_it_ended(pid: int) -> str:
    """'exited with status N' / 'was killed by SIGNAME' for a child of this process that has ended
    (reaped here), else 'ended' (not our child, or already reaped)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        # a wait, not a poll: a poll says None while another thread (a `start`'s reap) holds the Popen's
        # wait lock, and CI's retry then read "how is not known" for a child killed by SIGKILL
        try:
            _ENDINGS[pid] = _ending(child.wait(timeout=2))
        except subprocess.TimeoutExpired:
            return "ended"  # not yet, as far as its parent knows
        _CHILDREN.pop(pid, None)
    if pid in _ENDINGS:
        return _ENDINGS[pid]
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return "ended"  # not this process's child
    if done != pid:
        return "ended"
    if os.WIFSIGNALED(status):
        _ENDINGS[pid] = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        _ENDINGS[pid] = f"exited with status {os.WEXITSTATUS(status)}"
    return _ENDINGS[pid]


_ENDINGS: dict[int, str] = {}  # how reaped children ended: a wait's error and the kept logs both say it
# The Popen of every process started here, kept: a dropped Popen is reaped by the next Popen anywhere
# in this process (subprocess' own clean-up), and its exit status is lost — which is why CI's start
# deaths said "ended" with nothing more
_CHILDREN: dict[int, subprocess.Popen] = {}


def _ending(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"


def _reap_dead(pid: int) -> None:
    """Wait for a child this process started and that was just killed or stopped: a blocking wait
    (a poll returns None while another thread holds the Popen's wait lock, and the zombie stays)."""
    child = _CHILDREN.pop(pid, None)
    if child is None:
        return
    try:
        _ENDINGS[pid] = _ending(child.wait(timeout=5))
    except subprocess.TimeoutExpired:
        _CHILDREN[pid] = child  # still alive: the next reap takes it


def _reap() -> None:
    """Reap children that ended, keeping how (no zombies pile up in a long pytest session)."""
    for pid, child in list(_CHILDREN.items()):
        if child.poll() is not None:
            _ENDINGS[pid] = _ending(child.returncode)
            del _CHILDREN[pid]


def restart(lab: Path, rec: ProcessRecord) -> ProcessRecord:
    """Start a dead process again exactly as it was started (same argv, ports, environment)."""
    stop(rec)
    with open(logs_dir(lab) / f"{rec.name}.log", "ab") as log:
        log.write(f"\n----- kailab restarted {rec.name} at {time.strftime('%H:%M:%S')} -----\n".encode())
    return start(lab, rec.name, rec.argv, rec.ports, rec.env)


def records(lab: Path) -> dict[str, ProcessRecord]:
    out = {}
    for f in sorted(pids_dir(lab).glob("*.json")):
        try:
            out[f.stem] = ProcessRecord(**json.loads(f.read_text()))
        except (OSError, ValueError, TypeError):
            continue
    return out


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """Terminal colour codes (KAI's logs carry them) removed: for messages, verdicts, reports."""
    return _ANSI.sub("", text)


def recent_log(lab: Path, name: str, lines: int = 20) -> str:
    """The last lines of a process's log, as plain text (the log file itself stays raw)."""
    path = logs_dir(lab) / f"{name}.log"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return strip_ansi("\n".join(text.splitlines()[-lines:]))


def log_head(lab: Path, name: str, lines: int = 200) -> str:
    """The first lines of a process's log (what it said when it started), as plain text."""
    out = []
    try:
        with open(logs_dir(lab) / f"{name}.log", "rb") as f:
            for raw in f:
                out.append(raw.decode(errors="replace").rstrip("\n"))
                if len(out) >= lines:
                    break
    except OSError:
        return "(no log)"
    return strip_ansi("\n".join(out))


def marked_pids(lab: Path) -> list[int]:
    """Every live process carrying this lab's marker, whatever started it."""
    want = f"{MARKER}={lab.resolve()}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if want in env.split(b"\0") and _start_ticks(int(entry.name)) is not None:
            found.append(int(entry.name))
    return found


def stop(rec: ProcessRecord, grace: float = 10.0) -> None:
    if not rec.alive():
        _reap_dead(rec.pid)
        return
    _signal_group(rec.pid, signal.SIGTERM)
    deadline = time.time() + grace
    while time.time() < deadline and rec.alive():
        time.sleep(0.1)
    if rec.alive():
        _signal_group(rec.pid, signal.SIGKILL)
        for _ in range(50):
            if not rec.alive():
                break
            time.sleep(0.1)
    _reap_dead(rec.pid)
    _reap()


def kill(rec: ProcessRecord) -> None:
    """SIGKILL, as a crash would: no chance to clean up."""
    _signal_group(rec.pid, signal.SIGKILL)
    for _ in range(50):
        if not rec.alive():
            break
        time.sleep(0.1)
    _reap_dead(rec.pid)  # a child of this process stays a zombie (kill -0 still finds it) until waited for
    _reap()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # each process leads its own session/group
    except ProcessLookupError:
        return
    except PermissionError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_all(lab: Path, order: list[str] | None = None, grace: float = 10.0,
             kill_tail: bool = False) -> list[str]:
    """Stop every process of the lab, then reap marked strays. The API's consumers (everything
    before the last two of `order`: kube-apiserver and etcd) get SIGTERM together, then the API
    server, then etcd: a lab's state is thrown away, so nothing needs a slower, one-by-one stop.
    With kill_tail those last two are killed outright (the API server's graceful stop takes a
    second, and buys nothing when its log is about to be removed with the lab)."""
    recs = records(lab)
    names = [n for n in (order or []) if n in recs] + [n for n in recs if n not in (order or [])]
    stopped = [n for n in names if recs[n].alive()]
    tail = [n for n in (order or [])[-2:] if n in recs]
    waves = [[n for n in names if n not in tail]] + [[n] for n in tail]
    for i, wave in enumerate(waves):
        _stop_together([recs[n] for n in wave], 0 if kill_tail and i > 0 else grace)
    for pid in marked_pids(lab):
        _signal_group(pid, signal.SIGKILL)
        stopped.append(f"stray pid {pid}")
    deadline = time.time() + 5
    while time.time() < deadline and marked_pids(lab):
        time.sleep(0.05)
    _reap()
    return stopped


def _stop_together(recs: list[ProcessRecord], grace: float) -> None:
    live = [r for r in recs if r.alive()]
    for r in live:
        _signal_group(r.pid, signal.SIGTERM)
    deadline = time.time() + grace
    while live and time.time() < deadline:
        time.sleep(0.02)
        live = [r for r in live if r.alive()]
    for r in live:
        _signal_group(r.pid, signal.SIGKILL)
    for _ in range(100):
        if not any(r.alive() for r in live):
            break
        time.sleep(0.02)
    for r in recs:
        _reap_dead(r.pid)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _listen_range() -> tuple[int, int]:
    """Ports for the lab's listeners, below the kernel's ephemeral range: a port picked by binding to 0
    comes from that range, and any outgoing connection (every kube client of every lab on the machine)
    may take it as its source port before the component binds it - a start then dies "port in use"."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return (max(1024, low - 12000), low - 1) if low > 6000 else (0, 0)


RESERVED_FOR_S = 600  # a port handed to a lab stays out of other labs' reach while it starts


def allocate_ports(names: list[str], fixed: dict[str, int] | None = None) -> dict[str, int]:
    """Distinct free loopback ports for every name; `fixed` ones are kept as given. Chosen at random
    below the ephemeral range (see _listen_range), free when chosen, and reserved for a while in the
    state directory so that labs starting at the same time never pick the same one."""
    ports = dict(fixed or {})
    lo, hi = _listen_range()
    book = state_dir().parent / "ports.json"  # beside labs/, which holds only labs
    book.parent.mkdir(parents=True, exist_ok=True)
    with open(book.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now = time.time()
        try:
            reserved = {int(k): v for k, v in json.loads(book.read_text()).items() if v > now}
        except (OSError, ValueError):
            reserved = {}
        taken = set(ports.values()) | set(reserved)
        for name in names:
            if name in ports:
                continue
            for _ in range(1000):
                p = random.randint(lo, hi) if hi > lo else free_port()
                if p not in taken and not port_in_use(p):
                    break
            ports[name] = p
            taken.add(p)
            reserved[p] = now + RESERVED_FOR_S
        book.write_text(json.dumps({str(k): v for k, v in reserved.items()}))
    return ports
