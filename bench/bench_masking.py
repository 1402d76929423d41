"""Time bertcore's vectorised MLM masking against a per-position Python loop, in the same run.

The loop is what BERT-from-scratch tutorials write (one ``random.random()`` per token, then the
80/10/10 split per selected token); bertcore does the same with a few tensor operations.

    python bench/bench_masking.py                 # 128 x 64 batch, 200 repeats
    python bench/bench_masking.py --batch 32 --seq 512 --repeats 50

Prints the median time per batch of each (and p10/p90), and the ratio loop / bertcore.
Both run on the CPU with one thread set by ``--threads`` (default: torch's default).
"""

from __future__ import annotations

import harness

import random
import statistics

import torch

from bertcore.tokenization.masking import eligible_positions, mask_tokens

# ids of a bert-base-uncased-like vocabulary; the benchmark reads them from a tokenizer when one
# loads (the packaged model's), and only falls back to these for a bare environment
FALLBACK = {"pad": 0, "cls": 101, "sep": 102, "mask": 103, "vocab": 30522}


def special_ids() -> dict[str, int]:
    """[PAD]/[CLS]/[SEP]/[MASK] ids and the vocabulary size, from the packaged tokenizer if it loads."""
    try:
        from bertcore.loading.sources import load_tokenizer, packaged_model_dir

        tok = load_tokenizer(packaged_model_dir())
        return {"pad": tok.pad_token_id, "cls": tok.cls_token_id, "sep": tok.sep_token_id,
                "mask": tok.mask_token_id, "vocab": len(tok), "tokenizer": tok}
    except Exception as exc:  # noqa: BLE001 - the benchmark still runs without the package
        print(f"(packaged tokenizer not available: {exc}; using bert-base-uncased ids)")
        return dict(FALLBACK)


