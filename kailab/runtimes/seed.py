"""A seeded control plane: etcd's data as a fresh API server leaves it once it has bootstrapped
itself (RBAC roles, system priority classes, namespaces) and KAI's kinds and chart objects are in,
baked once into the cache and copied into every new lab.

Why: a fresh API server spends seconds writing its bootstrap objects before /readyz, and holds
every create of a custom kind for 2 s after its CRD is Established (apiextensions-apiserver's HA
safeguard). A seeded lab starts past both. Everything per lab stays per lab: its certificates
and service-account keys (nothing in the seed depends on them), its ports, its fleet, its probe
pod. The lab still applies everything it would without a seed (each apply is then a no-op) and
waits for the same conditions, so a seed can make `up` faster but never make it skip a check.

The key covers etcd's and the API server's binaries and every object baked in; a change to any
of them bakes a new seed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path

from ..paths import cache_dir

FORMAT = 1  # bump when what a seed holds, or how it is made, changes


def seeds_dir() -> Path:
    return cache_dir() / "seeds"


def key(binaries: list[Path], objects: list[dict]) -> str:
    h = hashlib.sha256(f"kailab-seed-{FORMAT}".encode())
    for b in binaries:
        st = b.stat()
        h.update(f"{b.resolve()}:{st.st_size}:{int(st.st_mtime)}".encode())
    h.update(json.dumps(objects, sort_keys=True).encode())
    return h.hexdigest()[:20]


def restore(seed: str, etcd_dir: Path) -> bool:
    """Copy the seed's etcd data into etcd_dir; False when there is no such seed yet."""
    src = seeds_dir() / seed / "etcd"
    if not (src / "member").is_dir():
        return False
    shutil.copytree(src, etcd_dir, copy_function=_sparse_copy)
    os.chmod(etcd_dir, 0o700)  # etcd refuses a data dir others can read
    return True


def _sparse_copy(src: str, dst: str) -> None:
    """Copy leaving holes where the source is zeros: etcd preallocates each 64 MB WAL segment and
    a seed's is almost empty, so this writes a few hundred kB instead of 64 MB per lab."""
    block = 1 << 20
    zero = bytes(block)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(block):
            if chunk == zero[:len(chunk)]:
                fout.seek(len(chunk), os.SEEK_CUR)
            else:
                fout.write(chunk)
        fout.truncate()
    shutil.copymode(src, dst)


def save(seed: str, etcd_dir: Path) -> None:
    """Keep a stopped etcd's data as the seed (atomically: a half-copied seed is never used)."""
    seeds_dir().mkdir(parents=True, exist_ok=True)
    tmp = seeds_dir() / f".{seed}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(etcd_dir, tmp / "etcd")
    try:
        os.rename(tmp, seeds_dir() / seed)
    except OSError:  # another process saved it first: theirs is as good
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def baking(seed: str):
    """One bake per seed at a time; a second `up` waits for the first one's seed."""
    seeds_dir().mkdir(parents=True, exist_ok=True)
    with open(seeds_dir() / f".{seed}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def remove_all() -> int:
    """Forget every seed (`kailab tools clean-seeds`); returns how many there were."""
    found = [p for p in seeds_dir().iterdir() if p.is_dir()] if seeds_dir().exists() else []
    for p in found:
        shutil.rmtree(p, ignore_errors=True)
    return len(found)
