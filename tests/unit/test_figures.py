"""Figures in README and docs come from their records (kailab.bench.figures): every marked block is
what its record gives, a changed number in a record shows as a stale block, and a bad block is one
line naming the page."""

from __future__ import annotations

import json
import shutil

import pytest

from kailab.bench import figures
from kailab.errors import KailabError
from kailab.paths import PROJECT_ROOT

RECORD = PROJECT_ROOT / "bench" / "results" / "2026-11-27-endings-2000.json"


def test_every_figure_block_is_what_its_record_gives():
    blocks = [m for page in figures.pages() for m in figures.BLOCK.finditer(page.read_text())]
    assert len(blocks) >= 3, "README's headline results are rendered blocks"
    assert figures.stale() == [], "run `kailab bench render-docs` and commit the pages"


def test_a_number_changed_in_a_record_changes_the_block(tmp_path):
    page = PROJECT_ROOT / "README.md"
    before = figures.render("endings", str(RECORD.relative_to(PROJECT_ROOT)), page)
    changed = tmp_path / RECORD.name
    shutil.copy(RECORD, changed)
    record = json.loads(changed.read_text())
    record["per_pod"]["deleted"]["cpu_ms"] = 77.7
    changed.write_text(json.dumps(record))
    after = figures.render("endings", str(changed), page)
    assert "50.61" in before and "77.7" in after and after != before


def test_each_block_says_its_date_machine_and_record():
    text = figures.render("endings", str(RECORD.relative_to(PROJECT_ROOT)), PROJECT_ROOT / "README.md")
    assert "2026-11-27, 2 cores, 24 GiB" in text
    assert "[record](bench/results/2026-11-27-endings-2000.md)" in text
    from_docs = figures.render("endings", str(RECORD.relative_to(PROJECT_ROOT)), PROJECT_ROOT / "docs" / "results.md")
    assert "[record](../bench/results/2026-11-27-endings-2000.md)" in from_docs


@pytest.mark.parametrize("kind, record, fragment", [
    ("nonsense", "bench/results/2026-11-27-endings-2000.json", "figure kind 'nonsense' is unknown"),
    ("endings", "bench/results/no-such-record.json", "figure record bench/results/no-such-record.json"),
])
def test_a_bad_block_is_one_line_naming_the_page(kind, record, fragment):
    with pytest.raises(KailabError) as err:
        figures.render(kind, record, PROJECT_ROOT / "README.md")
    assert "\n" not in str(err.value) and "README.md" in str(err.value) and fragment in str(err.value)


RESULTS = PROJECT_ROOT / "bench" / "results"
RESULTS_PAGE = PROJECT_ROOT / "docs" / "results.md"


