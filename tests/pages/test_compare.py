"""AppTest of the Compare models and Attribution pages: defaults, two identical sources, a run
checkpoint, bad inputs; a message in the page, never an exception box; the numbers shown are bertcore's."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
import transformers
from streamlit.testing.v1 import AppTest

from bertcore import runs
from bertcore.analysis import compare
from bertcore.sources import ModelSource, list_run_sources, load, packaged_model_dir
from .test_masking import BAD_TEXTS, ROOT, array, assert_clean, chart_specs, messages, page

CMP_TABS = ["CKA by layer", "Layer × layer CKA", "Attention difference per head", "One head side by side"]
TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
        "intermediate_size": 64, "max_position_embeddings": 128, "initializer_range": 0.2}
LABELS = {0: "business", 1: "sport"}


def save(folder, model, vocab=None):
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(vocab or packaged_model_dir() / "vocab.txt", folder / "vocab.txt")
    model.eval().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Sources: ``base`` (tiny BertModel), ``mlm``, ``shallow`` (2 layers), ``small_vocab`` (another
    tokenizer), and ``runs``: a runs root whose fine-tuning run has a checkpoint = base with its
    last layer changed plus a 2-class classifier."""
    root = tmp_path_factory.mktemp("pages_cmp")
    torch.manual_seed(0)
    base = transformers.BertModel(transformers.BertConfig(**TINY))
    src = {"base": save(root / "base", base)}
    torch.manual_seed(1)
    src["mlm"] = save(root / "mlm", transformers.BertForMaskedLM(transformers.BertConfig(**TINY)))
    src["shallow"] = save(root / "shallow",
                          transformers.BertModel(transformers.BertConfig(**{**TINY, "num_hidden_layers": 2})))
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "."]
                               + [f"w{i}" for i in range(50)]))
    src["small_vocab"] = save(root / "small_vocab", transformers.BertModel(transformers.BertConfig(**TINY)), vocab)
    cfg = transformers.BertConfig(**TINY, id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    torch.manual_seed(2)
    tuned = transformers.BertForSequenceClassification(cfg)
    g = torch.Generator().manual_seed(3)
    tuned.bert.load_state_dict({k: v + (0.3 * torch.randn(v.shape, generator=g)
                                        if k.startswith("encoder.layer.2.") else 0)
                                for k, v in base.state_dict().items()}, strict=False)
    run_dir = root / "runs" / "20261123-120000-finetune-aaaa"
    runs.write_json(run_dir / "run.json", {"run_id": run_dir.name, "task": "finetune"})
    ckpt = save(run_dir / "checkpoints" / "step-000010", tuned)
    torch.save({"step": 10}, ckpt / "trainer_state.pt")  # a complete checkpoint (RunDir.is_complete)
    sources = {k: ModelSource("local", str(v), f"tiny {k}") for k, v in src.items()}
    sources["runs"] = root / "runs"
    return sources


@pytest.fixture
def run_source(models, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(models["runs"]))
    (found,) = list_run_sources()
    return found


def table(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


# ----------------------------------------------------------------------------- compare
def test_compare_defaults_every_tab():
    at = page("compare")
    assert_clean(at)
    assert any("same model" in i for i in messages(at)["info"])
    assert [t.label for t in at.tabs] == CMP_TABS
    np.testing.assert_allclose(table(at, "CKA")["CKA"], 1.0, atol=1e-4)  # MiniLM with itself
    for label in CMP_TABS[1:]:
        at.session_state["cmp_tab"] = label
        at.run()
        assert_clean(at)
        assert len(chart_specs(at)) == 1, label


def test_compare_run_checkpoint_picked_on_the_page(models, run_source):
    at = page("compare", source=models["base"])
    at.radio(key="cmp_b_kind").set_value("run").run()
    at.button(key="cmp_b_run_use").click().run()
    assert_clean(at)
    assert not any("same model" in i for i in messages(at)["info"])
    shown = table(at, "CKA")
    # the page shows bertcore's numbers: the checkpoint changed only the last layer
    a, b = load(models["base"]), load(run_source)
    expected = compare.run_pair(a.encoder, a.tokenizer, b.encoder, b.tokenizer,
                                compare.sentences_of(at.text_area(key="cmp_text").value))
    np.testing.assert_allclose(shown["CKA"], np.round(expected.cka, 4))
    np.testing.assert_allclose(shown["CKA"][:3], 1.0, atol=1e-4)
    assert shown["CKA"].iloc[3] < 0.99
    for label in CMP_TABS[1:]:
        at.session_state["cmp_tab"] = label
        at.run()
        assert_clean(at)
    at.slider(key="cmp_layer").set_value(3).run()
    assert_clean(at)
    assert any("JS distance" in c.value and "Layer 3" in c.value for c in at.caption)


def test_compare_bad_text():
    at = page("compare")
    for case, text in BAD_TEXTS.items():
        at.text_area(key="cmp_text").input(text).run()
        assert_clean(at)
        if case in ("empty", "whitespace"):
            assert any("empty" in w for w in messages(at)["warning"]), case
        assert not messages(at)["error"], (case, messages(at))
    at.text_area(key="cmp_text").input("line\n" * 65).run()
    assert any("at most 64" in w for w in messages(at)["warning"])


def test_compare_other_tokenizer_and_other_depth(models):
    at = page("compare", source=models["base"], cmp_source_b=models["small_vocab"], cmp_b_kind="local")
    assert_clean(at)
    assert any("cannot be compared token by token" in w for w in messages(at)["warning"])
    at = page("compare", source=models["base"], cmp_source_b=models["shallow"], cmp_b_kind="local")
    assert_clean(at)
    assert any("different numbers of layers" in i for i in messages(at)["info"])
    at.session_state["cmp_tab"] = "Layer × layer CKA"
    at.run()
    assert_clean(at)
    assert array(chart_specs(at)[0]["data"][0]["z"]).shape == (4, 3)  # emb + 3 layers of A, emb + 2 of B


def test_compare_bad_folder_for_b_keeps_the_previous(tmp_path):
    at = page("compare")
    at.radio(key="cmp_b_kind").set_value("local").run()
    at.text_input(key="cmp_b_local_path").input(str(tmp_path / "nothing")).run()
    at.button(key="cmp_b_local_use").click().run()
    assert_clean(at)
    assert any("Cannot load" in e for e in messages(at)["error"])
    assert any("same model" in i for i in messages(at)["info"])  # B is still the packaged model


# ----------------------------------------------------------------------------- attribution
def gap(at) -> float:
    metric = next(m for m in at.metric if m.label == "Completeness gap")
    return float(metric.delta.split("%")[0]) / 100


def test_attribution_defaults_minilm_similarity():
    at = page("attribution")
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
    assert target.startswith("f(input) = P(class = ") and any(n in target for n in LABELS.values())
    other = next(i for i, n in LABELS.items() if n not in target)
    at.selectbox(key="attr_class").set_value(other).run()
    assert_clean(at)
    assert at.metric[0].label == f"f(input) = P(class = {LABELS[other]})"
    for case, text in BAD_TEXTS.items():
        at.text_area(key="attr_cls_text").input(text).run()
        assert_clean(at)
        if case in ("empty", "whitespace"):
            assert any("empty" in w for w in messages(at)["warning"]), case
        assert not messages(at)["error"], (case, messages(at))
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
    at = page("attribution")
    for case, text in BAD_TEXTS.items():
        if case == "20k_chars" or case == "over_max_positions":
            continue  # 512-token IG is the benchmark's job, not a unit test's
        at.text_area(key="attr_sim_a").input(text).run()
        assert_clean(at)
        if case in ("empty", "whitespace"):
            assert any("empty" in w for w in messages(at)["warning"]), case
        assert not messages(at)["error"], (case, messages(at))


def test_pages_are_registered_in_the_app():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    for name in ("compare", "attribution"):
        at.switch_page(f"explorer/app_pages/{name}.py").run()
        assert_clean(at)
        assert at.title and at.title[0].value in ("Compare two models", "Attribution")
    # the sidebar and the compare page each have their own picker (no shared widget keys)
    at.switch_page("explorer/app_pages/compare.py").run()
    assert at.sidebar.radio(key="model_kind").value == "packaged" and at.radio(key="cmp_b_kind").value == "packaged"
