"""AppTest of the Overview, Tokenization, Attention and Word senses pages (through app.py and
st.navigation): defaults render, and bad inputs give a message in the page, never an exception."""

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")

TIMEOUT = 120

BAD_TEXTS = {
    "empty": "",
    "whitespace": "   \n\t  \n ",
    "20k_chars": ("lorem ipsum dolor sit amet " * 800)[:20_000],
    "over_max_positions": "token " * 700,
    "emoji": "I love pizza 🍕🍕 😀👍🏽 and 🇫🇷!",
    "rtl": "مرحبا بالعالم، שלום עולם",
    "zero_width_and_control": "zero\u200bwidth\u200djoin\u200e text\x00 with \x07bell \x1b[31m escape",
    "only_invisible": "\u200b\u200d\x00\x07",
}
# what the page must say for each (None: just render without error)
EXPECTED = {
    "empty": "warning",
    "whitespace": "warning",
    "20k_chars": "warning",
    "over_max_positions": "warning",
    "emoji": None,
    "rtl": None,
    "zero_width_and_control": None,
    "only_invisible": "warning",
}


def messages(at: AppTest) -> dict[str, list[str]]:
    return {kind: [e.value for e in getattr(at, kind)] for kind in ("warning", "error", "info")}


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    if page != "overview":
        at.switch_page(f"explorer/app_pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def tok_app():
    return open_page("tokenization")


@pytest.fixture(scope="module")
def att_app():
    return open_page("attention")


@pytest.fixture(scope="module")
def ws_app():
    return open_page("word_senses")


def check(at: AppTest, expected: str | None) -> dict[str, list[str]]:
    assert not at.exception, [e.value for e in at.exception]
    msgs = messages(at)
    assert not msgs["error"], msgs["error"]
    if expected is not None:
        assert msgs[expected], f"expected a {expected} message, got {msgs}"
    return msgs


# ----------------------------------------------------------------------------- overview & sidebar
def test_overview_shows_model_card():
    at = open_page("overview")
    check(at, None)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Layers"] == "6" and metrics["Heads per layer"] == "12"
    assert metrics["Vocabulary"] == "30,522" and metrics["Max positions"] == "512"
    assert metrics["Parameters"].endswith("M")
    assert any("all-MiniLM-L6-v2" in t.value for t in at.text)


def test_sidebar_hub_id_offline_gives_clear_error_and_keeps_packaged_model():
    at = open_page("overview")
    at.sidebar.radio(key="model_kind").set_value("hub").run()
    at.sidebar.text_input(key="model_hub_id").set_value("bert-base-uncased").run()
    at.sidebar.button(key="model_hub_use").click().run()
    assert not at.exception
    errors = [e.value for e in at.sidebar.error]
    assert len(errors) == 1 and "offline" in errors[0] and "local" in errors[0]
    assert {m.label: m.value for m in at.metric}["Layers"] == "6"  # still the packaged model
    # a missing local folder: the same kind of message
    at.sidebar.radio(key="model_kind").set_value("local").run()
    assert not at.sidebar.error  # switching the source clears the old message
    at.sidebar.text_input(key="model_local_path").set_value("/no/such/folder").run()
    at.sidebar.button(key="model_local_use").click().run()
    assert "no folder" in at.sidebar.error[0].value
    at.sidebar.radio(key="model_kind").set_value("packaged").run()
    assert not at.sidebar.error and not at.exception


def test_sidebar_broken_local_folder_gives_clear_error(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "model.safetensors").write_bytes(b"garbage")
    at = open_page("overview")
    at.sidebar.radio(key="model_kind").set_value("local").run()
    at.sidebar.text_input(key="model_local_path").set_value(str(tmp_path)).run()
    at.sidebar.button(key="model_local_use").click().run()
    assert not at.exception
    assert "cannot read weights" in at.sidebar.error[0].value
    assert {m.label: m.value for m in at.metric}["Layers"] == "6"


def test_sidebar_lists_run_checkpoints_or_says_there_are_none(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path))
    at = open_page("overview")
    at.sidebar.radio(key="model_kind").set_value("run").run()
    assert not at.exception
    assert any("No checkpoint" in i.value for i in at.sidebar.info)