@pytest.mark.parametrize("kind, record, fragments", [
    ("scale", "2026-11-22-scale", ["| 4,000 single-GPU Jobs | in 54 s (74/s) | **731 s** (12.2 min) | 5.5 | 348 s / 673 s",
                                   "**160 s / 194 s** (100 GPUs)", "| 1031 / 821 / 32.2 |",
                                   "used 94 % and 94 % of the 2 cores' CPU seconds", "the API server alone 51 % and 43 %",
                                   "most first: queuecontroller 483 s, scheduler 126 s", "3.8 % and 3.9 % of KAI's CPU"]),
    ("warm-up", "2026-11-22", ["| tiny | **3.9 s** (3.7–4.9, 3 runs) | 0.08 s |",
                               "KAI CRDs Established 1.5 s → KAI serving 0.6 s → probe pod bound 1.2 s",
                               "| large | **22.4 s** (22.2–24.5, 3 runs) | 0.14 s | fleet Ready 22.1 s |"]),
    ("cold-builds", "2026-11-22", ["etcd/v3.6.8 87 s", "kubernetes/v1.36.3 516 s", "kwok/v0.8.0 270 s",
                                   "kwokctl/v0.8.0 25 s"]),
    ("peer", "2026-11-24-peer-2", ["5 alternating runs", "+ down` **2.47 s** (2.44–2.70)",
                                   "/readyz + delete` **2.69 s** (2.65–3.13)", "at equal readiness **0.92**",
                                   "bare kwokctl **2.08**"]),
    ("peer", "2026-11-22", ["`kailab up --without-kai + down` **4.40 s**", "bare kwokctl **1.86**"]),  # nested under "peer"
    ("suite", "2026-11-22-suite", ["12 exercises, once each", "12 / 12 passed", "**227 s** in all",
                                   "**113 s are windows the exercises ask for** (`stays` 100 s, `settle` 13 s)",
                                   "87 s waiting for KAI", "48 s of it in node-failure", "11 s clean-up (about 0.9 s",
                                   "8 s evidence", "6 s the rest"]),
    ("runtimes", "2026-11-23-runtimes-all", ["labs binary (kb1) and kind (kt1)", "**13 of 14** exercises passed",
                                             "node-labels: binary failed, kind passed", "binary 6.6–120 s, kind 12–82 s"]),
    ("runtimes", "2026-11-23-runtimes-node-labels", ["**3 of 3** runs of node-labels", "binary 12–14 s, kind 13–18 s"]),
    ("repeatability", "2026-11-22-repeatability", ["**40 / 40** runs passed, every exercise 5 / 5", "8 exercises"]),
    ("repeatability", "2026-11-22-repeatability-added", ["**20 / 20**", "consolidation, elastic, fractional, placement"]),
    ("repeatability", "2026-11-23-kind-time-based-fairness-repeatability",
     ["**10 / 10** runs of time-based-fairness passed on a kind lab", "each 84–91 s (median 86 s)"]),
    ("repeatability", "2026-11-23-time-based-fairness-repeatability",  # no runtime recorded: none said
     ["**10 / 10** runs of time-based-fairness passed, one after another, each 85–102 s (median 91 s)"]),
    ("soak", "2026-11-22-soak", ["**50 / 50** up/down cycles", "`up` median 13.64 s, `down` median 1.94 s",
                                 "times are inflated"]),
    ("vcluster-trial", "2026-11-25-vcluster", ["host up 52 s", "68.1 s (v0.16.8), 68.8 s (v0.17.0)", "in 511 s",
                                               "delete-to-clean 14.3 s (v0.16.8), 13.5 s (v0.17.0)", "1,403 s",
                                               "1.6–3.2× its time", "| quota | 51.5 s / 29.2 s (1.8×) |",
                                               "**10 of 10** exercise × version cells"]),
    ("churn", "2026-11-25-churn", ["200 starts of a `small` lab, 2 at a time, in 29.7 min",
                                   "**200 of 200 came up, 0 died**", "median `up` 16 s, slowest 43 s",
                                   "busy cores 1.99 of 2", "10 of 200 (kube-controller-manager: exited"]),
])
def test_a_record_gives_its_numbers(kind, record, fragments):
    text = figures.render(kind, f"bench/results/{record}.json", RESULTS_PAGE)
    missing = [f for f in fragments if f not in text]
    assert not missing, f"{missing} not in:\n{text}"
    assert text.endswith(f"; [record](../bench/results/{record}.md))\n")


def _render_from(tmp_path, kind: str, record: dict) -> str:
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    return figures.render(kind, str(path), RESULTS_PAGE)


def test_a_scale_run_not_all_bound_and_without_reclaim_says_so(tmp_path):
    record = json.loads((RESULTS / "2026-11-22-scale.json").read_text())
    run = record["runs"][1]
    run.update(all_bound=False, bound=5432)
    del run["reclaim"]
    text = _render_from(tmp_path, "scale", record)
    assert "not all: 5,432 of 8,000" in text and text.count("(nothing lent out at this size)") == 2


def test_repeatability_and_verdicts_that_differ_show(tmp_path):
    record = json.loads((RESULTS / "2026-11-22-repeatability.json").read_text())
    record["exercises"]["gang"]["passed"], record["passed"] = 3, 38
    assert "**38 / 40** runs passed, the least any exercise passed 3 / 5" in _render_from(tmp_path, "repeatability", record)
    trial = json.loads((RESULTS / "2026-11-25-vcluster.json").read_text())
    trial["verdicts"]["gang"]["v0.17.0"]["kind"] = "failed"
    assert "**9 of 10** exercise × version cells" in _render_from(tmp_path, "vcluster-trial", trial)


