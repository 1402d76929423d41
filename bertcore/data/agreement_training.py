"""Counterfactual agreement pairs (:mod:`bertcore.data.counterfactual`) as pretraining sequences
(``--agreement-pairs``).

Mined from the *training* documents only (the same per-part split as :func:`bertcore.data.build_pretraining_data`,
so no held-out document is ever used; parts weighted 0 by ``--corpus-weights`` are left out). Pairs with a noun
between subject and verb come first (they hold the attractor sentences), in a seeded order, then the others.

Each pair gives two sequences, the sentence and its other-number version, with the same context, so both numbers
enter training equally: ``[CLS] sentence [SEP] next sentence [SEP]`` (IsNext), or with NSP on and probability 0.5
a sentence of another training document as B (NotNext); a document's last sentence takes its previous sentence
as A instead. The context segment is cut from its far side to fit ``max_seq_len``; the pair's sentence is never
cut. Rows carry :data:`~bertcore.data.batching.AGREEMENT_COLUMNS`: the verb's position (always [MASK]ed by the
collator) and the ids of the correct and the other-number verb (for the margin loss,
:mod:`bertcore.training.losses`). The other training sequences get -1 there and are built as before.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from .batching import AGREEMENT_COLUMNS
from .corpora import CORPORA, load_documents, split_sentences
from .counterfactual import AgreementItem, mine, summary, verb_token_index
from .nsp import PretrainData, split_documents

NO_PAIRS = ("no counterfactual agreement pair found in the training documents of corpus {corpus!r} (a sentence "
            "whose noun subject has a determiner that leaves its number open and a present-tense verb or was/were, "
            "with both numbers of noun and verb single WordPieces): training without selective verb masking and "
            "without the agreement margin loss")


def training_documents(corpus: str, *, seed: int, val_fraction: float, max_docs: int | None,
                       weights: dict[str, float] | None = None) -> list[list[str]]:
    """Sentences of each training document of ``corpus`` (per part, as :func:`build_pretraining_data` splits it;
    parts weighted 0 left out)."""
    parts = CORPORA[corpus].parts if corpus in CORPORA else ()
    out: list[list[str]] = []
    for name in parts or (corpus,):
        if (weights or {}).get(name, 1.0) <= 0:
            continue
        texts = load_documents(name, max_docs, seed)["text"]
        train, _ = split_documents(texts, seed, val_fraction)
        out += [split_sentences(t) for t in train]
    return out


def select(items: list[AgreementItem], max_items: int, seed: int) -> list[AgreementItem]:
    """At most ``max_items``: pairs with an intervening noun first, each group in a seeded order."""
    rng = random.Random(seed)
    first = [it for it in items if it.any_attractor]
    rest = [it for it in items if not it.any_attractor]
    rng.shuffle(first)
    rng.shuffle(rest)
    return (first + rest)[:max_items]


def item_rows(tokenizer, item: AgreementItem, context: list[int], item_first: bool, label: int,
              max_seq_len: int) -> list[dict[str, Any]] | None:
    """The two rows of a pair (original, counterfactual) around the same ``context`` segment; None when a verb is
    not one WordPiece in place or the sentence does not fit."""
    rows = []
    vocab_id = tokenizer.convert_tokens_to_ids
    for v in item.versions():
        got = verb_token_index(tokenizer, v)
        if got is None:
            return None
        ids, t = got
        room = max_seq_len - 3 - len(ids)
        if room < 1:
            return None
        ctx = context[:room] if item_first else context[-room:]
        a, b = (ids, ctx) if item_first else (ctx, ids)
        pos = 1 + t if item_first else 2 + len(a) + t
        rows.append({"input_ids": [tokenizer.cls_token_id, *a, tokenizer.sep_token_id, *b, tokenizer.sep_token_id],
                     "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1), "next_sentence_label": label,
                     AGREEMENT_COLUMNS[0]: pos, AGREEMENT_COLUMNS[1]: vocab_id(v.good),
                     AGREEMENT_COLUMNS[2]: vocab_id(v.bad)})
    return rows


def build_rows(tokenizer, documents: list[list[str]], items: list[AgreementItem], max_seq_len: int, *, seed: int,
               nsp: bool) -> tuple[dict[str, list], list[AgreementItem]]:
    """Columns of the training rows of ``items`` (mined from ``documents``) and the items that made rows."""
    rng = random.Random(seed)
    usable = [d for d, sents in enumerate(documents) if sents]
    cols: dict[str, list] = {k: [] for k in ("input_ids", "token_type_ids", "next_sentence_label",
                                              *AGREEMENT_COLUMNS)}
    kept = []

    def other_sentence(d: int) -> str | None:
        others = [x for x in rng.sample(usable, min(len(usable), 3)) if x != d]
        return rng.choice(documents[others[0]]) if others else None

    for it in items:
        sents = documents[it.doc]
        has_next, has_prev = it.sentence + 1 < len(sents), it.sentence > 0
        random_next = nsp and rng.random() < 0.5
        if has_next or (nsp and not has_prev):  # the sentence is A
            item_first = True
            context, label = (other_sentence(it.doc), 1) if random_next or not has_next else (sents[it.sentence + 1], 0)
        elif has_prev:  # a document's last sentence is B
            item_first = False
            context, label = (other_sentence(it.doc), 1) if random_next else (sents[it.sentence - 1], 0)
        else:  # a one-sentence document without NSP: no true neighbour
            context = None
        rows = None if not context else item_rows(
            tokenizer, it, tokenizer(context, add_special_tokens=False)["input_ids"], item_first, label, max_seq_len)
        if rows:
            kept.append(it)
            for row in rows:
                for k in cols:
                    cols[k].append(row[k])
    return cols, kept


def add_agreement_rows(data: PretrainData, tokenizer, corpus: str, max_pairs: int, max_seq_len: int, *, seed: int,
                       pair_seed: int, val_fraction: float, max_docs: int | None, nsp: bool,
                       weights: dict[str, float] | None = None, attractor_repeat: int = 1,
                       log: Callable[[str], None] = print) -> PretrainData:
    """``data`` with the rows of up to ``max_pairs`` counterfactual pairs added to its training split (and the
    agreement columns, -1, on its other rows); ``data.stats["agreement"]`` says what was mined. When no pair is
    found the data is returned unchanged and :data:`NO_PAIRS` is logged. A pair with a noun between subject and
    verb enters ``attractor_repeat`` times (``--agreement-attractor-repeat``), each time with its own context
    segment and NSP coin; the rows of the first time are the rows made without repeats.

    Raises:
        DataError: spaCy is missing (with the install line), or the corpus cannot be read.
    """
    import datasets

    if "sotu" in ((CORPORA[corpus].parts or (corpus,)) if corpus in CORPORA else (corpus,)):
        log("note: the corpus holds sotu, the source of the held-out natural agreement set "
            "(bertcore.data.natural_agreement): a model trained on it cannot be scored on that set")
    docs = training_documents(corpus, seed=seed, val_fraction=val_fraction, max_docs=max_docs, weights=weights)
    # documents in corpus order, so the content-defined cache chunks of an earlier run are hit again; on a cold
    # cache, parsing stops once there are enough pairs (the first parts of a mixture then give them)
    items, mined = mine(docs, tokenizer, log=log, enough=max_pairs * 3 // 2)
    chosen = select(items, max_pairs, pair_seed)
    cols, used = build_rows(tokenizer, docs, chosen, max_seq_len, seed=pair_seed, nsp=nsp)
    for k in range(1, attractor_repeat):  # the attractor pairs again, each time with new contexts and NSP coins
        more, _ = build_rows(tokenizer, docs, [it for it in used if it.any_attractor], max_seq_len,
                             seed=pair_seed + 7919 * k, nsp=nsp)
        for key in cols:
            cols[key] += more[key]
    n_pairs = len(used)
    stats = {"sentences": mined.sentences, "parsed_now": mined.parsed, "from_cache": mined.cached,
             "mined": summary(items), "dropped_vocabulary": mined.dropped_vocabulary, "selected": len(chosen),
             "dropped_unfit": len(chosen) - n_pairs, "used": summary(used), "attractor_repeat": attractor_repeat,
             "rows": len(cols["input_ids"])}
    data.stats["agreement"] = stats
    if not n_pairs:
        log(NO_PAIRS.format(corpus=corpus))
        return data
    train = data.train
    for k in AGREEMENT_COLUMNS:
        train = train.add_column(k, [-1] * len(train))
    extra = datasets.Dataset.from_dict(cols).cast(train.features)
    data.train = datasets.concatenate_datasets([train, extra])
    data.stats["train_pairs"] = len(data.train)
    log(f"agreement pairs: {n_pairs:,} pairs used ({len(cols['input_ids']):,} sequences, verb always [MASK]ed; "
        f"{stats['used']['attractor_sentences']:,} with an attractor {stats['used']['by_type']}"
        + (f", each of those {attractor_repeat} times" if attractor_repeat > 1 else "")
        + f") of {mined.kept:,} mined in {mined.sentences:,} training sentences")
    return data