# ----------------------------------------------------------------------------- tokenization
def test_tokenization_default(tok_app):
    at = tok_app
    at.text_area(key="tok_text").set_value("Unbelievably, the Café's naïve chatbot tokenized hyperparameterization!")
    at.run()
    check(at, None)
    assert charts(at) == 1
    words = at.dataframe[0].value
    assert "cafe" in set(words["normalized"]) and "Café" in set(words["typed"])
    pieces = [p.replace("\u200e", "") for p in words["pieces"]]  # left-to-right marks
    assert any(p.startswith("hyper ##") for p in pieces)  # an unknown word split into pieces
    tokens = at.dataframe[1].value
    assert tokens["token"].iloc[0] == "[CLS]" and tokens["token"].iloc[-1] == "[SEP]"
    assert set(tokens["attention mask"]) == {1} and set(tokens["segment id"]) == {0}


@pytest.mark.parametrize("name", BAD_TEXTS)
def test_tokenization_bad_inputs(tok_app, name):
    at = tok_app
    at.text_area(key="tok_text").set_value(BAD_TEXTS[name]).run()
    msgs = check(at, EXPECTED[name])
    if name in ("20k_chars", "over_max_positions"):
        assert any("cut off" in w for w in msgs["warning"])
        assert len(at.dataframe[1].value) == 512
    if name == "emoji":
        assert any("[UNK]" in i for i in msgs["info"])
    if name == "zero_width_and_control":
        assert any("⟨U+200B⟩" in t for t in at.dataframe[0].value["typed"])


def test_tokenization_pair_shows_segments(tok_app):
    at = tok_app
    at.text_area(key="tok_text").set_value("The man went to the store.").run()
    at.toggle(key="tok_pair_on").set_value(True).run()
    at.text_area(key="tok_text_b").set_value("He bought milk.").run()
    check(at, None)
    tokens = at.dataframe[1].value
    assert list(tokens["token"]).count("[SEP]") == 2 and set(tokens["segment id"]) == {0, 1}
    at.text_area(key="tok_text_b").set_value("   ").run()
    msgs = check(at, "warning")
    assert any("second sentence" in w for w in msgs["warning"])
    at.toggle(key="tok_pair_on").set_value(False).run()


# ----------------------------------------------------------------------------- attention
ATT_TABS = ["One head", "All heads of a layer", "All layers × heads", "Head view", "Head statistics",
            "Rollout and flow", "Neuron view"]


def each_attention_tab(at: AppTest, expected: str | None = None) -> None:
    """Open every (lazy) tab in turn: each must show its one chart, with no exception."""
    for label in ATT_TABS:
        at.session_state["att_tab"] = label
        at.run()
        check(at, expected)
        assert charts(at) == 1, label
    at.session_state["att_tab"] = ATT_TABS[0]
    at.run()


def test_attention_default(att_app):
    at = att_app
    check(at, None)
    assert [t.label for t in at.tabs] == ATT_TABS
    assert charts(at) == 1  # tabs are lazy: only the open one is drawn
    each_attention_tab(at)
    at.session_state["att_tab"] = "Head statistics"
    at.run()
    stats = at.dataframe[0].value
    assert len(stats) == 12 and "Entropy (bits)" in stats.columns
    assert stats["Share to [CLS]"].between(0, 1).all()
    at.session_state["att_tab"] = ATT_TABS[0]
    at.run()


def test_attention_controls(att_app):
    at = att_app
    at.slider(key="att_layer").set_value(6)
    at.slider(key="att_head").set_value(12)
    at.toggle(key="att_hide").set_value(True)
    at.run()
    check(at, None)
    assert any("removed" in c.value for c in at.caption)
    at.session_state["att_tab"] = "Head view"
    at.run()
    at.selectbox(key="att_query").set_value(3).run()
    check(at, None)
    at.session_state["att_tab"] = "Head statistics"
    at.run()
    at.radio(key="att_stat").set_value("to_sep").run()
    check(at, None)
    at.toggle(key="att_hide").set_value(False)
    at.session_state["att_tab"] = ATT_TABS[0]
    at.run()


