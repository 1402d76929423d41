"""Clark et al.'s attention-only probe (bertcore.analysis.representations.syntax_probe) on constructed attention."""

import numpy as np
import pytest

from bertcore.analysis.representations import syntax as S
from bertcore.analysis.representations import syntax_probe as SP

pytest.importorskip("spacy")

TEXTS = ["The old dog sleeps on the red mat.", "A small boy reads a long book in the garden.",
         "My sister bought three green apples at the market yesterday.", "They will visit the museum next week."]


@pytest.fixture(scope="module")
def segments(packaged):
    return [S.parse_segment(packaged.tokenizer, t) for t in TEXTS * 6]


def _maps(seg, rng, syntax: bool):
    """(2, 2, T, T) random attention; with ``syntax``, head (1, 0)'s pieces attend most to their parse head's
    first piece (a root word: to [CLS]), so one weight of the probe can read the whole parse."""
    T = len(seg.tokens)
    att = rng.random((2, 2, T, T))
    if syntax:
        first = {}
        for t, w in enumerate(seg.word_ids):
            first.setdefault(w, t)
        for t, w in enumerate(seg.word_ids):
            if w is not None:
                h = seg.words[w].head
                att[1, 0, t, 0 if h == w else first[h]] += 20
    return att / att.sum(-1, keepdims=True)


def test_a_head_that_points_to_parse_heads_gives_a_perfect_probe(segments):
    rng = np.random.default_rng(0)
    res = SP.attention_probe([_maps(s, rng, True) for s in segments], segments)
    assert res.uas == 1.0 and res.train_uas == 1.0
    assert res.weights.shape == (2, 2, 2)
    # the weight on the syntactic head's "word -> candidate" direction dominates
    assert res.weights[0, 1, 0] == res.weights.max() and res.weights[0, 1, 0] > 5 * abs(res.weights[0, 0, 0])
    assert res.n_test > 0 and res.n_train > 2 * res.n_test / 3 and res.test_segments


def test_random_attention_gives_a_chance_probe(segments):
    rng = np.random.default_rng(1)
    res = SP.attention_probe([_maps(s, rng, False) for s in segments], segments)
    # ~8-10 candidates a word: chance is ~12%; the probe cannot read a parse from noise
    assert res.uas < 0.3
    assert res.right_branching > res.uas


def test_dependents_and_right_branching(packaged):
    seg = S.parse_segment(packaged.tokenizer, "The dog sleeps. A cat runs.")
    T = len(seg.tokens)
    deps = SP.dependents(np.full((1, 1, T, T), 1.0 / T), seg)
    words = [w.text for w in seg.words]
    assert [words[d.word] for d in deps] == ["The", "dog", "sleeps", "A", "cat", "runs"]  # no punctuation
    by = {words[d.word]: d for d in deps}
    # candidates: the other words of the word's own sentence (no punctuation filter there), ROOT last
    assert [words[c] for c in by["dog"].candidates[:-1]] == ["The", "sleeps", "."]
    assert by["dog"].candidates[-1] == SP.ROOT and by["sleeps"].candidates[by["sleeps"].gold] == SP.ROOT
    assert words[by["The"].candidates[by["The"].gold]] == "dog"
    assert by["dog"].features.shape == (4, 2)
    # right-branching: The -> dog (right), dog -> sleeps (right), sleeps -> "." (wrong), twice: 4 of 6
    assert SP.right_branching(deps) == pytest.approx(4 / 6)


def test_errors(segments):
    with pytest.raises(ValueError, match="2 attention maps for 1 segments"):
        SP.attention_probe([np.zeros((1, 1, 3, 3))] * 2, segments[:1])
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least two segments"):
        SP.attention_probe([_maps(segments[0], rng, True)], segments[:1])
    with pytest.raises(ValueError, match="no words"):
        SP.fit([])


def test_run_syntax_adds_the_probe_and_keeps_the_heads_without_it(packaged):
    from types import SimpleNamespace

    segs = [SimpleNamespace(text_a=t, text_b=None) for t in TEXTS]
    run = S.run_syntax(packaged.encoder, packaged.tokenizer, segs, min_count=1, with_probe=True)
    assert isinstance(run.probe, SP.AttentionProbe) and 0 <= run.probe.uas <= 1 and run.heads.relations
    one = S.run_syntax(packaged.encoder, packaged.tokenizer, segs[:1], min_count=1, with_probe=True)
    assert one.probe is None and one.heads.relations  # one segment cannot be split: the heads still come back
    assert S.run_syntax(packaged.encoder, packaged.tokenizer, segs, min_count=1).probe is None  # not asked for
