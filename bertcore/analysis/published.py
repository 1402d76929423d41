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
    """Layers ``first..last`` (1-based) of a ``of``-layer model mapped to the same relative depth in
    a ``num_layers``-layer model, e.g. bert-base's 6-10 -> 3-5 in a 6-layer model."""
    lo = max(1, min(num_layers, round(first * num_layers / of)))
    hi = max(lo, min(num_layers, round(last * num_layers / of)))
    return lo, hi
