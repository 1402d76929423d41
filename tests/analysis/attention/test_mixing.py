"""bertcore.analysis.attention.mixing / decompose: context-mixing measures.

The decompositions rebuild the real outputs of the model's own modules (float64 copies), every method equals an
independent computation written as the authors' code is (einsums over the model's own hidden states and
attentions, value zeroing as T plain reruns of each layer), on a tiny random model and on the shipped one."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertcore import BertForPreTraining, BertModel
from bertcore.loading import sources
from bertcore.analysis.attention import decompose, mixing, rollout
from bertcore.tokenization.tokenizer import encode

from tests.conftest import tiny_bert

SENTENCE = "The keys to the cabinet are on the table."  # the Attention page's default (explorer/app_pages/attention.py)


def randomized(model, seed=1):
    """The test's own float64 copy of ``model`` with every weight, bias and LayerNorm parameter random (BERT's init
    leaves biases at 0 and LayerNorms at 1/0, which would hide a dropped bias or gamma)."""
    model = copy.deepcopy(model).double().eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            p.copy_(1 + 0.3 * noise if "LayerNorm.weight" in name else 0.15 * noise)
    return model


def tiny_inputs(t=9, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 5000, (1, t), generator=gen)
    ids[0, 0], ids[0, -1] = 101, 102
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids)}


@pytest.fixture(scope="module")
def shipped():
    return sources.load(sources.PACKAGED_MLM)


@pytest.fixture(scope="module")
def shipped64(shipped):
    return copy.deepcopy(shipped.model).double().eval()


@pytest.fixture(scope="module")
def tiny():
    return randomized(tiny_bert(BertForPreTraining, intermediate_size=37))


def cases(tiny, shipped, shipped64):
    return [(tiny, tiny_inputs()), (shipped64, encode(shipped.tokenizer, SENTENCE).tensors())]


# ----------------------------------------------------------------------------- independent computations


def authors(model, inputs):
    """Every per-layer measure as the authors' code computes it (Kobayashi et al.'s ``transformed_layer`` /
    ``weighted_layer`` einsums, Ferrando et al.'s ALTI, GlobEnc's second LayerNorm), from the model's own hidden
    states, attentions and module outputs. Returns method -> (L, T, T)."""
    base = model.base_model
    cfg = base.config
    heads, d, hid = cfg.num_attention_heads, cfg.head_size, cfg.hidden_size
    with torch.no_grad():
        out = base(**inputs, output_attentions=True, output_hidden_states=True)
        res = {k: [] for k in ("norm", "norm_res_ln", "globenc", "alti")}
        for layer, module in enumerate(base.encoder.layer):
            hs, probs = out.hidden_states[layer], out.attentions[layer]  # (1, T, H), (1, heads, T, T)
            t = hs.shape[1]
            value_layer = module.attention.self.value(hs).view(1, t, heads, d).permute(0, 2, 1, 3)  # bhsv
            dense = module.attention.output.dense.weight.view(hid, heads, d)
            transformed = torch.einsum("bhsv,dhv->bhsd", value_layer, dense)
            weighted = torch.einsum("bhks,bhsd->bhksd", probs, transformed)
            summed = weighted.sum(1)  # (1, T, T, H)
            res["norm"].append(summed.norm(dim=-1)[0])
            residual = torch.einsum("sk,bsd->bskd", torch.eye(t, dtype=hs.dtype), hs)
            with_res = summed + residual
            real1 = module.attention(hs)[0]  # LN1's real output
            ln1 = module.attention.output.LayerNorm
            pre1 = module.attention.output.dense(module.attention.self(hs)[0]) + hs
            var1 = pre1.var(-1, unbiased=False, keepdim=True).unsqueeze(2)
            vec1 = (with_res - with_res.mean(-1, keepdim=True)) / torch.sqrt(var1 + ln1.eps) * ln1.weight
            res["norm_res_ln"].append(vec1.norm(dim=-1)[0])
            c = -(vec1 - real1.unsqueeze(2)).abs().sum(-1) + real1.abs().sum(-1).unsqueeze(-1)
            c = c.clamp(min=0)
            res["alti"].append((c / c.sum(-1, keepdim=True))[0])
            pre2 = module.output.dense(module.intermediate(real1)) + real1
            ln2 = module.output.LayerNorm
            var2 = pre2.var(-1, unbiased=False, keepdim=True).unsqueeze(2)
            vec2 = (vec1 - vec1.mean(-1, keepdim=True)) / torch.sqrt(var2 + ln2.eps) * ln2.weight
            n2 = vec2.norm(dim=-1)[0]
            res["globenc"].append(n2 / n2.sum(-1, keepdim=True))
    return {k: torch.stack(v).numpy() for k, v in res.items()}


def value_zeroing_reruns(model, inputs):
    """Mohebbi et al.'s loop: for each layer and token j, rerun the layer's modules with j's values zeroed (all
    heads) and the original attention weights; 1 - cos against the real layer output; rows divided by their sum."""
    base = model.base_model
    cfg = base.config
    heads, d = cfg.num_attention_heads, cfg.head_size
    with torch.no_grad():
        out = base(**inputs, output_attentions=True, output_hidden_states=True)
        scores = []
        for layer, module in enumerate(base.encoder.layer):
            hs, probs = out.hidden_states[layer], out.attentions[layer]
            t = hs.shape[1]
            m = torch.zeros(t, t, dtype=torch.float64)
            for j in range(t):
                v = module.attention.self.value(hs).view(1, t, heads, d).transpose(1, 2).clone()  # (1, heads, T, d)
                v[:, :, j] = 0
                context = (probs @ v).transpose(1, 2).reshape(1, t, -1)
                x1 = module.attention.output(context, hs)
                o = module.output(module.intermediate(x1), x1)[0]
                m[:, j] = 1 - F.cosine_similarity(o, out.hidden_states[layer + 1][0], dim=-1)
            scores.append(m / m.sum(-1, keepdim=True))
    return torch.stack(scores).numpy()


# ----------------------------------------------------------------------------- decompositions rebuild real outputs


@pytest.mark.parametrize("which", ["tiny", "shipped"])
def test_decompositions_rebuild_the_models_real_outputs(which, tiny, shipped, shipped64):
    model, inputs = cases(tiny, shipped, shipped64)[which == "shipped"]
    with torch.no_grad():
        out = model.base_model(**inputs, output_hidden_states=True)
        for layer, module in enumerate(model.base_model.encoder.layer):
            hs = out.hidden_states[layer]
            real = {"attention": module.attention.output.dense(module.attention.self(hs)[0])[0],
                    "ln1": module.attention(hs)[0][0], "layer": out.hidden_states[layer + 1][0]}
            for stage in decompose.STAGES:
                dec = decompose.layer_decomposition(model, inputs, layer, stage)
                assert dec.vectors.dtype == torch.float64
                torch.testing.assert_close(dec.rebuilt(), real[stage], atol=1e-9, rtol=0)
                torch.testing.assert_close(dec.output, real[stage], atol=1e-9, rtol=0)
                # every term matters: dropping any one moves the sum far beyond the tolerance
                for name, term in dec.rest.items():
                    assert float((dec.rebuilt() - term - real[stage]).abs().max()) > 1e-3, (stage, name)
                diag = dec.vectors[torch.arange(len(real[stage])), torch.arange(len(real[stage]))]
                assert float((dec.rebuilt() - diag - real[stage]).abs().max()) > 1e-3
            assert set(dec.rest) == {"b_O", "beta1", "ffn", "beta2"}


def test_the_rest_terms_are_the_biases_carried_through_the_layernorms(tiny):
    inputs = tiny_inputs()
    module = tiny.bert.encoder.layer[1]
    bo = module.attention.output.dense.bias
    att = decompose.layer_decomposition(tiny, inputs, 1, "attention")
    torch.testing.assert_close(att.rest["b_O"], bo.expand_as(att.rest["b_O"]), atol=0, rtol=0)
    ln1 = decompose.layer_decomposition(tiny, inputs, 1, "ln1")
    pre = att.output + tiny.bert(**inputs, output_hidden_states=True).hidden_states[1][0]
    std = torch.sqrt(pre.var(-1, unbiased=False, keepdim=True) + module.attention.output.LayerNorm.eps)
    expect = module.attention.output.LayerNorm.weight * (bo - bo.mean()) / std
    torch.testing.assert_close(ln1.rest["b_O"], expect, atol=1e-12, rtol=0)


# ----------------------------------------------------------------------------- each method = the authors' computation


@pytest.mark.parametrize("which", ["tiny", "shipped"])
def test_methods_equal_the_authors_computations(which, tiny, shipped, shipped64):
    model, inputs = cases(tiny, shipped, shipped64)[which == "shipped"]
    ref = authors(model, inputs)
    for method, expect in ref.items():
        np.testing.assert_allclose(mixing.mixing(model, inputs, method), expect, atol=1e-9, err_msg=method)
    np.testing.assert_allclose(mixing.mixing(model, inputs, "value_zeroing"), value_zeroing_reruns(model, inputs),
                               atol=1e-9)
    with torch.no_grad():
        att = torch.stack(model.base_model(**inputs, output_attentions=True).attentions)[:, 0].mean(1)
    np.testing.assert_allclose(mixing.mixing(model, inputs, "attention"), att.numpy(), atol=1e-12)


@pytest.mark.parametrize("act", ["relu", "gelu_new", "silu"])
def test_value_zeroing_with_other_activations_equals_the_reruns(act):
    model = randomized(tiny_bert(BertForPreTraining, intermediate_size=37, hidden_act=act), seed=3)
    inputs = tiny_inputs(t=6, seed=4)
    np.testing.assert_allclose(mixing.mixing(model, inputs, "value_zeroing"), value_zeroing_reruns(model, inputs),
                               atol=1e-9)


def test_norm_is_the_norm_of_the_decomposition_vectors(tiny):
    inputs = tiny_inputs(t=7, seed=3)
    got = mixing.mixing(tiny, inputs, "norm")
    for layer in range(2):
        vec = decompose.layer_decomposition(tiny, inputs, layer, "attention").vectors
        np.testing.assert_allclose(got[layer], vec.norm(dim=-1).numpy(), atol=1e-12)


def test_float32_model_matches_its_float64_copy_and_rows_sum_to_one(shipped, shipped64):
    inputs = encode(shipped.tokenizer, SENTENCE).tensors()
    for method in mixing.METHODS:
        m32 = mixing.mixing(shipped.model, inputs, method)
        m64 = mixing.mixing(shipped64, inputs, method)
        assert m32.dtype == np.float64 and m32.shape == (6, 12, 12)
        np.testing.assert_allclose(m32, m64, atol=2e-5, err_msg=method)
        if method not in mixing.RAW_METHODS:
            assert (m32 >= 0).all()
            np.testing.assert_allclose(m32.sum(-1), 1.0, atol=1e-6, err_msg=method)
        rolled = mixing.mixing(shipped.model, inputs, method, rollout=True)
        assert (rolled >= 0).all()
        np.testing.assert_allclose(rolled.sum(-1), 1.0, atol=1e-6, err_msg=method)


def test_shares_on_cls_and_sep_of_the_default_sentence(shipped):
    """An implementation that agrees with the authors' code gives the mean row's share on [CLS] + [SEP]
    in the shipped model's first layer as 30% (attention), 15% (norm) and 11% (value zeroing)."""
    enc = encode(shipped.tokenizer, SENTENCE)
    special = np.array(enc.special_tokens_mask, dtype=bool)
    for method, expect in (("attention", 0.30), ("norm", 0.15), ("value_zeroing", 0.11)):
        share = mixing.special_share(mixing.mixing(shipped.model, enc.tensors(), method), special)
        assert abs(share[0] - expect) < 0.01, (method, share)


