"""bertcore.tokenization.masking: the BERT recipe (15% of eligible positions; 80% [MASK], 10% random, 10% kept),
as tensor operations, with the statistics checked against the parameters.

Statistical tests draw ~10^5-10^6 decisions with a seeded generator and require every observed
fraction to lie within 5 standard errors of the parameter (binomial sampling error); a wrong
rate or split (e.g. 80/10/10 of all tokens instead of the selected ones) is far outside that.
"""

from __future__ import annotations

import ast
import inspect
import math

import pytest
import torch

from bertcore.tokenization import masking
from bertcore.tokenization.masking import (MASKED, NOT_SELECTED, RANDOM, UNCHANGED, MaskingError, eligible_positions,
    mask_for_tokenizer, mask_tokens)
from bertcore.tokenization.tokenizer import encode_batch, load_tokenizer

Z = 5.0  # tolerance in standard errors


def within_sampling_error(successes: int, trials: int, p: float) -> tuple[bool, str]:
    """Binomial check: |observed - p| <= Z * sqrt(p(1-p)/n) (exact 0 or 1 must match exactly)."""
    obs = successes / trials
    se = math.sqrt(p * (1 - p) / trials)
    ok = obs == p if se == 0 else abs(obs - p) <= Z * se
    return ok, f"observed {obs:.5f} over {trials} trials, expected {p} +- {Z * se:.5f}"


