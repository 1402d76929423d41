"""Published numbers and findings the Findings page compares against, each with its citation.

The one place for these figures: pages and figures read them from here, never type them.
All are for bert-base (12 layers x 12 heads, hidden 768, MLM + NSP pretraining on BooksCorpus and
Wikipedia) unless ``model`` says otherwise. ``value`` is None for a finding the paper states in
words or shows only as a plot (then ``claim`` says what to look for).
"""

from __future__ import annotations

from dataclasses import dataclass

BERT_BASE = {"num_hidden_layers": 12, "num_attention_heads": 12, "hidden_size": 768}


@dataclass(frozen=True)
class Paper:
    """A paper: short name, full title, venue and year, and where it is available."""

    short: str
    title: str
    venue: str
    url: str


@dataclass(frozen=True)
class Finding:
    """One published result.

    Attributes:
        key: identifier used by the page.
        paper: the :class:`Paper`.
        where: section / figure / table number in the paper.
        claim: the result in words, as the paper states it.
        value: the number when there is one (units in ``unit``), else None.
        unit: "share", "nats", "heads", "positions" ...
        model: the model it was measured on.
        data: what it was measured on.
    """

    key: str
    paper: Paper
    where: str
    claim: str
    value: float | None = None
    unit: str = ""
    model: str = "bert-base-uncased"
    data: str = ""

    @property
    def citation(self) -> str:
        return f"{self.paper.short}, {self.where}"


CLARK = Paper("Clark et al. 2019", "What Does BERT Look At? An Analysis of BERT's Attention",
              "BlackboxNLP 2019", "https://arxiv.org/abs/1906.04341")
KOVALEVA = Paper("Kovaleva et al. 2019", "Revealing the Dark Secrets of BERT", "EMNLP 2019",
                 "https://arxiv.org/abs/1908.08593")
ETHAYARAJH = Paper("Ethayarajh 2019", "How Contextual are Contextualized Word Representations? Comparing the "
                   "Geometry of BERT, ELMo, and GPT-2 Embeddings", "EMNLP 2019", "https://arxiv.org/abs/1909.00512")
WANG_CHEN = Paper("Wang & Chen 2020", "What Do Position Embeddings Learn? An Empirical Study of Pre-Trained "
                  "Language Model Positional Encoding", "EMNLP 2020", "https://arxiv.org/abs/2010.04903")
CHEN_2023 = Paper("Chen et al. 2023", "Sudden Drops in the Loss: Syntax Acquisition, Phase Transitions, and "
                  "Simplicity Bias in MLMs", "ICLR 2024", "https://arxiv.org/abs/2309.07311")

CLARK_DATA = "1,000 Wikipedia segments of at most 128 tokens, [CLS] paragraph 1 [SEP] paragraph 2 [SEP], no masking"

