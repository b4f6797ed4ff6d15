"""Where runs keep their evidence: pytest's --kailab-evidence, else $KAILAB_EVIDENCE, else evidence/ in
the folder the command runs in — a team running `pytest my-exercises/ --kailab-lab X` in its own
repository keeps its runs there, and `make exercises` (run from kailab's root) keeps writing kailab's
evidence/. The summary line names the folder and the rule that chose it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from kailab.paths import PROJECT_ROOT, evidence_dir, evidence_dir_why
from kailab.testing.plugin import evidence_root


def _config(given=None):
    return SimpleNamespace(getoption=lambda name: given if name == "--kailab-evidence" else None)


def test_the_current_folder_then_the_variable_then_the_option(tmp_path, monkeypatch):
    team = tmp_path / "team-repo"
    team.mkdir()
    monkeypatch.delenv("KAILAB_EVIDENCE", raising=False)
    monkeypatch.chdir(team)
    assert evidence_dir() == team / "evidence" and evidence_dir_why() == "evidence/ in the current folder"
    assert evidence_root(_config()) == (team / "evidence", "evidence/ in the current folder")

    monkeypatch.setenv("KAILAB_EVIDENCE", str(tmp_path / "elsewhere"))
    assert evidence_dir() == tmp_path / "elsewhere" and evidence_dir_why() == "$KAILAB_EVIDENCE"
    assert evidence_root(_config()) == (tmp_path / "elsewhere", "$KAILAB_EVIDENCE")

    given = str(tmp_path / "given")
    assert evidence_root(_config(given)) == (tmp_path / "given", "--kailab-evidence")


def test_make_exercises_from_kailabs_root_writes_kailabs_evidence(monkeypatch):
    monkeypatch.delenv("KAILAB_EVIDENCE", raising=False)
    monkeypatch.chdir(PROJECT_ROOT)  # where make runs its recipes
    assert evidence_dir() == PROJECT_ROOT / "evidence"


def test_a_kailab_process_started_elsewhere_writes_there(tmp_path):
    """Not this process's view only: a fresh interpreter in a team's folder, as pytest or `kailab run`
    starts there, makes its run folder under that folder's evidence/."""
    env = {k: v for k, v in os.environ.items() if k != "KAILAB_EVIDENCE"}
    code = textwrap.dedent("""
        from kailab.evidence import EvidenceDir
        from kailab.paths import evidence_dir
        print(EvidenceDir(evidence_dir(), "quota").path)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out.startswith(str(tmp_path / "evidence") + "/") and out.endswith("-quota"), out
    assert not (PROJECT_ROOT / "evidence" / out.rsplit("/", 1)[1]).exists()
