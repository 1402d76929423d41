"""bertcore.modeling.interventions: every named site, in every family, is the tensor transformers' own modules compute;
edits at the sites are exact; they belong to one call (no hooks on the model)."""

import threading

import pytest
import torch
import transformers

from bertcore.loading import sources
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.modeling.interventions import (BLOCK_SITES, EMBED_SITES, FINAL_SITES, MLM_HEAD_SITES, Interventions,
                                             act_name, eval_mode, hidden_state_site, layer_norm_scale_sites,
                                             missing_reason)
from tests.conftest import SMALL_VOCAB, hf_folder, save_with_tokenizer, tiny_bert
from tests.test_families import inputs as family_inputs, save_family, tokenizers  # noqa: F401 - a fixture

LAYER_NORM_SITES = ("hook_scale", "hook_normalized", "hook_out")
IDS = torch.tensor([[2, 10, 11, 12, 4, 13, 3]])


def all_sites(config) -> list[str]:
    """Every site a model of ``config`` has (the MLM head's included)."""
    names = [*EMBED_SITES, *FINAL_SITES, *MLM_HEAD_SITES]
    names += [f"blocks.{i}.{s}" for i in range(config.num_hidden_layers) for s in BLOCK_SITES]
    return [n for n in names if n.startswith("mlm_head.") or missing_reason(config, n) is None]


# ----------------------------------------------------------------------------- an independent forward: transformers
# Which transformers module computes each site: ``(module path, "in" | "out")`` with ``{i}`` for the block. The
# q / k / v / z sites are reshaped to (B, T, n, d); a LayerNorm's scale is sqrt(var + eps) of its hooked input.
BERT_LIKE = {
    "embed.hook_embed": ("{base}.embeddings.word_embeddings", "out"),
    "embed.hook_pos_embed": ("{base}.embeddings.position_embeddings", "out"),
    "embed.hook_token_type_embed": ("{base}.embeddings.token_type_embeddings", "out"),
    "embed.ln": ("{base}.embeddings.LayerNorm", None),
    "hook_full_embed": ("{base}.embeddings", "out"),
    "hook_resid_pre": ("{base}.encoder.layer.{i}", "in"),
    "attn.hook_q": ("{base}.encoder.layer.{i}.attention.self.query", "out"),
    "attn.hook_k": ("{base}.encoder.layer.{i}.attention.self.key", "out"),
    "attn.hook_v": ("{base}.encoder.layer.{i}.attention.self.value", "out"),
    "attn.hook_z": ("{base}.encoder.layer.{i}.attention.output.dense", "in"),
    "hook_attn_out": ("{base}.encoder.layer.{i}.attention.output.dense", "out"),
    "hook_resid_mid": ("{base}.encoder.layer.{i}.attention.output.LayerNorm", "in"),
    "ln1": ("{base}.encoder.layer.{i}.attention.output.LayerNorm", None),
    "mlp.hook_pre": ("{base}.encoder.layer.{i}.intermediate.dense", "out"),
    "mlp.hook_post": ("{base}.encoder.layer.{i}.output.dense", "in"),
    "hook_mlp_out": ("{base}.encoder.layer.{i}.output.dense", "out"),
    "hook_resid_post": ("{base}.encoder.layer.{i}.output.LayerNorm", "in"),
    "ln2": ("{base}.encoder.layer.{i}.output.LayerNorm", None),
}
PRE_LN = {**{k: v for k, v in BERT_LIKE.items() if k not in ("hook_resid_mid", "hook_resid_post")},
          "ln1": ("{base}.encoder.layer.{i}.attention.LayerNorm", None),
          "hook_resid_mid": ("{base}.encoder.layer.{i}.intermediate.LayerNorm", "in"),
          "ln2": ("{base}.encoder.layer.{i}.intermediate.LayerNorm", None),
          "hook_resid_post": ("{base}.encoder.layer.{i}", "out"),
          "ln_final": ("{base}.encoder.LayerNorm", None)}