def make_batch(b: int, t: int, ids: dict, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A padded batch ``(B, T)``: [CLS] words [SEP] [PAD]..., lengths uniform in [T/2, T]."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1000, ids["vocab"], (b, t), generator=g)  # (B, T)
    lengths = torch.randint(t // 2, t + 1, (b,), generator=g)  # (B,)
    pos = torch.arange(t)[None, :]  # (1, T)
    attention_mask = (pos < lengths[:, None]).long()  # (B, T)
    input_ids[:, 0] = ids["cls"]
    input_ids[torch.arange(b), lengths - 1] = ids["sep"]
    input_ids[attention_mask == 0] = ids["pad"]
    return input_ids, attention_mask


def loop_reference(input_ids: torch.Tensor, attention_mask: torch.Tensor, ids: dict, p: float = 0.15,
                   rng: random.Random | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The tutorial way: visit every position in Python (what bertcore replaces).

    It works on Python lists (the fast version of the loop; indexing tensors element by element
    would be about 10x slower still) and returns tensors like bertcore.
    """
    rng = rng or random.Random(0)
    specials = {ids["pad"], ids["cls"], ids["sep"], ids["mask"]}
    rows, masks = input_ids.tolist(), attention_mask.tolist()
    out_rows, label_rows = [], []
    for row, mrow in zip(rows, masks):
        out, labels = list(row), [-100] * len(row)
        for j, tok in enumerate(row):
            if mrow[j] == 0 or tok in specials:
                continue
            if rng.random() < p:
                labels[j] = tok
                r = rng.random()
                if r < 0.8:
                    out[j] = ids["mask"]
                elif r < 0.9:
                    out[j] = rng.randrange(ids["vocab"])
        out_rows.append(out)
        label_rows.append(labels)
    return torch.tensor(out_rows), torch.tensor(label_rows)


def loop_reference_tensors(input_ids: torch.Tensor, attention_mask: torch.Tensor, ids: dict, p: float = 0.15,
                           rng: random.Random | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The same loop indexing the tensors element by element (as many tutorials write it)."""
    rng = rng or random.Random(0)
    specials = {ids["pad"], ids["cls"], ids["sep"], ids["mask"]}
    out = input_ids.clone()
    labels = torch.full_like(input_ids, -100)
    b, t = input_ids.shape
    for i in range(b):
        for j in range(t):
            tok = int(input_ids[i, j])
            if attention_mask[i, j] == 0 or tok in specials:
                continue
            if rng.random() < p:
                labels[i, j] = tok
                r = rng.random()
                if r < 0.8:
                    out[i, j] = ids["mask"]
                elif r < 0.9:
                    out[i, j] = rng.randrange(ids["vocab"])
    return out, labels


def timed(name: str, fn, repeats: int, warmup: int = 3) -> list[float]:
    """Wall times in seconds of ``repeats`` calls of ``fn`` after ``warmup`` calls (``harness.timed``, kept for
    ``--json``)."""
    return list(harness.timed(name, fn, repeats, warmup).get_values())


def quantiles(times: list[float]) -> tuple[float, float, float]:
    """(p10, median, p90) in milliseconds."""
    qs = statistics.quantiles(times, n=10) if len(times) >= 2 else [times[0]] * 9
    return qs[0] * 1e3, statistics.median(times) * 1e3, qs[-1] * 1e3


def main(argv: list[str] | None = None) -> dict[str, float]:
    def options(ap):
        ap.add_argument("--batch", type=int, default=128)
        ap.add_argument("--seq", type=int, default=64)
        ap.add_argument("--repeats", type=int, default=200, help="timed calls of bertcore masking")
        ap.add_argument("--loop-repeats", type=int, default=20, help="timed calls of the Python loop (slow)")

    args = harness.parse(__doc__, options, argv)

    ids = special_ids()
    input_ids, attention_mask = make_batch(args.batch, args.seq, ids)
    tok = ids.get("tokenizer")
    if tok is not None:
        eligible = eligible_positions(tok, input_ids, attention_mask)
    else:
        eligible = ~torch.isin(input_ids, torch.tensor([ids["pad"], ids["cls"], ids["sep"], ids["mask"]]))
        eligible &= attention_mask.bool()
    g = torch.Generator().manual_seed(0)

    def vectorised():
        return mask_tokens(input_ids, eligible, mask_token_id=ids["mask"], vocab_size=ids["vocab"], generator=g)

    def vectorised_with_eligibility():
        elig = eligible_positions(tok, input_ids, attention_mask) if tok is not None else eligible
        return mask_tokens(input_ids, elig, mask_token_id=ids["mask"], vocab_size=ids["vocab"], generator=g)

    rng = random.Random(0)
    t_vec = timed("bertcore mask_tokens", vectorised, args.repeats)
    t_vec_e = timed("bertcore eligible_positions + mask_tokens", vectorised_with_eligibility, args.repeats)
    t_loop = timed("per-position Python loop (lists)", lambda: loop_reference(input_ids, attention_mask, ids, rng=rng),
                   args.loop_repeats, warmup=1)
    n_tensor_loop = max(2, args.loop_repeats // 4)
    t_loop_t = timed("per-position Python loop (tensor indexing)",
                     lambda: loop_reference_tensors(input_ids, attention_mask, ids, rng=rng), n_tensor_loop, warmup=0)

    # sanity: both select about 15% of the eligible positions
    frac_vec = float((vectorised().labels != -100).sum()) / float(eligible.sum())
    frac_loop = (float((loop_reference(input_ids, attention_mask, ids, rng=rng)[1] != -100).sum())
                 / float(eligible.sum()))

    print(f"batch {args.batch} x {args.seq} ({int(eligible.sum())} eligible positions), torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s)")
    rows = [("bertcore mask_tokens", t_vec, args.repeats),
            ("bertcore eligible_positions + mask_tokens", t_vec_e, args.repeats),
            ("per-position Python loop (lists)", t_loop, args.loop_repeats),
            ("per-position Python loop (tensor indexing)", t_loop_t, n_tensor_loop)]
    for name, times, n in rows:
        p10, med, p90 = quantiles(times)
        print(f"  {name:<44} median {med:9.3f} ms  (p10 {p10:.3f}, p90 {p90:.3f}; {n} runs)")
    med_vec, med_vec_e, med_loop, med_loop_t = (statistics.median(t) * 1e3 for t in (t_vec, t_vec_e, t_loop, t_loop_t))
    print(f"  selected fraction: bertcore {frac_vec:.3f}, loop {frac_loop:.3f} (expected 0.150)")
    print(f"ratio loop (lists) / bertcore: {med_loop / med_vec:.0f}x (mask_tokens), "
          f"{med_loop / med_vec_e:.0f}x (with eligibility); "
          f"loop (tensor indexing) / bertcore: {med_loop_t / med_vec:.0f}x")
    harness.save(args.json)
    return {"vectorised_ms": med_vec, "vectorised_eligibility_ms": med_vec_e, "loop_ms": med_loop,
            "loop_tensor_ms": med_loop_t}


if __name__ == "__main__":
    main()
