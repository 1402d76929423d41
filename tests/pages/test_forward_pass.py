"""AppTest of the One forward pass page: the numbers drawn are the model's own (attention rows, layer outputs,
top-5 words), the choices of token, layer and head follow, and bad input (empty text, 600 tokens, odd Unicode),
a model without an MLM head, a pre-LN model and a junk link get a message or a working page, never a traceback."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertcore.readouts import fill_mask
from bertcore.loading import sources
from bertcore.modeling.heads import BertForPreTraining
from bertcore.loading.sources import ModelSource
from bertcore.tokenization.tokenizer import encode

from ..conftest import save_tiny_bert
from .conftest import PAGES, TIMEOUT, array, assert_bad_texts_handled, assert_clean, chart_specs, charts, messages, page

DEFAULT = "The film won the [MASK] for best actor at the ceremony in London."
STEPS = ["1. Embeddings", "2. One attention head", "3. All heads, projection, residual", "4. Feed-forward",
         "5. Every layer", "6. MLM head"]


def step(at: AppTest, n: int) -> AppTest:
    """Open step ``n`` (1-based) of the page's lazy tabs."""
    at.session_state["fp_step"] = STEPS[n - 1]
    at.run()
    assert_clean(at)
    return at


def charts_per_step(at: AppTest) -> list[int]:
    out = [charts(step(at, n)) for n in range(1, len(STEPS) + 1)]
    step(at, 1)
    return out


def strip(at: AppTest, title: str) -> np.ndarray:
    """The numbers of the strip whose title starts with ``title`` (the first chart that has one)."""
    for spec in chart_specs(at):
        titles = [a.get("text", "") for a in spec["layout"].get("annotations", [])]
        for k, t in enumerate(titles):
            if t.startswith(title):
                return array(spec["data"][k]["z"])
    raise AssertionError(f"no strip titled {title!r}")


def model_forward(text: str, source=sources.PACKAGED_MLM):
    lm = sources.load(source)
    t = encode(lm.tokenizer, text).tensors()
    with torch.no_grad():
        return lm, t, lm.encoder(t["input_ids"], output_hidden_states=True, output_attentions=True)


def test_the_default_view_draws_the_models_own_numbers():
    at = page("forward_pass")
    assert_clean(at)
    assert any("equals its formula" in s and "model's own forward" in s for s in messages(at)["success"])
    assert charts(at) == 1  # lazy tabs: only the open step draws
    lm, t, out = model_forward(DEFAULT)
    token = 5  # the [MASK]: the page follows it by default
    assert at.selectbox(key="fp_token").value == token
    np.testing.assert_allclose(strip(at, "after LayerNorm"), out.hidden_states[0][0, token][None], atol=1e-5)
    np.testing.assert_allclose(strip(step(at, 2), "attention weights (the row"), out.attentions[0][0, 0, token][None],
                               atol=1e-6)
    np.testing.assert_allclose(strip(step(at, 5), "'[MASK]' after each layer"),
                               torch.stack(out.hidden_states)[:, 0, token], atol=1e-4)
    step(at, 6)
    [expected] = fill_mask.predict(lm.model, lm.tokenizer, t["input_ids"], [token], k=5)
    table = next(d.value for d in at.dataframe if "word" in d.value.columns)
    assert list(table["word"]) == expected.tokens
    np.testing.assert_allclose(table["probability"], expected.probs, atol=1e-6)
    assert charts_per_step(at) == [1, 1, 1, 1, 1, 2]


def test_token_layer_and_head_choices_follow():
    at = page("forward_pass", fp_layer=4, fp_head=7, fp_token=2, fp_step=STEPS[1])
    assert_clean(at)
    _, _, out = model_forward(DEFAULT)
    np.testing.assert_allclose(strip(at, "attention weights (the row"), out.attentions[3][0, 6, 2][None], atol=1e-6)
    np.testing.assert_allclose(strip(step(at, 3), "attention weights of 'film' in every head"),
                               out.attentions[3][0, :, 2], atol=1e-6)
    np.testing.assert_allclose(strip(step(at, 4), "layer 4's output at 'film'"), out.hidden_states[4][0, 2][None],
                               atol=1e-5)
    step(at, 2).selectbox(key="fp_head").set_value(2).run()
    np.testing.assert_allclose(strip(at, "attention weights (the row"), out.attentions[3][0, 1, 2][None], atol=1e-6)


def test_bad_text_gets_a_message_and_the_rest_still_draws():
    msgs = assert_bad_texts_handled(page("forward_pass"), "fp_text")
    assert any("cut off" in w for w in msgs["over_max_positions"]["warning"])
    at = page("forward_pass")
    at.text_area(key="fp_text").input("token " * 600).run()
    assert_clean(at)
    assert charts(at) == 1 and messages(at)["success"]
    assert strip(at, "embedding output, every token").shape == (512, 384)
    assert strip(step(at, 2), "attention weights (the row").shape == (1, 512)


@pytest.mark.parametrize("text", ["😀🎉 emoji only then words 👍🏽", "مرحبا بالعالم שלום עולם",
                                  "zero\u200bwidth\u200c and\u0000 control\x07 chars\u200d", "Z̵̡̢̛a̶̘l̷̪g̸̣o̵͎ téxt"])
def test_odd_unicode_is_followed_like_any_text(text):
    at = page("forward_pass", fp_text=text)
    assert_clean(at)
    assert charts(at) == 1 and messages(at)["success"] and not messages(at)["warning"]


def test_a_model_without_an_mlm_head_shows_every_layer_and_says_why_no_words():
    at = page("forward_pass", sources.PACKAGED, fp_step=STEPS[5])
    assert_clean(at)
    info = " ".join(messages(at)["info"])
    assert "has no MLM head" in info and "cls\\.predictions" in info and "MiniLM-MLM" in info
    assert charts(at) == 0 and messages(at)["success"]
    assert not [d for d in at.dataframe if "word" in d.value.columns]
    assert charts_per_step(at) == [1, 1, 1, 1, 1, 0]
    _, _, out = model_forward(DEFAULT, sources.PACKAGED)
    np.testing.assert_allclose(strip(step(at, 2), "attention weights (the row"), out.attentions[0][0, 0, 5][None],
                               atol=1e-6)
    step(at, 6).button(key="fp_switch").click().run()  # one click to the model that has a head
    assert_clean(at)
    assert at.session_state["model_source"] == sources.PACKAGED_MLM and charts(at) == 2


def test_a_pre_layer_norm_model_gets_its_own_layer_norm_placement(tmp_path):
    folder = save_tiny_bert(tmp_path / "preln", BertForPreTraining, tokenizer="full", pre_layer_norm=True,
                            max_position_embeddings=128)
    at = page("forward_pass", ModelSource("local", str(folder), "tiny pre-LN"), fp_step=STEPS[1])
    assert_clean(at)
    assert messages(at)["success"]
    assert any("pre-LN" in m.value for m in at.markdown)
    strip(at, "LN(x): what attention reads")
    strip(step(at, 4), "LN(h): what the feed-forward reads")
    with pytest.raises(AssertionError):
        strip(step(at, 3), "after LayerNorm: h")


def test_a_junk_link_falls_back_to_a_working_view():
    at = AppTest.from_file(str(PAGES / "forward_pass.py"), default_timeout=TIMEOUT)
    for k, v in {"fp_token": "9999", "fp_layer": "0", "fp_head": "abc", "fp_text": DEFAULT}.items():
        at.query_params[k] = v
    at.run()
    assert_clean(at)
    assert charts(at) == 1
    assert at.selectbox(key="fp_token").value == 5
