"""AppTest of the Compare models page: defaults, two identical sources, a run checkpoint picked on the page,
another tokenizer or depth, bad text and a bad folder for B; a message in the page, never an exception
box; the numbers shown are bertcore's."""

from __future__ import annotations

import numpy as np

from bertcore.analysis.representations import compare
from bertcore.loading import sources
from bertcore.loading.sources import load

from .conftest import array, assert_bad_texts_answered, assert_clean, chart_specs, messages, page, table

CMP_TABS = ["CKA by layer", "Layer × layer CKA", "Attention difference per head", "One head side by side"]


def test_compare_defaults_every_tab():
    at = page("compare", sources.PACKAGED)  # model B defaults to all-MiniLM-L6-v2 too
    assert_clean(at)
    assert any("same model" in i for i in messages(at)["info"])
    assert [t.label for t in at.tabs] == CMP_TABS
    np.testing.assert_allclose(table(at, "CKA")["CKA"], 1.0, atol=1e-4)  # MiniLM with itself
    for label in CMP_TABS[1:]:
        at.session_state["cmp_tab"] = label
        at.run()
        assert_clean(at)
        assert len(chart_specs(at)) == 1, label


def test_compare_first_visit_shows_what_mlm_training_changed():
    """Every default: A = MiniLM-MLM (the sidebar's), B = all-MiniLM-L6-v2, the same encoder before MLM training:
    a real comparison, not a model with itself."""
    at = page("compare")
    assert_clean(at)
    assert not any("same model" in i for i in messages(at)["info"])
    cka = np.asarray(table(at, "CKA")["CKA"], dtype=float)
    assert ((cka > 0) & (cka <= 1 + 1e-6)).all() and cka.min() < 0.999


def test_compare_says_which_lines_were_cut():
    at = page("compare", sources.PACKAGED)
    at.text_area(key="cmp_text").set_value("A short line.\n" + "word " * 600 + "\nAnother short line.").run()
    assert_clean(at)
    assert "Line 2 was cut to the models' positions." in messages(at)["warning"]
    at.text_area(key="cmp_text").set_value("word " * 600 + "\nshort\n" + "word " * 600).run()
    assert "Lines 1, 3 were cut to the models' positions." in messages(at)["warning"]


def test_compare_run_checkpoint_picked_on_the_page(models, run_source):
    at = page("compare", source=models["base"])
    at.radio(key="cmp_b_kind").set_value("run").run()
    at.button(key="cmp_b_run_use").click().run()
    assert_clean(at)
    assert not any("same model" in i for i in messages(at)["info"])
    shown = table(at, "CKA")
    # the page shows bertcore's numbers: the checkpoint changed only the last layer
    a, b = load(models["base"]), load(run_source)
    expected = compare.run_pair(a.encoder, a.tokenizer, b.encoder, b.tokenizer,
                                compare.sentences_of(at.text_area(key="cmp_text").value))
    np.testing.assert_allclose(shown["CKA"], np.round(expected.cka, 4))
    np.testing.assert_allclose(shown["CKA"][:3], 1.0, atol=1e-4)
    assert shown["CKA"].iloc[3] < 0.99
    for label in CMP_TABS[1:]:
        at.session_state["cmp_tab"] = label
        at.run()
        assert_clean(at)
    at.selectbox(key="cmp_layer").set_value(3).run()
    assert_clean(at)
    assert any("JS distance" in c.value and "Layer 3" in c.value for c in at.caption)


def test_compare_bad_text():
    at = page("compare")
    assert_bad_texts_answered(at, "cmp_text")
    at.text_area(key="cmp_text").input("line\n" * 65).run()
    assert any("at most 64" in w for w in messages(at)["warning"])


def test_compare_other_tokenizer_and_other_depth(models):
    at = page("compare", source=models["base"], cmp_source_b=models["small_vocab"], cmp_b_kind="local")
    assert_clean(at)
    assert any("cannot be compared token by token" in w for w in messages(at)["warning"])
    at = page("compare", source=models["base"], cmp_source_b=models["shallow"], cmp_b_kind="local")
    assert_clean(at)
    assert any("different numbers of layers" in i for i in messages(at)["info"])
    at.session_state["cmp_tab"] = "Layer × layer CKA"
    at.run()
    assert_clean(at)
    assert array(chart_specs(at)[0]["data"][0]["z"]).shape == (4, 3)  # emb + 3 layers of A, emb + 2 of B


def test_compare_bad_folder_for_b_keeps_the_previous(tmp_path):
    at = page("compare", sources.PACKAGED)
    at.radio(key="cmp_b_kind").set_value("local").run()
    at.text_input(key="cmp_b_local_path").input(str(tmp_path / "nothing")).run()
    at.button(key="cmp_b_local_use").click().run()
    assert_clean(at)
    assert any("Cannot load" in e for e in messages(at)["error"])
    assert any("same model" in i for i in messages(at)["info"])  # B is still the packaged model
