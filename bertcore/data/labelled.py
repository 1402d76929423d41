"""Labelled sets for fine-tuning: the packaged tweets (positive vs negative; neutral and duplicate
texts dropped), the packaged BBC topics, a local CSV, or a hub set (imdb, sst2, ...). One fixed,
seeded, stratified train / validation / test split.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .corpora import DataError, _hub_error, _parse_hub, bbc_dir, read_text, tweets_csv

TWEETS_LABELS = ("negative", "positive")
MIN_LABELLED = 10  # fewest usable labelled rows a data set needs


@dataclass
class ClassificationData:
    """Fine-tuning splits (``datasets.Dataset`` with text, [text_pair], label), label names and stats."""

    train: Any
    val: Any
    test: Any
    labels: list[str]
    has_pair: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


def _tweets() -> tuple[list[str], list[str]]:
    import pandas as pd

    df = pd.read_csv(tweets_csv(), encoding="latin-1")
    df = df[df["sentiment"].isin(TWEETS_LABELS)].dropna(subset=["text"])
    df = df.drop_duplicates(subset=["text"], keep="first")
    return df["text"].astype(str).tolist(), df["sentiment"].tolist()


def _bbc_topics() -> tuple[list[str], list[str]]:
    files = sorted(bbc_dir().glob("*/*.txt"))
    return [read_text(f) for f in files], [f.parent.name for f in files]


def load_labelled(
    dataset: str = "tweets",
    text_column: str = "text",
    label_column: str = "label",
    text_pair_column: str | None = None,
):
    """A labelled set as ``datasets.Dataset`` (text, [text_pair], label as str) before splitting.

    ``dataset``: ``tweets`` | ``bbc-topics`` | a ``.csv`` path | ``hub:<name>[:<config>]``
    (``hub:imdb``, ``hub:sst2`` = ``stanfordnlp/sst2``; online only; unlabelled rows (-1) dropped).
    """
    import datasets

    pair: list[str] | None = None
    if dataset == "tweets":
        texts, labels = _tweets()
    elif dataset in ("bbc-topics", "bbc"):
        texts, labels = _bbc_topics()
    elif dataset.startswith("hub:"):
        name, config = _parse_hub(dataset)
        alias = {"sst2": ("stanfordnlp/sst2", None, "sentence"), "imdb": ("stanfordnlp/imdb", None, "text")}
        hub_name, hub_config, alias_text = alias.get(name, (name, config, text_column))
        if name in alias:
            text_column = alias_text
        try:
            dd = datasets.load_dataset(hub_name, hub_config if hub_config else config)
        except Exception as exc:  # noqa: BLE001
            raise _hub_error(hub_name, exc) from exc
        parts = [dd[s] for s in dd if {text_column, label_column} <= set(dd[s].column_names)]
        if not parts:
            raise DataError(f"{hub_name} has no split with columns {text_column!r} and {label_column!r}")
        ds = datasets.concatenate_datasets(parts).filter(
            lambda r: r[label_column] is not None and r[label_column] != -1)
        names = getattr(ds.features[label_column], "names", None)
        texts = ds[text_column]
        labels = [names[x] if names else str(x) for x in ds[label_column]]
        if text_pair_column:
            pair = ds[text_pair_column]
    else:
        path = Path(dataset).expanduser()
        if not path.is_file():
            raise DataError(f"unknown data set {dataset!r}: use 'tweets', 'bbc-topics', a .csv file or hub:<name>")
        try:
            ds = datasets.load_dataset("csv", data_files=str(path), split="train")
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"cannot read CSV {path}: {type(exc).__name__}: {exc}") from exc
        missing = [c for c in (text_column, label_column, text_pair_column) if c and c not in ds.column_names]
        if missing:
            raise DataError(f"{path.name} lacks column(s) {missing}; it has {ds.column_names}. "
                            "Choose them with --text-column / --label-column / --text-pair-column")
        texts = ["" if t is None else str(t) for t in ds[text_column]]
        labels = ["" if x is None else str(x) for x in ds[label_column]]
        if text_pair_column:
            pair = ["" if t is None else str(t) for t in ds[text_pair_column]]
    keep = [i for i, (t, y) in enumerate(zip(texts, labels)) if t and str(t).strip() and str(y) != ""]
    data = {"text": [str(texts[i]) for i in keep], "label": [str(labels[i]) for i in keep]}
    if pair is not None:
        data["text_pair"] = [str(pair[i] or "") for i in keep]
    return datasets.Dataset.from_dict(data)


def split_indices(labels: Sequence[Any], val_fraction: float, test_fraction: float,
                  seed: int) -> tuple[list[int], list[int], list[int]]:
    """A seeded, stratified train / val / test split of positions (stratified when every class
    has at least 2 examples per split; else plain random). Train sorted; val and test shuffled."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels))
    y = np.asarray(labels)
    holdout = val_fraction + test_fraction
    if holdout <= 0:
        return idx.tolist(), [], []
    strat = y if min(np.unique(y, return_counts=True)[1]) >= 4 else None
    train, rest = train_test_split(idx, test_size=holdout, random_state=seed, stratify=strat)
    # val and test keep the shuffled order (a file sorted by label must not give an evaluation
    # of its first batches only one class); train order is set per epoch anyway
    if test_fraction == 0:
        return sorted(train.tolist()), rest.tolist(), []
    if val_fraction == 0:
        return sorted(train.tolist()), [], rest.tolist()
    strat_rest = y[rest] if strat is not None and min(np.unique(y[rest], return_counts=True)[1]) >= 2 else None
    val, test = train_test_split(rest, test_size=test_fraction / holdout, random_state=seed, stratify=strat_rest)
    return sorted(train.tolist()), val.tolist(), test.tolist()


