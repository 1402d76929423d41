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
