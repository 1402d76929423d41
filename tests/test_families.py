"""RoBERTa, DistilBERT, ELECTRA and ModernBERT load through ``bertcore.loading.sources.load`` and equal
``transformers``.

Each family: a tiny random ``transformers`` model built from its config class (every weight, LayerNorms and
biases included, moved off its initial value so a missing or swapped tensor shows), saved to a folder with a
tokenizer, loaded with ``sources.load(ModelSource("local", folder))`` and compared in float64 to 1e-9: logits,
every attention, every hidden state (docs/LAYERING.md, "Parity"). Then bertcore saves it and transformers loads
that folder back to the same numbers. RoBERTa's and ModernBERT's tokenizer is a byte-level BPE trained here
(``bertcore.tokenization.bpe``) on BBC sentences of the installed corpus; the WordPiece families use the tests' small
vocabulary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

from bertcore.tokenization import masking
from bertcore.loading import sources
from bertcore.modeling import families
from bertcore.tokenization.bpe import train_byte_level_bpe
from bertcore.data.corpora import bbc_dir
from bertcore.modeling.interventions import Interventions
from bertcore.tokenization.tokenizer import encode, load_bpe_tokenizer, load_tokenizer

from .conftest import SMALL_VOCAB, assert_parity

HF_PREFIX = {"roberta": "Roberta", "distilbert": "DistilBert", "electra": "Electra", "modernbert": "ModernBert"}
HEADS = {"roberta": ("mlm", "classification", "base"), "distilbert": ("mlm", "classification", "base"),
         "electra": ("rtd", "mlm", "classification", "base"), "modernbert": ("mlm", "classification", "base")}
CASES = [(f, h) for f, heads in HEADS.items() for h in heads]
TEXTS = (["The cat sat on the mat and looked at the dog for a long while.", "A dog ran."],
         ["The big dog sat.", "It ran to the rug and sat on it."])
WORDPIECE_TEXTS = (["the cat sat on the mat", "a dog ran"], ["the big dog", "to the rug"])


def bbc_sentences(n: int = 300) -> list[str]:
    """The first ``n`` non-empty lines of the installed BBC corpus (sorted files): the BPE training text."""
    lines: list[str] = []
    for path in sorted(bbc_dir().rglob("*.txt")):
        lines += [line.strip() for line in path.read_text(encoding="latin-1").splitlines() if line.strip()]
        if len(lines) >= n:
            return lines[:n]
    return lines


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    """``{family: tokenizer folder}``: byte-level BPE for RoBERTa and ModernBERT, WordPiece for the others."""
    root = tmp_path_factory.mktemp("tokenizers")
    texts = bbc_sentences()
    out = {}
    for family in ("roberta", "modernbert"):
        train_byte_level_bpe(texts, 320, family).save_pretrained(root / family)
        out[family] = root / family
    (root / "vocab.txt").write_text("\n".join(SMALL_VOCAB) + "\n", encoding="utf-8")
    load_tokenizer(root).save_pretrained(root / "wordpiece")
    out["distilbert"] = out["electra"] = root / "wordpiece"
    return out


def hf_config(family: str, vocab_size: int):
    """A tiny config of the family's transformers class (eager attention, so attentions are returned)."""
    if family == "roberta":
        cfg = transformers.RobertaConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=37, max_position_embeddings=80,
                                         type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    elif family == "distilbert":
        cfg = transformers.DistilBertConfig(vocab_size=vocab_size, dim=32, n_layers=2, n_heads=4, hidden_dim=37,
                                            max_position_embeddings=40)
    elif family == "electra":
        cfg = transformers.ElectraConfig(vocab_size=vocab_size, embedding_size=16, hidden_size=32,
                                         num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                                         max_position_embeddings=40)
    else:  # 3 layers: global, local, local; a 4-token window (2 each side) so the local mask bites
        cfg = transformers.ModernBertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=3,
                                            num_attention_heads=4, intermediate_size=37, max_position_embeddings=64,
                                            local_attention=4, global_attn_every_n_layers=3, pad_token_id=1,
                                            cls_token_id=0, sep_token_id=2, bos_token_id=0, eos_token_id=2,
                                            global_rope_theta=160_000.0, local_rope_theta=10_000.0)
    cfg._attn_implementation = "eager"
    return cfg


def hf_model(family: str, head: str, vocab_size: int, seed: int = 0):
    """A random transformers model of the family with every parameter moved by N(0, 0.05) noise."""
    torch.manual_seed(seed)
    model = getattr(transformers, families.HF_CLASSES[family][head])(hf_config(family, vocab_size)).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.05)
    return model


