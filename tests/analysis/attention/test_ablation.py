"""bertcore.analysis.attention.ablation: head masks, what switching heads off moves, the held-out MLM loss."""

import numpy as np
import pytest
import torch

from bertcore.analysis.attention import ablation
from bertcore.tokenization.tokenizer import encode


def test_make_head_mask():
    mask = ablation.make_head_mask(3, 4, heads=[(0, 1)], layers=[2])  # blocks and heads from 0
    assert mask.tolist() == [[1, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]]
    with pytest.raises(ValueError, match=r"layers 0\.\.2, heads 0\.\.3"):
        ablation.make_head_mask(3, 4, heads=[(3, 0)])
    with pytest.raises(ValueError, match="does not exist"):
        ablation.make_head_mask(3, 4, heads=[(0, 4)])
    with pytest.raises(ValueError, match=r"layers 0\.\.2"):
        ablation.make_head_mask(3, 4, layers=[-1])


def test_ablation_readout_and_movement_on_the_minilm(packaged):
    enc = encode(packaged.tokenizer, "The bank raised interest rates again.")
    cfg = packaged.config
    before = ablation.readout(packaged.model, packaged.head, packaged.tokenizer, enc, None)
    same = ablation.readout(packaged.model, packaged.head, packaged.tokenizer, enc,
                            torch.ones(cfg.num_hidden_layers, cfg.num_attention_heads))
    np.testing.assert_array_equal(before.hidden_states, same.hidden_states)
    mv = ablation.movement(before, same)
    np.testing.assert_allclose(mv.per_layer, 1.0, atol=1e-6)
    mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, layers=[1])  # the 2nd block
    for mode in ablation.MODES:
        after = ablation.readout(packaged.model, packaged.head, packaged.tokenizer, enc, mask, mode)
        mv = ablation.movement(before, after)
        np.testing.assert_allclose(mv.per_layer[:2], 1.0, atol=1e-6)  # embeddings and layer 1 untouched
        assert mv.per_layer[2] < 0.999 and mv.cls < 1.0 and mv.mean_pooled < 1.0


def test_heldout_mlm_loss_rises_when_layers_are_switched_off(tmp_path):
    from bertcore import BertConfig, BertForPreTraining
    from bertcore.loading.sources import packaged_model_dir
    from bertcore.tokenization.tokenizer import load_tokenizer

    tok = load_tokenizer(packaged_model_dir())
    texts = ablation.heldout_texts(4)
    assert len(texts) == 4 and all(len(t) > 20 for t in texts)
    batch = ablation.heldout_batch(tok, texts, max_length=32)
    again = ablation.heldout_batch(tok, texts, max_length=32)
    assert torch.equal(batch["input_ids"], again["input_ids"])  # fixed seed: the same masks every time
    assert (batch["labels"] != -100).any()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=64)
    model = BertForPreTraining(cfg).eval()
    plain = ablation.mlm_loss(model, batch)
    assert plain == ablation.mlm_loss(model, batch, torch.ones(2, 4))
    assert plain != ablation.mlm_loss(model, batch, torch.zeros(2, 4))
