"""bertcore.sae.transcoder: the JumpReLU skip transcoder trained by BatchTopK, and its SAELens files."""

import json

import pytest
import torch

from bertcore.sae.io import SAEError
from bertcore.sae.model import resample
from bertcore.sae.transcoder import Transcoder, aux_k_loss, hook_names, load, save, sites
from tests.conftest import tiny_config


def _data(n: int, d: int = 16, seed: int = 0):
    """A toy feed-forward block: y = relu(x A) B / 8 + 0.3 x (a sparse part and a linear part)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(d, 48, generator=torch.Generator().manual_seed(1))
    b = torch.randn(48, d, generator=torch.Generator().manual_seed(2))
    x = torch.randn(n, d, generator=g)
    return x, torch.relu(x @ a) @ b / 8 + 0.3 * x


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    tc = Transcoder(16, 16, 128, 6, in_scale=0.9, out_scale=0.4)
    opt = torch.optim.Adam(tc.parameters(), lr=3e-3)
    tc.train()
    for step in range(300):
        x, y = _data(256, seed=step)
        out = tc(x, y)
        loss = (out.x_hat - out.target).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        tc.remove_parallel_grad()
        opt.step()
        tc.normalise_decoder()
    return tc.eval()


def _fvu(y, y_hat):
    return float((y - y_hat).pow(2).sum() / (y - y.mean(0)).pow(2).sum())


@torch.no_grad()
def test_training_learns_the_block_and_the_threshold_keeps_about_k(trained):
    x, y = _data(2048, seed=999)
    assert _fvu(y, trained.reconstruct(x)) < 0.3
    z = trained.encode(x)
    assert 3 <= float((z > 0).sum(-1).float().mean()) <= 12  # k = 6 on average in training
    assert trained.W_skip.abs().max() > 0  # the skip path learned the linear part


@torch.no_grad()
def test_sae_lens_loads_the_file_and_computes_the_same(trained, tmp_path):
    from sae_lens import SAE

    save(trained, tmp_path / "t", 2, model_name="tiny")
    cfg = json.loads((tmp_path / "t" / "cfg.json").read_text())
    assert cfg["architecture"] == "jumprelu_skip_transcoder" and cfg["d_out"] == 16
    assert (cfg["metadata"]["hook_name"], cfg["metadata"]["hook_name_out"]) == hook_names(2)
    x, _ = _data(64, seed=5)
    theirs = SAE.load_from_disk(str(tmp_path / "t"))
    torch.testing.assert_close(theirs(x), trained.reconstruct(x), atol=1e-5, rtol=1e-5)
    ours, meta = load(tmp_path / "t")
    assert meta["layer"] == 2
    torch.testing.assert_close(ours.reconstruct(x), trained.reconstruct(x), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ours.encode(x), trained.encode(x), atol=1e-6, rtol=1e-6)


def test_bad_files_get_clear_messages(trained, tmp_path):
    folder = save(trained, tmp_path / "t", 0)
    weights = folder / "sae_weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(SAEError, match="cannot be read"):
        load(folder)
    with pytest.raises(SAEError, match="not found"):
        load(tmp_path / "nothing")
    other = save(trained, tmp_path / "u", 0)
    cfg = json.loads((other / "cfg.json").read_text())
    cfg["d_in"] = 17
    (other / "cfg.json").write_text(json.dumps(cfg))
    with pytest.raises(SAEError, match="W_enc has shape"):
        load(other)


def test_sites_of_post_and_pre_ln_blocks():
    assert sites(tiny_config(num_hidden_layers=2), 1) == ("blocks.1.ln1.hook_out", "blocks.1.hook_mlp_out")
    assert sites(tiny_config(pre_layer_norm=True), 0) == ("blocks.0.ln2.hook_out", "blocks.0.hook_mlp_out")
    with pytest.raises(ValueError, match="numbered 0..1"):
        sites(tiny_config(num_hidden_layers=2), 2)


def test_aux_loss_and_resampling_touch_only_dead_latents(trained):
    tc = Transcoder(16, 16, 32, 4)
    tc.train()
    x, y = _data(128)
    out = tc(x, y)
    dead = torch.zeros(32, dtype=torch.bool)
    assert float(aux_k_loss(tc, out, dead, 8)) == 0.0
    dead[[3, 7]] = True
    assert float(aux_k_loss(tc, out, dead, 8)) > 0
    before = tc.W_dec.detach().clone()
    assert resample(tc, dead, out, generator=torch.Generator().manual_seed(0)) == 2
    changed = (tc.W_dec != before).any(dim=1)
    assert changed.nonzero().flatten().tolist() == [3, 7]


@torch.no_grad()
def test_keep_latents_gives_the_same_output_where_the_dropped_latents_are_inactive(trained):
    from bertcore.sae.transcoder import keep_latents

    x, _ = _data(512, seed=7)
    fired = (trained.encode(x) > 0).any(0)  # (d_sae,)
    kept = keep_latents(trained, fired)
    assert kept.d_sae == int(fired.sum()) < trained.d_sae  # some latents never fire on these inputs
    torch.testing.assert_close(kept.reconstruct(x), trained.reconstruct(x), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(kept.encode(x), trained.encode(x)[:, fired])
    # dropping a latent that fires changes the output: the copy is not the original in disguise
    busiest = int((trained.encode(x) > 0).sum(0).argmax())
    fewer = keep_latents(trained, torch.tensor([i for i in range(trained.d_sae) if i != busiest]))
    assert (fewer.reconstruct(x) - trained.reconstruct(x)).abs().max() > 1e-3
    with pytest.raises(ValueError, match="at least one"):
        keep_latents(trained, torch.zeros(trained.d_sae, dtype=torch.bool))
    with pytest.raises(ValueError, match="0.."):
        keep_latents(trained, torch.tensor([trained.d_sae]))