def save_family(folder: Path, family: str, head: str, tokenizers) -> tuple[Path, torch.nn.Module]:
    tok = transformers.AutoTokenizer.from_pretrained(str(tokenizers[family]))
    hf = hf_model(family, head, len(tok))
    hf.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder, hf


def inputs(loaded, family: str) -> dict[str, torch.Tensor]:
    """A padded batch of two sentence pairs (segment ids only for the families that have segments)."""
    a, b = TEXTS if families.TOKENIZER_MODEL[family] == "BPE" else WORDPIECE_TEXTS
    if family == "modernbert":  # at most 2 [PAD]s (half the window): more make transformers' eager path NaN
        a, b = ["The cat sat on the mat and looked at the dog.", "The cat sat on the mat and looked at the dog"], None
    enc = loaded.tokenizer(a, b, padding=True, return_tensors="pt")
    out = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    if family == "electra":
        out["token_type_ids"] = enc["token_type_ids"]
    assert (enc["attention_mask"] == 0).any(), "the batch must be padded"
    return out


def main_output(out) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def assert_same(ours, theirs, real: torch.Tensor) -> None:
    """Logits, attentions and hidden states equal in float64. ``real (B, T)``: the unpadded tokens. At [PAD]
    positions transformers' eager ModernBERT gives NaN where a [PAD] query's local window holds only [PAD] keys
    (and with more [PAD]s than half the window, the NaN reaches real tokens through 0 * NaN); bertcore lets such a
    query see itself, so [PAD] rows are compared only where transformers' are finite."""
    a, b = main_output(ours), main_output(theirs)
    if a.dim() >= 2 and a.shape[:2] == real.shape:  # per-token outputs
        a, b = a[real], b[real]
    assert_parity(a, b)
    assert len(ours.attentions) == len(theirs.attentions) and len(ours.hidden_states) == len(theirs.hidden_states)
    for x, y in [*zip(ours.attentions, theirs.attentions), *zip(ours.hidden_states, theirs.hidden_states)]:
        finite = torch.isfinite(y)
        assert (finite.transpose(1, 2) if y.dim() == 4 else finite)[real].all()  # every real token's row
        assert_parity(x[finite], y[finite])


@pytest.mark.parametrize("family,head", CASES)
@torch.no_grad()
def test_family_loads_at_parity_and_round_trips(tmp_path, tokenizers, family, head):
    folder, hf = save_family(tmp_path / "hf", family, head, tokenizers)
    loaded = sources.load(sources.ModelSource("local", str(folder)))
    assert loaded.head == head and loaded.config.family == family
    assert not loaded.model.load_report.missing and not loaded.model.load_report.unexpected
    assert loaded.model.num_parameters() == hf.num_parameters()
    # the anatomy table's "transformers name" column: every tensor of ours names one of theirs, and all of them
    ours_named = {families.hf_name(family, n, head) for n, _ in loaded.model.named_parameters()}
    assert ours_named == {n for n, _ in hf.named_parameters()}
    batch = inputs(loaded, family)
    real = batch["attention_mask"].bool()
    ours = loaded.model.double()
    theirs = hf.double()
    out = ours(**batch, output_attentions=True, output_hidden_states=True)
    assert_same(out, theirs(**batch, output_attentions=True, output_hidden_states=True), real)
    # bertcore -> save_pretrained folder -> transformers: the same numbers
    ours.save_pretrained(tmp_path / "ours")
    config = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert config["model_type"] == family and config["architectures"] == [families.HF_CLASSES[family][head]]
    back = getattr(transformers, families.HF_CLASSES[family][head]).from_pretrained(
        tmp_path / "ours", attn_implementation="eager").double().eval()
    assert_same(out, back(**batch, output_attentions=True, output_hidden_states=True), real)


@torch.no_grad()
def test_modernbert_local_layers_see_only_their_window(tmp_path, tokenizers):
    """Layer 0 is global, layers 1 and 2 local (window 4: 2 keys each side): probabilities beyond are exactly 0."""
    folder, _ = save_family(tmp_path / "m", "modernbert", "base", tokenizers)
    loaded = sources.load(sources.ModelSource("local", str(folder)))
    enc = encode(loaded.tokenizer, TEXTS[0][0]).tensors()
    out = loaded.model(**enc, output_attentions=True)
    t = enc["input_ids"].size(1)
    far = (torch.arange(t)[:, None] - torch.arange(t)[None, :]).abs() > 2  # (T, T)
    assert (out.attentions[0][..., far] > 0).all()
    assert (out.attentions[1][..., far] == 0).all() and (out.attentions[2][..., far] == 0).all()


