"""The app as a whole (app.py): the sidebar navigation reaches every page file once, in a named section;
pages open through it with their defaults; inputs and settings survive a page switch; the default pages
never touch the network."""

from __future__ import annotations

import ast

import pytest
from streamlit.testing.v1 import AppTest

from ..conftest import ROOT
from .conftest import APP, TIMEOUT, assert_clean, charts, check, messages, open_page, page


def registered() -> dict[str, list[str]]:
    """Section -> page file stems, read from app.py's PAGES dict (page("<stem>", ...) calls)."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    pages = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "PAGES")
    return {k.value: [c.args[0].value for c in v.elts] for k, v in zip(pages.keys, pages.values)}


def test_every_page_file_is_in_exactly_one_section():
    stems = [s for section in registered().values() for s in section]
    files = sorted(p.stem for p in (ROOT / "explorer" / "app_pages").glob("*.py") if p.stem != "__init__")
    assert sorted(stems) == files
    assert len(stems) == len(set(stems))
    assert list(registered())[0] == "Start" and registered()["Start"] == ["tour", "overview"]


def test_app_opens_on_the_overview_with_the_model_picker():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert at.title[0].value == "BERT Explorer"  # the Overview page is the default
    assert at.sidebar.radio(key="model_kind").value == "packaged"


@pytest.mark.parametrize("name", ["masking", "embeddings", "positions", "anatomy"])
def test_page_runs_with_defaults(name):
    at = page(name)
    assert_clean(at)
    assert not messages(at)["error"]


def test_pages_open_through_the_app():
    """Reached through app.py's navigation, pages open with their title and no exception; the sidebar and
    the Compare page each have their own model picker (no shared widget keys)."""
    at = open_page("overview")
    titles = {}
    for name in ("masking", "embeddings", "positions", "anatomy", "compare", "attribution"):
        at.switch_page(f"explorer/app_pages/{name}.py").run()
        assert_clean(at)
        assert at.title and at.title[0].value, name
        titles[name] = at.title[0].value
    assert (titles["compare"], titles["attribution"]) == ("Compare two models", "Attribution")
    at.switch_page("explorer/app_pages/compare.py").run()
    assert at.sidebar.radio(key="model_kind").value == "packaged" and at.radio(key="cmp_b_kind").value == "packaged"


def test_settings_survive_a_page_switch():
    at = open_page("masking")
    at.slider(key="msk_rate").set_value(0.5).run()
    at.switch_page("explorer/app_pages/positions.py").run()
    at.number_input(key="pos_end").set_value(40).run()
    at.switch_page("explorer/app_pages/masking.py").run()
    assert not at.exception
    assert at.slider(key="msk_rate").value == 0.5
    at.switch_page("explorer/app_pages/positions.py").run()
    assert at.number_input(key="pos_end").value == 40


def test_inputs_survive_a_page_switch():
    at = open_page("word_senses")
    at.text_input(key="ws_target").set_value("rabbit").run()
    at.switch_page("explorer/app_pages/attention.py").run()
    at.text_area(key="att_text").set_value("A different sentence.").run()
    at.switch_page("explorer/app_pages/word_senses.py").run()
    assert at.text_input(key="ws_target").value == "rabbit"
    at.switch_page("explorer/app_pages/attention.py").run()
    assert at.text_area(key="att_text").value == "A different sentence."
    assert not at.exception


def test_default_pages_never_touch_the_network(monkeypatch):
    """With the defaults (packaged model), loading and every page run without one connection attempt."""
    import socket

    import streamlit as st

    from explorer.views import core as views_core

    attempts = []

    def refuse(self, address, *args, **kwargs):
        attempts.append(address)
        raise OSError(f"network access attempted: {address}")

    import huggingface_hub.constants

    # behave as an online machine would (conftest sets the offline flags) ...
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    # ... but refuse and record any connection
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: refuse(None, host))
    st.cache_resource.clear()  # load the model again, under the guard
    views_core.clear(models=True)
    st.cache_data.clear()
    at = open_page("overview")
    check(at, None)
    for name in ("tokenization", "attention", "word_senses"):
        at.switch_page(f"explorer/app_pages/{name}.py").run()
        check(at, None)
        assert charts(at) >= 1
    assert attempts == []
    # the guard does catch a download: a hub id tries to connect (and fails with a clear message)
    from bertcore.loading import sources

    with pytest.raises(sources.SourceError, match="cannot get"):
        sources.load(sources.ModelSource("hub", "bert-base-uncased"))
    assert attempts
