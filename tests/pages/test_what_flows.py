"""AppTest of the what-flows views: the Attention page's "What flows" tab and the Masking page's "Which words made this
prediction" panel, with defaults (the numbers drawn are bertcore's), bad input, a model without an MLM head and a
pre-LN checkpoint (every post-LN-only method says so in one line, nothing crashes)."""

import re

import numpy as np
import pytest
import torch

from bertcore import BertForPreTraining
from bertcore.loading import sources
from bertcore.analysis.attention import flows, mixing
from bertcore.loading.sources import ModelSource
from bertcore.tokenization.tokenizer import encode

from ..conftest import save_tiny_bert
from .conftest import BAD_TEXTS, array, assert_clean, chart_specs, check, messages, page

TAB = "What flows"
DEFAULT = "The keys to the cabinet are on the table."


WHY_TAB = "Which words made this prediction"  # the Masking page's tab of this panel


@pytest.fixture(scope="module")
def flows_app():
    return page("attention", att_tab=TAB)


def _lines(at) -> str:
    return " ".join(m.value for m in at.markdown)


def test_what_flows_default_shows_five_methods_side_by_side_and_the_kobayashi_readout():
    at = page("attention", att_tab=TAB)  # its own page: the module's is changed by the other tests, in any order
    check(at, None)
    specs = chart_specs(at)
    assert len(specs) == 4  # maps, rollouts, route graph, a node's row
    titles = [a["text"] for a in specs[0]["layout"]["annotations"]]
    assert titles == list(__import__("explorer.panels.what_flows", fromlist=["SHOWN"]).SHOWN.values())
    heat = [tr for tr in specs[0]["data"] if tr["type"] == "heatmap"]
    assert len({(tr["zmin"], tr["zmax"]) for tr in heat}) == 1  # one colour scale for the row
    # the readout is bertcore's: layer 1 of the shipped model, the paper's finding on the default sentence
    lm = sources.load(sources.DEFAULT)
    inputs = encode(lm.tokenizer, DEFAULT).tensors()
    text = _lines(at)
    for name, want in (("Raw attention", 30), ("Norm ‖αf(x)‖", 15), ("Value zeroing", 11)):
        line = next(li for li in text.split("- **")[1:] if li.startswith(name + "**"))
        assert f"mean over all rows: {want}% on [CLS] + [SEP]" in line, line
    tokens = encode(lm.tokenizer, DEFAULT).tokens
    m = mixing.mixing(lm.model, inputs, "alti")[0]
    s = flows.row_shares(m, 1, tokens)
    alti = next(li for li in text.split("- **")[1:] if li.startswith("ALTI**"))
    assert f"{s.special:.0%} on [CLS] / [SEP], {s.punctuation:.0%} on punctuation, {s.itself:.0%} on itself" in alti
    # the first map drawn is raw attention's layer 1, rows as shares
    np.testing.assert_allclose(array(heat[0]["z"]), mixing.normalize_rows(mixing.mixing(lm.model, inputs,
                                                                                         "attention")[0]), atol=1e-6)


def test_what_flows_follows_the_layer_the_token_and_the_words_switch(flows_app):
    at = flows_app
    at.slider(key="att_layer").set_value(3).run()
    check(at, None)
    assert "layer 3" in _lines(at)
    at.selectbox(key="att_query").set_value(4).run()
    at.toggle(key="att_words").set_value(True).run()
    check(at, None)
    first = chart_specs(at)[-1]["layout"]["annotations"][0]["text"]
    assert first.startswith("layer 6: into ")  # the top node: the selected token's last layer
    at.selectbox(key="att_route_node").set_value(1).run()  # another node: its row is drawn
    check(at, None)
    row_title = chart_specs(at)[-1]["layout"]["annotations"][0]["text"]
    assert row_title.startswith("layer 5: into ")  # node 1: the first token reached one layer down
    at.slider(key="att_route_threshold").set_value(0.5).run()
    check(at, None)
    at.selectbox(key="att_route_method").set_value("attention").run()
    check(at, None)
    at.toggle(key="att_words").set_value(False)
    at.slider(key="att_layer").set_value(1)
    at.run()


@pytest.mark.parametrize("case", ["empty", "over_max_positions", "emoji", "zero_width_control", "only_zero_width"])
def test_what_flows_with_bad_input(case):
    at = page("attention", att_tab=TAB)
    at.text_area(key="att_text").input(BAD_TEXTS[case]).run()
    assert_clean(at)
    msgs = messages(at)
    assert not msgs["error"], msgs
    if case in ("empty", "only_zero_width"):
        assert msgs["warning"]
    if case == "over_max_positions":
        assert any("up to 128 tokens" in i for i in msgs["info"]), msgs


@pytest.fixture(scope="module")
def pre_ln_source(tmp_path_factory) -> ModelSource:
    folder = save_tiny_bert(tmp_path_factory.mktemp("pre_ln"), BertForPreTraining, tokenizer="full",
                            pre_layer_norm=True, max_position_embeddings=512)
    return ModelSource("local", str(folder), "tiny pre-LN")


