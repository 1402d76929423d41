"""bertcore.analysis.causal.faithfulness: occlusion equals reruns, Spearman of magnitudes, the six rankings and
their correlations on post-LN and pre-LN tiny models (post-LN-only methods skipped, not crashing), and the
whole-set loop; the default sentence's table on the shipped model."""

import numpy as np
import pytest
import torch

from bertcore import BertForPreTraining
from bertcore.loading import sources
from bertcore.analysis.causal import faithfulness as faith

from tests.analysis.attention.test_mixing import randomized, tiny_inputs
from tests.conftest import tiny_bert


@pytest.fixture(scope="module")
def tiny():
    return randomized(tiny_bert(BertForPreTraining, intermediate_size=37))


def test_spearman_uses_magnitudes_and_is_nan_when_undefined():
    assert faith.spearman([1, -2, 3], [0.1, 0.2, 0.3]) == pytest.approx(1.0)
    assert faith.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(faith.spearman([1, 1, 1], [1, 2, 3])) and np.isnan(faith.spearman([1, 2], [1, 2]))


def test_occlusion_equals_a_rerun_with_the_token_masked(tiny):
    inputs = tiny_inputs(t=8, seed=4)
    got = faith.occlusion(tiny, inputs, 4, 2024, 103, [1, 2, 6], batch=2)
    with torch.no_grad():
        real = float(tiny(**inputs).prediction_logits[0, 4, 2024])
        for n, j in enumerate([1, 2, 6]):
            ids = inputs["input_ids"].clone()
            ids[0, j] = 103
            masked = float(tiny(**{**inputs, "input_ids": ids}).prediction_logits[0, 4, 2024])
            assert got[n] == pytest.approx(real - masked, abs=1e-9)
    diff = faith.occlusion(tiny, inputs, 4, 2024, 103, [1], bad_id=2003)
    with torch.no_grad():
        ids = inputs["input_ids"].clone()
        ids[0, 1] = 103
        lo = tiny(**inputs).prediction_logits[0, 4]
        hi = tiny(**{**inputs, "input_ids": ids}).prediction_logits[0, 4]
    assert diff[0] == pytest.approx(float((lo[2024] - lo[2003]) - (hi[2024] - hi[2003])), abs=1e-9)


def test_measure_ranks_every_ordinary_token_by_six_methods(tiny):
    inputs = tiny_inputs(t=9, seed=5)
    special = np.zeros(9, bool)
    special[[0, 8]] = True
    seen = []
    got = faith.measure(tiny, inputs, 4, 2024, 103, 0, special, ig_steps=4, progress=seen.append)
    assert got.positions == [1, 2, 3, 5, 6, 7]
    assert set(got.scores) == set(faith.METHODS) and not got.skipped
    assert all(v.shape == (6,) for v in (*got.scores.values(), *got.effects.values()))
    assert got.correlations.shape == (len(faith.METHODS), len(faith.EFFECTS))
    assert np.all(np.abs(got.correlations) <= 1 + 1e-12)
    assert seen[-1] == 1.0 and seen == sorted(seen)
    # each cell is the Spearman correlation of that method's scores with that effect
    r = list(faith.METHODS).index("decompx")
    assert got.correlations[r, 0] == pytest.approx(faith.spearman(got.scores["decompx"], got.effects["occlusion"]))


def test_a_pre_ln_model_skips_the_post_ln_methods_and_says_why():
    pre = tiny_bert(BertForPreTraining, pre_layer_norm=True)
    special = np.zeros(8, bool)
    special[[0, 7]] = True
    got = faith.measure(pre, tiny_inputs(t=8), 3, 2024, 103, 0, special, ig_steps=4)
    assert set(got.skipped) == {"alti_rollout", "value_zeroing_rollout", "decompx"}
    assert all("post-LN" in why for why in got.skipped.values())
    rows = {m: got.correlations[i] for i, m in enumerate(faith.METHODS)}
    assert np.isnan(rows["alti_rollout"]).all() and not np.isnan(rows["attention_rollout"]).any()


def test_over_sentences_masks_one_word_each_and_averages():
    lm = sources.load(sources.PACKAGED_MLM)
    sentences = ["The keys to the cabinet are on the table.", "Our nation is strong because our people work hard."]
    got = faith.over_sentences(lm.model, lm.tokenizer, sentences, ig_steps=4)
    assert got.correlations.shape == (2, len(faith.METHODS), len(faith.EFFECTS))
    assert all(s.count("[MASK]") == 1 for s in got.sentences)
    assert got.mean().shape == (len(faith.METHODS), len(faith.EFFECTS))
