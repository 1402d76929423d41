"""bertcore.analysis.grammar.scoring: pseudo-log-likelihood (Salazar et al. 2020) and its within-word variant."""

import numpy as np
import pytest

from bertcore.loading import sources
from bertcore.analysis.grammar.scoring import ScoringError, pseudo_log_likelihood
from bertcore.readouts.fill_mask import FillMaskError, mlm_logits_at
from bertcore.modeling.model import BertModel

from tests.conftest import tiny_bert


@pytest.fixture(scope="module")
def shipped():
    return sources.load(sources.PACKAGED_MLM)


def test_pll_is_the_sum_of_each_position_masked_directly(shipped):
    text = "The keys to the cabinet are on the table."
    got = pseudo_log_likelihood(shipped.model, shipped.tokenizer, text)
    ids = shipped.tokenizer(text, return_tensors="pt")["input_ids"][0]
    direct = []
    for i in range(1, len(ids) - 1):
        masked = ids.clone()
        masked[i] = shipped.tokenizer.mask_token_id
        logits = mlm_logits_at(shipped.model, masked, [i])[0]
        direct.append(float(logits.log_softmax(-1)[ids[i]]))
    np.testing.assert_allclose(got.log_probs, direct, atol=1e-5)
    # each term within 1e-5 (batched and single fp32 forwards round differently); the sum within that per term
    assert got.pll == pytest.approx(sum(direct), abs=1e-5 * len(direct))
    assert got.tokens == shipped.tokenizer.convert_ids_to_tokens(ids[1:-1].tolist())


def test_within_word_l2r_differs_only_for_multi_piece_words(shipped):
    m, tok = shipped.model, shipped.tokenizer
    plain = "the dog ran to the park ."  # one piece per word
    a = pseudo_log_likelihood(m, tok, plain)
    b = pseudo_log_likelihood(m, tok, plain, "within_word_l2r")
    np.testing.assert_allclose(a.log_probs, b.log_probs, atol=1e-6)
    split = "the unbelievably gargantuan aardvark ran ."
    a = pseudo_log_likelihood(m, tok, split)
    b = pseudo_log_likelihood(m, tok, split, "within_word_l2r")
    last_piece = [i == len(a.word_ids) - 1 or a.word_ids[i + 1] != a.word_ids[i] for i in range(len(a.word_ids))]
    assert not all(last_piece)  # the sentence has multi-piece words
    for i, last in enumerate(last_piece):  # a word's last piece (or a one-piece word) is scored alike
        if last:
            assert a.log_probs[i] == pytest.approx(b.log_probs[i], abs=1e-5)
        else:
            assert a.log_probs[i] != pytest.approx(b.log_probs[i], abs=1e-3)
    assert b.pll < a.pll  # hiding the rest of a word makes its first pieces harder


MINICONS = r"""
import json, sys
import transformers
from minicons import scorer

path, texts = sys.argv[1], json.loads(sys.argv[2])
hf = transformers.BertForMaskedLM.from_pretrained(path).eval()
tok = transformers.AutoTokenizer.from_pretrained(path)


class Tokenizer(type(tok)):  # minicons 0.3.39 calls batch_encode_plus, which transformers 5 removed
    def batch_encode_plus(self, *args, **kwargs):
        return self(*args, **kwargs)


tok.__class__ = Tokenizer
mc = scorer.MaskedLMScorer(hf, "cpu", tokenizer=tok)
print(json.dumps({m: mc.sequence_score(texts, reduction=lambda x: x.sum(0).item(), PLL_metric=m)
                  for m in ("original", "within_word_l2r")}))
"""


def test_agrees_with_minicons_on_the_shipped_model(shipped):
    """minicons' MaskedLMScorer, in a fresh interpreter: in the suite's own process it once raised inside its
    torch.tensor call (a random order's state left by another test), which is minicons' and torch's, not ours."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("minicons")
    texts = ["The keys to the cabinet are on the table.", "Bees make honey from the nectar of gargantuan flowers."]
    out = subprocess.run([sys.executable, "-c", MINICONS, str(shipped.path), json.dumps(texts)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    for metric in ("original", "within_word_l2r"):
        mine = [pseudo_log_likelihood(shipped.model, shipped.tokenizer, t, metric).pll for t in texts]
        np.testing.assert_allclose(mine, theirs[metric], atol=1e-4)


def test_bad_input_gets_a_clear_error(shipped):
    with pytest.raises(ScoringError, match="empty"):
        pseudo_log_likelihood(shipped.model, shipped.tokenizer, "   ")
    with pytest.raises(ScoringError, match="more than the 512"):
        pseudo_log_likelihood(shipped.model, shipped.tokenizer, "word " * 600)
    with pytest.raises(ScoringError, match="more than the 8"):
        pseudo_log_likelihood(shipped.model, shipped.tokenizer, "word " * 7, max_tokens=8)
    with pytest.raises(ValueError, match="metric"):
        pseudo_log_likelihood(shipped.model, shipped.tokenizer, "a b", "l2r")
    with pytest.raises(FillMaskError):
        pseudo_log_likelihood(tiny_bert(BertModel), shipped.tokenizer, "a b")


def test_batching_does_not_change_the_scores(shipped):
    text = "She put the milk back in the fridge to keep it cold."
    a = pseudo_log_likelihood(shipped.model, shipped.tokenizer, text, batch_size=64)
    b = pseudo_log_likelihood(shipped.model, shipped.tokenizer, text, batch_size=3)
    np.testing.assert_allclose(a.log_probs, b.log_probs, atol=1e-5)
