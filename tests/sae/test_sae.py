"""The TopK SAE, its metrics and its on-disk format (bertcore.sae.model, metrics, io)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from bertcore.sae import io as sae_io
from bertcore.sae.metrics import fvu, mlm_ce, spliced
from bertcore.sae.model import TopKSAE, aux_k_loss, mse
from tests.conftest import assert_close_scaled


def identity_sae(d: int) -> TopKSAE:
    """Latents +e_i and -e_i with k = d: exactly one of each pair is positive, so the reconstruction is x."""
    sae = TopKSAE(d, 2 * d, d)
    eye = torch.eye(d)
    with torch.no_grad():
        sae.W_enc.copy_(torch.cat([eye, -eye], dim=1))
        sae.W_dec.copy_(torch.cat([eye, -eye], dim=0))
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    return sae


def test_topk_keeps_exactly_k_latents_per_token():
    sae = TopKSAE(16, 64, 5, seed=1)
    with torch.no_grad():
        sae.b_enc.fill_(10.0)  # every pre-activation positive: the ReLU after TopK removes none
    x = torch.randn(50, 16)
    z = sae.encode(x)
    assert ((z != 0).sum(-1) == 5).all()
    pre = sae.pre_acts(x * sae.norm_scale)
    assert torch.equal(z.topk(5, dim=-1).indices.sort(-1).values, pre.topk(5, dim=-1).indices.sort(-1).values)
    sae_neg = TopKSAE(16, 64, 5, seed=1)  # with negative pre-activations, at most k
    assert ((sae_neg.encode(x) != 0).sum(-1) <= 5).all()


def test_decoder_rows_stay_unit_norm_after_a_step():
    sae = TopKSAE(8, 32, 4, seed=0)
    opt = torch.optim.Adam(sae.parameters(), lr=0.1)
    x = torch.randn(64, 8) * 3
    out = sae(x)
    loss = mse(out.x, out.x_hat) + aux_k_loss(sae, out, torch.arange(32) % 2 == 0, 8)
    loss.backward()
    sae.remove_parallel_grad()
    parallel = (sae.W_dec.grad * sae.W_dec).sum(1)
    assert parallel.abs().max() < 1e-4 * sae.W_dec.grad.abs().max()  # no component along the rows
    opt.step()
    assert (sae.W_dec.norm(dim=1) - 1).abs().max() > 1e-3  # the raw step leaves the sphere ...
    sae.normalise_decoder()
    torch.testing.assert_close(sae.W_dec.norm(dim=1), torch.ones(32))  # ... and the renormalisation brings it back


def test_fvu_of_known_cases():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]])
    assert fvu(x, x) == 0.0
    assert fvu(x, x.mean(0).expand_as(x)) == pytest.approx(1.0)
    # residual x - mean scaled by one half: a quarter of the variance is left
    assert fvu(x, x.mean(0) + 0.5 * (x - x.mean(0))) == pytest.approx(0.25)
    # mean (3, 2); deviations (-2, 0), (0, 2), (2, -2): total sum of squares 16; an error of 1 in one coordinate
    x_hat = x.clone()
    x_hat[0, 0] += 1.0
    assert fvu(x, x_hat) == pytest.approx(1 / 16)


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    from bertcore.loading import sources
    from bertcore.modeling import heads
    from tests.conftest import save_tiny_bert

    folder = save_tiny_bert(tmp_path_factory.mktemp("sae") / "mlm", heads.BertForPreTraining)
    return sources.load(sources.ModelSource("local", str(folder), "tiny"))


def test_a_perfect_sae_spliced_in_changes_no_loss(tiny_mlm):
    from bertcore.sae.stream import chunk_documents

    tok = tiny_mlm.tokenizer
    docs = [[tok("the cat sat on the mat and the dog slept", add_special_tokens=False)["input_ids"]] * 3] * 4
    chunks = chunk_documents(docs, tok.cls_token_id, tok.sep_token_id, 24)
    d = tiny_mlm.config.hidden_size
    saes = {0: identity_sae(d), 1: identity_sae(d)}  # keyed by block, 0-based: both blocks of the tiny model
    means = {layer: torch.zeros(d).numpy() for layer in saes}
    result = spliced(tiny_mlm.model, tok, saes, chunks, means, n_chunks=8, batch_chunks=4)
    assert result.masked > 0
    assert result.delta_sae == {0: 0.0, 1: 0.0}
    assert result.share_of_zero(1) == 0.0
    with pytest.raises(ValueError, match=r"blocks: \[0, 1\]"):
        result.share_of_zero(2)
    assert all(v != 0 for v in result.delta_zero.values())  # the scale is not zero: the edit is applied
    broken = identity_sae(d)
    with torch.no_grad():
        broken.W_dec[:d] *= 0.5  # the positive halves decoded at half strength
    edits = {"blocks.0.hook_normalized_resid_post": broken.reconstruct}
    batch_loss = mlm_ce(tiny_mlm.model, _masked(tok, chunks), edits)
    assert batch_loss != mlm_ce(tiny_mlm.model, _masked(tok, chunks))


def _masked(tok, chunks):
    from bertcore.sae.metrics import masked_batch

    return masked_batch(tok, chunks[:4], seed=0)


def test_saelens_loads_our_file_with_the_same_activations(tmp_path):
    sae_lens = pytest.importorskip("sae_lens")
    sae = TopKSAE(24, 96, 6, norm_scale=2.7, seed=3)
    with torch.no_grad():
        sae.b_enc.normal_(0, 0.1)
        sae.b_dec.normal_(0, 0.5)
    folder = sae_io.save(sae, tmp_path / "ours", layer=2, model_name="tiny")  # block 2 (0-based)
    cfg = json.loads((folder / "cfg.json").read_text())
    assert cfg["metadata"]["hook_name"] == "bert.encoder.layer.2" and cfg["k"] == 6
    theirs = sae_lens.SAE.load_from_disk(folder, device="cpu")
    x = torch.randn(40, 24) * 5
    with torch.no_grad():  # float32 on both sides: 1e-5 of the activations' magnitude (docs/LAYERING.md, Parity)
        assert_close_scaled(theirs.encode(x), sae.encode(x), rel=1e-5)
        assert_close_scaled(theirs.decode(theirs.encode(x)), sae.decode(sae.encode(x)), rel=1e-5)
    # and the reverse: a file SAELens wrote loads here
    theirs.save_model(tmp_path / "theirs")
    back, back_cfg = sae_io.load(tmp_path / "theirs")
    assert back_cfg["layer"] == 2
    with torch.no_grad():
        assert_close_scaled(back.encode(x), theirs.encode(x), rel=1e-5)


def test_bad_sae_files_get_a_sentence(tmp_path):
    sae = TopKSAE(8, 16, 2)
    folder = sae_io.save(sae, tmp_path / "s", layer=2)
    weights = folder / sae_io.WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(sae_io.SAEError, match="truncated|cannot be read"):
        sae_io.load(folder)
    sae_io.save(sae, folder, layer=2)
    _, cfg = sae_io.load(folder)
    with pytest.raises(sae_io.SAEError, match="hidden size is 32"):
        sae_io.check_fits(cfg, hidden_size=32, num_layers=6)
    with pytest.raises(sae_io.SAEError, match=r"has 1 layers \(blocks 0\.\.0\)"):
        sae_io.check_fits(cfg, hidden_size=8, num_layers=1)
    sae_io.check_fits(cfg, hidden_size=8, num_layers=3)  # block 2 is the last of 3
    with pytest.raises(sae_io.SAEError, match="not found"):
        sae_io.load(tmp_path / "nothing")


def test_an_saes_layer_is_the_block_it_reads():
    """Blocks from 0 (hook_name's number); files and people name them by the label, block + 1."""
    assert sae_io.hook_name(3) == "bert.encoder.layer.3" and sae_io.layer_of("bert.encoder.layer.3") == 3
    assert sae_io.layer_of("encoder.layer.0") == 0 and sae_io.folder_name(1) == "layer-2" and sae_io.label(5) == 6
    with pytest.raises(sae_io.SAEError, match="0-based block"):
        sae_io.hook_name(-1)
    with pytest.raises(sae_io.SAEError, match=r"0\.\.5"):
        sae_io.hook_name(6, num_layers=6)


def test_resampling_gives_dead_latents_the_error_directions_and_fresh_adam_moments():
    from bertcore.sae.model import resample

    torch.manual_seed(0)
    sae = TopKSAE(8, 32, 2, seed=0)
    x = torch.randn(64, 8)
    opt = torch.optim.Adam(sae.parameters(), lr=1e-3)
    out = sae(x)
    mse(out.x, out.x_hat).backward()
    opt.step()  # Adam moments everywhere
    out = sae(x)
    dead = torch.zeros(32, dtype=torch.bool)
    dead[:5] = True
    kept = {name: getattr(sae, name).detach().clone() for name in ("W_dec", "W_enc", "b_enc")}
    assert resample(sae, dead, out, opt, torch.Generator().manual_seed(0)) == 5
    err = (out.x - out.x_hat).detach()
    directions = err / err.norm(dim=-1, keepdim=True)
    # each new decoder row is one token's error direction (unit norm), the encoder column along it, b_enc 0
    assert torch.allclose((sae.W_dec[:5] @ directions.T).max(dim=1).values, torch.ones(5), atol=1e-5)
    assert torch.allclose(F.cosine_similarity(sae.W_enc[:, :5].T, sae.W_dec[:5]), torch.ones(5), atol=1e-5)
    assert torch.all(sae.b_enc[:5] == 0)
    # the alive latents are untouched, their moments too; the dead ones' moments start again
    assert torch.equal(sae.W_dec[5:], kept["W_dec"][5:]) and torch.equal(sae.W_enc[:, 5:], kept["W_enc"][:, 5:])
    assert torch.equal(sae.b_enc[5:], kept["b_enc"][5:])
    for param, dead_part, alive_part in ((sae.W_dec, (slice(0, 5),), (slice(5, None),)),
                                         (sae.W_enc, (slice(None), slice(0, 5)), (slice(None), slice(5, None)))):
        state = opt.state[param]
        assert torch.all(state["exp_avg_sq"][dead_part] == 0) and torch.any(state["exp_avg_sq"][alive_part] != 0)
    assert resample(sae, torch.zeros(32, dtype=torch.bool), out, opt) == 0


def test_the_card_gives_each_layer_its_own_k_and_held_out_counts(tmp_path):
    from bertcore.sae.report import card

    folders = []
    for block, k, tokens, masked in ((0, 4, 1_000_720, 4_082), (1, 3, 203_148, 2_017)):
        folder = sae_io.save(TopKSAE(8, 16, k), tmp_path / sae_io.folder_name(block), layer=block)
        sae_io.write_metrics(folder, {"layer": sae_io.label(block), "hook_name": sae_io.hook_name(block),
                                      "fvu": 0.09, "l0": k,
                                      "dead": 0.01, "tokens": tokens, "ce_clean": 3.8, "delta_ce_sae": 0.1,
                                      "delta_ce_zero": 5.0, "delta_ce_mean": 4.0, "masked": masked})
        folders.append(folder)
    rows = [line for line in card(folders, tmp_path, ["cmd"]).splitlines() if line.startswith("| 1 (") or
            line.startswith("| 2 (")]
    assert "| 4 |" in rows[0] and "1,000,720" in rows[0] and "4,082" in rows[0]
    assert "| 3 |" in rows[1] and "203,148" in rows[1] and "2,017" in rows[1]
