"""AppTest of the Attribution page: integrated gradients of the packaged MiniLM (similarity), a run's
classifier and a fill-mask model, with a completeness gap under 5%; bad text gives a message."""

from __future__ import annotations

from bertcore.loading import sources

from .conftest import COMPARE_LABELS, assert_bad_texts_answered, assert_clean, chart_specs, messages, page


def gap(at) -> float:
    metric = next(m for m in at.metric if m.label == "Completeness gap")
    return float(metric.delta.split("%")[0]) / 100


def test_attribution_defaults_minilm_similarity():
    at = page("attribution", sources.PACKAGED)
    assert_clean(at)
    assert any("no classification or MLM head" in i and "Train page" in i for i in messages(at)["info"])
    assert gap(at) <= 0.05
    assert len(chart_specs(at)) == 1
    at.toggle(key="attr_words").set_value(True).run()
    assert_clean(at)
    assert "word" in at.dataframe[0].value.columns
    at.button(key="attr_switch").click().run()  # to the packaged MiniLM-MLM, or a message if it is not shipped
    assert_clean(at)
    state = at.session_state
    assert ("model_source" in state and state["model_source"].ref == "mlm") or "model_error" in state


def test_attribution_run_classifier(run_source):
    at = page("attribution", source=run_source)
    assert_clean(at)
    assert at.radio(key="attr_kind").value == "classification"
    assert gap(at) <= 0.05
    target = at.metric[0].label
    assert target.startswith("f(input) = P(class = ") and any(n in target for n in COMPARE_LABELS.values())
    other = next(i for i, n in COMPARE_LABELS.items() if n not in target)
    at.selectbox(key="attr_class").set_value(other).run()
    assert_clean(at)
    assert at.metric[0].label == f"f(input) = P(class = {COMPARE_LABELS[other]})"
    assert_bad_texts_answered(at, "attr_cls_text")
    at.radio(key="attr_kind").set_value("similarity").run()
    assert_clean(at)


def test_attribution_fill_mask(models):
    at = page("attribution", source=models["mlm"])
    assert_clean(at)
    assert at.radio(key="attr_kind").value == "fill_mask"
    assert gap(at) <= 0.05
    first = at.metric[0].label
    at.selectbox(key="attr_guess").select_index(1).run()
    assert_clean(at)
    assert at.metric[0].label != first
    at.text_area(key="attr_mlm_text").input("No mask in this text.").run()
    assert_clean(at)
    assert any("Type [MASK]" in i for i in messages(at)["info"])
    at.text_area(key="attr_mlm_text").input("The [mask] sat on the [MASK].").run()
    assert_clean(at)
    assert len(at.selectbox(key="attr_mask_pos").options) == 2
    for text in ("", "[MASK] " * 600, "😀 [MASK] 👍🏽"):
        at.text_area(key="attr_mlm_text").input(text).run()
        assert_clean(at)
        assert not messages(at)["error"], (text[:20], messages(at))


def test_attribution_similarity_bad_text():
    at = page("attribution", sources.PACKAGED)
    # 512-token IG is the benchmark's job, not a unit test's
    assert_bad_texts_answered(at, "attr_sim_a", skip=("20k_chars", "over_max_positions"))
