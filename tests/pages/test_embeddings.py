"""AppTest of the Embeddings page: the sum check and its views; bad text gives a message, never a traceback."""

from __future__ import annotations

from .conftest import assert_bad_texts_handled, assert_clean, dataframes, messages, page


def test_bad_text_gets_a_message():
    assert_bad_texts_handled(page("embeddings", emb_pair_on=False), "emb_text")


def test_embeddings_check_and_views(packaged):
    at = page("embeddings")
    assert_clean(at)
    assert any(s.startswith("Yes") for s in messages(at)["success"])
    steps = [df for df in dataframes(at) if "step" in df.columns][0]
    assert list(steps["step"])[-1].startswith("output")
    at.multiselect(key="emb_parts").set_value([]).run()
    assert any("at least one part" in i for i in messages(at)["info"])
    at.slider(key="emb_first_dim").set_value(packaged.config.hidden_size - 1).run()
    assert_clean(at)