FINDINGS: dict[str, Finding] = {f.key: f for f in [
    Finding("sep_middle", CLARK, "section 3.2, Figure 2",
            "Over half of BERT's attention in layers 6-10 goes to [SEP].", 0.5, "share", data=CLARK_DATA),
    Finding("cls_early", CLARK, "section 3.2, Figure 2",
            "Heads in the first layers attend broadly and to [CLS]; [CLS] gets little attention later.",
            data=CLARK_DATA),
    Finding("punct_late", CLARK, "section 3.2, Figure 2",
            "Heads in the last layers (11-12) attend more to periods and commas.", data=CLARK_DATA),
    Finding("prev_heads", CLARK, "section 3.1",
            "Four heads (in layers 2, 4, 7 and 8) put more than 50% of their attention on the previous token.",
            4, "heads", data=CLARK_DATA),
    Finding("next_heads", CLARK, "section 3.1",
            "Five heads (in layers 1, 2, 2, 3 and 6) put more than 50% of their attention on the next token.",
            5, "heads", data=CLARK_DATA),
    Finding("entropy_by_layer", CLARK, "section 3.3, Figure 4",
            "Some heads in the lower layers have very broad attention (high entropy); entropy varies "
            "widely between heads.", data=CLARK_DATA),
    Finding("broad_heads", CLARK, "section 3.3",
            "Broad heads spend at most 10% of their attention mass on any single word; they are found "
            "especially in the lower layers.", 0.10, "share", data=CLARK_DATA),
    Finding("cls_entropy_last", CLARK, "section 3.3",
            "In the last layer, the attention of [CLS] has high entropy: 3.89 nats on average.", 3.89, "nats",
            data=CLARK_DATA),
    Finding("heterogeneous", KOVALEVA, "section 4.1, Figure 2",
            "Heterogeneous heads (the only ones that could carry linguistic structure) are 32% (MRPC) to "
            "61% (QQP) of all heads; the rest are vertical, diagonal or both.", None, "share",
            model="bert-base-uncased fine-tuned on GLUE tasks (a CNN classifier of patterns)",
            data="up to 1,000 validation examples per GLUE task"),
    Finding("anisotropy", ETHAYARAJH, "section 4.1, Figure 1",
            "Contextual representations are anisotropic in every layer: two random words have a positive "
            "average cosine; in BERT it grows in the upper layers.", model="bert-base",
            data="SemEval STS 2012-2016 sentences"),
    Finding("self_similarity", ETHAYARAJH, "section 4.2, Figure 2",
            "Adjusted for anisotropy, a word's self-similarity across contexts falls in the upper layers: "
            "upper layers are more context-specific.", model="bert-base", data="words in at least 5 contexts"),
    Finding("intra_similarity", ETHAYARAJH, "section 4.2, Figure 3",
            "In BERT, words of the same sentence become more dissimilar to each other in the upper layers, "
            "but stay more similar than two random words (adjusted intra-sentence similarity > 0).",
            model="bert-base", data="SemEval STS 2012-2016 sentences"),
    Finding("position_regression", WANG_CHEN, "Table 1",
            "A linear regression (5-fold) from a position embedding to its index recovers sinusoidal "
            "positions almost exactly and GPT-2's well, but bert-base's learned positions poorly (an error of "
            "tens of positions): BERT's table does not encode absolute position linearly.",
            model="bert-base-uncased, RoBERTa, GPT-2, sinusoidal", data="the 512 x 768 position tables"),
    Finding("sudden_drop", CHEN_2023, "Figure 1",
            "MLM training shows a loss plateau followed by a sudden drop, at the time syntactic attention "
            "structure appears in the heads.", model="BERT-base trained from scratch"),
]}


@dataclass(frozen=True)
class SyntaxHead:
    """bert-base's best head for one dependency relation (Clark et al. 2019, Table 1 / Figure 5): ``relation``
    (their Stanford label), ``layer`` / ``head`` the 0-based block and head (:attr:`name` is the paper's "layer-head",
    numbered from 1: block 7, head 10 is their head 8-11), ``accuracy`` (share of arcs), ``direction``
    (``dep->head``: the dependent attends most to its head; ``head->dep``: its head attends to it most of the words
    attending to it), ``baseline`` / ``offset``: their best fixed-offset baseline, ``claim``: what the head does."""

    relation: str
    layer: int
    head: int
    accuracy: float
    direction: str
    baseline: float
    offset: int
    claim: str = ""

    @property
    def name(self) -> str:
        """The head as the paper names it, "layer-head" numbered from 1 (e.g. ``"8-11"``)."""
        return f"{self.layer + 1}-{self.head + 1}"


