"""AppTest of the Overview page: the model card of the packaged model."""

from .conftest import check, open_page


def test_overview_shows_model_card():
    at = open_page("overview")
    check(at, None)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Layers"] == "6" and metrics["Heads per layer"] == "12"
    assert metrics["Vocabulary"] == "30,522" and metrics["Max positions"] == "512"
    assert metrics["Parameters"].endswith("M")
    assert any("all-MiniLM-L6-v2" in t.value for t in at.text)
