"""Transcoder features on the Features page's machinery (bertcore.sae.features, report, explore, catalog): a random
transcoder set is indexed from what each block's feed-forward sub-layer READS (not the block's output), its stored
index follows the transcoder's files, its logit effect is the block's LayerNorm of the mean residual sum plus the
decoder direction, and the catalog lists transcoder folders by block."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.modeling.heads import BertForMaskedLM
from bertcore.readouts.fill_mask import mlm_head_of
from bertcore.sae import catalog, explore, features, report
from bertcore.sae import io as sae_io
from bertcore.sae import transcoder as T
from bertcore.sae.model import TopKSAE
from bertcore.sae.stream import pad, record_sites
from tests.circuits.test_attribution import random_transcoders
from tests.conftest import tiny_bert

from .test_features import SENTENCES

BLOCK = 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("spacy")
    from bertcore.loading import sources
    from bertcore.modeling import heads
    from tests.conftest import save_tiny_bert

    folder = save_tiny_bert(tmp_path_factory.mktemp("tcfeat") / "mlm", heads.BertForPreTraining)
    return sources.load(sources.ModelSource("local", str(folder), "tiny"))


@pytest.fixture(scope="module")
def indexed(tiny, tmp_path_factory):
    """A random transcoder of block 1 saved as a run writes it, and its index on the labelled sentences."""
    tc = random_transcoders(tiny.config, d_sae=24, seed=1)[BLOCK]
    folder = T.save(tc, tmp_path_factory.mktemp("tcrun") / "sae" / sae_io.folder_name(BLOCK), BLOCK)
    text = features.labelled_text(tiny.tokenizer, SENTENCES)
    index = report.index_features(folder, tiny.model, tiny.tokenizer, tiny.path, len(SENTENCES), text=text)
    return T.load(folder)[0], folder, text, index


def _direct(lm, tc, chunks, site):
    """``tc.encode`` of what ``site`` holds on each chunk's tokens, ``(B, T, d_sae)``: the recomputation."""
    batch = pad(chunks, lm.tokenizer.pad_token_id)
    with torch.no_grad():
        return tc.encode(record_sites(lm.model, batch, [site], site)[site].float())


def test_contexts_are_the_transcoders_code_of_the_feed_forward_input(tiny, indexed):
    tc, folder, text, index = indexed
    fired = np.flatnonzero(index.fired > 0)
    assert len(fired) >= 3, "the random transcoder should fire somewhere"
    ff_input, _ = T.sites(tiny.config, BLOCK)
    output = sae_io.site(tiny.config, BLOCK)  # the block's output, what an SAE of block 1 would read
    for f in fired[:3]:
        rows = [int(r) for r in index.top_rows[f] if r >= 0][:4]
        sents = [text.sentence_of(r) for r in rows]
        chunks = [text.token_ids[text.starts[s]:text.starts[s + 1]] for s in sents]
        shades = explore.context_activations(tiny.model, tiny.tokenizer, tc, BLOCK, chunks, int(f))
        direct = _direct(tiny, tc, chunks, ff_input)[..., f].numpy()
        wrong = _direct(tiny, tc, chunks, output)[..., f].numpy()
        for i, (r, s, c) in enumerate(zip(rows, sents, chunks)):
            np.testing.assert_allclose(shades[i], direct[i, :len(c)], rtol=1e-5, atol=1e-5)
            here = r - int(text.starts[s])
            assert index.top_values[f][rows.index(r)] == pytest.approx(direct[i, here], rel=2e-3, abs=2e-3)
        assert not np.allclose(direct, wrong, atol=1e-3), "the block's output gives other activations"
    typed = explore.text_features(tiny.model, tiny.tokenizer, tc, BLOCK, SENTENCES[0])
    enc = tiny.tokenizer(SENTENCES[0])["input_ids"]
    np.testing.assert_allclose(typed.z, _direct(tiny, tc, [np.array(enc)], ff_input)[0].numpy(), rtol=1e-5, atol=1e-5)


