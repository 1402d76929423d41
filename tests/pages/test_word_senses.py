"""AppTest of the Word senses page: the python / bank presets, layers, and every bad target or sentence
list gives a message, never an exception; the page links to the Findings page."""

import pytest

from bertcore.loading.sources import PACKAGED

from .conftest import assert_clean, charts, check, messages, open_page, page, texts


@pytest.fixture(scope="module")
def ws_app():
    return open_page("word_senses")


def test_word_senses_default_python():
    at = open_page("word_senses")  # its own page: the module's is changed by the other tests, in any order
    check(at, None)
    assert at.text_input(key="ws_target").value == "python"
    assert charts(at) == 3  # similarity matrix, PCA, similarity across layers
    assert not messages(at)["warning"]


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
        assert any(i.startswith("Line 1 was cut to the model's") for i in msgs["info"]) and charts(at) == 3


def test_word_senses_page_links_to_the_findings_page():
    at = page("word_senses", PACKAGED)
    assert_clean(at)
    assert any("Findings" in t and "Ethayarajh" in t for t in texts(at.markdown) + texts(at.caption))
