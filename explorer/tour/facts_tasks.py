"""The guided tour's numbers for steps 9-17: BERT's two tasks, what its layers know, why it answered, training,
and the quiz. Same contract as :mod:`explorer.tour.facts` (loaded model + the step's inputs -> :class:`Fact`)."""

from __future__ import annotations

import numpy as np
import torch

from bertcore.readouts import fill_mask
from bertcore.tokenization import masking
from bertcore.readouts import next_sentence
from bertcore.analysis.causal import patching as P
from bertcore.analysis.representations import logit_lens, similarity, syntax
from bertcore.modeling.config import PRESETS
from bertcore.loading.sources import LoadedModel
from bertcore.tokenization.tokenizer import encode
from bertcore.training.recipes import RECIPES

from .. import resources
from ..views import attention as attention_views
from ..views import word_senses as word_senses_views
from . import quiz as tour_quiz
from .facts import Fact, code, head_focus, head_name, pct, text_pair
from .steps import NSP_RANDOM, TRAIN_RECIPE

MAX_SEED = 2**31 - 1  # the Masking page's seed range
SWITCH = "Pick **MiniLM-MLM** in the sidebar (it has both of BERT's heads) to see this step's numbers."


def _no_mlm(lm: LoadedModel) -> Fact:
    return Fact(f"**{lm.source.name} has no MLM head**, so it cannot fill in [MASK]. " + SWITCH, ok=False)


def _typed_masks(lm: LoadedModel, values: dict):
    """The Masking page's encoding of its text (mask markers normalised) and the typed [MASK] positions."""
    text, pair = text_pair(values, "msk")
    tok = lm.tokenizer
    enc = encode(tok, fill_mask.normalise_mask_markers(text, tok),
                 None if pair is None else fill_mask.normalise_mask_markers(pair, tok), max_length=lm.max_length)
    return enc, fill_mask.mask_token_positions(tok, enc.tensors()["input_ids"])


def fill(lm: LoadedModel, values: dict) -> Fact:
    if not lm.has_mlm_head:
        return _no_mlm(lm)
    enc, masks = _typed_masks(lm, values)
    if not masks:
        return Fact("The text has no [MASK]: type one (e.g. *The capital of France is [MASK].*) to ask the model.",
                    ok=False)
    t = enc.tensors()
    (pred,) = fill_mask.predict(lm.model, lm.tokenizer, t["input_ids"], masks[:1], k=3,
                                attention_mask=t["attention_mask"], token_type_ids=t["token_type_ids"])
    guesses = ", ".join(f"{code(w)} ({pct(p)})" for w, p in zip(pred.tokens, pred.probs))
    return Fact(f"At the [MASK] (position {pred.position}), this model's top guesses are {guesses}.")


def masking_draw(lm: LoadedModel, values: dict) -> Fact:
    text, pair = text_pair(values, "msk")
    tok = lm.tokenizer
    enc = encode(tok, text, pair, max_length=lm.max_length)
    t = enc.tensors()
    eligible = masking.eligible_positions(tok, t["input_ids"], t["attention_mask"])
    word_ids = masking.whole_word_ids(tok, t["input_ids"], eligible) if values.get("msk_wwm") else None
    lo, hi = (float(x) for x in values.get("msk_split") or (0.8, 0.9))
    seed = int(values.get("msk_seed") or 0)
    rate = float(values.get("msk_rate", 0.15))
    result = masking.mask_tokens(t["input_ids"], eligible, mask_token_id=tok.mask_token_id, vocab_size=len(tok),
                                 mlm_probability=rate, mask_replace_prob=lo, random_replace_prob=hi - lo,
                                 word_ids=word_ids,
                                 generator=torch.Generator().manual_seed(seed % MAX_SEED))
    c = result.counts()
    if not c["eligible"]:
        return Fact("This text has no token that may be selected (only special tokens).", ok=False)
    return Fact(f"This draw (seed {seed}, rate {pct(rate)}) selects **{c['selected']} of the {c['eligible']}** "
                f"ordinary tokens ({pct(c['selected'] / c['eligible'])}). Of those, → [MASK]: {c['masked']}, → a "
                f"random token: {c['random']}, left unchanged: {c['unchanged']}. A short text rarely hits the rate "
                "exactly.")