def synthetic_batch(b=256, t=128, vocab=1000, seed=0):
    """Ids >= 10 with [CLS]=2 / [SEP]=3 / [PAD]=0 around them; eligible = words only."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, vocab, (b, t), generator=g)  # (B, T)
    lengths = torch.randint(3, t + 1, (b,), generator=g)
    pos = torch.arange(t)[None]
    attn = (pos < lengths[:, None]).long()
    ids[:, 0] = 2
    ids[torch.arange(b), lengths - 1] = 3
    ids[attn == 0] = 0
    eligible = (ids >= 10) & attn.bool()
    return ids, eligible


# ----------------------------------------------------------------------------- statistics
@pytest.mark.parametrize("p,mf,rf", [(0.15, 0.8, 0.1), (0.3, 0.5, 0.25), (0.05, 1.0, 0.0), (0.6, 0.0, 0.5)])
def test_selected_fraction_and_split_match_parameters(p, mf, rf):
    ids, eligible = synthetic_batch()
    g = torch.Generator().manual_seed(1234)
    n_elig = n_sel = n_mask = n_rand = n_keep = 0
    for _ in range(20):  # 20 draws of a 256 x 128 batch: ~4e5 eligible positions
        r = mask_tokens(ids, eligible, mask_token_id=4, vocab_size=1000, mlm_probability=p,
                        mask_replace_prob=mf, random_replace_prob=rf, generator=g)
        c = r.counts()
        n_elig += c["eligible"]
        n_sel += c["selected"]
        n_mask += c["masked"]
        n_rand += c["random"]
        n_keep += c["unchanged"]
    assert n_sel == n_mask + n_rand + n_keep
    for successes, trials, expected in ((n_sel, n_elig, p), (n_mask, n_sel, mf), (n_rand, n_sel, rf),
                                        (n_keep, n_sel, 1 - mf - rf)):
        ok, msg = within_sampling_error(successes, trials, expected)
        assert ok, msg


def test_the_check_would_catch_a_wrong_rate():
    """Control for the tolerance: 16% instead of 15% is rejected at this sample size."""
    ids, eligible = synthetic_batch()
    g = torch.Generator().manual_seed(7)
    counts = [mask_tokens(ids, eligible, mask_token_id=4, vocab_size=1000, mlm_probability=0.16,
                          generator=g).counts() for _ in range(20)]
    ok, _ = within_sampling_error(sum(c["selected"] for c in counts), sum(c["eligible"] for c in counts), 0.15)
    assert not ok


def test_per_sequence_selection_is_not_fixed_count():
    """Selection is Bernoulli per position (as BERT and HF): counts vary between sequences of equal length."""
    ids, eligible = synthetic_batch(b=64, t=64)
    eligible[:] = True
    r = mask_tokens(ids, eligible, mask_token_id=4, vocab_size=1000, generator=torch.Generator().manual_seed(0))
    per_row = (r.decision != NOT_SELECTED).sum(1).float()
    assert per_row.std() > 0
    assert abs(per_row.mean().item() - 0.15 * 64) < 1.5


def test_random_replacements_are_uniform_over_the_vocabulary():
    ids, eligible = synthetic_batch(b=256, t=128, vocab=50)
    g = torch.Generator().manual_seed(3)
    drawn = []
    for _ in range(10):
        r = mask_tokens(ids, eligible, mask_token_id=4, vocab_size=50, mlm_probability=1.0, mask_replace_prob=0.0,
                        random_replace_prob=1.0, generator=g)
        drawn.append(r.input_ids[r.decision == RANDOM])
    drawn = torch.cat(drawn)
    assert int(drawn.min()) >= 0 and int(drawn.max()) < 50
    counts = torch.bincount(drawn, minlength=50).float()
    chi2 = float(((counts - counts.mean()) ** 2 / counts.mean()).sum())
    assert chi2 < 49 + 6 * math.sqrt(2 * 49), chi2  # chi-square with 49 dof, far tail


# ----------------------------------------------------------------------------- invariants
@pytest.mark.parametrize("seed", range(5))
def test_labels_decisions_and_ids_agree(seed):
    ids, eligible = synthetic_batch(b=32, t=48, seed=seed)
    r = mask_tokens(ids, eligible, mask_token_id=4, vocab_size=1000, mlm_probability=0.4,
                    generator=torch.Generator().manual_seed(seed))
    selected = r.decision != NOT_SELECTED
    assert torch.equal(r.labels == -100, ~selected)  # -100 exactly where nothing was selected
    assert torch.equal(r.labels[selected], ids[selected])  # the original id where selected
    assert not (selected & ~eligible).any()  # specials and padding never selected
    assert torch.equal(r.input_ids[~selected], ids[~selected])
    assert (r.input_ids[r.decision == MASKED] == 4).all()
    assert torch.equal(r.input_ids[r.decision == UNCHANGED], ids[r.decision == UNCHANGED])
    assert r.decision.dtype == torch.uint8 and set(r.decision.unique().tolist()) <= {0, 1, 2, 3}
    assert r.input_ids.shape == r.labels.shape == r.decision.shape == ids.shape


def test_specials_padding_and_typed_mask_are_never_selected(packaged):
    tok = packaged.tokenizer
    texts = ["The cat sat on the mat.", "a [MASK] here", "short", "Ünïcödé 😀 text that is a little bit longer"]
    batch = encode_batch(tok, texts)
    ids, attn = batch["input_ids"], batch["attention_mask"]
    assert (attn == 0).any(), "the batch should contain padding"
    eligible = eligible_positions(tok, ids, attn)
    specials = torch.tensor([tok.cls_token_id, tok.sep_token_id, tok.pad_token_id, tok.mask_token_id])
    assert not (eligible & torch.isin(ids, specials)).any()
    assert not (eligible & (attn == 0)).any()
    unk = ids == tok.unk_token_id
    assert unk.any() and eligible[unk].all(), "[UNK] stays eligible (as HF)"
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        r = mask_for_tokenizer(tok, ids, attn, mlm_probability=0.9, generator=g)
        sel = r.decision != NOT_SELECTED
        assert not (sel & torch.isin(ids, specials)).any()
        assert not (sel & (attn == 0)).any()
    full = mask_for_tokenizer(tok, ids, attn, mlm_probability=1.0, generator=g)
    assert torch.equal(full.decision != NOT_SELECTED, eligible)


def test_ids_are_read_from_the_tokenizer(tmp_path):
    """A vocabulary whose [MASK] is not 103: masked positions hold that tokenizer's id."""
    vocab = ["[UNK]", "[SEP]", "[MASK]", "[PAD]", "[CLS]", "the", "cat", "sat", "on", "mat", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = load_tokenizer(tmp_path)
    assert tok.mask_token_id == 2 and tok.cls_token_id == 4
    batch = encode_batch(tok, ["the cat sat on the mat .", "the cat"])
    r = mask_for_tokenizer(tok, batch["input_ids"], batch["attention_mask"], mlm_probability=1.0,
                           mask_replace_prob=1.0, random_replace_prob=0.0)
    assert (r.input_ids[r.decision == MASKED] == 2).all()
    assert (r.decision == MASKED).sum() == 7 + 2
    assert not ((r.decision != NOT_SELECTED) & torch.isin(batch["input_ids"], torch.tensor([1, 3, 4]))).any()


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_rate_zero_and_one(p):
    ids, eligible = synthetic_batch(b=8, t=32)
    r = mask_tokens(ids, eligible, mask_token_id=4, vocab_size=1000, mlm_probability=p)
    assert torch.equal(r.decision != NOT_SELECTED, eligible if p == 1.0 else torch.zeros_like(eligible))


def test_no_eligible_position_gives_no_selection():
    ids = torch.tensor([[2, 3, 0, 0]])
    r = mask_tokens(ids, torch.zeros_like(ids, dtype=torch.bool), mask_token_id=4, vocab_size=10, mlm_probability=1.0)
    assert r.counts() == {"eligible": 0, "selected": 0, "masked": 0, "random": 0, "unchanged": 0}
    assert (r.labels == -100).all() and torch.equal(r.input_ids, ids)


def test_seeded_generator_is_deterministic():
    ids, eligible = synthetic_batch(b=16, t=32)
    kw = dict(mask_token_id=4, vocab_size=1000, mlm_probability=0.3)
    a = mask_tokens(ids, eligible, generator=torch.Generator().manual_seed(5), **kw)
    b = mask_tokens(ids, eligible, generator=torch.Generator().manual_seed(5), **kw)
    c = mask_tokens(ids, eligible, generator=torch.Generator().manual_seed(6), **kw)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.decision, b.decision)
    assert not torch.equal(a.decision, c.decision)