@pytest.mark.parametrize("name", BAD_TEXTS)
def test_attention_bad_inputs(att_app, name):
    at = att_app
    at.text_area(key="att_text").set_value(BAD_TEXTS[name]).run()
    msgs = check(at, EXPECTED[name])
    if EXPECTED[name] is None or name in ("20k_chars", "over_max_positions"):
        assert charts(at) == 1
    if name in ("20k_chars", "over_max_positions"):
        assert any("cut" in w for w in msgs["warning"])
    if name in ("over_max_positions", "rtl"):  # every view of 512 tokens / another script
        each_attention_tab(at, EXPECTED[name])


def test_attention_sentence_pair_and_shorter_text_after_long(att_app):
    at = att_app
    at.text_area(key="att_text").set_value("token " * 700).run()
    at.session_state["att_tab"] = "Head view"
    at.run()
    at.selectbox(key="att_query").set_value(400).run()  # a position that a short text does not have
    at.toggle(key="att_pair_on").set_value(True).run()
    at.text_area(key="att_text").set_value("The man went to the store.")
    at.text_area(key="att_text_b").set_value("He bought a gallon of milk.")
    at.run()
    check(at, None)
    assert charts(at) == 1
    assert at.selectbox(key="att_query").value < 20
    each_attention_tab(at)
    at.text_area(key="att_text_b").set_value("").run()
    check(at, "warning")
    at.toggle(key="att_pair_on").set_value(False).run()


# ----------------------------------------------------------------------------- word senses
def test_word_senses_default_python(ws_app):
    at = ws_app
    check(at, None)
    assert at.text_input(key="ws_target").value == "python"
    assert charts(at) == 3  # similarity matrix, PCA, similarity across layers
    assert not messages(at)["warning"]


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


def test_word_senses_bank_preset(ws_app):
    at = ws_app
    at.selectbox(key="ws_preset").set_value("bank: river vs money").run()
    check(at, None)
    assert at.text_input(key="ws_target").value == "bank"
    assert "river |" in at.text_area(key="ws_sentences").value
    assert charts(at) == 3
    at.slider(key="ws_layer").set_value(0).run()
    check(at, None)


PY_SENTENCES = ("snake | The python swallowed the rabbit whole.\nsnake | A python coiled around the branch.\n"
                "language | I wrote the script in Python last night.\nlanguage | Python code is easy to read.")
WS_BAD = {
    "empty_target": ("", None, "warning"),
    "whitespace_target": ("   ", None, "warning"),
    "target_not_in_any_sentence": ("giraffe", None, "warning"),
    "target_markup_is_escaped": ("**bold**", None, "warning"),
    "emoji_target": ("🍕", "a | I ate 🍕 today.\nb | Cold 🍕 for breakfast.", None),
    "rtl_target": ("שלום", "a | שלום עולם\nb | אמרתי שלום לכולם", None),
    "zero_width_target": ("py\u200bthon", None, None),
    "20k_chars_target": (("python " * 3000)[:20_000], None, "warning"),
    "multi_word_target": ("python code", None, "info"),  # found once only: a phrase works, needs 2 hits
    "empty_sentences": ("python", "", "warning"),
    "whitespace_sentences": ("python", "  \n\t\n  ", "warning"),
    "empty_sentence_after_label": ("python", "snake | The python slept.\nsnake |   \nlang | Python is fun.", "warning"),
    "20k_chars_sentence": ("python", "snake | python " + "lorem ipsum " * 1700 + "\nlang | I code in Python.", "info"),
    "target_beyond_max_positions": ("python", "x | " + "word " * 700 + "python\ny | python here\nz | python there",
                                    "warning"),
    "control_chars": ("python", "a | The \x00python\x07 slept.\nb | Python\u200b is \x1b fun.", None),
    "only_one_occurrence": ("python", "snake | The python slept.\nsnake | No snake here.", "info"),
    "too_many_lines": ("python", "\n".join(f"s | python number {i}" for i in range(30)), "warning"),
}