def nsp(lm: LoadedModel, values: dict) -> Fact:
    if not next_sentence.has_nsp_head(lm.model):
        return Fact(f"**{lm.source.name} has no next-sentence head**, so it cannot score pairs. " + SWITCH, ok=False)
    a, b = str(values.get("nsp_a") or ""), str(values.get("nsp_b") or "")
    pred = next_sentence.predict(lm.model, lm.tokenizer, a, b, max_length=lm.max_length)
    other = next_sentence.predict(lm.model, lm.tokenizer, a, NSP_RANDOM, max_length=lm.max_length)
    verdict = "B follows A" if pred.p_is_next >= 0.5 else "B is a random sentence"
    return Fact(f"P(IsNext) = **{pct(pred.p_is_next)}** for this pair (the model says: {verdict}); with a sentence "
                f"from another article as B (*{NSP_RANDOM}*) it is **{pct(other.p_is_next)}**.")


def _sense_lines(block: str) -> tuple[list[str], list[str]]:
    """``sense | sentence`` lines -> (senses, sentences), as the Word senses page reads them."""
    senses, sentences = [], []
    for line in (block or "").splitlines():
        if line.strip():
            sense, sep, sentence = line.partition("|")
            senses.append(sense.strip() if sep else "")
            sentences.append((sentence if sep else line).strip())
    return senses, sentences


def word_senses(lm: LoadedModel, values: dict) -> Fact:
    target = str(values.get("ws_target") or "").strip()
    senses, sentences = _sense_lines(str(values.get("ws_sentences") or ""))
    if not target or len(sentences) < 2:
        return Fact("Type a target word and at least two sentences that contain it.", ok=False)
    occ = word_senses_views.occurrences(lm.source, target, tuple(sentences[:24]))
    same, diff = similarity.similarity_by_layer(occ.vectors, [senses[i] for i in occ.sentence_index])
    gap = same - diff  # (L+1,)
    if np.isnan(gap).all():
        return Fact(f"Found {code(target)} in {len(occ.sentence_index)} sentence(s): label at least two senses "
                    "(`river | ...`, `money | ...`) to compare them.", ok=False)
    layer = int(np.nanargmax(gap))
    return Fact(f"At layer {layer}, two {code(target)}s of the same sense have cosine **{same[layer]:.2f}** on "
                f"average, of different senses **{diff[layer]:.2f}**: the widest gap ({gap[layer]:.2f}) of all "
                f"layers; in the embedding layer (0) it is {gap[0]:.2f}.", {"ws_layer": layer})


def syntax_head(lm: LoadedModel, values: dict) -> Fact:
    text, pair = text_pair(values, "att")
    act = attention_views.forward(lm.source, text, pair)
    try:
        seg = syntax.parse_segment(lm.tokenizer, text, pair, max_length=lm.max_length)
        heads = syntax.syntax_heads([act.attentions], [seg], min_count=1)
    except syntax.SyntaxUnavailable as exc:
        return Fact(f"The parser is not installed, so no head can be scored here ({exc}).", ok=False)
    except ValueError:
        return Fact("This text has no dependency arc to score: type a sentence of several words.", ok=False)
    rel = "det" if "det" in heads.relations else heads.relations[0]
    grid = heads.dep_to_head[rel]  # (L, heads): share of the relation's dependents that attend most to their head
    layer, head = (int(i) for i in np.unravel_index(int(grid.argmax()), grid.shape))  # 0-based
    n = heads.counts[rel]
    base, offset = heads.baseline[rel]
    what = "determiners to their noun" if rel == "det" else f"words to their head in {code(rel)} arcs"
    return Fact(f"Head **{head_name(layer, head)}** points **{round(grid.max() * n)} of {n}** {what} (its "
                f"most-attended other word); always taking the word {offset:+d} away gets {round(base * n)} of {n}.",
                head_focus(layer, head))