def test_the_logit_effect_is_the_block_layernorm_of_the_mean_residual_plus_the_direction(tiny, indexed):
    tc, folder, text, index = indexed
    assert index.mean.shape == (tc.d_in + tc.d_out,)  # the mean feed-forward input and output side by side
    resid = f"blocks.{BLOCK}.hook_resid_post"
    chunks = [text.token_ids[text.starts[s]:text.starts[s + 1]] for s in range(len(text.starts) - 1)]
    batch = pad(chunks, tiny.tokenizer.pad_token_id)
    recorded = record_sites(tiny.model, batch, [resid], resid)[resid][batch["attention_mask"].bool()]
    mean_resid = recorded.double().mean(0).float()
    np.testing.assert_allclose(index.mean[:tc.d_in] + index.mean[tc.d_in:], mean_resid.numpy(), atol=1e-4)
    f = int(np.argmax(index.fired))
    strength = float(index.top_values[f][0])
    up, down = explore.logit_effect(tiny.model, tiny.tokenizer, tc, BLOCK, f, index.mean, strength, n=3)
    encoder, head = mlm_head_of(tiny.model)
    norm = encoder.encoder.layer[BLOCK].output.LayerNorm
    with torch.no_grad():
        delta = head(norm(mean_resid + strength * tc.W_dec[f] / tc.out_scale)) - head(norm(mean_resid))
    assert [t for t, _ in up] == tiny.tokenizer.convert_ids_to_tokens(delta.topk(3).indices.tolist())
    assert up[0][1] == pytest.approx(float(delta.max()), rel=1e-4)
    assert down[0][1] == pytest.approx(float(delta.min()), rel=1e-4)


def test_a_pre_ln_transcoder_has_no_logit_effect_and_no_steering_here():
    model = tiny_bert(BertForMaskedLM, pre_layer_norm=True)
    tc = random_transcoders(model.config, d_sae=8)[0]
    from bertcore.tokenization.tokenizer import load_tokenizer
    from bertcore.loading import sources

    tok = load_tokenizer(sources.packaged_model_dir())
    with pytest.raises(sae_io.SAEError, match="post-LN"):
        explore.logit_effect(model, tok, tc, 0, 0, np.zeros(2 * tc.d_in, np.float32), 1.0)
    with pytest.raises(sae_io.SAEError, match="Circuits page"):
        explore.steering_edit(tc, 0, "add", 1.0)


def test_the_stored_index_follows_the_transcoders_files(tiny, indexed, tmp_path):
    tc, _, text, index = indexed
    folder = T.save(tc, tmp_path / "layer-2", BLOCK)
    params = report.feature_params(BLOCK, len(SENTENCES))
    features.write(folder, tiny.path, index, params)
    again = features.read(folder, tiny.path, params)
    assert again is not None and np.array_equal(again.top_rows, index.top_rows)
    np.testing.assert_array_equal(again.mean, index.mean)
    with torch.no_grad():
        tc.W_enc[:, 0] *= -1  # a retrained transcoder: same shapes, other weights
    try:
        T.save(tc, folder, BLOCK)
        assert features.read(folder, tiny.path, params) is None  # stale: not used
    finally:
        with torch.no_grad():
            tc.W_enc[:, 0] *= -1


def test_the_catalog_lists_transcoders_by_block_beside_saes(tiny, tmp_path):
    h, n = tiny.config.hidden_size, tiny.config.num_hidden_layers
    runs = tmp_path / "runs"
    for block, tc in random_transcoders(tiny.config, d_sae=8).items():
        T.save(tc, runs / "20261129-tc" / "sae" / sae_io.folder_name(block), block)
    sae_io.save(TopKSAE(h, 16, 2), runs / "20261128-sae" / "sae" / sae_io.folder_name(0), 0)
    T.save(T.Transcoder(8, 8, 4, 2), runs / "20261127-other" / "sae" / "layer-1", 0)  # another model's width
    problems: list = []
    both = catalog.available(tiny.path, h, n, runs, problems, kinds=("sae", "transcoder"))
    assert [e.label for e in both] == ["run 20261129-tc, transcoder, block 0 (layer 1)",
                                       "run 20261129-tc, transcoder, block 1 (layer 2)",
                                       "run 20261128-sae, SAE, layer 1"]
    assert [e.kind for e in both] == ["transcoder", "transcoder", "sae"] and both[1].cfg["layer"] == 1
    assert len(problems) == 1 and "hidden size" in problems[0][1]
    assert [e.kind for e in catalog.available(tiny.path, h, n, runs)] == ["sae"]  # SAEs only by default
    loaded, cfg = catalog.load(both[1].folder, h, n)
    assert loaded.kind == "transcoder" and cfg["layer"] == 1
    with pytest.raises(sae_io.SAEError, match="hidden size"):
        catalog.load(runs / "20261127-other" / "sae" / "layer-1", h, n)


def test_shipped_transcoders_beside_the_model_are_listed(tiny, tmp_path):
    import shutil

    model = shutil.copytree(tiny.path, tmp_path / "model")
    T.save(random_transcoders(tiny.config, d_sae=8)[1], model / catalog.TRANSCODERS_DIR / "layer-2", 1)
    found = catalog.available(model, tiny.config.hidden_size, tiny.config.num_hidden_layers,
                              kinds=("sae", "transcoder"))
    assert [e.label for e in found] == ["shipped, transcoder, block 1 (layer 2)"]
