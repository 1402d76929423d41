"""AppTest of the Tokenization page's vocabulary comparison: a model with a corpus WordPiece vocabulary
is shown beside bert-base-uncased's; the packaged model (bert-base-uncased's vocabulary) is not."""

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertcore import BertConfig, BertForPreTraining
from bertcore.tokenizer import save_tokenizer
from bertcore.wordpiece import train_wordpiece

APP = str(Path(__file__).resolve().parents[2] / "app.py")
FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny_corpus.txt"
TEXT = "The village council met on Monday about hyperparameterization."


@pytest.fixture(scope="module")
def corpus_vocab_run(tmp_path_factory):
    """A run directory with one checkpoint of a tiny BERT whose tokenizer was trained on the tiny corpus."""
    texts = [b for b in FIXTURE.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    tok = train_wordpiece(texts, 300)
    root = tmp_path_factory.mktemp("runs")
    folder = root / "corpus-vocab" / "checkpoints" / "step-000010"
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, pad_token_id=tok.pad_token_id)
    BertForPreTraining(cfg).save_pretrained(folder)
    save_tokenizer(tok, folder)
    torch.save({"step": 10}, folder / "trainer_state.pt")  # a complete checkpoint (bertcore.runs.RunDir)
    return root, tok


def open_tokenization() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("explorer/app_pages/tokenization.py").run()
    assert not at.exception, at.exception
    return at


def test_packaged_model_has_bert_base_uncased_vocab():
    at = open_tokenization()
    at.text_area(key="tok_text").set_value(TEXT).run()
    assert not at.exception and not at.error
    assert any("uses bert-base-uncased's vocabulary (30,522" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 1
    assert not any("reference_pieces" in d.value.columns for d in at.dataframe)


def test_corpus_vocab_shown_beside_bert_base_uncased(corpus_vocab_run, monkeypatch):
    root, tok = corpus_vocab_run
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(root))
    at = open_tokenization()
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


def test_train_page_offers_the_corpus_vocabulary_and_corpora(tmp_path, monkeypatch):
    """From-scratch pretraining: 'WordPiece trained on the corpus' and its size reach the launch as
    tokenizer='corpus' and vocab_size; the named corpora are offered."""
    from bertcore import runs

    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path / "runs"))
    launched = []

    def fake_launch(task, args, **kwargs):
        launched.append((task, args))
        raise runs.RunError("not launched in this test")

    monkeypatch.setattr(runs, "launch", fake_launch)
    at = AppTest.from_file(str(Path(APP).parent / "explorer" / "app_pages" / "train.py"), default_timeout=120)
    at.session_state["train_recipe"] = "custom"
    at.run()
    assert not at.exception, at.exception
    options = " | ".join(at.selectbox(key="train_pt_data").options)  # their labels
    assert all(w in options for w in ("State of the Union", "Wikipedia", "BBC News + State of the Union"))
    at.selectbox(key="train_pt_data").set_value("sotu").run()
    at.selectbox(key="train_pretrain_vocab").set_value("corpus").run()
    at.number_input(key="train_pretrain_vocab_size").set_value(4000).run()
    at.button(key="train_start").click().run()
    assert not at.exception, at.exception
    [(task, args)] = launched
    assert task == "pretrain" and args["corpus"] == "sotu"
    assert args["tokenizer"] == "corpus" and args["vocab_size"] == 4000
    at.selectbox(key="train_pretrain_vocab").set_value("packaged").run()
    at.button(key="train_start").click().run()
    assert launched[-1][1]["tokenizer"] == "packaged" and "vocab_size" not in launched[-1][1]
