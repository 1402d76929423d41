"""Time sentence scoring (pseudo-log-likelihood) and the whole minimal-pair suite on the packaged MiniLM-MLM.

    python bench/bench_grammar.py --threads 2                  # PLL of a 20-word sentence, then the suite
    python bench/bench_grammar.py --threads 2 --suite-n 100    # pairs per paradigm of the suite

Reference measured in the same run: minicons' ``MaskedLMScorer`` (the well-kept implementation, PyPI
``minicons``; a dev dependency) on the same weights loaded by transformers, scoring the same sentence the same
way (within-word left-to-right PLL). Prints the median time of each, the ratio bertcore / minicons, the
suite's time (pairs/s), and the load average (time nothing else while this runs).
"""

from __future__ import annotations

import harness

import json
from pathlib import Path

from bertcore.loading import sources
from bertcore.analysis.grammar import minimal_pairs as MP
from bertcore.analysis.grammar.scoring import pseudo_log_likelihood

SENTENCE = "The old farmer who lives near the river said that his two dogs were happy to run across the fields."


def minicons_scorer(folder: Path):
    """A minicons MaskedLMScorer on the folder's weights loaded by transformers (None without minicons)."""
    try:
        from minicons import scorer
    except ImportError:
        return None
    import transformers

    hf = transformers.BertForMaskedLM.from_pretrained(str(folder)).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))

    class Tokenizer(type(tok)):  # minicons 0.3.39 calls batch_encode_plus, which transformers 5 removed
        def batch_encode_plus(self, *args, **kwargs):
            return self(*args, **kwargs)

    tok.__class__ = Tokenizer
    return scorer.MaskedLMScorer(hf, "cpu", tokenizer=tok)


def main() -> None:
    def options(ap):
        ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
        ap.add_argument("--reps", type=int, default=20)
        ap.add_argument("--suite-n", type=int, default=100, help="pairs per paradigm (the app's default is 40)")

    a = harness.parse(__doc__, options)  # applies --threads (default 2 here)
    lm = sources.load(sources.PACKAGED_MLM)
    assert len(SENTENCE.split()) == 20
    n_tokens = len(lm.tokenizer(SENTENCE)["input_ids"])
    ours = harness.median_ms(lambda: pseudo_log_likelihood(lm.model, lm.tokenizer, SENTENCE, "within_word_l2r"),
                             a.reps, 2, name="PLL of a 20-word sentence: bertcore")
    ref = None
    mc = minicons_scorer(lm.path)
    if mc is not None:
        ref = harness.median_ms(lambda: mc.sequence_score([SENTENCE], reduction=lambda x: x.sum(0).item(),
                                                          PLL_metric="within_word_l2r"),
                                a.reps, 2, name="PLL of a 20-word sentence: minicons")
    pairs = MP.generate(a.suite_n, MP.SUITE_SEED)
    with harness.stopwatch(f"minimal-pair suite, {a.suite_n} per paradigm") as sw:
        results = list(MP.score(lm.model, lm.tokenizer, pairs))
    suite_s = sw.seconds
    acc = MP.accuracy_by_paradigm(results)
    out = {
        "threads": a.threads, "load_average_1min": round(harness.load_average(), 2),
        "pll_20_words_ms": round(ours, 1), "tokens": n_tokens,
        "minicons_ms": None if ref is None else round(ref, 1),
        "ratio_bertcore_over_minicons": None if ref is None else round(ours / ref, 3),
        "suite_pairs": len(results), "suite_s": round(suite_s, 1), "pairs_per_s": round(len(results) / suite_s, 1),
        "suite_accuracy_pll": {k: round(v["pll"], 3) for k, v in acc.items()},
    }
    print(json.dumps(out, indent=1))
    harness.save(a.json)


if __name__ == "__main__":
    main()
