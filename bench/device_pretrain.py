"""Pretraining on a lent GPU machine whose image has no corpora, NLTK or spaCy: the data is built here, replayed there.

    python bench/device_pretrain.py pack DIR -- pretrain --init models/minilm-mlm --corpus everyday ...   # here
    python bench/device_pretrain.py train DIR -- pretrain --init models/minilm-mlm --corpus everyday ...  # there

``pack`` runs the real data pipeline of ``python -m bertcore.training`` for those options
(:meth:`bertcore.training.tasks.PretrainTask.load_data`) and records what it read from the machine: each part's
WordPiece ids (:func:`bertcore.data.corpora.tokenized_corpus`), the training documents' sentences and the mined
counterfactual pairs (:mod:`bertcore.data.agreement_training`, which needs spaCy). It writes them to ``DIR``
(compressed, a few MB) with a digest of the NSP pairs and agreement rows they give. ``train`` serves those
recordings in place of the three readers and runs ``bertcore.training.cli``'s own ``main`` with the
same options, so the run's training pairs, masks and schedule are the ones a machine with the corpora would use
(the digest is checked before the first step). Everything else is the product's code path: device, bf16
autocast, checkpoints, metrics.
"""

from __future__ import annotations

import harness

import argparse
import contextlib
import gzip
import hashlib
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bertcore.training import cli as T
from bertcore.data import agreement_training as AT
from bertcore.data import corpora
from bertcore.data.counterfactual import AgreementItem, MiningStats
from bertcore.data import nsp
from bertcore.training import tasks


def _digest(data) -> str:
    """A hash of the training and validation rows (ids, segments, NSP labels, agreement columns)."""
    h = hashlib.sha256()
    for ds in (data.train, data.val):
        for col in sorted(ds.column_names):
            h.update(col.encode())
            h.update(json.dumps(list(ds[col])).encode())
    return h.hexdigest()[:16]


def _save_tokens(path: Path, docs: list) -> None:
    top = max((t for d in docs for s in d for t in s), default=0)
    np.savez_compressed(path, **corpora.documents_to_arrays(docs, dtype=np.uint16 if top < 2**16 else np.int32))


def _load_tokens(path: Path) -> list:
    with np.load(path, allow_pickle=False) as z:
        return corpora.documents_from_arrays(z)


def _key(*args) -> str:
    return hashlib.sha256(repr(args).encode()).hexdigest()[:12]


@contextlib.contextmanager
def readers(tokenized_corpus, training_documents, mine):
    """The three readers replaced for the duration (and put back after, also on an error)."""
    saved = nsp.tokenized_corpus, AT.training_documents, AT.mine
    nsp.tokenized_corpus, AT.training_documents, AT.mine = tokenized_corpus, training_documents, mine
    try:
        yield
    finally:
        nsp.tokenized_corpus, AT.training_documents, AT.mine = saved


def pack(out: Path, argv: list[str]) -> str:
    """Build the data of ``argv`` (``python -m bertcore.training`` options) and record it in ``out``; returns the
    digest of its rows."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = T.to_config(T.parse_args(argv))
    index: dict = {"tokens": {}, "documents": {}, "mine": {}}
    real_tok, real_docs, real_mine = nsp.tokenized_corpus, AT.training_documents, AT.mine

    def tokenized_corpus(name, tokenizer, max_docs=None, seed=0):
        docs = real_tok(name, tokenizer, max_docs, seed)
        k = _key(name, max_docs, seed)
        _save_tokens(out / f"tokens-{k}.npz", docs)
        index["tokens"][k] = name
        return docs

    def training_documents(corpus, **kw):
        docs = real_docs(corpus, **kw)
        k = _key(corpus, sorted(kw.items()))
        with gzip.open(out / f"documents-{k}.json.gz", "wt", encoding="utf-8") as fh:
            json.dump(docs, fh)
        index["documents"][k] = corpus
        return docs

    def mine(docs, tokenizer=None, **kw):
        got = real_mine(docs, tokenizer, **kw)
        k = _key(len(docs), kw.get("enough"), kw.get("natural", False))
        with gzip.open(out / f"mine-{k}.json.gz", "wt", encoding="utf-8") as fh:
            json.dump({"items": [it.to_json() for it in got[0]], "stats": asdict(got[1])}, fh)
        index["mine"][k] = len(got[0])
        return got

    task = tasks.make_task(cfg)
    with readers(tokenized_corpus, training_documents, mine):
        task.load_data(print)
    index["digest"] = _digest(task.data)
    index["argv"] = argv
    (out / "index.json").write_text(json.dumps(index, indent=1))
    print(f"packed {out}: {sum(f.stat().st_size for f in out.iterdir()) / 2**20:.1f} MiB, digest {index['digest']}")
    return index["digest"]


@contextlib.contextmanager
def replaying(src: Path):
    """For the duration, every pretraining task reads its data from ``src`` (see the module docstring) and checks
    the digest of the rows it built.

    Raises:
        SystemExit: the data built from ``src`` differs from what ``pack`` recorded (other options or code).
        FileNotFoundError: the run asks for data that ``src`` does not hold."""
    index = json.loads((src / "index.json").read_text())

    def tokenized_corpus(name, tokenizer, max_docs=None, seed=0):
        return _load_tokens(src / f"tokens-{_key(name, max_docs, seed)}.npz")

    def training_documents(corpus, **kw):
        with gzip.open(src / f"documents-{_key(corpus, sorted(kw.items()))}.json.gz", "rt", encoding="utf-8") as fh:
            return json.load(fh)

    def mine(docs, tokenizer=None, **kw):
        with gzip.open(src / f"mine-{_key(len(docs), kw.get('enough'), kw.get('natural', False))}.json.gz",
                       "rt", encoding="utf-8") as fh:
            got = json.load(fh)
        return [AgreementItem.from_json(d) for d in got["items"]], MiningStats(**got["stats"])

    real_load = tasks.PretrainTask.load_data

    def load_data(self, log, tokenizer=None):
        real_load(self, log, tokenizer)
        got = _digest(self.data)
        if got != index["digest"]:
            raise SystemExit(f"replayed data digest {got} != packed {index['digest']}: other options or code")
        log(f"replayed data from {src} (digest {got})")

    tasks.PretrainTask.load_data = load_data
    try:
        with readers(tokenized_corpus, training_documents, mine):
            yield
    finally:
        tasks.PretrainTask.load_data = real_load


def replay(src: Path, argv: list[str]) -> int:
    """Run ``python -m bertcore.training`` with ``argv``, its data read from ``src`` (:func:`replaying`); returns its
    exit status."""
    with replaying(src):
        return T.main(argv)


def main(argv: list[str] | None = None) -> None:
    def options(ap):
        modes = ap.add_subparsers(dest="mode", required=True, metavar="pack|train")
        for mode, what in (("pack", "build the data of the options here and record it in DIR"),
                           ("train", "run python -m bertcore.training with the options, its data replayed from DIR")):
            sub = modes.add_parser(mode, help=what, description=what)
            sub.add_argument("folder", type=Path, metavar="DIR")
            sub.add_argument("options", nargs=argparse.REMAINDER,
                             help="-- then the options of python -m bertcore.training (pretrain ...)")

    args = harness.parse(__doc__, options, argv=argv)
    rest = args.options[1:] if args.options[:1] == ["--"] else args.options
    if args.mode == "pack":
        pack(args.folder, rest)
    else:
        sys.exit(replay(args.folder, rest))


if __name__ == "__main__":
    main()
