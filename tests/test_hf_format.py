"""A checkpoint means the same everywhere: whatever transformers class a user loads a bertcore
checkpoint with gives bertcore's logits (float64, 1e-9), or raises with the reason and the bertcore line.

Kinds: ``post`` (post-LN: plain BERT), ``pre`` (pre-LN, GELU: RobertaPreLayerNorm), ``pre_relu`` (pre-LN with
another activation: no transformers class computes it, so all refuse), and ``legacy`` (a pre-LN folder written
before this change: transformers loads it wrong, the re-export fixes it).
"""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch
import transformers

from bertcore.loading import hf_export
from bertcore.modeling import hf_format
from bertcore.modeling.checkpoint import CheckpointError, model_state_for_saving, save_safetensors
from bertcore.modeling.config import BertConfig
from bertcore.modeling.heads import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
from bertcore.modeling.model import BertModel
from bertcore.loading.sources import ModelSource, SourceError, load

from .conftest import SMALL_VOCAB

TOL = 1e-9  # float64 on both sides
KINDS = {"post": {}, "pre": {"pre_layer_norm": True}, "pre_relu": {"pre_layer_norm": True, "hidden_act": "relu"}}
CLASSES = ("AutoModel", "AutoModelForMaskedLM", "AutoModelForPreTraining", "BertForPreTraining", "BertForMaskedLM",
           "BertModel")


def small_config(**kw) -> BertConfig:
    return BertConfig(**{"vocab_size": len(SMALL_VOCAB), "hidden_size": 32, "num_hidden_layers": 2,
                         "num_attention_heads": 4, "intermediate_size": 37, "max_position_embeddings": 24,
                         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, **kw})


def trained_like(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random LayerNorm gains and biases, and a larger-than-init scale, so that a misplaced LayerNorm, a missing
    final LayerNorm or a shifted position row changes the logits a lot."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.5 * torch.randn(p.shape, generator=g))
            elif "position_embeddings" in name or "token_type" in name:
                p.mul_(20)
    return model.eval()


def save_checkpoint_folder(folder, model) -> None:
    """``model.save_pretrained`` plus a WordPiece tokenizer over :data:`SMALL_VOCAB`."""
    from bertcore.tokenization.tokenizer import load_tokenizer, save_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(SMALL_VOCAB) + "\n", encoding="utf-8")
    save_tokenizer(load_tokenizer(folder), folder)
    model.save_pretrained(folder)


