"""Images as single-layer root filesystems: a base (a tiny tree, or a Debian rootfs) plus files,
written as one tar and `docker import`ed under the upstream image's name, with the upstream image's
entrypoint, user and paths. An image whose inputs label matches is never made again."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from . import docker

NONROOT = 65532  # the uid distroless images run as (KAI's images: USER 65532:65532)
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


@dataclass(frozen=True)
class ImageSpec:
    ref: str
    files: tuple[tuple[str, Path, int], ...]  # (path in the image, source file or directory, mode)
    base: Path | None = None                  # a rootfs tarball; None: a tiny tree
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    user: str = ""
    workdir: str = ""
    env: tuple[str, ...] = ("PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin",)
    generated: tuple[tuple[str, bytes, int], ...] = field(default=())  # (path, content, mode)
    links: tuple[tuple[str, str], ...] = ()   # (path, symlink target): e.g. `systemctl enable`
    dirs: tuple[str, ...] = ()
    drop: Callable[[str], bool] | None = field(default=None, compare=False)  # base members to leave out

    def changes(self) -> list[str]:
        out = [f"ENV {e.split('=', 1)[0]}={e.split('=', 1)[1]}" for e in self.env]
        if self.entrypoint:
            out.append(f"ENTRYPOINT {json.dumps(list(self.entrypoint))}")
        if self.cmd:
            out.append(f"CMD {json.dumps(list(self.cmd))}")
        if self.user:
            out.append(f"USER {self.user}")
        if self.workdir:
            out.append(f"WORKDIR {self.workdir}")
        return out


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    paths = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in paths:
        h.update(str(p.relative_to(path) if path.is_dir() else "").encode())
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def inputs_key(spec: ImageSpec) -> str:
    """What the image is made of, as one digest: files' content, base, configuration."""
    h = hashlib.sha256()
    h.update(json.dumps([spec.ref, str(spec.base.name) if spec.base else "tiny", spec.changes(),
                         [(dest, mode) for dest, _, mode in spec.files],
                         [(dest, hashlib.sha256(data).hexdigest(), mode) for dest, data, mode in spec.generated],
                         list(spec.links), list(spec.dirs)]).encode())
    for _, src, _ in spec.files:
        h.update(_file_digest(src).encode())
    return h.hexdigest()[:20]


def _tiny_tree() -> list[tuple[str, bytes, int]]:
    """What distroless-like images carry besides their binary: users, CA certificates, /tmp."""
    passwd = f"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n"
    group = f"root:x:0:\nnonroot:x:{NONROOT}:\n"
    out = [("etc/passwd", passwd.encode(), 0o644), ("etc/group", group.encode(), 0o644),
           ("etc/nsswitch.conf", b"hosts: files dns\n", 0o644)]
    if HOST_CA_BUNDLE.is_file():
        out.append(("etc/ssl/certs/ca-certificates.crt", HOST_CA_BUNDLE.read_bytes(), 0o644))
    return out


def _dirs_of(path: str) -> Iterable[str]:
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        yield "/".join(parts[:i])


def write_tar(spec: ImageSpec, out: Path) -> None:
    """The image's root filesystem as one tar: base members, then generated files, then files."""
    seen: set[str] = set()
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        def add_dir(name: str, mode: int = 0o755) -> None:
            if name in seen or not name:
                return
            seen.add(name)
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def add_bytes(name: str, data: bytes, mode: int) -> None:
            for d in _dirs_of(name):
                add_dir(d)
            info = tarfile.TarInfo(name.strip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
            seen.add(name.strip("/"))

        overridden = ({dest.strip("/") for dest, _, _ in spec.files} | {p.strip("/") for p, _, _ in spec.generated}
                      | {p.strip("/") for p, _ in spec.links})
        if spec.base is None:
            for name, data, mode in _tiny_tree():
                add_bytes(name, data, mode)
            add_dir("tmp", 0o1777)
            add_dir("home")
            home = tarfile.TarInfo("home/nonroot")
            home.type, home.mode, home.uid, home.gid = tarfile.DIRTYPE, 0o755, NONROOT, NONROOT
            tar.addfile(home)
        else:
            with tarfile.open(spec.base) as base:
                for member in base:
                    name = member.name.removeprefix("./").rstrip("/")
                    if not name or name in overridden or (spec.drop and spec.drop(name)):
                        continue
                    member.name = name
                    if member.islnk():
                        member.linkname = member.linkname.removeprefix("./")
                    seen.add(name)
                    tar.addfile(member, base.extractfile(member) if member.isreg() else None)
        for name, data, mode in spec.generated:
            add_bytes(name, data, mode)
        for d in spec.dirs:
            for parent in [*_dirs_of(d), d.strip("/")]:
                add_dir(parent)
        for path, target in spec.links:
            for d in _dirs_of(path):
                add_dir(d)
            info = tarfile.TarInfo(path.strip("/"))
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for dest, src, mode in spec.files:
            if src.is_dir():
                for p in sorted(src.rglob("*")):
                    if p.is_file():
                        add_bytes(f"{dest.strip('/')}/{p.relative_to(src)}", p.read_bytes(), mode)
            else:
                for d in _dirs_of(dest):
                    add_dir(d)
                info = tar.gettarinfo(str(src), arcname=dest.strip("/"))
                info.mode, info.uid, info.gid, info.uname, info.gname = mode, 0, 0, "root", "root"
                with open(src, "rb") as f:
                    tar.addfile(info, f)


def ensure(spec: ImageSpec, on_phase: Callable[[str], None], workdir: Path) -> bool:
    """Make the image unless Docker has it with the same inputs; True when it was made now."""
    key = inputs_key(spec)
    if docker.inputs_of(spec.ref) == key:
        return False
    on_phase(f"assembling {spec.ref}")
    before = docker.image_id(spec.ref)
    workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=workdir, suffix=".tar") as tmp:
        write_tar(spec, Path(tmp.name))
        docker.import_tar(tmp.name, spec.ref, [*spec.changes(), f"LABEL {docker.INPUTS_LABEL}={key}"])
    # the image it replaces, now nameless: each lab image made again left 1.3 GB behind, until a
    # kind node ran out of disk loading the next one
    if before and before != docker.image_id(spec.ref):
        docker.remove_unused(before)
    return True
