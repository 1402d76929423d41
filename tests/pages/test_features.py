"""AppTest of the Features page on a tiny fill-mask model with an SAE in a run folder: every tab paints without an
exception box; without an SAE the page says how to get one."""

from bertcore.sae import features, report
from bertcore.sae import io as sae_io
from bertcore.sae.model import TopKSAE

from .conftest import assert_clean, charts, messages, page


def _sae_run(root, source):
    from bertcore.loading import sources

    lm = sources.load(source)
    sae = TopKSAE(lm.config.hidden_size, 48, 4, seed=1)
    folder = sae_io.save(sae, root / "20261126-sae-test" / "sae" / sae_io.folder_name(0), layer=0)  # layer-1: block 0
    text = features.labelled_text(lm.tokenizer, ["The keys to the cabinet are on the table.",
                                                 "The president spoke to Congress in Washington."] * 12)
    index = features.collect(lm.model, lm.tokenizer, sae, 0, text, n_random=64)
    features.write(folder, lm.path, index, report.feature_params(0, report.QUICK_SENTENCES))
    return folder


def test_features_page_every_tab(mlm_source, runs_root):
    _sae_run(runs_root, mlm_source)
    at = page("features", mlm_source)
    assert_clean(at)
    assert [m.label for m in at.metric][:2] == ["Layer", "Features"]
    assert at.metric[0].value == "1 of 2"  # block 0, shown as the UI's "layer 1"
    assert charts(at) >= 4  # the token strip, the histogram, the logit effect, purity
    at.text_input(key="feat_search").set_value("cabinet").run()
    at.number_input(key="feat_steer_f").set_value(3).run()
    at.radio(key="feat_steer_mode").set_value("clamp").run()
    assert_clean(at)
    assert any("unsteered" in m.value for m in at.markdown)
    at.text_input(key="feat_steer_text").set_value("no mask here").run()
    assert any("[MASK]" in m for m in messages(at)["info"])
    assert not [w for w in messages(at)["warning"] if "cut off" in w]
    at.text_input(key="feat_text").set_value("word " * 600).run()  # over the model's positions: said
    assert_clean(at)
    assert [w for w in messages(at)["warning"] if "this model reads at most" in w and "cut off" in w]
    at.text_input(key="feat_text").set_value("   ").run()
    assert_clean(at)


def test_features_page_without_an_sae(mlm_source, runs_root):
    at = page("features", mlm_source)
    assert_clean(at)
    assert any("Train page" in m for m in messages(at)["info"])  # none: how to get one


def test_saes_that_do_not_fit_or_are_cut_get_a_sentence(mlm_source, runs_root):
    sae_io.save(TopKSAE(16, 32, 4), runs_root / "20261126-other" / "sae" / "layer-1", layer=0)
    sae_io.save(TopKSAE(32, 64, 4), runs_root / "20261126-deep" / "sae" / "layer-9", layer=8)  # block 8 of 2
    cut = sae_io.save(TopKSAE(32, 64, 4), runs_root / "20261126-cut" / "sae" / "layer-1", layer=0)
    weights = cut / sae_io.WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:64])  # a truncated sae_weights.safetensors
    at = page("features", mlm_source)
    assert_clean(at)
    shown = " ".join(m.value for m in at.markdown)
    assert "hidden size is 32" in shown and "has 2 layers" in shown  # each left out with its reason
    assert any("truncated" in m or "cannot be read" in m for m in messages(at)["error"])


def _transcoder_run(root, source):
    """A run of random transcoders (one per block) for the tiny model, block 0's indexed, with a metrics.json as
    bertcore.sae.replacement.evaluate_set writes it."""
    from bertcore.loading import sources
    from bertcore.sae import transcoder as T

    from ..circuits.test_attribution import random_transcoders

    lm = sources.load(source)
    tcs = random_transcoders(lm.config, d_sae=32)
    metrics = {"fvu": 0.25, "l0": 12.0, "dead": 0.03, "delta_ce": 0.4, "d_sae": 32, "d_sae_trained": 40,
               "tokens": 1000}
    folders = {b: T.save(tc, root / "20261129-000000-tc" / "sae" / sae_io.folder_name(b), b, metrics=metrics)
               for b, tc in tcs.items()}
    text = features.labelled_text(lm.tokenizer, ["The keys to the cabinet are on the table.",
                                                 "The president spoke to Congress in Washington."] * 12)
    index = features.collect(lm.model, lm.tokenizer, tcs[0], 0, text, n_random=64)
    features.write(folders[0], lm.path, index, report.feature_params(0, report.QUICK_SENTENCES))
    return lm, tcs, folders


def test_features_page_with_a_transcoder(mlm_source, runs_root):
    """The page lists the run's transcoders by block, reads their metrics.json, draws every tab of the indexed one,
    and its dashboard's contexts are the transcoder's code of each token's feed-forward input."""
    import numpy as np
    import torch

    from bertcore.sae.stream import pad, record_sites
    from bertcore.sae.transcoder import sites
    from explorer.views import features as views

    lm, tcs, folders = _transcoder_run(runs_root, mlm_source)
    at = page("features", mlm_source)
    assert_clean(at)
    assert at.selectbox(key="feat_sae").value == "run 20261129-000000-tc, transcoder, block 0 (layer 1)"
    assert [m.label for m in at.metric] == ["Block", "Features", "Unexplained variance", "Dead features",
                                            "MLM loss with the transcoder"]
    assert at.metric[0].value == "0 (layer 1)" and at.metric[2].value == "25.0%"
    assert charts(at) >= 4  # the token strip, the histogram, the logit effect, purity
    assert any("Circuits" in m for m in messages(at)["info"])  # steering: where it is
    at.text_input(key="feat_search").set_value("cabinet").run()
    assert_clean(at)
    at.selectbox(key="feat_sae").set_value("run 20261129-000000-tc, transcoder, block 1 (layer 2)").run()
    assert_clean(at)
    assert any("This transcoder has no indexed held-out text" in m for m in messages(at)["info"])

    tc, site = tcs[0], sites(lm.config, 0)[0]
    index = features.read(folders[0], lm.path, report.feature_params(0, report.QUICK_SENTENCES))
    feature = int(np.argmax(index.fired))
    d = views.dashboard(mlm_source, folders[0], feature)
    assert d.contexts and d.promoted is not None and d.fired == int(index.fired[feature])
    for c in d.contexts:
        batch = pad([np.array(lm.tokenizer.convert_tokens_to_ids(c.words))], lm.tokenizer.pad_token_id)
        with torch.no_grad():
            direct = tc.encode(record_sites(lm.model, batch, [site], site)[site].float())[0, :, feature]
        np.testing.assert_allclose(c.activations, direct.numpy(), rtol=1e-5, atol=1e-5)
        assert float(c.activations[c.here]) > 0
