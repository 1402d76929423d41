"""AppTest of the Overview page: the model card of the default model, and the one-click way to the other
packaged model."""

from .conftest import check, open_page


def test_overview_shows_model_card():
    """A fresh session gets MiniLM-MLM (BERT's two heads); the page says what each packaged model is."""
    at = open_page("overview")
    check(at, None)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Layers"] == "6" and metrics["Heads per layer"] == "12"
    assert metrics["Vocabulary"] == "30,522" and metrics["Max positions"] == "512"
    assert metrics["Parameters"].endswith("M") and metrics["Head on top"] == "pretraining"
    assert any("MiniLM-MLM" in t.value for t in at.text)
    assert not any("no masked-language-model head" in i.value for i in at.info)
    text = " ".join(m.value for m in at.markdown)
    assert "**MiniLM-MLM** (the default)" in text and "**all-MiniLM-L6-v2**" in text
    # the other packaged model is one click away in the sidebar
    at.selectbox(key="model_packaged").set_value("").run()
    check(at, None)
    assert any("all-MiniLM-L6-v2" in t.value for t in at.text)
    assert any("no masked-language-model head" in i.value for i in at.info)
