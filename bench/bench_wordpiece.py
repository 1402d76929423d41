"""The corpus WordPiece vocabulary: what determinism costs, and how finely each vocabulary cuts text.

``bertcore.tokenization.wordpiece.train_wordpiece`` runs the ``tokenizers`` WordPiece trainer twice (plus a
character count) so that the same corpus always gives the same ids; a single bare run of the
trainer is the reference, timed in the same run. Then, for each vocabulary, WordPiece pieces per
whitespace word on every 10th BBC document (part of the ``bbc`` corpus itself, so in-domain for a
BBC vocabulary) against bert-base-uncased's 30,522-token vocabulary (the packaged MiniLM's).

    python bench/bench_wordpiece.py                          # bbc at 4000 and 8000 tokens
    python bench/bench_wordpiece.py --corpus all --sizes 8000 --repeats 1

Prints median seconds per training (bare trainer, bertcore) and their ratio, the vocabulary size
reached, whether two bertcore trainings gave identical ids, and pieces per word.
"""

from __future__ import annotations

import harness

from bertcore import data as D
from bertcore.loading import sources
from bertcore.tokenization.tokenizer import load_tokenizer, vocab_md5
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, train_wordpiece


def bare_trainer(texts: list[str], vocab_size: int) -> int:
    """One run of tokenizers' WordPieceTrainer with BERT's normalizer and pre-tokenizer (the reference)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL_TOKENS), limit_alphabet=1000,
        continuing_subword_prefix="##", show_progress=False), length=len(texts))
    return tok.get_vocab_size()


def pieces_per_word(tok, texts: list[str]) -> float:
    words = sum(len(t.split()) for t in texts)
    ids = tok(texts, add_special_tokens=False, verbose=False)["input_ids"]
    return sum(len(x) for x in ids) / words


def main() -> None:
    def options(ap):
        ap.add_argument("--corpus", default="bbc", help="a corpus name (bbc, sotu, wiki, bbc+sotu, all) or path")
        ap.add_argument("--sizes", default="4000,8000", help="vocabulary sizes, comma-separated")
        ap.add_argument("--repeats", type=int, default=2, help="trainings per size and method (median reported)")

    args = harness.parse(__doc__, options)
    texts = list(D.load_documents(args.corpus)["text"])
    probe = list(D.load_documents("bbc")["text"])[::10]
    ref = load_tokenizer(sources.packaged_model_dir())
    print(f"corpus {args.corpus}: {len(texts):,} documents, {sum(len(t.split()) for t in texts):,} words")
    print(f"bert-base-uncased (30,522): {pieces_per_word(ref, probe):.3f} pieces per word on BBC (every 10th doc)")
    print(f"{'size':>6} {'bare s':>8} {'bertcore s':>10} {'ratio':>6} "
          f"{'tokens':>7} {'same ids':>8} {'pieces/word':>11}")
    for size in (int(s) for s in args.sizes.split(",")):
        toks: list = []

        def ours():
            toks.append(train_wordpiece(texts, size))

        # bare trainer, then bertcore, `repeats` times (no warm-up: each training is seconds long)
        pair = harness.paired(f"train_wordpiece, {size} tokens", ours, "bare WordPiece trainer",
                              lambda: bare_trainer(texts, size), args.repeats, warmup=0)
        b, o = pair.ref_ms / 1000, pair.ms / 1000
        tok, md5s = toks[-1], {vocab_md5(t) for t in toks}
        print(f"{size:>6} {b:>8.1f} {o:>10.1f} {o / b:>6.2f} {len(tok):>7} {len(md5s) == 1!s:>8} "
              f"{pieces_per_word(tok, probe):>11.3f}")
    harness.save(args.json)


if __name__ == "__main__":
    main()