@pytest.mark.parametrize("name", WS_BAD)
def test_word_senses_bad_inputs(ws_app, name):
    target, sentences, expected = WS_BAD[name]
    at = ws_app
    at.text_input(key="ws_target").set_value(target)
    at.text_area(key="ws_sentences").set_value(PY_SENTENCES if sentences is None else sentences)
    at.run()
    msgs = check(at, expected)
    if name == "target_not_in_any_sentence":
        assert any("not in" in w for w in msgs["warning"]) and charts(at) == 0
    if name == "target_markup_is_escaped":
        assert any(r"\*\*bold\*\*" in w for w in msgs["warning"])
    if name in ("emoji_target", "rtl_target", "zero_width_target", "control_chars"):
        assert charts(at) == 3
    if name == "target_beyond_max_positions":
        assert any("line(s) 1" in w for w in msgs["warning"]) and charts(at) == 3
    if name == "too_many_lines":
        assert any("only the first 24" in w for w in msgs["warning"])
        at.slider(key="ws_layer").set_value(0).run()  # identical vectors before any attention layer
        assert any("same vector" in i for i in messages(at)["info"]) and not at.exception
        at.slider(key="ws_layer").set_value(6).run()
    if name == "20k_chars_sentence":
        assert any("cut" in i for i in msgs["info"]) and charts(at) == 3


# ----------------------------------------------------------------------------- another model
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, packaged):
    """A run directory holding one checkpoint of a tiny 2-layer, 2-head BERT with 64 positions."""
    from bertcore import BertConfig, BertForPreTraining

    root = tmp_path_factory.mktemp("runs")
    folder = root / "tiny-run" / "checkpoints" / "step-000010"
    cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=64)
    BertForPreTraining(cfg).save_pretrained(folder)
    packaged.tokenizer.save_pretrained(str(folder))
    torch.save({"step": 10}, folder / "trainer_state.pt")  # a complete checkpoint (bertcore.runs.RunDir)
    return root


def test_pages_follow_a_run_checkpoint_with_other_sizes(tiny_run, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tiny_run))
    at = open_page("attention")
    at.slider(key="att_layer").set_value(6)
    at.slider(key="att_head").set_value(12).run()
    at.sidebar.radio(key="model_kind").set_value("run").run()
    assert "tiny-run" in at.sidebar.selectbox(key="model_run_ref").format_func(
        at.sidebar.selectbox(key="model_run_ref").value)
    at.sidebar.button(key="model_run_use").click().run()
    check(at, None)
    assert at.slider(key="att_layer").value == 2 and at.slider(key="att_head").value == 2  # clamped to the new model
    each_attention_tab(at)
    at.text_area(key="att_text").set_value("token " * 100).run()
    msgs = check(at, "warning")
    assert any("64 positions" in w for w in msgs["warning"])
    at.switch_page("explorer/app_pages/overview.py").run()
    check(at, None)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Layers"] == "2" and metrics["Head on top"] == "pretraining"
    at.switch_page("explorer/app_pages/word_senses.py").run()
    check(at, None)
    assert charts(at) == 3 and at.slider(key="ws_layer").max == 2
    at.switch_page("explorer/app_pages/tokenization.py").run()
    check(at, None)


# ----------------------------------------------------------------------------- offline
def test_default_pages_never_touch_the_network(monkeypatch):
    """With the defaults (packaged model), loading and every page run without one connection attempt."""
    import socket

    import streamlit as st

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
    st.cache_data.clear()
    at = open_page("overview")
    check(at, None)
    for page in ("tokenization", "attention", "word_senses"):
        at.switch_page(f"explorer/app_pages/{page}.py").run()
        check(at, None)
        assert charts(at) >= 1
    assert attempts == []
    # the guard does catch a download: a hub id tries to connect (and fails with a clear message)
    from bertcore import sources

    with pytest.raises(sources.SourceError, match="cannot get"):
        sources.load(sources.ModelSource("hub", "bert-base-uncased"))
    assert attempts