@torch.no_grad()
def test_rotary_model_honours_head_mask_and_interventions(tmp_path, tokenizers):
    """A switched-off head (head_mask) equals zeroing it at the ``attn.hook_z`` site; the recorded rotated query
    and key (``hook_rot_q`` / ``hook_rot_k``) give the scores; a residual edit changes the logits."""
    folder, _ = save_family(tmp_path / "m", "modernbert", "mlm", tokenizers)
    model = sources.load(sources.ModelSource("local", str(folder))).model.double()
    ids = encode(sources.load(sources.ModelSource("local", str(folder))).tokenizer, TEXTS[0][0]).tensors()
    ids = {k: ids[k] for k in ("input_ids", "attention_mask")}
    mask = torch.ones(3, 4, dtype=torch.float64)
    mask[1, 2] = 0
    d = 32 // 4

    def zero_head(x):  # (B, T, heads, d)
        x = x.clone()
        x[:, :, 2] = 0
        return x

    masked = model(**ids, head_mask=mask).logits
    edited = model(**ids, interventions=Interventions({"blocks.1.attn.hook_z": zero_head})).logits
    assert_parity(masked, edited)
    assert (masked - model(**ids).logits).abs().max() > 1e-4
    iv = Interventions(record=["blocks.1.attn.hook_rot_q", "blocks.1.attn.hook_rot_k"])
    probs = model(**ids, output_attentions=True, interventions=iv).attentions[1]  # block 1 is local
    q, k = (iv.recorded[f"blocks.1.attn.hook_rot_{x}"].transpose(1, 2) for x in "qk")  # (B, heads, T, d)
    scores = q @ k.transpose(-1, -2) / d ** 0.5
    t = scores.size(-1)
    scores = scores.masked_fill((torch.arange(t)[:, None] - torch.arange(t)[None, :]).abs() > 2, float("-inf"))
    torch.testing.assert_close(probs, torch.softmax(scores.float(), -1).double(), atol=1e-6, rtol=0)
    noise = torch.randn(ids["input_ids"].shape + (32,), dtype=torch.float64)
    shifted = model(**ids, interventions=Interventions({"blocks.1.hook_resid_pre": lambda x: x + noise})).logits
    assert (shifted - model(**ids).logits).abs().max() > 1e-3


def test_bpe_word_starts_follow_the_space_marker(tokenizers):
    """Byte-level BPE marks a word after a space with Ġ: whole-word masking (bertcore.tokenization.masking, as the
    training
    collator) finds word starts from it, and the text's first word starts after <s>."""
    tok = load_bpe_tokenizer(tokenizers["roberta"])
    enc = encode(tok, "The government said unbelievable things.")
    assert enc.tokens[0] == "<s>" and enc.tokens[-1] == "</s>" and enc.token_type_ids == [0] * len(enc)
    ids = enc.tensors()["input_ids"]
    words = masking.whole_word_ids(tok, ids, masking.eligible_positions(tok, ids))[0].tolist()
    starts = [not s and (t.startswith("Ġ") or i == 1) for i, (t, s) in
              enumerate(zip(enc.tokens, enc.special_tokens_mask))]
    assert words[0] == words[-1] == -1 and max(words) == 4  # The, government, said, unbelievable, things.
    assert [i for i in range(1, len(words) - 1) if words[i] != words[i - 1]] == [i for i, s in enumerate(starts) if s]


def test_bad_folders_get_clear_messages(tmp_path, tokenizers):
    folder, _ = save_family(tmp_path / "ok", "roberta", "mlm", tokenizers)
    config = json.loads((folder / "config.json").read_text())
    # an unknown model_type names the supported families
    (tmp_path / "gpt").mkdir()
    (tmp_path / "gpt" / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(sources.SourceError, match="'gpt2'.*bert, roberta, distilbert, electra, modernbert"):
        sources.load(sources.ModelSource("local", str(tmp_path / "gpt")))
    # weights that config.json does not describe
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 64}))
    with pytest.raises(sources.SourceError, match="config.json does not describe these weights"):
        sources.load(sources.ModelSource("local", str(folder)))
    # no tokenizer beside the weights
    folder2, _ = save_family(tmp_path / "notok", "modernbert", "mlm", tokenizers)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder2 / name).unlink()
    with pytest.raises(sources.SourceError, match="no tokenizer.*modernbert model needs its tokenizer"):
        sources.load(sources.ModelSource("local", str(folder2)))
