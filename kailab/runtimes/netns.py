"""Run one command in a private network namespace, bridged to chosen loopback ports of the host.

Why: KAI's podgroupcontroller (v0.15 … v0.17) never passes --metrics-bind-address to its
controller manager, which then listens on `:8080` on every interface. A second KAI lab on the
same host failed to start, and a lab would break kailab's loopback-only promise. Inside its own
network namespace that listener is private to the process; the lab reaches only what this shim
forwards. KAI's binary runs unmodified.

    python -m kailab.runtimes.netns --connect 6443 --expose 31001=31001 --expose 31002=8080 -- CMD ...

- `--connect P`: inside, 127.0.0.1:P is the host's 127.0.0.1:P (the API server; TLS passes
  through untouched, its certificate still names 127.0.0.1).
- `--expose H=I`: the host's 127.0.0.1:H is the namespace's 127.0.0.1:I (health probe, metrics).

Host-side sockets are made by a helper forked before the namespace is entered (it passes
connected sockets back over a socket pair), so no setns and no privilege beyond unshare is
needed: root unshares a network namespace; other users a user + network namespace. The shim
exits with the command's status and passes SIGTERM/SIGINT on, so a lab supervises it as it
would the command.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def _host_connector(port: int) -> socket.socket:
    """Fork a helper that stays in the host's namespace and hands out connected sockets."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.fork() == 0:
        ours.close()
        while theirs.recv(1):
            try:
                conn = socket.create_connection(("127.0.0.1", port))
                socket.send_fds(theirs, [b"1"], [conn.fileno()])
                conn.close()
            except OSError:
                theirs.sendall(b"0")
        os._exit(0)
    theirs.close()
    return ours


def _unshare() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() == 0:
        flags = CLONE_NEWNET
    else:
        flags = CLONE_NEWUSER | CLONE_NEWNET
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare of a network namespace refused: {os.strerror(err)}")
    if flags & CLONE_NEWUSER:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # `ip link set lo up`
        flags_now = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh", b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags_now | IFF_UP))


def _pump(src: socket.socket, dst: socket.socket, done: threading.Semaphore) -> None:
    how = socket.SHUT_WR  # a clean end of one direction is a half-close of the other side
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        how = socket.SHUT_RDWR
    try:
        dst.shutdown(how)
    except OSError:
        pass
    if not done.acquire(blocking=False):  # the second direction to finish closes both
        src.close()
        dst.close()


def _splice(a: socket.socket, b: socket.socket) -> None:
    for s in (a, b):
        s.setblocking(True)  # a socket handed over by fd may arrive non-blocking
    done = threading.Semaphore(1)
    threading.Thread(target=_pump, args=(a, b, done), daemon=True).start()
    threading.Thread(target=_pump, args=(b, a, done), daemon=True).start()


def _serve(listener: socket.socket, dial) -> None:
    lock = threading.Lock()
    while True:
        conn, _ = listener.accept()
        with lock:  # the connector answers one request at a time
            peer = dial()
        if peer is None:
            conn.close()
            continue
        _splice(conn, peer)


def _listen(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    return s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kailab.runtimes.netns")
    parser.add_argument("--connect", type=int, action="append", default=[])
    parser.add_argument("--expose", action="append", default=[], help="HOST_PORT=INNER_PORT")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    exposed = [tuple(int(x) for x in e.split("=", 1)) for e in args.expose]
    # host side first: the exposed listeners and one connector per forwarded port
    host_listeners = [(_listen(h), i) for h, i in exposed]
    connectors = {p: _host_connector(p) for p in args.connect}
    _unshare()

    def dial_host(port: int):
        conn = connectors[port]
        conn.sendall(b"?")
        msg, fds, _flags, _addr = socket.recv_fds(conn, 1, 1)
        return socket.socket(fileno=fds[0]) if msg == b"1" and fds else None

    def dial_inner(port: int):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            return None

    for port in args.connect:
        threading.Thread(target=_serve, args=(_listen(port), lambda p=port: dial_host(p)), daemon=True).start()
    for listener, inner in host_listeners:
        threading.Thread(target=_serve, args=(listener, lambda p=inner: dial_inner(p)), daemon=True).start()
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    code = child.wait()
    sys.stdout.flush()
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    sys.exit(main())
