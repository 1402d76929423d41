"""Annotations aligned to WordPieces and syntax-head scores (bertcore.analysis.representations.syntax)."""

import numpy as np
import pytest

from bertcore.tokenization import spacy_pipeline
from bertcore.analysis.representations import syntax as S

pytest.importorskip("spacy")


def test_parse_and_align(packaged):
    seg = S.parse_segment(packaged.tokenizer, "The keys to the cabinet are on the table.", "He can't find them.")
    words = [w.text for w in seg.words]
    assert words[:6] == ["The", "keys", "to", "the", "cabinet", "are"]
    by = {w.text: w for w in seg.words}
    assert by["keys"].dep == "nsubj" and seg.words[by["keys"].head].text == "are"
    assert by["The"].dep == "det" and by["The"].tag == "DT" and by["keys"].tag == "NNS"
    # every piece belongs to the word its first character falls in; specials to none
    text = {0: "The keys to the cabinet are on the table.", 1: "He can't find them."}
    enc = packaged.tokenizer(text[0], text[1], return_offsets_mapping=True)
    seq = enc.sequence_ids()
    for tok_i, (w, s, (a, b)) in enumerate(zip(seg.word_ids, seq, enc["offset_mapping"])):
        if s is None:
            assert w is None
            continue
        word = seg.words[w]
        assert word.start <= a < word.end and text[s][word.start:word.end] == word.text, (tok_i, word)
    # B's words come after A's, with B's heads re-indexed
    find = next(i for i, w in enumerate(seg.words) if w.text == "find")
    assert seg.words[find + 1].text == "them" and seg.words[find + 1].head == find


def _perfect_and_offset_maps(seg, T):
    """Head (0, 0): each word's pieces attend most to themselves (ignored: the prediction is the most-attended
    *other* word) and next to their syntactic head's first piece; head (0, 1): to the previous token."""
    att = np.full((1, 2, T, T), 1e-6)
    first_piece = {}
    for t, w in enumerate(seg.word_ids):
        if w is not None and w not in first_piece:
            first_piece[w] = t
    for t, w in enumerate(seg.word_ids):
        if w is None:
            att[0, :, t, t] = 1
            continue
        h = seg.words[w].head
        att[0, 0, t, first_piece.get(h, t)] = 1
        att[0, 0, t, t] += 2
        att[0, 1, t, max(t - 1, 0)] = 1
    return att / att.sum(-1, keepdims=True)


def test_a_head_that_attends_to_syntactic_heads_scores_one(packaged):
    texts = ["The old dog sleeps on the red mat.", "A small boy reads a long book in the garden."] * 12
    segs = [S.parse_segment(packaged.tokenizer, t) for t in texts]
    maps = [_perfect_and_offset_maps(s, len(s.tokens)) for s in segs]
    res = S.syntax_heads(maps, segs, min_count=10)
    assert "det" in res.relations and "prep" in res.relations
    for r in res.relations:
        assert res.dep_to_head[r][0, 0] == pytest.approx(1.0), r
        share, layer, head, direction = res.best(r)
        assert (share, layer, head, direction) == (pytest.approx(1.0), 0, 0, "dep->head")
    assert res.uas[0, 0] == pytest.approx(1.0) and res.uas.shape == (1, 2) and res.uas[0, 1] < 1
    # the previous-word head hits exactly the arcs whose head is the previous word (offset -1)
    for r in res.relations:
        prev_share = res.dep_to_head[r][0, 1]
        base, off = res.baseline[r]
        if off == -1:
            assert prev_share == pytest.approx(base), r
    # predicted_word agrees with the scoring
    merged, unit = S.word_attention(maps[0], segs[0])
    for d, w in enumerate(segs[0].words):
        if w.dep not in ("ROOT", "punct"):
            assert S.predicted_word(merged, unit, 0, 0, d) == w.head


def test_the_reverse_direction_is_clarks_transposed_map(packaged):
    """head->dep as Clark et al.'s code scores it: of the words attending to a dependent, its head attends most
    (the map transposed), so one head word can be right for all its dependents at once."""
    texts = ["The old dog sleeps on the red mat.", "A small boy reads a long book in the garden."] * 12
    segs = [S.parse_segment(packaged.tokenizer, t) for t in texts]
    maps = []
    for seg in segs:
        T = len(seg.tokens)
        att = np.full((1, 1, T, T), 1e-6)
        first = {}
        for t, w in enumerate(seg.word_ids):
            first.setdefault(w, t)
        for t, w in enumerate(seg.word_ids):
            att[0, 0, t, t] += 1  # ignored: the other word
            if w is not None and seg.words[w].head != w:
                att[0, 0, first[seg.words[w].head], t] += 1  # the head word attends to each piece of its dependent
        maps.append(att / att.sum(-1, keepdims=True))
    res = S.syntax_heads(maps, segs, min_count=10)
    for r in res.relations:
        assert res.head_to_dep[r][0, 0] == pytest.approx(1.0), r
        assert res.best(r)[3] == "head->dep" or res.dep_to_head[r][0, 0] == pytest.approx(1.0), r
    merged, unit = S.word_attention(maps[1], segs[1])
    for d, w in enumerate(segs[1].words):
        if w.dep not in ("ROOT", "punct"):
            assert S.predicted_word(merged, unit, 0, 0, d, "head->dep") == w.head
    with pytest.raises(ValueError, match="direction"):
        S.predicted_word(merged, unit, 0, 0, 0, "sideways")


def test_errors(monkeypatch, packaged):
    seg = S.parse_segment(packaged.tokenizer, "A dog.")
    with pytest.raises(ValueError, match="2 attention maps for 1 segments"):
        S.syntax_heads([np.zeros((1, 1, 4, 4))] * 2, [seg])
    with pytest.raises(ValueError, match="no dependency relation"):
        S.syntax_heads([_perfect_and_offset_maps(seg, len(seg.tokens))], [seg])
    S.parser.cache_clear()
    monkeypatch.setattr(spacy_pipeline, "SPACY_MODEL", "no_such_model_here")
    try:
        with pytest.raises(S.SyntaxUnavailable, match="pip install"):
            S.parse("A dog.")
    finally:
        S.parser.cache_clear()


@pytest.mark.parametrize("text", ["John Smith's café opened on 5 May 2024, at 9.30 a.m.!",
                                  "She didn't buy 3,000 apples (or pears) in Zürich.",
                                  "Naïve Ωmega — “quotes” and emoji 😀 here."])
def test_alignment_on_names_numbers_punctuation_contractions_non_ascii(packaged, text):
    seg = S.parse_segment(packaged.tokenizer, text)
    enc = packaged.tokenizer(text, return_offsets_mapping=True)
    covered = set()
    for w, (a, b), tok in zip(seg.word_ids, enc["offset_mapping"], seg.tokens):
        if tok in ("[CLS]", "[SEP]"):
            assert w is None
            continue
        assert w is not None, tok  # every piece of the text belongs to a word
        word = seg.words[w]
        assert word.start <= a < word.end, (tok, word)
        covered.add(w)
    # every word that holds a character the tokenizer keeps has a piece
    assert len(covered) >= len([w for w in seg.words if w.text.strip()]) - 1
    if "didn't" in text:
        did = next(i for i, w in enumerate(seg.words) if w.text == "did")
        nt = next(i for i, w in enumerate(seg.words) if w.text == "n't")
        assert seg.tokens[seg.word_ids.index(did)] == "didn" and seg.word_ids.count(nt) == 2  # "'" "t"