def lens(lm: LoadedModel, values: dict) -> Fact:
    if not lm.has_mlm_head:
        return _no_mlm(lm)
    enc, masks = _typed_masks(lm, values)
    if not masks:
        return Fact("The text has no [MASK]: type one to follow its answer through the layers.", ok=False)
    if len(enc) > logit_lens.MAX_TOKENS:
        return Fact(f"The logit lens reads at most {logit_lens.MAX_TOKENS} tokens; this input has {len(enc)}.",
                    ok=False)
    t = enc.tensors()
    ll = logit_lens.logit_lens(lm.model, t["input_ids"], t["attention_mask"], t["token_type_ids"], k=1)
    m = masks[0]
    ranks = ll.final_rank[:, m].tolist()  # layers 0..L
    first = next(k for k in range(len(ranks)) if all(r == 0 for r in ranks[k:]))
    word = code(lm.tokenizer.convert_ids_to_tokens(int(ll.final_ids[m])))
    last = len(ranks) - 1
    if first == last:
        return Fact(f"The final answer {word} ({pct(ll.final_prob[last, m])}) becomes the top guess only at the last "
                    f"layer, {last}; at layer {last - 1} it ranks {int(ranks[last - 1]) + 1}.")
    return Fact(f"The final answer {word} is the top guess from layer **{first}** on (probability "
                f"{pct(ll.final_prob[first, m])} there, {pct(ll.final_prob[last, m])} at the last layer, {last}).")


def patch(lm: LoadedModel, values: dict) -> Fact:
    if not lm.has_mlm_head:
        return _no_mlm(lm)
    tok = lm.tokenizer
    good, bad = (str(values.get(k) or "").strip().lower() for k in ("pat_good", "pat_bad"))
    limit = min(lm.max_length, 64)
    e_clean = encode(tok, str(values.get("pat_clean") or ""), max_length=limit)
    e_corr = encode(tok, str(values.get("pat_corrupt") or ""), max_length=limit)
    masks = fill_mask.mask_token_positions(tok, e_clean.tensors()["input_ids"])
    ids = [tok.convert_tokens_to_ids(w) for w in (good, bad)]
    if len(masks) != 1 or len(e_clean) != len(e_corr) or good == bad or any(i in (None, tok.unk_token_id)
                                                                           for i in ids):
        return Fact("The page says what to fix in the inputs first (one [MASK], the same length, two different "
                    "one-piece answers).", ok=False)
    result = P.scan(lm.model, e_clean.tensors(), e_corr.tensors(), P.logit_diff(masks[0], *ids), kinds=("resid",))
    eff = result.effects["resid"]  # (L+1, T)
    changed = [i for i, (a, b) in enumerate(zip(e_clean.tokens, e_corr.tokens)) if a != b] or [0]
    pos, m, last = changed[0], masks[0], eff.shape[0] - 1
    moved = next((k for k in range(eff.shape[0]) if eff[k, m] > eff[k, pos]), last)
    return Fact(f"logit({code(good)}) − logit({code(bad)}) is {result.clean:+.2f} on the clean input and "
                f"{result.corrupted:+.2f} on the corrupted one. Patching the residual stream at "
                f"{code(e_clean.tokens[pos])} restores **{pct(eff[0, pos])}** at layer 0; at the [MASK] it restores "
                f"**{pct(eff[last, m])}** at layer {last}; the [MASK] takes over at layer {moved}.")


def train(lm: LoadedModel, values: dict) -> Fact:
    recipe = RECIPES[TRAIN_RECIPE]
    opts = recipe.options
    cfg = PRESETS[opts["preset"]]
    return Fact(f"The recipe trains a **{cfg.num_hidden_layers}-layer** BERT (hidden size {cfg.hidden_size}, "
                f"{cfg.num_attention_heads} heads) with a vocabulary of {opts['vocab_size']} on the generated "
                f"*{opts['corpus']}* corpus for **{recipe.minutes:g} minutes**; its probe sentence is "
                f"{code(opts['probe'])}. The model in the sidebar stays as it is: the run is a separate process.")


def quiz(lm: LoadedModel, values: dict) -> Fact:
    built = tour_quiz.questions(resources.source_key(lm.source), _loaded=lm)
    skipped = f" ({len(built.skipped)} left out: this model lacks a head they need)" if built.skipped else ""
    return Fact(f"**{len(built.questions)} questions**, answered from {lm.source.name}{skipped}.")
