"""The lab image's content (`kailab tools lab-image`), read from a cache made here: which binaries go
in, at which paths, and the one-line refusal when they are not built. The image itself runs a lab in
a pod on a kind cluster in tests/live/test_lab_in_a_pod.py."""

from __future__ import annotations

import json

import pytest

from kailab import toolchain, versions
from kailab.errors import BuildError
from kailab.images import lab


def _fill(cache, image: lab.LabImage, tmp_path) -> None:
    tree = tmp_path / "kai-tree"
    (tree / "deployments").mkdir(parents=True)
    (tree / "go.mod").write_text("module github.com/kai-scheduler/KAI-scheduler\n")
    for r in image.recipes():
        folder = cache / "bin" / r.component / r.version
        folder.mkdir(parents=True)
        for name in r.binaries:
            (folder / name).write_text(name)
        source = {"kind": "repository", "tree": str(tree) if r.component == "kai" else "/somewhere/else"}
        (folder / "manifest.json").write_text(json.dumps({"component": r.component, "source": source}))


def test_a_lab_image_holds_what_a_binary_lab_runs_and_nothing_of_a_kubelet():
    image = lab.LabImage("v0.17.0")
    assert image.ref == "kailab/lab:kai-v0.17.0"
    components = {r.component for r in image.recipes()}
    assert {"etcd", "kubernetes-node", "kwok", "kai", "prometheus", "kube-state-metrics"} == components
    binaries = {b for r in image.recipes() for b in r.binaries}
    assert {"kube-apiserver", "kube-controller-manager", "scheduler", "binder"} <= binaries
    assert not {"kubelet", "kubeadm", "kube-proxy"} & binaries


def test_binaries_not_built_are_refused_in_one_line_naming_the_build(cache):
    with pytest.raises(BuildError) as e:
        lab._cache_files(lab.LabImage("v0.17.0"))
    msg = str(e.value)
    assert "\n" not in msg and "kailab tools build --kai-version v0.17.0" in msg and "kai/v0.17.0" in msg


def test_cached_binaries_go_to_the_images_cache_and_kais_tree_is_named_where_the_image_has_it(cache, tmp_path):
    image = lab.LabImage("v0.17.0")
    _fill(cache, image, tmp_path)
    files, generated = lab._cache_files(image)
    dests = {d for d, _, _ in files}
    kai = toolchain.kai_recipe(versions.kai_release("v0.17.0"))
    assert f"{lab.IMAGE_CACHE}/bin/kai/{kai.version}/scheduler" in dests
    assert f"{lab.IMAGE_CACHE}/src/kai/{kai.version}" in dests
    assert all(d.startswith(lab.IMAGE_CACHE + "/") for d in dests)
    manifests = {d: json.loads(data) for d, data, _ in generated}
    assert manifests[f"{lab.IMAGE_CACHE}/bin/kai/{kai.version}/manifest.json"]["source"]["tree"] == \
        f"{lab.IMAGE_CACHE}/src/kai/{kai.version}"
    # no path of this machine is left in a manifest: the image's kailab would look for it
    assert not any("/somewhere/else" in json.dumps(m) or str(tmp_path) in json.dumps(m) for m in manifests.values())


def test_the_images_cache_is_where_kailab_looks_under_the_images_home(monkeypatch):
    """The binaries go where kailab in the image finds its cache by default: HOME's ~/.cache/kailab."""
    from kailab import paths
    for var in ("KAILAB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", lab.IMAGE_HOME)
    assert str(paths.cache_dir()) == lab.IMAGE_CACHE