# ----------------------------------------------------------------------------- value zeroing, rollout, errors


def test_zeroing_a_token_whose_values_are_already_zero_changes_nothing(tiny):
    inputs = tiny_inputs(t=8, seed=5)
    model = copy.deepcopy(tiny)
    j = 3
    value = model.bert.encoder.layer[0].attention.self.value
    with torch.no_grad():
        x = model.bert(**inputs, output_hidden_states=True).hidden_states[0][0, j]
        value.bias.copy_(-(value.weight @ x))  # token j's value vectors are zero in every head of layer 0
        assert float(value(x).abs().max()) < 1e-12
    vz = mixing.mixing(model, inputs, "value_zeroing")
    assert float(np.abs(vz[0, :, j]).max()) < 1e-12  # zeroing j changes no output
    assert (vz[0, :, np.arange(8) != j] > 0).all() and (vz[1, :, j] > 1e-6).all()


def test_aggregate_is_rollout_with_the_residual_only_where_it_is_missing(tiny):
    inputs = tiny_inputs()
    for method in mixing.METHODS:
        per_layer = mixing.normalize_rows(mixing.mixing(tiny, inputs, method))
        if method in mixing.WITHOUT_RESIDUAL:
            per_layer = 0.5 * per_layer + 0.5 * np.eye(per_layer.shape[-1])
        expect = [per_layer[0]]
        for a in per_layer[1:]:
            expect.append(a @ expect[-1])  # Ferrando et al.'s / Abnar & Zuidema's compute_joint_attention
        np.testing.assert_allclose(mixing.mixing(tiny, inputs, method, rollout=True), np.stack(expect), atol=1e-12)
        weight = rollout.RESIDUAL_WEIGHT if method in mixing.WITHOUT_RESIDUAL else 0.0
        raw = mixing.normalize_rows(mixing.mixing(tiny, inputs, method))
        np.testing.assert_allclose(mixing.aggregate(raw, method), rollout.rollout(raw[:, None], weight), atol=1e-12)


