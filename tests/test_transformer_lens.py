"""TransformerLens's own ``HookedEncoder`` is the judge of bertcore's site names: built from the same weights with
TransformerLens's converter (``pretrained/weight_conversions/bert.py``), every hook name both have holds the same
tensor, in float64, to 1e-9; and ``bertcore.run_with_cache`` / ``run_with_hooks`` behave as TransformerLens's.
The behaviours TransformerLens's own tests check of ``HookedEncoder`` (``tests/acceptance/test_hooked_encoder.py``:
the full model on a padded batch, the embeddings of a sentence pair, the MLM head, the [MASK] prediction, the
pooler and NSP head, the cache's keys) are checked here against ``HookedEncoder`` itself."""

import re
import threading
import warnings

import pytest
import torch
import transformers

import bertcore
from bertcore.loading import sources
from bertcore.tokenization.tokenizer import encode_batch
from tests.conftest import ROOT, hf_folder

tl = pytest.importorskip("transformer_lens")
from transformer_lens.pretrained.weight_conversions.bert import convert_bert_weights  # noqa: E402

PAIR = ("The keys to the old cabinet [MASK] on the kitchen table.", "Nobody had opened it for years.")


def hooked_encoder(hf: transformers.BertForPreTraining, dtype=torch.float64, tokenizer=None):
    """TransformerLens's ``HookedEncoder`` (CPU, ``dtype``) with ``hf``'s weights, as its converter writes them
    (``from_pretrained`` needs the hub; the config is what it would build for a BERT)."""
    c = hf.config
    cfg = tl.HookedTransformerConfig(
        d_model=c.hidden_size, d_head=c.hidden_size // c.num_attention_heads, n_heads=c.num_attention_heads,
        d_mlp=c.intermediate_size, n_layers=c.num_hidden_layers, n_ctx=c.max_position_embeddings,
        d_vocab=c.vocab_size, act_fn="gelu", normalization_type="LN", attention_dir="bidirectional",
        original_architecture="BertForMaskedLM", eps=c.layer_norm_eps, dtype=dtype, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = tl.HookedEncoder(cfg, tokenizer=tokenizer, move_to_device=False)
    report = model.load_state_dict(convert_bert_weights(hf, cfg), strict=False)
    assert not report.unexpected_keys and all(k.endswith((".mask", ".IGNORE")) for k in report.missing_keys)
    return model.eval()


@pytest.fixture(scope="module", params=["shipped", "tiny"])
def pair(request, tmp_path_factory):
    """``(bertcore's LoadedModel, TransformerLens's HookedEncoder, a sentence-pair Encoding)``, float64: the shipped
    MiniLM-MLM, and a tiny random BertForPreTraining."""
    if request.param == "shipped":
        lm = sources.load(sources.PACKAGED_MLM)
        hf = transformers.BertForPreTraining.from_pretrained(str(lm.path), attn_implementation="eager")
    else:
        folder, hf = hf_folder(tmp_path_factory.mktemp("tl"), "BertForPreTraining", seed=5)
        lm = sources.load(sources.ModelSource("local", str(folder)))
    lm.model.double()
    enc = bertcore.encode(lm.tokenizer, *PAIR, max_length=lm.max_length)
    yield lm, hooked_encoder(hf.double().eval()), enc
    lm.model.float()


def tl_run(model, enc_or_batch):
    t = enc_or_batch.tensors() if hasattr(enc_or_batch, "tensors") else enc_or_batch
    with torch.no_grad():
        return model.run_with_cache(t["input_ids"], token_type_ids=t["token_type_ids"],
                                    one_zero_attention_mask=t["attention_mask"])


def test_every_name_both_have_is_the_same_tensor(pair):
    """Every hook of ``HookedEncoder``'s cache that bertcore names too (``hook_normalized`` of every LayerNorm,
    ``hook_normalized_resid_post``, ``hook_full_embed`` included) equals bertcore's to 1e-9 in float64, and so do
    the logits; only TransformerLens's unembed hooks are missing here (the logits are the model's output)."""
    lm, model, enc = pair
    tl_logits, tl_cache = tl_run(model, enc)
    logits, cache = bertcore.run_with_cache(lm, enc)
    common = [k for k in tl_cache.keys() if k in cache]
    assert [k for k in tl_cache.keys() if k not in cache] == ["unembed.hook_in", "unembed.hook_out"]
    assert sum(k.endswith(".hook_normalized") for k in common) == 2 * lm.config.num_hidden_layers + 2
    for name in common:
        torch.testing.assert_close(cache[name], tl_cache[name], atol=1e-9, rtol=0, msg=lambda m, n=name: f"{n}: {m}")
    torch.testing.assert_close(logits, tl_logits, atol=1e-9, rtol=0)
    for i in range(lm.config.num_hidden_layers):  # the meaning, not only the agreement: before weight and bias
        x = cache[f"blocks.{i}.hook_resid_post"]
        centred = x - x.mean(-1, keepdim=True)
        torch.testing.assert_close(cache[f"blocks.{i}.ln2.hook_normalized"], centred / cache["scale", i, "ln2"])


def test_a_padded_batch_of_texts_gives_transformer_lens_logits(pair):
    """TransformerLens's ``test_full_model``: two texts of different lengths, padded; the logits of every real token
    equal ``HookedEncoder``'s with its ``one_zero_attention_mask``."""
    lm, model, _ = pair
    texts = ["Hello, world!", "this is another sequence of tokens"]
    logits, cache = bertcore.run_with_cache(lm, texts, names_filter="blocks.1.hook_normalized_resid_post")
    batch = encode_batch(lm.tokenizer, texts)
    tl_logits, tl_cache = tl_run(model, batch)
    keep = batch["attention_mask"].bool()
    assert not keep.all()  # the first text is padded
    torch.testing.assert_close(logits[keep], tl_logits[keep], atol=1e-9, rtol=0)
    torch.testing.assert_close(cache["blocks.1.hook_normalized_resid_post"][keep],
                               tl_cache["blocks.1.hook_normalized_resid_post"][keep], atol=1e-9, rtol=0)
    assert list(cache) == ["blocks.1.hook_normalized_resid_post"]


def test_the_mask_prediction_pooler_and_nsp_head_are_transformer_lens(pair):
    """``test_predictions``, ``test_bert_pooler``, ``test_nsp_head``: the token predicted at [MASK], the pooled [CLS]
    vector (``pooler.hook_pooler_out``) and the NSP logits (``nsp_head.hook_nsp_out``) are TransformerLens's."""
    lm, model, enc = pair
    t = enc.tensors()
    out = lm.model(**t, output_hidden_states=False)
    with torch.no_grad():
        resid = model.encoder_output(t["input_ids"], t["token_type_ids"], t["attention_mask"])
        pooled = model.pooler(resid)
        nsp = model.nsp_head(pooled)
        tl_logits = model(t["input_ids"], token_type_ids=t["token_type_ids"])
    mask = enc.input_ids.index(lm.tokenizer.mask_token_id)
    assert int(out.prediction_logits[0, mask].argmax()) == int(tl_logits[0, mask].argmax())
    torch.testing.assert_close(lm.encoder(**t).pooler_output, pooled, atol=1e-9, rtol=0)
    torch.testing.assert_close(out.seq_relationship_logits, nsp, atol=1e-9, rtol=0)


def test_run_with_hooks_is_transformer_lens_run_with_hooks(pair):
    """A TransformerLens hook, unchanged (it edits its argument in place and returns None), zeroes head 2 of block 1
    in both libraries: the same logits; a hook chosen by a predicate on names, returning a tensor, too."""
    lm, model, enc = pair
    t = enc.tensors()

    def zero_head(pattern, hook):
        assert hook.name == "blocks.1.attn.hook_pattern" and hook.layer() == 1
        pattern[:, 2] = 0.0

    def halve(resid, hook):
        return resid * 0.5

    hooks = [("blocks.1.attn.hook_pattern", zero_head), (lambda n: n.endswith("hook_mlp_out"), halve)]
    ours = bertcore.run_with_hooks(lm, enc, fwd_hooks=hooks)
    with torch.no_grad():
        theirs = model.run_with_hooks(t["input_ids"], token_type_ids=t["token_type_ids"], fwd_hooks=hooks)
    torch.testing.assert_close(ours, theirs, atol=1e-9, rtol=0)
    assert (ours - bertcore.run_with_cache(lm, enc, names_filter=[])[0]).abs().max() > 1e-3  # the hooks did act


def test_the_cache_is_indexed_as_transformer_lens_cache(pair):
    """``test_run_with_cache_mlm``'s keys are there; ``cache["pattern", 3]`` is ``act_name``'s site, a negative block
    counts from the last; a names filter keeps only what it selects; an unknown name raises with the known ones."""
    lm, _, enc = pair
    last = lm.config.num_hidden_layers - 1
    _, cache = bertcore.run_with_cache(lm, enc)
    for name in ["embed.hook_embed", "blocks.0.attn.hook_q", f"blocks.{last}.attn.hook_attn_scores",
                 f"blocks.{last}.hook_resid_post", "mlm_head.ln.hook_normalized", "hook_full_embed"]:
        assert name in cache
    assert cache["pattern", 1] is cache["blocks.1.attn.hook_pattern"]
    assert cache["resid_post", -1] is cache[f"blocks.{last}.hook_resid_post"]
    assert ("pattern", 1) in cache and "blocks.99.attn.hook_pattern" not in cache
    _, some = bertcore.run_with_cache(lm, enc, names_filter=lambda n: n.endswith("hook_pattern"))
    assert sorted(some) == sorted(f"blocks.{i}.attn.hook_pattern" for i in range(last + 1))
    with pytest.raises(KeyError, match="was not recorded"):
        some["blocks.0.hook_resid_pre"]
    with pytest.raises(ValueError, match="is not an intervention site"):
        bertcore.run_with_cache(lm, enc, names_filter=["blocks.0.hook_nothing"])


def test_run_with_hooks_belongs_to_its_call_across_threads(pair):
    """Two threads on one model: one runs with a hook that zeroes every pattern, the other plain; each gets the
    numbers it gets alone (nothing is attached to the model)."""
    lm, _, enc = pair
    hooks = [(lambda n: n.endswith("hook_pattern"), lambda p, hook: torch.zeros_like(p))]
    alone_hooked = bertcore.run_with_hooks(lm, enc, fwd_hooks=hooks)
    alone_plain = bertcore.run_with_cache(lm, enc, names_filter=[])[0]
    results, errors = {"hooked": [], "plain": []}, []

    def work(kind):
        try:
            for _ in range(5):
                results[kind].append(bertcore.run_with_hooks(lm, enc, fwd_hooks=hooks) if kind == "hooked"
                                     else bertcore.run_with_cache(lm, enc, names_filter=[])[0])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in results]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert all(torch.equal(r, alone_hooked) for r in results["hooked"])
    assert all(torch.equal(r, alone_plain) for r in results["plain"])