#: Clark et al. 2019, section 4.2, Table 1 (the relations of Figure 5 first): bert-base-uncased on the WSJ Penn
#: Treebank dev set with Stanford dependencies, word-level attention, the most-attended other word. Re-read from
#: the output the authors' notebook prints for Table 1 (github.com/clarkkev/attention-analysis,
#: Syntax_Analysis.ipynb, cell "This produces the scores in Table 1"), whose layer-head indices start at 0 as
#: here (the paper's names, :attr:`SyntaxHead.name`, add 1). spaCy's ClearNLP labels name these relations the same
#: way (their "nn" is spaCy's "compound": left out).
#: Their "all relations" row counts punctuation and root words (never right), so it is not our best-head UAS.
SYNTAX_HEADS: dict[str, SyntaxHead] = {h.relation: h for h in [
    SyntaxHead("det", 7, 10, 0.943, "dep->head", 0.517, 1, "determiners attend to their noun"),
    SyntaxHead("dobj", 7, 9, 0.868, "dep->head", 0.400, -2, "direct objects attend to their verbs"),
    SyntaxHead("poss", 6, 5, 0.805, "dep->head", 0.477, 1, "possessives attend to the head of the noun phrase"),
    SyntaxHead("auxpass", 3, 9, 0.941, "dep->head", 0.825, 1, "passive auxiliaries attend to their verb"),
    SyntaxHead("pobj", 8, 5, 0.763, "head->dep", 0.346, -2, "prepositions attend to their objects"),
    SyntaxHead("prep", 6, 3, 0.667, "dep->head", 0.618, -1),
    SyntaxHead("nsubj", 7, 1, 0.585, "dep->head", 0.455, 1),
    SyntaxHead("amod", 3, 9, 0.756, "dep->head", 0.683, 1),
    SyntaxHead("advmod", 6, 5, 0.488, "dep->head", 0.402, 1),
    SyntaxHead("aux", 3, 9, 0.811, "dep->head", 0.715, 1),
    SyntaxHead("cc", 6, 4, 0.478, "dep->head", 0.412, -1),
    SyntaxHead("conj", 6, 0, 0.533, "dep->head", 0.268, -2),
    SyntaxHead("ccomp", 7, 0, 0.488, "dep->head", 0.124, -2),
    SyntaxHead("xcomp", 4, 6, 0.573, "dep->head", 0.471, -2),
    SyntaxHead("mark", 7, 1, 0.507, "dep->head", 0.145, 2),
    SyntaxHead("nsubjpass", 6, 5, 0.575, "dep->head", 0.437, 2),
    SyntaxHead("neg", 3, 9, 0.725, "dep->head", 0.683, 1),
    SyntaxHead("prt", 5, 6, 0.991, "dep->head", 0.914, -1),
]}
SYNTAX_HEADS_WHERE = "section 4.2, Table 1 and Figure 5"
#: Clark et al. 2019, section 5, Table 3: UAS of their attention-only probe (a learned combination of every head's
#: attention, both directions) and of the right-branching baseline, WSJ dev set.
ATTENTION_PROBE_UAS = 0.61
RIGHT_BRANCHING_UAS = 0.26


def finding(key: str) -> Finding:
    """The finding ``key`` (KeyError with the known keys if missing)."""
    try:
        return FINDINGS[key]
    except KeyError:
        raise KeyError(f"no published finding {key!r}; known: {sorted(FINDINGS)}") from None


def comparable(config) -> bool:
    """True when ``config`` has bert-base's shape (12 layers, 12 heads, hidden 768): the columns compare directly."""
    return all(int(getattr(config, k)) == v for k, v in BERT_BASE.items())


def differences(config) -> list[str]:
    """What differs between a model of ``config`` and bert-base, in words (empty when the shapes match)."""
    out = []
    for key, label in (("num_hidden_layers", "layers"), ("num_attention_heads", "heads per layer"),
                       ("hidden_size", "hidden size")):
        ours, theirs = int(getattr(config, key)), BERT_BASE[key]
        if ours != theirs:
            out.append(f"{ours} {label} instead of {theirs}")
    return out


def relative_layers(first: int, last: int, num_layers: int, of: int = 12) -> tuple[int, int]:
    """Blocks ``first..last`` (0-based, inclusive) of a ``of``-layer model mapped to the same relative depth in a
    ``num_layers``-layer model, as 0-based blocks: e.g. bert-base's blocks 5-9 (the papers' layers 6-10) -> blocks
    2-4 (layers 3-5) of a 6-layer model."""
    lo = max(1, min(num_layers, round((first + 1) * num_layers / of)))  # in the papers' numbering, from 1
    hi = max(lo, min(num_layers, round((last + 1) * num_layers / of)))
    return lo - 1, hi - 1


def _span(lo: int, hi: int) -> str:
    """0-based blocks ``lo..hi`` named as the papers and the UI do, from 1."""
    return f"layer {lo + 1}" if lo == hi else f"layers {lo + 1}-{hi + 1}"


def _heads(pairs: list[tuple[int, int]]) -> str:
    """0-based ``(block, head)`` pairs named "layer-head" from 1, as Clark et al. do."""
    return ", ".join(f"{layer + 1}-{head + 1}" for layer, head in pairs) or "none"