# For each kind, where its record holds a number its block shows: multiplying it by ten (plus one) changes the block.
FIRST = object()
NUMBER_SHOWN = {
    "exercises-side-by-side": ("runs", 0, "wall_s"),
    "vcluster": ("vcluster_trial", "wall_s"),
    "endings": ("per_pod", "deleted", "cpu_ms"),
    "scale": ("runs", 0, "seconds_to_all_bound"),
    "warm-up": ("labs", 0, "up_s"),
    "cold-builds": ("cold_build_s", FIRST),
    "peer": ("median_s", FIRST),
    "suite": ("exercises", FIRST, "seconds", 0),
    "runtimes": ("rows", 0, "labs", FIRST, "seconds"),
    "repeatability": ("passed",),
    "soak": ("up_s_median",),
    "vcluster-trial": ("exercises_s",),
    "churn": ("up_s_median",),
    "twin-scale": ("seconds", "to_settled"),
    "twins": ("decided_differently",),
    "side-by-side-runs": ("runs", 0, "wall_s"),
    "fill": ("table", FIRST, FIRST, 0),
    "replay": ("differences", "figures_compared"),
    "endings-table": ("per_pod", "deleted", "cpu_ms"),
    "top": ("top_core_share",),
}


def _blocks() -> list[tuple[str, str, str]]:
    return [(str(page.relative_to(PROJECT_ROOT)), m.group(2), m.group(3))
            for page in figures.pages() for m in figures.BLOCK.finditer(page.read_text())]


def test_every_kind_has_a_number_the_next_test_changes():
    assert set(NUMBER_SHOWN) == set(figures.RENDERERS)
    assert {kind for _, kind, _ in _blocks()} >= {"scale", "warm-up", "peer", "suite", "runtimes", "repeatability",
                                                  "soak", "vcluster-trial", "churn", "cold-builds"}, \
        "docs/results.md's figures are rendered blocks"
    kinds = {(page, kind) for page, kind, _ in _blocks()}
    assert {("docs/getting-started.md", "side-by-side-runs"), ("docs/getting-started.md", "cold-builds"),
            ("docs/replay.md", "replay"), ("docs/replay.md", "fill"), ("docs/replay.md", "endings-table"),
            ("docs/traces.md", "fill")} <= kinds, "getting-started, replay and traces render their figures"
    assert {("docs/kind-runtime.md", "repeatability"), ("docs/kind-runtime.md", "runtimes"),
            ("docs/kind-runtime.md", "vcluster-trial"), ("docs/version-trials.md", "vcluster-trial")} <= kinds, \
        "kind-runtime and version-trials render their figures"


@pytest.mark.parametrize("page, kind, record", _blocks(), ids=lambda v: str(v))
def test_a_number_changed_in_any_blocks_record_makes_that_block_stale(tmp_path, monkeypatch, page, kind, record):
    for name in {p for p, _, _ in _blocks()} | {"README.md"}:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT_ROOT / name, tmp_path / name)
    shutil.copytree(RESULTS, tmp_path / "bench" / "results")
    monkeypatch.setattr(figures, "PROJECT_ROOT", tmp_path)
    assert figures.stale() == []

    data = json.loads((tmp_path / record).read_text())
    holder, *path = [data, *NUMBER_SHOWN[kind]]
    for step in path[:-1]:
        holder = holder[next(iter(holder)) if step is FIRST else step]
    key = next(iter(holder)) if path[-1] is FIRST else path[-1]
    holder[key] = holder[key] * 10 + 1
    (tmp_path / record).write_text(json.dumps(data))

    assert f"{page}: {kind} {record}" in figures.stale()
    figures.render_docs()
    assert figures.stale() == []


def test_a_twins_record_renders_each_twin_and_what_they_decided_differently():
    record = {"date": "2026-11-27", "machine": {"cores": 2, "memory_gib": 24}, "pending_in_snapshot": 20,
              "variants": {"as-is": {"kai_version": "v0.17.0", "design": "as-is", "placed": 20, "still_pending": 0,
                                     "evicted": 27, "settled": True, "seconds": 60.1},
                           "serve-quota-40": {"kai_version": "v0.17.0", "design": "serve-quota-40", "placed": 10,
                                              "still_pending": 10, "evicted": 12, "settled": True, "seconds": 58.0}},
              "queues_gpus": {"serve": {"before": 0, "as-is": 80, "serve-quota-40": 40}},
              "decided_differently": 25, "placed_differently": 3}
    text = figures.RENDERERS["twins"](record, "r.md")
    assert "| serve-quota-40 | v0.17.0 | serve-quota-40 | 10 | 10 | 12 | yes | 58.0 |" in text
    assert "| serve | 0 | 80 | 40 |" in text and "decided differently: **25**" in text and "[record](r.md)" in text


