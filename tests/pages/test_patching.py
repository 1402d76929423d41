"""AppTest of the Activation patching page: with every default the heatmaps hold bertcore's patching effects;
inputs of different lengths get a message and a one-click pad; bad text, no [MASK], a model without an MLM
head: a message, never a traceback."""

from __future__ import annotations

import pytest

from bertcore.loading import sources
from bertcore.analysis.causal import patching as P
from bertcore.readouts.fill_mask import mask_token_positions
from bertcore.tokenization.tokenizer import encode

from .conftest import BAD_TEXTS, array, assert_clean, chart_specs, messages, page


def test_defaults_draw_bertcores_effects():
    at = page("patching")  # the default model, MiniLM-MLM
    assert_clean(at)
    specs = chart_specs(at)
    assert len(specs) == 4
    lm = sources.load(sources.PACKAGED_MLM)
    clean = encode(lm.tokenizer, "The keys to the cabinet [MASK] on the table.")
    corrupt = encode(lm.tokenizer, "The key to the cabinet [MASK] on the table.")
    pos = mask_token_positions(lm.tokenizer, clean.tensors()["input_ids"])[0]
    ids = lm.tokenizer.convert_tokens_to_ids(["are", "is"])
    res = P.scan(lm.model, clean.tensors(), corrupt.tensors(), P.logit_diff(pos, *ids), kinds=("resid",))
    shown = array(specs[0]["data"][0]["z"])
    assert shown.shape == res.effects["resid"].shape
    assert abs(shown - res.effects["resid"]).max() < 1e-6
    # the last layer at the [MASK] restores the clean answer, the embeddings at "keys" too
    assert shown[-1, pos] == pytest.approx(1.0, abs=1e-4) and shown[0, 2] == pytest.approx(1.0, abs=1e-4)
    assert at.metric[0].value.startswith(("+", "-"))


@pytest.mark.parametrize("clean_text, corrupt_text", [
    ("The keys to the cabinet [MASK] on the table.", "The key to the cabinet [MASK] on the table."),
    ("The keys [MASK] on the table.", "The key [MASK] on the table.")])
def test_the_page_says_whether_the_model_gets_the_pair_right(clean_text, corrupt_text):
    at = page("patching", pat_clean=clean_text, pat_corrupt=corrupt_text, pat_kinds=["resid"])
    assert_clean(at)
    lm = sources.load(sources.PACKAGED_MLM)
    clean, corrupt = encode(lm.tokenizer, clean_text), encode(lm.tokenizer, corrupt_text)
    pos = mask_token_positions(lm.tokenizer, clean.tensors()["input_ids"])[0]
    ids = lm.tokenizer.convert_tokens_to_ids(["are", "is"])
    res = P.scan(lm.model, clean.tensors(), corrupt.tensors(), P.logit_diff(pos, *ids), kinds=("resid",))
    right = res.clean > 0 and res.corrupted < 0
    msgs = messages(at)
    assert any("gets this pair right" in m for m in msgs["success"]) == right
    assert any("*wrong* answer" in m for m in msgs["warning"]) == (not right)


def test_inputs_of_different_length_get_a_pad_button():
    at = page("patching", pat_corrupt="The key to the big old cabinet [MASK] on the table.")
    assert_clean(at)
    assert any("same length" in w for w in messages(at)["warning"])
    at.button(key="pat_pad").click().run()
    assert_clean(at)
    assert at.text_input(key="pat_clean").value.endswith(". . .")
    assert len(chart_specs(at)) == 4


def test_bad_inputs_get_messages():
    at = page("patching")
    for name, text in BAD_TEXTS.items():
        at.text_input(key="pat_clean").input(text).run()
        assert_clean(at)
        assert messages(at)["warning"] or messages(at)["info"] or name == "typed_mask", name
    at.text_input(key="pat_clean").input("The keys to the cabinet are on the table.").run()
    assert any("exactly one [MASK]" in w for w in messages(at)["warning"])
    at.text_input(key="pat_clean").input("The keys to the cabinet [MASK] on the table.").run()
    at.text_input(key="pat_good").input("unbelievably").run()
    assert any("one WordPiece" in w for w in messages(at)["warning"])


def test_a_model_without_an_mlm_head_is_offered_the_switch():
    at = page("patching", sources.PACKAGED)
    assert_clean(at)
    assert any("no MLM head" in i for i in messages(at)["info"])
    at.button(key="pat_switch").click().run()
    assert_clean(at)
    assert len(chart_specs(at)) == 4