def comparison_rows(result, position_mae: float | None = None, sinusoid_mae: float | None = None) -> list[dict]:
    """One row per measure: ours (from a :class:`~bertcore.analysis.papers.evalset.FindingsResult`) beside the
    published result and its citation.

    Layer ranges named for bert-base's 12 layers (e.g. 6-10) are mapped to the same relative depth
    (:func:`relative_layers`), and the row says which layers were used.

    Returns:
        dicts with keys ``measure``, ``ours``, ``published``, ``source``.
    """
    from . import findings as F

    n = result.num_layers
    rows = []

    def add(measure: str, ours: str, key: str, published: str | None = None) -> None:
        f = finding(key)
        rows.append({"measure": measure, "ours": ours, "published": published or f.claim, "source": f.citation})

    lo, hi = relative_layers(5, 9, n)  # 0-based blocks; the papers' layers 6-10
    add(f"Attention to [SEP], {_span(lo, hi)} (bert-base: 6-10)",
        f"{result.to_sep[lo:hi + 1].mean():.1%} (per layer: "
        + ", ".join(f"{v:.0%}" for v in result.to_sep.mean(1)) + ")", "sep_middle", "over 50%")
    e_lo, e_hi = relative_layers(0, 1, n)  # the papers' layers 1-2
    add(f"Attention to [CLS], {_span(e_lo, e_hi)} vs the rest (bert-base: 1-2)",
        f"{result.to_cls[e_lo:e_hi + 1].mean():.1%} vs {result.to_cls[e_hi + 1:].mean():.1%}" if e_hi + 1 < n
        else f"{result.to_cls.mean():.1%}", "cls_early", "high in layers 1-2, low later")
    p_lo, p_hi = relative_layers(10, 11, n)  # the papers' layers 11-12
    add(f"Attention to periods and commas, {_span(p_lo, p_hi)} vs the rest (bert-base: 11-12)",
        f"{result.to_punct[p_lo:p_hi + 1].mean():.1%} vs {result.to_punct[:p_lo].mean():.1%}" if p_lo > 0
        else f"{result.to_punct.mean():.1%}", "punct_late", "higher in layers 11-12")
    prev, nxt = F.positional_heads(result.prev), F.positional_heads(result.next)
    add("Heads with > 50% on the previous token", f"{len(prev)} ({_heads(prev)}); strongest {result.prev.max():.0%}",
        "prev_heads", "4 (layers 2, 4, 7, 8)")
    add("Heads with > 50% on the next token", f"{len(nxt)} ({_heads(nxt)}); strongest {result.next.max():.0%}",
        "next_heads", "5 (layers 1, 2, 2, 3, 6)")
    add("Entropy of [CLS] attention, last layer (mean over heads)", f"{result.cls_entropy[-1].mean():.2f} nats",
        "cls_entropy_last", "3.89 nats")
    broad = F.broad_heads(result.max_weight)
    add("Broad heads (< 10% on any token), layer 1", f"{int(broad[0].sum())} of {result.num_heads} "
        f"(all layers: {int(broad.sum())})", "broad_heads", "present, mostly in the lower layers")
    het = result.pattern_shares[:, F.PATTERNS.index("heterogeneous")]
    add("Heterogeneous heads (rule-based types)", f"{result.patterns[:, -1].sum() / result.patterns.sum():.0%} "
        f"(layer 1: {het[0]:.0%}, last layer: {het[-1]:.0%})", "heterogeneous", "32% (MRPC) to 61% (QQP), fine-tuned")
    a = result.anisotropy
    add("Anisotropy (cosine of random word pairs), layer 1 -> last", f"{a[1]:.2f} -> {a[-1]:.2f} "
        f"(embeddings: {a[0]:.2f})", "anisotropy", "above 0 in every layer, growing in upper layers")
    s = result.self_similarity_adjusted
    add("Self-similarity, adjusted, layer 1 -> last", f"{s[1]:.2f} -> {s[-1]:.2f} ({result.n_self_words} words)",
        "self_similarity", "falls in the upper layers")
    i = result.intra_similarity_adjusted
    add("Intra-sentence similarity, adjusted, layer 1 -> last", f"{i[1]:.2f} -> {i[-1]:.2f}", "intra_similarity",
        "falls in the upper layers, stays > 0")
    if position_mae is not None:
        add("Position regression MAE (5-fold), learned vs sinusoidal", f"{position_mae:.1f} vs "
            f"{sinusoid_mae if sinusoid_mae is not None else float('nan'):.1f} positions",
            "position_regression", "bert-base: large (tens of positions); sinusoidal: ~0")
    return rows