def page_blocks() -> tuple[str, str]:
    """docs/transformer-lens.md's python blocks: (TransformerLens's, bertcore's), each column joined in order."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "transformer-lens.md").read_text("utf-8"), re.DOTALL)
    columns = {"# TransformerLens": [], "# bertcore": []}
    for block in blocks:
        columns[block.splitlines()[0].strip()].append(block)
    assert len(columns["# TransformerLens"]) == len(columns["# bertcore"]) >= 5
    return "\n".join(columns["# TransformerLens"]), "\n".join(columns["# bertcore"])


def test_the_coming_from_transformer_lens_page_runs_and_both_columns_agree(monkeypatch):
    """Each column of the page runs as written (TransformerLens's ``from_pretrained`` gives a ``HookedEncoder`` of
    the shipped model's weights: the hub is out of reach); every variable both define holds the same value."""
    lm = sources.load(sources.PACKAGED_MLM)
    hf = transformers.BertForPreTraining.from_pretrained(str(lm.path), attn_implementation="eager").eval()
    theirs = hooked_encoder(hf, torch.float32, lm.tokenizer)
    monkeypatch.setattr(tl.HookedEncoder, "from_pretrained", classmethod(lambda cls, name, **kw: theirs))
    tl_code, ours_code = page_blocks()
    tl_ns, ours_ns = {}, {}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(compile(tl_code, "docs/transformer-lens.md (TransformerLens)", "exec"), tl_ns)  # noqa: S102
    exec(compile(ours_code, "docs/transformer-lens.md (bertcore)", "exec"), ours_ns)  # noqa: S102
    compared = []
    for name in ("prediction", "logits", "pattern", "normalized", "block_output", "ablated", "patched"):
        a, b = ours_ns[name], tl_ns[name]
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=0, msg=lambda m, n=name: f"{n}: {m}")
        else:
            assert a == b, name
        compared.append(name)
    assert (ours_ns["ablated"] - ours_ns["logits"]).abs().max() > 1e-3  # the hook acted
    assert (ours_ns["patched"] - ours_ns["logits"]).abs().max() > 1e-4