@pytest.mark.parametrize("kind, record, fragments", [
    ("side-by-side-runs", "2026-11-24-exercises-side-by-side",
     ["one lab (`LABS=0`), once: **19 / 19** items passed, **696 s**, 404 CPU-s (202 s over 2 cores)",
      "3 labs side by side, once: **19 / 19** items passed, **302 s**", "quota-what-if 268–345 s"]),
    ("side-by-side-runs", "2026-11-24-exercises-side-by-side-3",
     ["10 runs: **190 / 190** items passed, **380 s** median (365–399 s), 351–426 CPU-s (175–213 s over 2 cores)"]),
    ("replay", "2026-11-23-replay-repeatability",
     ["`quota-what-if.csv` (80 jobs), fleet `small`, compressed 30×, 3 variants, 3 times each",
      "| team-a.wait_p95 | **2,295 (791–3,057)** | **2,833 (1,236–2,940)** | **6,363 (5,575–7,410)** |",
      "of 59 figures compared: team-a-first vs team-a-first-again: **nothing moved**",
      "Expectations held: 2 of 2", "lag p99: 2.4–9.2 s wall; it fell behind the trace in every variant"]),
    ("endings-table", "2026-11-27-endings-2000",
     ["| run time (then the namespace goes) | 49.6 ms | 29.0 ms | 4.1 | 1.1 |",
      "within the 1 s termination grace, and removes it) | 50.6 ms | 30.8 ms | 5.8 | 2.8 |",
      "98.4–102.4 CPU-s a run; a deleted pod 1.7 more writes"]),
    ("fill", "2026-11-25-fill-default-1of8",
     ["seeds 1, 2, 3, steps of at most 2 %", "| binpack | GPU allocated | 80.1–80.5 | 89.1–91.6 | 89.4–92.5 |",
      "| spread | GPU fragmented | 14.9–16.8 |", "binpack's lowest seed above spread's highest at 80, 90, 100 and 110 %",
      "the seeds' ranges overlap at 130 %", "| binpack, seed 1 | 1,402 | 69 | 436 s | 396 | 198 s | — |",
      "the whole bench (labs up, fills, labs down) 27.4 min"]),
    ("fill", "2026-11-26-fill-default",
     ["full scale (1,213 nodes, 6,212 GPUs)", "binpack allocated more at every mark",
      "| binpack, seed 2 | 10,832 | 132 | 36 min (2,165 s) | 3,873 | 32 min | 0.09 core | kube-apiserver 29 %",
      "harness 1.6 % | 2.2 / 0.7 |", "nodes not Ready at the end: 0 in every run"]),
    ("fill", "2026-11-26-fill-gpushare100-seeds1-spread",
     ["KAI v0.17.0, seed 1", "| spread | CPU allocated | 71.2 |", "the first pod unplaced at 60.7 % arrived",
      "4,587 pods unplaced at 130 %, 0 evicted, 0 deleted after binding", "KAI's cycle 5.5 s at 100 % arrived, 8.4 s",
      "took 4,474 s of the steps' 6,753 s (66 %", "kwok 14 %, binder 11 %; harness 1.0 %"]),
    ("fill", "2026-11-26-fill-gpushare100-1of8",
     ["binpack allocated more at 80 and 90 % arrived; spread allocated more at 100, 110 and 130 % arrived"]),
])
def test_a_fill_replay_or_side_by_side_record_gives_its_numbers(kind, record, fragments):
    text = figures.render(kind, f"bench/results/{record}.json", RESULTS_PAGE)
    missing = [f for f in fragments if f not in text]
    assert not missing, f"{missing} not in:\n{text}"
    assert text.endswith(f"; [record](../bench/results/{record}.md))\n")


def test_a_replay_judged_nothing_and_a_fill_without_steps_say_so(tmp_path):
    record = json.loads((RESULTS / "2026-11-23-replay-repeatability.json").read_text())
    record["differences"] = {"judged": False, "why": "a difference needs 2+ runs of each design (--repeat 2)", "moved": {}}
    record["warnings"] = {}
    text = _render_from(tmp_path, "replay", record)
    assert "No difference judged: a difference needs 2+ runs" in text and "fell behind" not in text
    assert "**" not in text.split("No difference")[0].split("\n\n", 1)[1]  # nothing bold: nothing moved
    fill = json.loads((RESULTS / "2026-11-26-fill-gpushare100-seeds1-binpack.json").read_text())
    del fill["curves"]
    text = _render_from(tmp_path, "fill", fill)
    assert "CPU allocated" not in text and "first pod unplaced" not in text and "| binpack | GPU allocated | 80.6 |" in text
