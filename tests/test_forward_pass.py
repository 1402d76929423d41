"""bertcore.readouts.forward_pass: every step of one forward pass, read at the model's named sites, equals
transformers' own
intermediates (read with forward hooks), hidden states and attentions on the shipped MiniLM-MLM, in float64, and
its formula applied to the step before it; for post-LN and pre-LN models and a model without an MLM head."""

from __future__ import annotations

import pytest
import torch
import transformers

from bertcore.readouts import forward_pass
from bertcore.loading import sources
from bertcore.readouts.forward_pass import TraceError
from bertcore.modeling.heads import BertForPreTraining
from bertcore.tokenization.tokenizer import encode

from .conftest import assert_parity, double, tiny_bert

TEXT, PAIR = "The film won the [MASK] for best actor.", "Its director thanked his mother in London."


@pytest.fixture(scope="module")
def shipped():
    """(bertcore MiniLM-MLM in float64, transformers BertForPreTraining of the same folder in float64, tokenizer)."""
    lm = sources.load(sources.PACKAGED_MLM)
    hf = transformers.BertForPreTraining.from_pretrained(str(lm.path), attn_implementation="eager").eval()
    return double(lm.model), double(hf), lm.tokenizer


def hf_intermediates(hf, inputs: dict) -> tuple[dict, object]:
    """Every module output transformers computes on ``inputs``, by forward hooks: ``{(block, name): tensor}``
    (block 0-based as ``encoder.layer[i]``; ``("mlm", name)`` for the MLM head) with the batch dimension dropped, and
    the model's output (hidden states, attentions, logits)."""
    seen, hooks = {}, []

    def keep(key, take_input=False):
        def hook(module, args, output):
            value = args[0] if take_input else (output[0] if isinstance(output, tuple) else output)
            seen[key] = value[0].detach()
        return hook

    for i, layer in enumerate(hf.bert.encoder.layer):
        for name, module, take_input in (
                ("query", layer.attention.self.query, False), ("key", layer.attention.self.key, False),
                ("value", layer.attention.self.value, False), ("merged", layer.attention.self, False),
                ("attn_proj", layer.attention.output.dense, False), ("attn_out", layer.attention.output, False),
                ("residual1", layer.attention.output.LayerNorm, True), ("ffn_pre", layer.intermediate.dense, False),
                ("ffn_act", layer.intermediate, False), ("ffn_out", layer.output.dense, False),
                ("residual2", layer.output.LayerNorm, True), ("output", layer, False)):
            hooks.append(module.register_forward_hook(keep((i, name), take_input)))
    transform = hf.cls.predictions.transform
    for name, module, take_input in (("mlm_dense", transform.dense, False), ("mlm_act", transform.LayerNorm, True),
                                     ("mlm_norm", transform, False)):
        hooks.append(module.register_forward_hook(keep(("mlm", name), take_input)))
    try:
        with torch.no_grad():
            out = hf(**inputs, output_hidden_states=True, output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    return seen, out


def heads_of(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(T, H) -> (heads, T, d)."""
    t, h = x.shape
    return x.view(t, heads, h // heads).transpose(0, 1)


@pytest.mark.parametrize("layer", [0, 2, 5])  # blocks, 0-based
def test_every_step_equals_transformers_on_the_shipped_model(shipped, layer):
    model, hf, tok = shipped
    enc = encode(tok, TEXT, PAIR)
    t = enc.tensors()
    token = enc.tokens.index("[MASK]")
    tr = forward_pass.trace(model, t["input_ids"], token, layer, 2, t["token_type_ids"])
    seen, out = hf_intermediates(hf, t)
    s, heads = tr.steps, model.config.num_attention_heads
    for name in ("query", "key", "value"):
        assert_parity(getattr(s, name), heads_of(seen[(layer, name)], heads), msg=f"layer {layer} {name}")
    for name in ("merged", "attn_proj", "residual1", "attn_out", "ffn_pre", "ffn_act", "ffn_out", "residual2",
                 "output"):
        assert_parity(getattr(s, name), seen[(layer, name)], msg=lambda m, n=name: f"layer {layer} {n}: {m}")
    assert tr.layer == s.layer == layer and tr.head == 2
    assert_parity(s.x, out.hidden_states[layer][0])  # hidden_states[layer]: block layer's input
    assert_parity(s.probs, out.attentions[layer][0])
    assert_parity(torch.softmax(s.scores, -1), out.attentions[layer][0])  # the scores are softmax's input
    assert_parity(s.context, heads_of(seen[(layer, "merged")], heads))
    assert_parity(tr.hidden_states, torch.cat(out.hidden_states))  # every layer's output, (L + 1, T, H)
    assert_parity(tr.embeddings.output, out.hidden_states[0][0])
    for name, field in (("mlm_dense", "dense"), ("mlm_act", "act"), ("mlm_norm", "normed")):
        assert_parity(getattr(tr.mlm, field), seen[("mlm", name)][token], msg=name)
    logits = out.prediction_logits[0, token]
    assert_parity(tr.mlm.logits, logits)
    top_p, top_i = logits.softmax(-1).topk(5)
    assert tr.mlm.top_ids == top_i.tolist() and tr.mlm.top_probs == pytest.approx(top_p.tolist(), abs=1e-12)


def test_layer_outputs_equal_bertcores_own_forward_and_the_checks_say_so(shipped):
    model, _, tok = shipped
    t = encode(tok, TEXT).tensors()
    tr = forward_pass.trace(model, t["input_ids"], 1, 3, 11, t["token_type_ids"])  # block 3, the last head
    out = model.base_model(t["input_ids"], output_hidden_states=True, output_attentions=True)
    assert_parity(tr.hidden_states, torch.cat(out.hidden_states))
    assert_parity(tr.steps.probs, out.attentions[3][0])
    assert tr.matches(1e-9), tr.max_abs_diff
    assert set(tr.max_abs_diff) == {"embeddings", "formulas", "hidden_states", "attentions", "mlm_logits"}
    # the float32 model the page runs: the same checks pass at the page's tolerance
    lm = sources.load(sources.PACKAGED_MLM)
    assert forward_pass.trace(lm.model, t["input_ids"], 1, 3, 11).matches(1e-4)


def test_the_formula_checks_catch_a_step_that_is_not_its_formula(shipped):
    """formula_checks is 0 (float64 rounding) on the recorded steps, and names the step that was changed."""
    import dataclasses

    model, _, tok = shipped
    t = encode(tok, TEXT).tensors()
    tr = forward_pass.trace(model, t["input_ids"], 3, 2, 4)
    block = model.bert.encoder.layer[2]
    clean = forward_pass.formula_checks(tr.steps, block, model.config)
    assert max(clean.values()) < 1e-9, clean
    for field, step in (("residual1", "residual1"), ("probs", "probs"), ("ffn_act", "ffn_act")):
        broken = dataclasses.replace(tr.steps, **{field: getattr(tr.steps, field) * 1.001})
        diffs = forward_pass.formula_checks(broken, block, model.config)
        assert diffs[step] > 1e-6, (field, diffs)


def test_the_weighted_sum_and_the_score_row_are_what_the_formulas_say(shipped):
    model, _, tok = shipped
    t = encode(tok, TEXT).tensors()
    tr = forward_pass.trace(model, t["input_ids"], 3, 1, 4)
    s, i, h = tr.steps, 3, 4
    d = s.query.size(-1)
    row = s.key[h] @ s.query[h, i] / d ** 0.5  # (T,)
    assert_parity(s.scores[h, i], row)
    assert_parity(s.context[h, i], (torch.softmax(row, -1)[:, None] * s.value[h]).sum(0))
    assert_parity(s.residual1, s.x + s.attn_proj)


def pre_ln_model() -> torch.nn.Module:
    return double(tiny_bert(BertForPreTraining, seed=1, pre_layer_norm=True, num_hidden_layers=3))


@pytest.mark.parametrize("layer", [0, 2])  # blocks, 0-based
def test_a_pre_layer_norm_model_normalises_before_each_sub_layer(layer):
    model = pre_ln_model()
    ids = torch.tensor([[101, 7592, 2088, 103, 1012, 102]])
    tr = forward_pass.trace(model, ids, 3, layer, 0)
    out = model.bert(ids, output_hidden_states=True, output_attentions=True)
    assert tr.pre_layer_norm
    assert_parity(tr.hidden_states, torch.cat(out.hidden_states))
    assert_parity(tr.steps.probs, out.attentions[layer][0])
    block = model.bert.encoder.layer[layer]
    s = tr.steps
    assert_parity(s.attn_in, block.attention.output.LayerNorm(s.x))
    assert_parity(s.attn_out, s.residual1)  # no LayerNorm after the residual
    assert_parity(s.ffn_in, block.output.LayerNorm(s.attn_out))
    expected = s.residual2 if layer < 2 else model.bert.encoder.LayerNorm(s.residual2)  # the final LayerNorm
    assert_parity(s.output, expected)
    assert "LN(x)" in forward_pass.formulas(True)["residual1"]
    assert forward_pass.formulas(False)["attn_out"] == "h = LayerNorm(x + Attn(x))"


def test_a_model_without_an_mlm_head_is_traced_up_to_the_last_layer():
    lm = sources.load(sources.PACKAGED)
    hf = transformers.BertModel.from_pretrained(str(lm.path), attn_implementation="eager")
    model, hf = double(lm.model), double(hf)
    t = encode(lm.tokenizer, TEXT).tensors()
    tr = forward_pass.trace(model, t["input_ids"], 2, 5, 0)  # the last block
    assert tr.mlm is None and "no MLM head" in tr.no_mlm_reason
    with torch.no_grad():
        out = hf(**t, output_hidden_states=True, output_attentions=True)
    assert_parity(tr.hidden_states, torch.cat(out.hidden_states))
    assert_parity(tr.steps.probs, out.attentions[5][0])
    assert "mlm_logits" not in tr.max_abs_diff


@pytest.mark.parametrize("token, layer, head, match", [(9, 0, 0, "token"), (-1, 0, 0, "token"),
                                                       (0, -1, 0, r"layer must lie in 0\.\.5"),
                                                       (0, 6, 0, r"layer must lie in 0\.\.5"),
                                                       (0, 0, 12, r"head must lie in 0\.\.11"), (0, 0, -1, "head")])
def test_out_of_range_choices_are_clear_errors(shipped, token, layer, head, match):
    model, _, tok = shipped
    ids = encode(tok, "a short text").tensors()["input_ids"]  # 5 tokens
    with pytest.raises(TraceError, match=match):
        forward_pass.trace(model, ids, token, layer, head)