def test_what_flows_on_a_pre_ln_checkpoint_says_which_methods_do_not_apply(pre_ln_source):
    at = page("attention", pre_ln_source, att_tab=TAB)
    check(at, None)
    info = " ".join(messages(at)["info"])
    assert "pre-LN" in info and "ALTI" in info and "Value zeroing" in info
    titles = [a["text"] for a in chart_specs(at)[0]["layout"]["annotations"]]
    assert titles == ["Raw attention", "Norm ‖αf(x)‖"]


# ----------------------------------------------------------------------------- Masking
@pytest.fixture(scope="module")
def mask_app():  # the panel's tab opened (it waits for the click otherwise)
    return page("masking", sources.PACKAGED_MLM, msk_panel=WHY_TAB)


def _bars(at):
    return next(s for s in chart_specs(at) if s["data"] and s["data"][0].get("orientation") == "h"
                and "rest (biases)" in list(s["data"][0]["y"]))


def test_masking_panel_default_explains_the_example_and_the_bars_sum_to_the_logit():
    at = page("masking", sources.PACKAGED_MLM, msk_panel=WHY_TAB)  # its own page, as above
    check(at, None)
    assert any("no [MASK] of its own" in c.value for c in at.caption)
    bars = _bars(at)
    x = array(bars["data"][0]["x"])
    shown = float(re.search(r"bars sum to logit (-?[\d.]+)", bars["layout"]["title"]["text"]).group(1))
    assert x.sum() == pytest.approx(shown, abs=2e-3)
    lm = sources.load(sources.PACKAGED_MLM)
    enc = encode(lm.tokenizer, "The keys to the cabinet [MASK] on the table.")
    with torch.no_grad():
        logits = lm.model(**enc.tensors()).prediction_logits[0, enc.tokens.index("[MASK]")]
    assert shown == pytest.approx(float(logits.max()), abs=2e-3)  # the top guess's real logit
    table = next(d.value for d in at.dataframe if "Occlusion ([MASK] in its place)" in d.value.columns)
    assert list(table.index) == ["Raw attention rollout", "Norm rollout", "ALTI rollout", "Value zeroing rollout",
                                 "DecompX", "Integrated gradients"]
    assert table.abs().max().max() <= 1


def test_masking_panel_explains_a_pair_and_the_typed_mask(mask_app):
    at = mask_app
    at.text_area(key="msk_text").input("The keys to the cabinet [MASK] on the table.").run()
    at.text_input(key="msk_dx_pair").input("are/is").run()
    check(at, None)
    bars = _bars(at)
    assert "logit(“are”) − logit(“is”)" in bars["layout"]["title"]["text"]
    at.text_input(key="msk_dx_pair").input("are/notaword").run()
    assert any("two words" in w for w in messages(at)["warning"])
    at.text_input(key="msk_dx_pair").input("").run()
    # a sentence pair whose [MASK] is in sentence B: the bars cover both sentences, their sum is B's [MASK] logit
    at.text_area(key="msk_text").input("The film won the award.").run()
    at.toggle(key="msk_pair_on").set_value(True).run()
    check(at, None)
    lm = sources.load(sources.PACKAGED_MLM)
    enc = encode(lm.tokenizer, "The film won the award.", at.text_area(key="msk_text_b").value)
    bars = _bars(at)
    assert len(bars["data"][0]["y"]) == len(enc.tokens) + 1
    with torch.no_grad():
        top = float(lm.model(**enc.tensors()).prediction_logits[0, enc.tokens.index("[MASK]")].max())
    assert array(bars["data"][0]["x"]).sum() == pytest.approx(top, abs=2e-3)
    at.toggle(key="msk_pair_on").set_value(False).run()


@pytest.mark.parametrize("text,expect", [
    ("", "warning"), ("   ", "warning"), ("token " * 600, None), ("[MASK] " + "token " * 300, "info"),
    ("😀🎉 the [MASK] sat\u200b on the mat \u0000 👍🏽", None), ("The capital of France is [MASK].", None)])
def test_masking_panel_with_bad_input(text, expect):
    at = page("masking", sources.PACKAGED_MLM, msk_panel=WHY_TAB)
    at.text_area(key="msk_text").input(text).run()
    assert_clean(at)
    msgs = messages(at)
    assert not msgs["error"], msgs
    if expect == "warning":
        assert msgs["warning"]
    if expect == "info":
        assert any("up to 256 tokens" in i for i in msgs["info"]), msgs


def test_masking_panel_without_mlm_head_says_why_it_is_absent():
    at = page("masking", sources.PACKAGED)
    assert_clean(at)
    assert any("Which words made this prediction" in i for i in messages(at)["info"])
    assert not any(s["data"] and "rest (biases)" in str(s["data"][0].get("y")) for s in chart_specs(at))


def test_masking_panel_on_a_pre_ln_checkpoint(pre_ln_source):
    at = page("masking", pre_ln_source, msk_panel=WHY_TAB)
    at.text_area(key="msk_text").input("The keys to the cabinet [MASK] on the table.").run()
    check(at, None)
    info = " ".join(messages(at)["info"]).replace("\\", "")  # Markdown escapes
    assert "DecompX is not shown" in info and "post-LN" in info
    table = next(d.value for d in at.dataframe if "Occlusion ([MASK] in its place)" in d.value.columns)
    assert table.loc["ALTI rollout"].isna().all() and not table.loc["Raw attention rollout"].isna().any()
    assert any("n/a" in c.value and "post-LN" in c.value.replace("\\", "") for c in at.caption)
