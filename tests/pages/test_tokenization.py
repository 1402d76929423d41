"""AppTest of the Tokenization page: words, pieces and tokens of a text or a pair; bad inputs give a message;
a model with a corpus WordPiece vocabulary is shown beside bert-base-uncased's (the packaged model,
which has bert-base-uncased's vocabulary, is not)."""

import pytest

from bertcore import BertForPreTraining
from bertcore.tokenization.tokenizer import save_tokenizer
from bertcore.tokenization.wordpiece import train_wordpiece

from ..conftest import TINY_CORPUS, mark_complete, save_tiny_bert
from .conftest import BAD_TEXTS, charts, check, open_page

TEXT = "The village council met on Monday about hyperparameterization."
# what the page must say for each bad text (None: just render without error)
EXPECTED = {"empty": "warning", "whitespace": "warning", "20k_chars": "warning", "over_max_positions": "warning",
            "only_zero_width": "warning"}


@pytest.fixture(scope="module")
def tok_app():
    return open_page("tokenization")


def test_tokenization_default():
    at = open_page("tokenization")  # its own page: the module's is changed by the other tests, in any order
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
    msgs = check(at, EXPECTED.get(name))
    if name in ("20k_chars", "over_max_positions"):
        assert any("cut off" in w for w in msgs["warning"])
        assert len(at.dataframe[1].value) == 512
    if name == "emoji":
        assert any("[UNK]" in i for i in msgs["info"])
    if name == "zero_width_control":
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


@pytest.fixture(scope="module")
def corpus_vocab_run(tmp_path_factory):
    """A run directory with one checkpoint of a tiny BERT whose tokenizer was trained on the tiny corpus."""
    texts = [b for b in TINY_CORPUS.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    tok = train_wordpiece(texts, 300)
    root = tmp_path_factory.mktemp("runs")
    folder = save_tiny_bert(root / "corpus-vocab" / "checkpoints" / "step-000010", BertForPreTraining, tokenizer=None,
                            vocab_size=len(tok), num_attention_heads=2, pad_token_id=tok.pad_token_id)
    save_tokenizer(tok, folder)
    mark_complete(folder, 10)
    return root, tok


def test_packaged_model_has_bert_base_uncased_vocab():
    at = open_page("tokenization")
    at.text_area(key="tok_text").set_value(TEXT).run()
    assert not at.exception and not at.error
    assert any("uses bert-base-uncased's vocabulary (30,522" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 1
    assert not any("reference_pieces" in d.value.columns for d in at.dataframe)


def test_corpus_vocab_shown_beside_bert_base_uncased(corpus_vocab_run, monkeypatch):
    root, tok = corpus_vocab_run
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(root))
    at = open_page("tokenization")
    at.sidebar.radio(key="model_kind").set_value("run").run()
    at.sidebar.button(key="model_run_use").click().run()
    at.text_area(key="tok_text").set_value(TEXT).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("is not bert-base-uncased's" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 3  # the model's grid, then the two side by side
    metrics = {m.label: int(m.value) for m in at.metric if m.label.startswith("Pieces under")}
    ours = len(tok.tokenize(TEXT))
    assert metrics == {"Pieces under this model": ours, "Pieces under bert-base-uncased": 12}
    assert ours > 12  # a 300-token vocabulary cuts words into more pieces
    table = next(d.value for d in at.dataframe if "reference_pieces" in d.value.columns)
    row = table[table["text"] == "hyperparameterization"].iloc[0]
    assert row["reference_pieces"] == "hyper ##para ##meter ##ization" and row["n_pieces"] > 4
    assert table["n_pieces"].sum() == ours and table["n_reference_pieces"].sum() == 12


def test_tokens_carry_spacys_part_of_speech_and_dependency(tok_app):
    """Each WordPiece cell shows its word's POS and dependency label (all pieces of a word the same); hover
    names the head word; off, the grid has no labels."""
    import json

    at = tok_app
    at.text_area(key="tok_text").set_value("The keys to the cabinet are unbelievably heavy.")
    at.run()
    check(at, None)
    cells = [str(c) for row in json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["text"] for c in row]
    labelled = {c.split("<br>")[0]: c.split("<i>")[1].split("</i>")[0] for c in cells if "<i>" in c}
    assert labelled["keys"] == "NOUN nsubj" and labelled["the"] == "DET det" and labelled["are"] == "AUX ROOT"
    assert labelled["un"] == labelled["##bel"] == "ADV advmod"  # every piece of 'unbelievably'
    hover = json.dumps(json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["customdata"])
    assert "nsubj of 'are'" in hover
    at.toggle(key="tok_syntax").set_value(False).run()
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert not any("<i>" in str(c) for row in spec["data"][0]["text"] for c in row)
    at.toggle(key="tok_syntax").set_value(True).run()
