"""AppTest of the Query-key map page: defaults draw one head's normalised queries and keys and a sentence's
attention equal to the model's; colourings; every head of a layer; bad input gets a message."""

from __future__ import annotations

import numpy as np
import torch

from bertcore.loading import sources

from .conftest import array, assert_clean, chart_specs, messages, page


def test_defaults_and_the_sentence_attention_is_the_models():
    at = page("query_key", qk_layer=2, qk_head=4)
    assert_clean(at)
    specs = chart_specs(at)
    assert len(specs) == 2  # the map and the picked sentence's attention
    assert [t["name"] for t in specs[0]["data"]] == ["queries", "keys"]
    lm = sources.load(sources.DEFAULT)
    text = at.text_area(key="qk_text").value.splitlines()[0]
    enc = lm.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        att = lm.encoder(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"],
                         output_attentions=True).attentions[1][0, 3].numpy()
    np.testing.assert_allclose(array(specs[1]["data"][0]["z"]), att, atol=1e-5)
    for colour in ("position", "pos"):
        at.radio(key="qk_colour").set_value(colour).run()
        assert_clean(at)
    at.toggle(key="qk_all").set_value(True).run()
    assert_clean(at)
    assert len(chart_specs(at)) == 3


def test_bad_input():
    at = page("query_key", qk_text="   \n ")
    assert_clean(at)
    assert any("empty" in w for w in messages(at)["warning"])
    at.text_area(key="qk_text").input("😀🎉\nمرحبا بالعالم\n<script>alert(1)</script>").run()
    assert_clean(at)
    assert not [w for w in messages(at)["warning"] if "cut" in w or "first" in w]
    at.text_area(key="qk_text").input("A short line.\n" + "word " * 300 + "\n" + "More.\n" * 45).run()
    assert_clean(at)  # line 2 is cut to 128 tokens, lines past the 40th left out: both said
    said = " ".join(messages(at)["warning"])
    assert "Line 2 was cut to 128 tokens" in said and "first 40 of your 47 lines" in said, said
    at.radio(key="qk_method").set_value("tsne").run()
    assert_clean(at)


def test_a_changed_sentence_list_is_recomputed():
    """The map is cached per (model, sentences, layer, head, projection): new sentences give the new attention."""
    at = page("query_key", qk_layer=2, qk_head=4)
    assert_clean(at)
    at.text_area(key="qk_text").input("Bees make honey from the nectar of flowers.\nA dog barked.").run()
    assert_clean(at)
    lm = sources.load(sources.DEFAULT)
    enc = lm.tokenizer("Bees make honey from the nectar of flowers.", return_tensors="pt")
    with torch.no_grad():
        att = lm.encoder(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"],
                         output_attentions=True).attentions[1][0, 3].numpy()
    np.testing.assert_allclose(array(chart_specs(at)[1]["data"][0]["z"]), att, atol=1e-5)
