"""bertcore.sae.replacement.evaluate_set and card: a transcoder set measured on held-out text, its never-active
latents dropped first, each folder's metrics.json written from the written files, and the card built from them."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from bertcore.loading import sources
from bertcore.sae import replacement
from bertcore.sae import transcoder as T
from bertcore.sae.io import folder_name, read_metrics

from ..circuits.test_attribution import random_transcoders
from ..conftest import TINY_CORPUS


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("set")
    lm = sources.load(sources.PACKAGED_MLM)
    trained = random_transcoders(lm.config, d_sae=48)
    with torch.no_grad():
        for tc in trained.values():
            tc.b_enc[:8] = -50.0  # eight latents that can never fire
    for block, tc in trained.items():
        T.save(tc, root / "ckpt" / f"layer-{block + 1}", block)
    out = root / "shipped"
    result = replacement.evaluate_set(root / "ckpt", "shipped", out=out, dtype="float32", n_tokens=1500,
                                      prune_tokens=400, train_corpus=str(TINY_CORPUS), spliced_chunks=4)
    return lm, trained, out, result


def test_never_active_latents_are_dropped_and_the_numbers_are_the_files(measured):
    lm, trained, out, result = measured
    fired = np.load(out / "fired.npz")
    tcs = T.load_set(out, lm.config.hidden_size, lm.config.num_hidden_layers)
    for block, m in result.items():
        kept = fired[f"kept_{block}"]
        assert not kept[:8].any() and m["d_sae"] == int(kept.sum()) == tcs[block].d_sae < m["d_sae_trained"] == 48
        assert m["d_sae"] == int((fired[f"train_{block}"] > 0).sum())  # prune_below 1: exactly the never-active
        assert m["dead"] == pytest.approx(float((fired[f"heldout_{block}"] == 0).mean()))
        assert read_metrics(out / folder_name(block)) == m  # what the card reads
        assert 0 <= m["top1_all"] <= 1 and m["masked"] > 0 and set(m["goals"]) == set(replacement.GOALS)
    # the check numbers are what the written files give, recomputed
    again = replacement.check_numbers(lm.model, lm.tokenizer, tcs)
    for block, m in result.items():
        assert again[block]["fvu"] == pytest.approx(m["check"]["fvu"], rel=1e-9)
        assert again[block]["l0"] == pytest.approx(m["check"]["l0"], rel=1e-9)


def test_the_card_quotes_the_metrics(measured):
    _, _, out, result = measured
    text = replacement.card(sorted(out.glob("layer-*")), ["python -m bertcore.sae transcoders ..."])
    for block, m in result.items():
        assert f"| {block} | {m['d_sae']:,} of 48 | {m['fvu']:.3f} | {m['l0']:.1f} |" in text
    assert f"+{result[0]['delta_ce_all']:.3f} nats" in text and "**Missed:" in text


def test_the_training_counts_of_an_earlier_evaluation_give_another_threshold_without_counting(measured, tmp_path,
                                                                                               monkeypatch):
    from bertcore.sae import stream
    from bertcore.sae.io import SAEError

    lm, trained, out, _ = measured
    ckpt = out.parent / "ckpt"
    fired = np.load(out / "fired.npz")
    real = stream.corpus_chunks

    def corpus_chunks(corpus, *args, **kwargs):
        assert corpus != str(TINY_CORPUS), "counted the training text again"
        return real(corpus, *args, **kwargs)

    monkeypatch.setattr(stream, "corpus_chunks", corpus_chunks)
    again = replacement.evaluate_set(ckpt, "shipped", out=tmp_path / "b", dtype="float32", n_tokens=300,
                                     prune_tokens=400, prune_below=3, train_corpus=str(TINY_CORPUS),
                                     spliced_chunks=2, train_counts=out / "fired.npz")
    for block, m in again.items():
        assert m["d_sae"] == int((fired[f"train_{block}"] >= 3).sum()) and m["pruned_below"] == 3
    other = {block: copy.deepcopy(tc) for block, tc in trained.items()}
    with torch.no_grad():
        other[0].W_enc.mul_(2)  # another set: its counts are refused
    for block, tc in other.items():
        T.save(tc, tmp_path / "other" / f"layer-{block + 1}", block)
    with pytest.raises(SAEError, match="another transcoder set"):
        replacement.evaluate_set(tmp_path / "other", "shipped", n_tokens=300, prune_tokens=400,
                                 train_corpus=str(TINY_CORPUS), spliced_chunks=2, train_counts=out / "fired.npz")