def write_legacy(folder, model) -> None:
    """How checkpoints were written before this change: our names, ``model_type: bert`` + ``pre_layer_norm``."""
    save_safetensors(model_state_for_saving(model), folder / "model.safetensors")
    (folder / hf_format.NSP_FILE).unlink(missing_ok=True)
    data = model.config.to_hf_dict()
    data["architectures"] = [type(model).__name__]
    (folder / "config.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """kind -> (folder, bertcore BertForPreTraining in float64)."""
    out = {}
    for kind, changes in KINDS.items():
        model = trained_like(BertForPreTraining(small_config(**changes)))
        folder = tmp_path_factory.mktemp(kind)
        save_checkpoint_folder(folder, model)
        out[kind] = (folder, model.double())
    return out


def _inputs():
    ids = torch.tensor([[2, 5, 6, 8, 9, 5, 10, 3, 11, 12, 13, 18, 3], [2, 7, 13, 14, 5, 12, 4, 3, 16, 17, 6, 18, 3]])
    types = torch.tensor([[0] * 8 + [1] * 5] * 2)
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": torch.ones_like(ids)}


def _hf(name, folder):
    return getattr(transformers, name).from_pretrained(str(folder)).eval().double()


@pytest.mark.parametrize("name", CLASSES)
@pytest.mark.parametrize("kind", list(KINDS))
@torch.no_grad()
def test_every_transformers_class_gives_our_logits_or_raises(folders, kind, name):
    folder, ours = folders[kind]
    exact = kind == "post" or (kind == "pre" and name.startswith("Auto"))
    if not exact:
        with pytest.raises(Exception) as err:
            _hf(name, folder)
        message = str(err.value)
        assert "pre-LayerNorm" in message and "bertcore" in message and "from_pretrained" in message, message
        if kind == "pre":
            assert "AutoModelForMaskedLM" in message  # the transformers class that does load it
        return
    theirs = _hf(name, folder)
    x = _inputs()
    mine = ours(**x)
    out = theirs(**x)
    if name in ("AutoModel", "BertModel"):
        base = ours.bert(**x)
        torch.testing.assert_close(out.last_hidden_state, base.last_hidden_state, atol=TOL, rtol=0)
        torch.testing.assert_close(out.pooler_output, base.pooler_output, atol=TOL, rtol=0)
        return
    logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
    assert (mine.prediction_logits.abs().max() > 1.0)  # a model whose logits differ when anything is misplaced
    torch.testing.assert_close(logits, mine.prediction_logits, atol=TOL, rtol=0)
    if hasattr(out, "seq_relationship_logits"):
        torch.testing.assert_close(out.seq_relationship_logits, mine.seq_relationship_logits, atol=TOL, rtol=0)


@pytest.mark.parametrize("kind", list(KINDS))
@torch.no_grad()
def test_fill_mask_pipeline_gives_our_probabilities_or_raises(folders, kind):
    folder, ours = folders[kind]
    if kind == "pre_relu":
        with pytest.raises(Exception, match="bertcore"):
            transformers.pipeline("fill-mask", model=str(folder))
        return
    fill = transformers.pipeline("fill-mask", model=str(folder), top_k=5)
    got = fill("the cat [MASK] on the mat .")
    tok = fill.tokenizer
    enc = tok("the cat [MASK] on the mat .", return_tensors="pt")
    probs = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).prediction_logits[0, 3].softmax(-1)
    top = probs.topk(5)
    assert [g["token"] for g in got] == top.indices.tolist()
    assert [g["score"] for g in got] == pytest.approx(top.values.tolist(), abs=1e-5)  # the pipeline runs in float32


@torch.no_grad()
def test_a_pre_ln_checkpoint_is_roberta_prelayernorm_with_the_nsp_head_in_our_file(folders):
    folder, ours = folders["pre"]
    data = json.loads((folder / "config.json").read_text())
    assert data["model_type"] == "roberta-prelayernorm"
    assert data["architectures"] == ["RobertaPreLayerNormForMaskedLM"]
    assert data["max_position_embeddings"] == 24 + data["pad_token_id"] + 1  # positions start after [PAD]
    assert "pre_layer_norm" not in data and (folder / hf_format.NSP_FILE).is_file()
    assert hf_format.folder_format(folder) == hf_format.PRELN
    back = BertForPreTraining.from_pretrained(folder)  # bertcore reads its own format back exactly
    assert back.config.pre_layer_norm and back.config.max_position_embeddings == 24
    assert not back.load_report.missing and not back.load_report.unexpected
    for key, value in ours.state_dict().items():
        torch.testing.assert_close(back.state_dict()[key].double(), value, atol=0, rtol=0, msg=key)
    assert load(ModelSource("local", str(folder))).head == "pretraining"


@torch.no_grad()
def test_pre_ln_padded_batches_agree_at_every_real_token(folders):
    """RoBERTa gives [PAD] tokens the position row ``pad_token_id``: only the (masked) pad positions differ."""
    folder, ours = folders["pre"]
    theirs = _hf("AutoModelForMaskedLM", folder)
    x = _inputs()
    x["input_ids"][1, 9:] = 0  # right padding, as BERT tokenizers pad
    x["attention_mask"][1, 9:] = 0
    real = x["attention_mask"].bool()
    torch.testing.assert_close(theirs(**x).logits[real], ours(**x).prediction_logits[real], atol=TOL, rtol=0)


@pytest.mark.parametrize("kind", ["post", "pre"])
@torch.no_grad()
def test_round_trip_through_transformers_save_pretrained(folders, tmp_path, kind):
    """bertcore -> transformers ``from_pretrained`` / ``save_pretrained`` -> bertcore: the same logits."""
    folder, ours = folders[kind]
    x = _inputs()
    name = "BertForPreTraining" if kind == "post" else "AutoModelForMaskedLM"
    _hf(name, folder).float().save_pretrained(tmp_path / "mlm")
    shutil.copy(folder / "vocab.txt", tmp_path / "mlm" / "vocab.txt")
    loaded = load(ModelSource("local", str(tmp_path / "mlm")))
    assert loaded.head == ("pretraining" if kind == "post" else "mlm")  # the NSP head stays in our file
    assert loaded.config == BertForPreTraining.from_pretrained(folder).config
    assert not loaded.model.load_report.missing
    out = loaded.model.double()(**x)
    logits = out.prediction_logits if loaded.head == "pretraining" else out.logits
    torch.testing.assert_close(logits, ours(**x).prediction_logits, atol=TOL, rtol=0)
    _hf("AutoModel", folder).float().save_pretrained(tmp_path / "base")  # no prefix on the keys
    base = BertModel.from_pretrained(tmp_path / "base").double()
    torch.testing.assert_close(base(**x).last_hidden_state, ours.bert(**x).last_hidden_state, atol=TOL, rtol=0)
    if kind == "pre":  # transformers keeps the guard: its Bert classes still refuse the re-saved folder
        with pytest.raises(Exception, match="pre-LayerNorm"):
            transformers.BertForMaskedLM.from_pretrained(str(tmp_path / "mlm"))


@pytest.mark.parametrize("kind", ["post", "pre"])
@torch.no_grad()
def test_fine_tuned_classifier_is_exact_in_auto_model_for_sequence_classification(tmp_path, kind):
    model = trained_like(BertForSequenceClassification(small_config(
        num_labels=3, id2label={0: "a", 1: "b", 2: "c"}, **KINDS[kind])))
    save_checkpoint_folder(tmp_path, model)
    theirs = _hf("AutoModelForSequenceClassification", tmp_path)
    x = _inputs()
    torch.testing.assert_close(theirs(**x).logits, model.double()(**x).logits, atol=TOL, rtol=0)
    assert theirs.config.id2label == {0: "a", 1: "b", 2: "c"}
    back = BertForSequenceClassification.from_pretrained(tmp_path).double()
    torch.testing.assert_close(back(**x).logits, model(**x).logits, atol=0, rtol=0)
    assert load(ModelSource("local", str(tmp_path))).head == "classification"


@pytest.mark.parametrize("kind", ["post", "pre"])
@torch.no_grad()
def test_a_mean_pooled_classifier_is_refused_by_transformers_and_loads_here(tmp_path, kind):
    """transformers' BERT classifiers read [CLS] only: a mean-pooled head (the packaged MiniLM's fine-tuning
    default) must not load there as a different model, and must come back here with the same logits."""
    model = trained_like(BertForSequenceClassification(small_config(
        num_labels=2, id2label={0: "neg", 1: "pos"}, classifier_pooling="mean", **KINDS[kind])))
    assert hf_format.format_for(model.config) == hf_format.BERTCORE_ONLY
    save_checkpoint_folder(tmp_path, model)
    x = _inputs()
    x["attention_mask"][1, -4:] = 0  # the mean is over the unpadded tokens only
    for name in ("AutoModelForSequenceClassification", "BertForSequenceClassification"):
        with pytest.raises(Exception, match="mean of the token vectors"):
            _hf(name, tmp_path)
    back = BertForSequenceClassification.from_pretrained(tmp_path).double()
    assert back.config.classifier_pooling == "mean"
    torch.testing.assert_close(back(**x).logits, model.double()(**x).logits, atol=0, rtol=0)
    cls_head = BertForSequenceClassification(back.config.replace(classifier_pooling="cls"))
    cls_head.load_state_dict(back.state_dict())
    assert not torch.allclose(cls_head.double()(**x).logits, back(**x).logits)  # the pooling matters here
    assert "from bertcore.modeling.heads import BertForSequenceClassification" in hf_export.usage_code(tmp_path)
    assert "mean of the token vectors" in hf_export.usage_note(hf_format.folder_format(tmp_path), "classification",
                                                                 tmp_path)


@torch.no_grad()
def test_legacy_pre_ln_folder_loads_here_is_wrong_in_transformers_and_the_reexport_fixes_it(folders, tmp_path):
    _, ours = folders["pre"]
    folder = tmp_path / "step-000010"
    as_float = copy.deepcopy(ours).float()  # .float() works in place: never on the shared model
    save_checkpoint_folder(folder, as_float)
    write_legacy(folder, as_float)
    (folder / "trainer_state.pt").write_bytes(b"state")
    x = _inputs()
    assert hf_format.folder_format(folder) == hf_format.LEGACY_PRELN
    here = BertForPreTraining.from_pretrained(folder).double()
    torch.testing.assert_close(here(**x).prediction_logits, ours(**x).prediction_logits, atol=TOL, rtol=0)
    wrong = _hf("BertForPreTraining", folder)  # the old bug: no error, another model
    # another model: far beyond parity's 1e-9 (how far depends on the random weights: 0.08-0.3 seen)
    assert (wrong(**x).prediction_logits - ours(**x).prediction_logits).abs().max() > 1e-3
    hf_export.reexport_checkpoint(folder, card=lambda tmp: "# card\n")
    assert hf_format.folder_format(folder) == hf_format.PRELN
    assert (folder / "trainer_state.pt").read_bytes() == b"state" and (folder / "README.md").read_text() == "# card\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000010"]  # no temp folder left
    torch.testing.assert_close(_hf("AutoModelForMaskedLM", folder)(**x).logits, ours(**x).prediction_logits,
                               atol=TOL, rtol=0)
    nsp = BertForPreTraining.from_pretrained(folder).double()(**x).seq_relationship_logits
    torch.testing.assert_close(nsp, ours(**x).seq_relationship_logits, atol=TOL, rtol=0)


def test_a_reexport_that_fails_leaves_the_old_folder(folders, tmp_path, monkeypatch):
    _, ours = folders["pre"]
    folder = tmp_path / "step-000010"
    as_float = copy.deepcopy(ours).float()  # .float() works in place: never on the shared model
    save_checkpoint_folder(folder, as_float)
    write_legacy(folder, as_float)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def boom(tmp):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        hf_export.reexport_checkpoint(folder, card=boom)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-000010"]


def test_the_refusing_config_keeps_the_true_config_for_bertcore(folders):
    folder, ours = folders["pre_relu"]
    data = json.loads((folder / "config.json").read_text())
    assert data["model_type"] == "bert" and "hidden_act 'relu'" in data["hidden_size"]
    assert hf_format.folder_format(folder) == hf_format.BERTCORE_ONLY
    back = BertForPreTraining.from_pretrained(folder)
    assert back.config == ours.config
    code = hf_export.usage_code(folder)
    assert "from bertcore.modeling.heads import BertForPreTraining" in code
    assert "transformers import AutoModel" not in code


def test_post_ln_checkpoints_stay_plain_bert(folders):
    folder, ours = folders["post"]
    data = json.loads((folder / "config.json").read_text())
    assert data == {**ours.config.to_hf_dict(), "architectures": ["BertForPreTraining"]}
    assert data["model_type"] == "bert" and "pre_layer_norm" not in data
    assert not (folder / hf_format.NSP_FILE).exists()


def test_the_shipped_model_is_unchanged_plain_bert():
    from bertcore.loading.sources import shipped_mlm_dir

    folder = shipped_mlm_dir()
    assert hf_format.folder_format(folder) == hf_format.BERT
    cfg = BertConfig.from_json_file(folder / "config.json")
    assert not cfg.pre_layer_norm and hf_format.format_for(cfg) == hf_format.BERT
    assert "AutoModelForMaskedLM.from_pretrained(path)" in hf_export.usage_code(folder)


# ----------------------------------------------------------------------------- bad folders
@pytest.fixture
def bad_folders(folders, tmp_path):
    """name -> a copy of the pre-LN folder broken one way."""
    src, _ = folders["pre"]
    out = {}
    for name in ("truncated", "model_type", "no_tokenizer"):
        out[name] = shutil.copytree(src, tmp_path / name)
    weights = out["truncated"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    data = json.loads((out["model_type"] / "config.json").read_text())
    (out["model_type"] / "config.json").write_text(json.dumps({**data, "model_type": "gpt2"}))
    for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (out["no_tokenizer"] / f).unlink(missing_ok=True)
    return out


EXPECTED = {"truncated": "truncated or corrupt", "model_type": "'gpt2'", "no_tokenizer": "no tokenizer"}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_bad_folders_get_a_clear_message_from_the_loader(bad_folders, name):
    with pytest.raises(SourceError) as err:
        load(ModelSource("local", str(bad_folders[name])))
    assert EXPECTED[name] in str(err.value)
    if name != "no_tokenizer":
        with pytest.raises(CheckpointError, match=EXPECTED[name]):
            BertForMaskedLM.from_pretrained(bad_folders[name])
