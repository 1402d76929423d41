"""The logit lens (bertcore.analysis.representations.logit_lens): each layer decoded by the model's own MLM head."""

import pytest
import torch

from bertcore.loading import sources
from bertcore.analysis.representations.logit_lens import MAX_TOKENS, layer_logits, logit_lens
from bertcore.readouts.fill_mask import FillMaskError, mlm_logits_at


@pytest.fixture(scope="module")
def mlm():
    return sources.load(sources.PACKAGED_MLM)


def _enc(lm, text="The keys to the cabinet [MASK] on the table."):
    return lm.tokenizer(text.replace("[MASK]", lm.tokenizer.mask_token), return_tensors="pt")


def test_each_layer_is_decoded_as_transformers_would(mlm):
    """Row k = transformers' cls.predictions on transformers' hidden_states[k] (same weights)."""
    import transformers

    hf = transformers.BertForPreTraining.from_pretrained(str(mlm.path), attn_implementation="eager").eval()
    enc = _enc(mlm)
    ours = layer_logits(mlm.model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    with torch.no_grad():
        hs = hf(**enc, output_hidden_states=True).hidden_states
        ref = torch.stack([hf.cls.predictions(h[0]) for h in hs])
    assert ours.shape == (mlm.config.num_hidden_layers + 1, enc["input_ids"].size(1), mlm.config.vocab_size)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)
    # and the last row is the model's own prediction
    t = enc["input_ids"].size(1)
    torch.testing.assert_close(ours[-1], mlm_logits_at(mlm.model, enc["input_ids"], list(range(t))), atol=1e-5, rtol=0)


def test_ranks_probabilities_and_kl(mlm):
    enc = _enc(mlm)
    lens = logit_lens(mlm.model, enc["input_ids"], k=5)
    L1, T = lens.final_rank.shape
    assert (lens.final_rank[-1] == 0).all() and torch.allclose(lens.kl_to_final[-1], torch.zeros(T), atol=1e-5)
    assert (lens.top_ids[-1, :, 0] == lens.final_ids).all()
    # rank 0 exactly where the layer's own top-1 is the final guess
    assert torch.equal(lens.final_rank == 0, lens.top_ids[..., 0] == lens.final_ids[None])
    logits = layer_logits(mlm.model, enc["input_ids"])
    p = torch.softmax(logits, -1)
    torch.testing.assert_close(lens.final_prob, p.gather(-1, lens.final_ids[None, :, None].expand(L1, -1, 1))[..., 0])
    assert (lens.kl_to_final[:-1] > 0).any()
    # the [MASK]: the final guess is far down in the embedding layer and top-1 at the end
    pos = int((enc["input_ids"][0] == mlm.tokenizer.mask_token_id).nonzero())
    assert lens.final_rank[0, pos] > 0 and lens.final_rank[-1, pos] == 0


def test_errors(mlm, packaged):
    with pytest.raises(FillMaskError):
        logit_lens(packaged.model, torch.tensor([[101, 102]]))
    with pytest.raises(ValueError, match=f"at most {MAX_TOKENS}"):
        logit_lens(mlm.model, torch.full((1, MAX_TOKENS + 1), 1000))


# ----------------------------------------------------------------------------- tuned lens
def _tiny_mlm():
    from bertcore.modeling.heads import BertForMaskedLM

    from tests.conftest import tiny_bert

    return tiny_bert(BertForMaskedLM, num_hidden_layers=3)


def _encodings(n=12, t=20, vocab=99, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(5, vocab, (1, t), generator=g),
             "attention_mask": torch.ones(1, t, dtype=torch.long),
             "token_type_ids": torch.zeros(1, t, dtype=torch.long)} for _ in range(n)]


def test_an_untrained_tuned_lens_is_the_logit_lens():
    from bertcore.analysis.representations.logit_lens import TunedLens, tuned_layer_logits

    model = _tiny_mlm()
    ids = _encodings(1)[0]["input_ids"]
    lens = TunedLens(model.config.num_hidden_layers, model.config.hidden_size)
    torch.testing.assert_close(tuned_layer_logits(model, lens, ids), layer_logits(model, ids), atol=0, rtol=0)


def test_training_lowers_held_out_kl_and_leaves_the_model_alone(tmp_path):
    from bertcore.analysis.representations.logit_lens import (load_tuned_lens, save_tuned_lens, train_tuned_lens,
                                                              tuned_layer_logits)

    model = _tiny_mlm()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = [p.requires_grad for p in model.parameters()]
    seen = []
    lens = train_tuned_lens(model, _encodings(), steps=60, positions_per_step=64, lr=1e-2,
                            progress=lambda s, n, loss: seen.append((s, n, loss)))
    assert len(seen) == 60 and seen[-1][2] < seen[0][2]
    L = model.config.num_hidden_layers
    assert lens.kl_logit.shape == lens.kl_tuned.shape == (L + 1,)
    assert float(lens.kl_logit[-1]) == pytest.approx(0, abs=1e-6)
    assert float(lens.kl_tuned[-1]) == pytest.approx(0, abs=1e-6)
    assert (lens.kl_tuned[:-1] < lens.kl_logit[:-1]).all(), (lens.kl_tuned, lens.kl_logit)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert [p.requires_grad for p in model.parameters()] == flags
    # written and read back: the same decodings and KL numbers
    path = tmp_path / "lens.safetensors"
    save_tuned_lens(lens, path)
    again = load_tuned_lens(path)
    ids = _encodings(1, seed=9)[0]["input_ids"]
    torch.testing.assert_close(tuned_layer_logits(model, again, ids), tuned_layer_logits(model, lens, ids))
    torch.testing.assert_close(again.kl_tuned, lens.kl_tuned)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="cannot read the tuned lens"):
        load_tuned_lens(path)


def test_layer_zero_is_the_head_on_the_embeddings(mlm):
    enc = _enc(mlm)
    with torch.no_grad():
        emb = mlm.model.bert.embeddings(enc["input_ids"], enc["token_type_ids"])  # (1, T, H)
        expected = mlm.model.cls.predictions(emb[0])
    torch.testing.assert_close(layer_logits(mlm.model, enc["input_ids"], enc["attention_mask"],
                                            enc["token_type_ids"])[0], expected, atol=1e-5, rtol=0)