def test_pre_ln_models_refuse_the_post_ln_methods_and_norm_still_rebuilds():
    model = tiny_bert(BertModel, pre_layer_norm=True).double()
    inputs = tiny_inputs()
    for method in mixing.POST_LN_ONLY:
        with pytest.raises(ValueError, match="post-LN"):
            mixing.mixing(model, inputs, method)
    assert mixing.mixing(model, inputs, "norm").shape == (2, 9, 9)
    with torch.no_grad():
        hs = model(**inputs, output_hidden_states=True).hidden_states[1]
        module = model.encoder.layer[1]
        real = module.attention.output.dense(module.attention.self(module.attention.output.LayerNorm(hs))[0])[0]
    dec = decompose.layer_decomposition(model, inputs, 1, "attention")
    torch.testing.assert_close(dec.rebuilt(), real, atol=1e-9, rtol=0)


def test_errors_and_the_model_is_left_alone(tiny):
    inputs = tiny_inputs()
    with pytest.raises(ValueError, match="method"):
        mixing.mixing(tiny, inputs, "rollout")
    with pytest.raises(ValueError, match="one encoding"):
        mixing.mixing(tiny, {k: v.repeat(2, 1) for k, v in inputs.items()}, "norm")
    with pytest.raises(ValueError, match="eval mode"):
        mixing.mixing(copy.deepcopy(tiny).train(), inputs, "norm")
    with pytest.raises(ValueError, match="layer"):
        decompose.layer_decomposition(tiny, inputs, 2, "ln1")
    with pytest.raises(ValueError, match="one flag per token"):
        mixing.special_share(np.ones((2, 9, 9)), [True])
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    grads = [p.requires_grad for p in tiny.parameters()]
    for method in mixing.METHODS:
        mixing.mixing(tiny, inputs, method, rollout=True)
    assert not tiny.training and grads == [p.requires_grad for p in tiny.parameters()]
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in tiny.modules())
    assert all(torch.equal(v, tiny.state_dict()[k]) for k, v in before.items())
