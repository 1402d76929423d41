"""Shareable views (explorer.server.share): a link's query string reopens the same model, text and controls; bad or
stale parameters fall back to the defaults with a notice, never an exception; the URL follows the widgets."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from bertcore.loading import sources

from .conftest import APP, PAGES, TIMEOUT, assert_clean, messages


def _page(name: str, **params) -> AppTest:
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def _qp(at) -> dict:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}


def test_a_link_reopens_the_masking_view_and_follows_the_widgets():
    at = _page("masking", msk_text="Paris is the [MASK] of France.", msk_rate="0.3", msk_k="7", msk_seed="5")
    assert_clean(at)
    assert at.text_area(key="msk_text").value == "Paris is the [MASK] of France."
    assert at.slider(key="msk_rate").value == 0.3 and at.slider(key="msk_k").value == 7
    assert at.session_state["msk_seed"] == 5
    at.text_area(key="msk_text").input("The cat sat on the [MASK].").run()
    assert _qp(at)["msk_text"] == "The cat sat on the [MASK]." and _qp(at)["msk_rate"] == "0.3"


def test_bad_parameters_fall_back_with_a_notice():
    at = _page("masking", msk_rate="lots", msk_k="99", msk_wwm="maybe", msk_text="ok text")
    assert_clean(at)
    notice = " ".join(messages(at)["info"])
    assert "could not be used" in notice and "msk_rate" in notice and "msk_k" in notice and "msk_wwm" in notice
    assert at.slider(key="msk_rate").value == 0.15 and at.slider(key="msk_k").value == 5
    assert at.text_area(key="msk_text").value == "ok text"  # the good parameter still applies
    at = _page("attention", att_layer="300", att_head="-1")  # out of range: clamped or refused, never a crash
    assert_clean(at)


def test_the_model_in_the_link(tmp_path):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = "packaged:"
    at.run()
    assert_clean(at)
    assert at.session_state["model_source"] == sources.PACKAGED
    assert _qp(at)["model"] == "packaged:"
    for bad in ("local:" + str(tmp_path / "nothing-here"), "nonsense", "packaged:zzz"):
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.query_params["model"] = bad
        at.run()
        assert_clean(at)
        assert "model_source" not in at.session_state or at.session_state["model_source"] == sources.DEFAULT
        assert any("model could not be" in i for i in messages(at)["info"]), bad
        assert "model" not in _qp(at)  # the default model: a clean URL


def test_a_link_sets_the_findings_evaluation_set():
    at = _page("findings", find_segments="20")
    assert_clean(at)
    assert at.number_input(key="find_segments").value == 20
    assert any(c.startswith("20 segments") for c in (str(x.value) for x in at.caption))
    assert _qp(at)["find_segments"] == "20"