DISTILBERT = {
    "embed.hook_embed": ("distilbert.embeddings.word_embeddings", "out"),
    "embed.hook_pos_embed": ("distilbert.embeddings.position_embeddings", "out"),
    "embed.ln": ("distilbert.embeddings.LayerNorm", None),
    "hook_full_embed": ("distilbert.embeddings", "out"),
    "hook_resid_pre": ("distilbert.transformer.layer.{i}", "in"),
    "attn.hook_q": ("distilbert.transformer.layer.{i}.attention.q_lin", "out"),
    "attn.hook_k": ("distilbert.transformer.layer.{i}.attention.k_lin", "out"),
    "attn.hook_v": ("distilbert.transformer.layer.{i}.attention.v_lin", "out"),
    "attn.hook_z": ("distilbert.transformer.layer.{i}.attention.out_lin", "in"),
    "hook_attn_out": ("distilbert.transformer.layer.{i}.attention.out_lin", "out"),
    "hook_resid_mid": ("distilbert.transformer.layer.{i}.sa_layer_norm", "in"),
    "ln1": ("distilbert.transformer.layer.{i}.sa_layer_norm", None),
    "mlp.hook_pre": ("distilbert.transformer.layer.{i}.ffn.lin1", "out"),
    "mlp.hook_post": ("distilbert.transformer.layer.{i}.ffn.lin2", "in"),
    "hook_mlp_out": ("distilbert.transformer.layer.{i}.ffn.lin2", "out"),
    "hook_resid_post": ("distilbert.transformer.layer.{i}.output_layer_norm", "in"),
    "ln2": ("distilbert.transformer.layer.{i}.output_layer_norm", None),
    "mlm_head.hook_pre": ("vocab_transform", "out"),
    "mlm_head.hook_post": ("vocab_layer_norm", "in"),
    "mlm_head.ln": ("vocab_layer_norm", None),
}
MODERNBERT = {
    "embed.hook_embed": ("model.embeddings.tok_embeddings", "out"),
    "embed.ln": ("model.embeddings.norm", None),
    "hook_full_embed": ("model.embeddings", "out"),
    "hook_resid_pre": ("model.layers.{i}", "in"),
    "attn.hook_z": ("model.layers.{i}.attn.Wo", "in"),
    "hook_attn_out": ("model.layers.{i}.attn.Wo", "out"),
    "ln1": ("model.layers.{i}.attn_norm", None),
    "hook_resid_mid": ("model.layers.{i}.mlp_norm", "in"),
    "ln2": ("model.layers.{i}.mlp_norm", None),
    "mlp.hook_post": ("model.layers.{i}.mlp.Wo", "in"),
    "hook_mlp_out": ("model.layers.{i}.mlp.Wo", "out"),
    "hook_resid_post": ("model.layers.{i}", "out"),
    "ln_final": ("model.final_norm", None),
    "mlm_head.hook_pre": ("head.dense", "out"),
    "mlm_head.hook_post": ("head.norm", "in"),
    "mlm_head.ln": ("head.norm", None),
}
MLM_HEADS = {"bert": "cls.predictions.transform", "roberta": "lm_head", "electra": "generator_predictions"}


def site_map(family: str) -> dict[str, tuple[str, str | None]]:
    """Site -> the transformers module of ``family`` (bert-preln: transformers' RobertaPreLayerNorm)."""
    if family == "distilbert":
        return DISTILBERT
    if family == "modernbert":
        return MODERNBERT
    pre_ln = family == "bert-preln"
    base = "roberta_prelayernorm" if pre_ln else family
    table = {k: (v[0].replace("{base}", base), v[1]) for k, v in (PRE_LN if pre_ln else BERT_LIKE).items()}
    head = MLM_HEADS["roberta" if pre_ln else family]
    norm = "layer_norm" if family == "roberta" or pre_ln else "LayerNorm"
    table.update({"mlm_head.hook_pre": (f"{head}.dense", "out"), "mlm_head.hook_post": (f"{head}.{norm}", "in"),
                  "mlm_head.ln": (f"{head}.{norm}", None)})
    if family == "electra":
        table["hook_resid_pre"] = ("electra.encoder.layer.{i}", "in")  # after embeddings_project
    return table


