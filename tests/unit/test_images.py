"""The image builder's pure parts (`kailab tools images`): names, image contents, the node image's
assembly rules, registered sources. The images themselves are checked on a Docker engine in
test_kind_lab.py."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from kailab import sources, versions
from kailab.errors import KailabError
from kailab.images import FGO_IMAGES, KAI_IMAGES, image_set, recipes
from kailab.images.assemble import NONROOT, ImageSpec, inputs_key, write_tar
from kailab.images.build import component_images
from kailab.images.node import _dropped, cni_conflist
from kailab.toolchain import Recipe


def test_image_set_uses_upstream_names_and_the_binary_runtimes_kubernetes():
    s = image_set("v0.17.0")
    assert s.kubernetes == versions.kai_release("v0.17.0").kubernetes == "v1.36.3"
    assert s.node_image == "kailab/node:v1.36.3"
    assert f"registry.k8s.io/kwok/kwok:{versions.KWOK_VERSION}" in s.images
    assert {f"ghcr.io/kai-scheduler/kai-scheduler/{n}:v0.17.0" for n in KAI_IMAGES} <= set(s.images)
    assert {f"ghcr.io/run-ai/fake-gpu-operator/{n}:0.0.74" for n in FGO_IMAGES} <= set(s.images)
    assert s.built_images[0] == s.node_image and len(set(s.built_images)) == len(s.built_images)


def _fake_recipes(tmp_path: Path) -> dict[str, Recipe]:
    return {r.component: r for r in recipes.all_recipes("v0.17.0")}


def test_every_component_image_is_made_once_with_its_upstream_layout(tmp_path, monkeypatch):
    s = image_set("v0.17.0")
    rs = _fake_recipes(tmp_path)
    specs = component_images(s, rs, tmp_path / "slim.tar", tmp_path / "kai")
    assert sorted(sp.ref for sp in specs) == sorted(s.images)
    by = {sp.ref.rsplit("/", 1)[-1].split(":")[0]: sp for sp in specs}
    for name in ("operator", "scheduler", "binder", "admission"):  # KAI's Dockerfile, prod stage
        sp = by[name]
        assert sp.entrypoint == ("/workspace/app",) and sp.user == f"{NONROOT}:{NONROOT}"
        assert [d for d, _, _ in sp.files] == ["/workspace/app"] and sp.base is None
    crd = by["crd-upgrader"]  # bash + kubectl + the chart's CRDs + KAI's script
    assert crd.base == tmp_path / "slim.tar" and crd.cmd == ("/apply-crds.sh",)
    assert {d for d, _, _ in crd.files} == {"/usr/bin/kubectl", "/internal-crds", "/apply-crds.sh"}
    assert by["status-exporter"].entrypoint == ("/usr/local/bin/status-exporter",)
    assert by["kwok"].entrypoint == ("/usr/local/bin/kwok",)


def _members(path: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as tar:
        return {m.name: m for m in tar}


def test_a_tiny_image_has_users_tmp_and_its_binary(tmp_path):
    binary = tmp_path / "app"
    binary.write_bytes(b"\x7fELF fake")
    spec = ImageSpec("x/app:v1", (("/workspace/app", binary, 0o755),), user="65532:65532")
    write_tar(spec, tmp_path / "out.tar")
    m = _members(tmp_path / "out.tar")
    assert m["workspace/app"].mode == 0o755 and m["workspace/app"].uid == 0
    assert m["tmp"].mode == 0o1777 and m["home/nonroot"].uid == NONROOT
    with tarfile.open(tmp_path / "out.tar") as tar:
        assert f"nonroot:x:{NONROOT}" in tar.extractfile("etc/passwd").read().decode()
    assert "USER 65532:65532" in spec.changes()


def test_a_based_image_drops_links_and_overrides(tmp_path):
    base = tmp_path / "base.tar"
    with tarfile.open(base, "w") as tar:
        for name, data in [("./etc/os-release", b"debian"), ("./etc/systemd/journald.conf", b"[Journal]\n"),
                           ("./usr/lib/systemd/system/multi-user.target.wants/getty.target", b"x")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    spec = ImageSpec("kailab/node-base:v1", (), base=base, drop=_dropped,
                     generated=(("/etc/systemd/journald.conf", b"[Journal]\nReadKMsg=no\n", 0o644),),
                     links=(("/etc/systemd/system/multi-user.target.wants/kubelet.service",
                             "/etc/systemd/system/kubelet.service"),), dirs=("/etc/kubernetes/manifests",))
    write_tar(spec, tmp_path / "out.tar")
    m = _members(tmp_path / "out.tar")
    assert "etc/os-release" in m and "usr/lib/systemd/system/multi-user.target.wants/getty.target" not in m
    assert m["etc/systemd/system/multi-user.target.wants/kubelet.service"].issym()
    assert m["etc/kubernetes/manifests"].isdir()
    with tarfile.open(tmp_path / "out.tar") as tar:  # the generated file replaced the base's
        assert tar.extractfile("etc/systemd/journald.conf").read().endswith(b"ReadKMsg=no\n")
    assert sum(1 for n in m if n == "etc/systemd/journald.conf") == 1


def test_kinds_clean_up_patterns_follow_merged_usr():
    assert _dropped("usr/lib/systemd/system/sockets.target.wants/systemd-udevd-control.socket")
    assert _dropped("usr/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service")
    assert not _dropped("usr/lib/systemd/system/sysinit.target.wants/systemd-journald.service")
    assert not _dropped("etc/systemd/system/kubelet.service")


def test_the_static_cni_config_covers_the_node_pod_subnet():
    conf = json.loads(cni_conflist("10.244.0.0/24"))
    ptp = conf["plugins"][0]
    assert ptp["type"] == "ptp" and ptp["ipam"]["ranges"] == [[{"subnet": "10.244.0.0/24"}]]


def test_inputs_key_changes_with_content_and_configuration(tmp_path):
    f = tmp_path / "bin"
    f.write_bytes(b"one")
    spec = ImageSpec("x:1", (("/bin/x", f, 0o755),))
    first = inputs_key(spec)
    assert inputs_key(spec) == first
    f.write_bytes(b"two")
    assert inputs_key(spec) != first
    assert inputs_key(ImageSpec("x:1", (("/bin/x", f, 0o755),), user="1")) != inputs_key(spec)


def _repo(path: Path, module: str, tags: list[str]) -> Path:
    path.mkdir(parents=True)
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (path / "go.mod").write_text(f"module {module}\n\ngo 1.24\n")
    run("add", "go.mod")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x")
    for t in tags:
        run("tag", t)
    return path


def test_a_registered_source_is_checked_mirrored_and_exported(cache, tmp_path):
    repo = _repo(tmp_path / "fgo", "github.com/run-ai/fake-gpu-operator", ["v0.0.74"])
    record = sources.register("fake-gpu-operator", str(repo))
    assert record["newest"] == "v0.0.74" and (cache / "sources" / "fake-gpu-operator" / "repo.git").is_dir()
    tree = sources.export_tree("fake-gpu-operator", "v0.0.74")
    assert (tree / "go.mod").is_file()


@pytest.mark.parametrize("project, module, fragment", [
    ("cri-tools", "example.com/other", "not a cri-tools repository"),
    ("nope", "sigs.k8s.io/cri-tools", "unknown source 'nope'"),
])
def test_a_wrong_source_is_one_line(cache, tmp_path, project, module, fragment):
    repo = _repo(tmp_path / "r", module, ["v1.36.0"])
    with pytest.raises(KailabError) as err:
        sources.register(project, str(repo))
    assert "\n" not in str(err.value) and fragment in str(err.value)
    assert not (cache / "sources" / project / "repo.git").exists()


def test_a_missing_source_names_the_command_that_registers_it(cache):
    with pytest.raises(KailabError) as err:
        sources.commit_of("cri-tools", "v1.36.0")
    assert "kailab tools source cri-tools PATH" in str(err.value) and "\n" not in str(err.value)


def test_kubernetes_node_binaries_are_stamped_with_their_version():
    """kubeadm refuses a control plane newer than the version it says it is (v0.0.0 unstamped)."""
    from kailab.toolchain import _version_ldflags

    kn = next(r for r in recipes.node_recipes("v1.36.3") if r.component == "kubernetes-node")
    flags = _version_ldflags(kn, "module-proxy")
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "-X k8s.io/component-base/version.gitMinor=36" in flags
    runc = next(r for r in recipes.node_recipes("v1.36.3") if r.component == "runc")
    assert runc.cgo and "seccomp" in runc.tags