def build_classification_data(
    dataset: str = "tweets",
    *,
    seed: int = 0,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_train_examples: int | None = None,
    text_column: str = "text",
    label_column: str = "label",
    text_pair_column: str | None = None,
) -> ClassificationData:
    """Load a labelled set and split it (fixed by ``seed``). Labels become ids 0..C-1 in sorted
    order of their names (``label`` column int, ``label_name`` str).

    ``max_train_examples`` subsamples the training split only (val and test stay whole).
    """
    ds = load_labelled(dataset, text_column, label_column, text_pair_column)
    if len(ds) < MIN_LABELLED:
        raise DataError(f"{dataset!r} has {len(ds)} labelled examples; at least {MIN_LABELLED} are needed")
    names = sorted(set(ds["label"]))
    if len(names) < 2:
        raise DataError(f"{dataset!r} has a single label {names}; classification needs 2 or more")
    index = {n: i for i, n in enumerate(names)}
    ds = ds.rename_column("label", "label_name")
    ds = ds.add_column("label", [index[x] for x in ds["label_name"]])
    tr, va, te = split_indices(ds["label"], val_fraction, test_fraction, seed)
    if max_train_examples is not None and len(tr) > max_train_examples:
        tr = sorted(random.Random(seed).sample(tr, max_train_examples))
    counts = np.bincount(np.asarray(ds["label"]), minlength=len(names))
    stats = {"dataset": dataset, "examples": len(ds), "train": len(tr), "val": len(va), "test": len(te),
             "class_counts": {n: int(c) for n, c in zip(names, counts)},
             "majority_fraction": float(counts.max() / counts.sum())}
    return ClassificationData(ds.select(tr), ds.select(va), ds.select(te), names,
                              has_pair="text_pair" in ds.column_names, stats=stats)


def tokenize_classification(ds, tokenizer, max_seq_len: int):
    """Add ``input_ids`` and ``token_type_ids`` (truncated longest-first to ``max_seq_len``)."""
    has_pair = "text_pair" in ds.column_names

    def fn(batch):
        enc = tokenizer(batch["text"], batch["text_pair"] if has_pair else None, truncation=True,
                        max_length=max_seq_len)
        return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"]}

    return ds.map(fn, batched=True, batch_size=1000, desc="WordPiece")