@torch.no_grad()
def hf_sites(hf, family: str, batch: dict, names: list[str], heads: int) -> dict:
    """What transformers' modules compute at each of ``names`` (those the table maps), by forward hooks on a
    private transformers model (never on a bertcore model)."""
    table, seen, handles = site_map(family), {}, []
    modules = dict(hf.named_modules())

    def hook(path):
        def fn(module, args, out):
            seen[path] = (args[0] if args else None, out[0] if isinstance(out, tuple) else out)
        return fn

    wanted = {}
    for name in names:
        i, site = (None, name) if not name.startswith("blocks.") else (name.split(".")[1], name.split(".", 2)[2])
        key = site.rsplit(".hook_", 1)[0] if site.endswith(LAYER_NORM_SITES) else site
        if site == "hook_normalized_resid_post":
            key = "ln2"
        if key not in table:
            continue
        path = table[key][0].replace("{i}", str(i))
        if path not in modules:
            continue
        wanted[name] = (path, table[key][1], site)
        if path not in seen:
            handles.append(modules[path].register_forward_hook(hook(path)))
            seen[path] = None
    try:
        out = hf(**batch, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    result = {}
    for name, (path, side, site) in wanted.items():
        x_in, x_out = seen[path]
        if site.endswith(("hook_scale", "hook_normalized")):  # TransformerLens's LayerNorm: before weight and bias
            scale = (x_in.var(-1, unbiased=False, keepdim=True) + modules[path].eps).sqrt()
            result[name] = scale if site.endswith("hook_scale") else (x_in - x_in.mean(-1, keepdim=True)) / scale
            continue
        x = x_out if side in ("out", None) else x_in
        if site in ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z"):
            x = x.reshape(*x.shape[:2], heads, -1)
        result[name] = x
    for i, probs in enumerate(out.attentions):
        if f"blocks.{i}.attn.hook_pattern" in names:
            result[f"blocks.{i}.attn.hook_pattern"] = probs
    return result


FAMILIES = ["bert", "bert-preln", "roberta", "distilbert", "electra", "modernbert"]


@pytest.fixture(scope="module")
def family_models(tmp_path_factory, tokenizers):  # noqa: F811 - the fixture imported above
    """``{family: (ours, transformers', batch)}``: a random tiny model of each family, both in float64."""
    out = {}
    for family in FAMILIES:
        root = tmp_path_factory.mktemp(family)
        if family == "bert":
            folder, hf = hf_folder(root, "BertForMaskedLM")
        elif family == "bert-preln":
            folder = save_with_tokenizer(root / "m", tiny_bert(BertForMaskedLM, seed=3, pre_layer_norm=True,
                                                               vocab_size=len(SMALL_VOCAB)), SMALL_VOCAB)
            hf = transformers.AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager")
        else:
            folder, hf = save_family(root / "m", family, "mlm", tokenizers)
        loaded = sources.load(sources.ModelSource("local", str(folder)))
        if family in ("bert", "bert-preln"):
            batch = {"input_ids": torch.tensor([[2, 10, 11, 12, 4, 13, 3], [2, 14, 15, 3, 0, 0, 0]]),
                     "attention_mask": torch.tensor([[1] * 7, [1, 1, 1, 1, 0, 0, 0]])}
        else:
            batch = family_inputs(loaded, family)
        out[family] = (loaded.model.double(), hf.double().eval(), batch)
    return out


@pytest.mark.parametrize("family", FAMILIES)
@torch.no_grad()
def test_every_site_is_what_transformers_computes(family_models, family):
    """Recorded in float64, each site equals the tensor transformers' module computes, to 1e-9; the model's outputs
    are unchanged by recording (the LayerNorm written out, the explicit attention path)."""
    ours, hf, batch = family_models[family]
    cfg = ours.config
    names = all_sites(cfg)
    iv = Interventions(record=names)
    out = ours(**batch, interventions=iv, output_hidden_states=True)
    plain = ours(**batch, output_hidden_states=True)
    torch.testing.assert_close(out.logits, plain.logits, atol=1e-9, rtol=0)
    reference = hf_sites(hf, family, batch, names, cfg.num_attention_heads)
    keep = batch["attention_mask"].bool()  # compare real tokens (padded queries may differ in what they attend to)
    for name, expected in reference.items():
        got = iv.recorded[name]
        assert got.shape == expected.shape or got.shape[0] == 1, (name, got.shape, expected.shape)
        got, expected = torch.broadcast_tensors(got, expected)
        if name.endswith("hook_pattern"):
            got, expected = got.transpose(1, 2)[keep], expected.transpose(1, 2)[keep]
        elif got.dim() >= 3 and got.shape[:2] == keep.shape:
            got, expected = got[keep], expected[keep]
        torch.testing.assert_close(got, expected, atol=1e-9, rtol=0, msg=lambda m, n=name: f"{n}: {m}")
    covered = {n.split(".", 2)[-1] if n.startswith("blocks.") else n for n in reference}
    assert len(covered) >= 12, sorted(covered)  # most kinds of site are checked against transformers
    for k, h in enumerate(plain.hidden_states):
        torch.testing.assert_close(iv.recorded[hidden_state_site(cfg, k)], h, atol=1e-9, rtol=0)


@pytest.mark.parametrize("family", ["bert", "modernbert"])
@torch.no_grad()
def test_recording_in_float32_is_the_plain_forward_to_1e_6(family_models, family):
    ours, _, batch = family_models[family]
    model = ours.float()
    try:
        iv = Interventions(record=all_sites(model.config))
        plain = model(**batch, output_hidden_states=True)
        model(**batch, interventions=iv)
        for k, h in enumerate(plain.hidden_states):
            torch.testing.assert_close(iv.recorded[hidden_state_site(model.config, k)], h, atol=1e-6, rtol=0)
    finally:
        ours.double()


@pytest.mark.parametrize("family", FAMILIES)
@torch.no_grad()
def test_an_identity_edit_at_every_site_changes_nothing(family_models, family):
    ours, _, batch = family_models[family]
    names = all_sites(ours.config)
    recorded = ours(**batch, interventions=Interventions(record=names)).logits
    edited = ours(**batch, interventions=Interventions({n: (lambda x: x.clone()) for n in names})).logits
    assert torch.equal(edited, recorded)
    assert (edited - ours(**batch).logits).abs().max() < 1e-12


@pytest.mark.parametrize("family", ["bert", "bert-preln", "modernbert"])
@torch.no_grad()
def test_zeroing_a_head_at_the_pattern_is_head_ablation(family_models, family):
    ours, _, batch = family_models[family]
    heads = ours.config.num_attention_heads
    mask = torch.ones(ours.config.num_hidden_layers, heads, dtype=torch.float64)
    mask[1, 2] = 0

    def zero(p):  # (B, heads, T, T)
        p = p.clone()
        p[:, 2] = 0
        return p

    ablated = ours(**batch, head_mask=mask).logits
    edited = ours(**batch, interventions=Interventions({"blocks.1.attn.hook_pattern": zero})).logits
    torch.testing.assert_close(edited, ablated, atol=1e-12, rtol=0)
    assert (edited - ours(**batch).logits).abs().max() > 1e-4


@torch.no_grad()
def test_a_frozen_layernorm_scale_makes_the_layernorm_linear(family_models):
    """Replacing ``ln1.hook_scale`` by the recorded scale gives the same output; scaling the input of the
    LayerNorm then scales ``hook_normalized`` (the circuit-tracing linearisation), and ``hook_out`` is it times the
    weight plus the bias."""
    ours, _, batch = family_models["bert"]
    names = ["blocks.0.ln1.hook_scale", "blocks.0.ln1.hook_normalized", "blocks.0.ln1.hook_out"]
    iv = Interventions(record=names)
    ours(**batch, interventions=iv)
    scale = iv.recorded["blocks.0.ln1.hook_scale"]
    again = Interventions({"blocks.0.ln1.hook_scale": lambda s: scale.clone()}, record=names[1:])
    ours(**batch, interventions=again)
    for name in names[1:]:
        torch.testing.assert_close(again.recorded[name], iv.recorded[name], atol=1e-12, rtol=0)
    ln = ours.bert.encoder.layer[0].attention.output.LayerNorm
    torch.testing.assert_close(iv.recorded["blocks.0.ln1.hook_out"],
                               iv.recorded["blocks.0.ln1.hook_normalized"] * ln.weight + ln.bias, atol=1e-12, rtol=0)
    doubled = Interventions({"blocks.0.hook_resid_mid": lambda x: 2 * x, "blocks.0.ln1.hook_scale": lambda s: scale},
                            record=names[1:])
    ours(**batch, interventions=doubled)
    torch.testing.assert_close(doubled.recorded["blocks.0.ln1.hook_normalized"],
                               2 * iv.recorded["blocks.0.ln1.hook_normalized"], atol=1e-9, rtol=0)
    torch.testing.assert_close((doubled.recorded["blocks.0.ln1.hook_out"] - ln.bias) / ln.weight,
                               2 * iv.recorded["blocks.0.ln1.hook_normalized"], atol=1e-9, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
@torch.no_grad()
def test_the_layer_norm_scale_sites_are_every_scale_the_model_computes(family_models, family):
    """``layer_norm_scale_sites`` lists each ``hook_scale`` site the family has, each once; every one is recorded by
    a forward pass (the MLM head's through the head's tap)."""
    ours, _, batch = family_models[family]
    names = layer_norm_scale_sites(ours.config)
    assert sorted(names) == sorted(n for n in all_sites(ours.config) if n.endswith(".hook_scale"))
    assert len(set(names)) == len(names) and "mlm_head.ln.hook_scale" in names
    assert ("ln_final.hook_scale" in names) == bool(ours.config.pre_layer_norm)
    iv = Interventions(record=names)
    ours(**batch, interventions=iv)
    assert set(iv.recorded) == set(names)


# ----------------------------------------------------------------------------- names, errors, threads
def test_names_follow_transformer_lens():
    assert act_name("pattern", 3) == "blocks.3.attn.hook_pattern"
    assert act_name("resid_post", 0) == "blocks.0.hook_resid_post"
    assert act_name("scale", 2, "ln1") == "blocks.2.ln1.hook_scale"
    assert act_name("embed.hook_embed") == "embed.hook_embed"
    with pytest.raises(ValueError, match="numbered from 0"):
        act_name("z", -1)
    with pytest.raises(ValueError, match="is not an intervention site"):
        act_name("hook_nothing", 1)


@pytest.fixture(params=[False, True], ids=["post_ln", "pre_ln"])
def model(request):
    return tiny_bert(BertForMaskedLM, num_hidden_layers=3, pre_layer_norm=request.param).eval()


@torch.no_grad()
def test_an_edit_changes_only_its_own_call(model):
    plain = model(IDS).logits
    edited = model(IDS, interventions=Interventions({"blocks.1.hook_mlp_out": torch.zeros_like})).logits
    assert not torch.allclose(edited, plain)
    assert torch.equal(model(IDS).logits, plain)  # the next call, without it, is the plain path
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_bad_sites_and_edits_are_refused(model):
    with pytest.raises(ValueError, match="is not an intervention site"):
        Interventions(record=["blocks.0.ffn"])
    with pytest.raises(ValueError, match="an intervention site is a name"):
        Interventions(record=[("attn", 1)])  # the old tuple form is gone
    with pytest.raises(ValueError, match="has 3 blocks, numbered 0..2"):
        model(IDS, interventions=Interventions(record=["blocks.3.hook_mlp_out"]))
    with pytest.raises(ValueError, match="only a rotary model"):
        model(IDS, interventions=Interventions(record=["blocks.0.attn.hook_rot_q"]))
    with pytest.raises(ValueError, match="returned shape"):
        model(IDS, interventions=Interventions({"blocks.0.hook_attn_out": lambda x: x[:, :2]}))
    if not model.config.pre_layer_norm:
        with pytest.raises(ValueError, match="'ln_final.hook_scale' does not exist: only a pre-LN"):
            model(IDS, interventions=Interventions(record=["ln_final.hook_scale"]))


def test_recording_every_site_beside_plain_fill_mask_on_one_model_leaves_both_exact(model):
    """Two threads share one model: one records every site, the other runs plain forwards; each gets exactly what
    it gets alone (the edits travel with the call, nothing is set on the model)."""
    names = all_sites(model.config)
    with torch.no_grad():
        plain_alone = model(IDS).logits
        recorded_alone = Interventions(record=names)
        model(IDS, interventions=recorded_alone)
    errors: list[str] = []

    def recorder():
        for _ in range(30):
            iv = Interventions(record=names)
            with torch.no_grad():
                model(IDS, interventions=iv)
            if any(not torch.equal(iv.recorded[n], recorded_alone.recorded[n]) for n in names):
                errors.append("recording")

    def filler():
        for _ in range(60):
            with torch.no_grad():
                if not torch.equal(model(IDS).logits, plain_alone):
                    errors.append("plain")

    threads = [threading.Thread(target=recorder), threading.Thread(target=filler)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@torch.no_grad()
def test_inputs_embeds_is_the_input_ids_path(model):
    embeds = model.bert.embeddings.word_embeddings(IDS)
    torch.testing.assert_close(model(None, inputs_embeds=embeds).logits, model(IDS).logits, rtol=0, atol=0)
    from bertcore.modeling.embeddings import InputError

    with pytest.raises(InputError, match="exactly one"):
        model(IDS, inputs_embeds=embeds)
    with pytest.raises(InputError, match="exactly one"):
        model(None)


def test_eval_mode_leaves_an_eval_model_alone_and_restores_a_training_one(model):
    model.eval()
    with eval_mode(model):
        assert not model.training
    assert not model.training
    model.train()
    with eval_mode(model):
        assert not model.training
    assert model.training


def test_every_site_is_in_the_library_docs():
    """docs/library.md's table names every site (so a new site cannot go undocumented)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text(encoding="utf-8")
    for site in (*EMBED_SITES, *FINAL_SITES, *MLM_HEAD_SITES, *BLOCK_SITES):
        owner, _, short = site.rpartition(".")  # ("attn", "hook_q"): the table groups a module's sites on one row
        assert short in text and f"{owner}." in text, site