@pytest.mark.parametrize("kw", [dict(mlm_probability=-0.1), dict(mlm_probability=1.5),
                                dict(mask_replace_prob=0.8, random_replace_prob=0.3), dict(mask_replace_prob=-0.1)])
def test_bad_parameters_raise_with_the_parameter_named(kw):
    ids, eligible = synthetic_batch(b=2, t=8)
    with pytest.raises(MaskingError, match="replace_prob|probability"):
        mask_tokens(ids, eligible, mask_token_id=4, vocab_size=1000, **kw)


def test_shape_mismatch_raises():
    ids, eligible = synthetic_batch(b=2, t=8)
    with pytest.raises(MaskingError, match="shape"):
        mask_tokens(ids, eligible[:, :4], mask_token_id=4, vocab_size=1000)


# ----------------------------------------------------------------------------- whole-word masking
def test_whole_word_masking_selects_all_pieces_of_a_word_together(packaged):
    tok = packaged.tokenizer
    text = "unbelievably tokenization embeddings transformers are surprisingly interpretable " * 8
    enc = tok(text, return_tensors="pt")
    ids = enc["input_ids"]
    word_ids = torch.tensor([[-1 if w is None else w for w in enc.word_ids()]])
    assert (torch.bincount(word_ids[word_ids >= 0]) > 1).any(), "the text should have multi-piece words"
    g = torch.Generator().manual_seed(0)
    n_words = int(word_ids.max()) + 1
    chosen_words = 0
    for _ in range(200):
        r = mask_for_tokenizer(tok, ids, word_ids=word_ids, mlm_probability=0.15, generator=g)
        sel = (r.decision != NOT_SELECTED)[0]
        for w in range(n_words):  # per word, for the test only
            pieces = sel[word_ids[0] == w]
            assert pieces.all() or not pieces.any(), f"word {w} partly selected"
        chosen_words += len(set(word_ids[0][sel].tolist()))
    ok, msg = within_sampling_error(chosen_words, 200 * n_words, 0.15)
    assert ok, msg


# ----------------------------------------------------------------------------- no Python loop; the bench runs
def test_mask_tokens_has_no_python_loop():
    tree = ast.parse(inspect.getsource(masking.mask_tokens).lstrip())
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While, ast.comprehension))]
    assert not loops, "mask_tokens must use tensor operations, not a loop over positions"


def test_bench_script_runs_and_reports_the_ratio(capsys, monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "bench_masking.py"
    monkeypatch.syspath_prepend(str(path.parent))  # its first import is bench/harness.py, as when run as a script
    spec = importlib.util.spec_from_file_location("bench_masking", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result = mod.main(["--batch", "16", "--seq", "32", "--repeats", "5", "--loop-repeats", "4"])
    out = capsys.readouterr().out
    assert "median" in out and "ratio" in out
    assert result["vectorised_ms"] < result["loop_tensor_ms"]
