"""The guided tour's quiz: questions whose answers are measured on the model in use (a different model can have
different right answers), checked with an explanation that shows the numbers.

:func:`build` is plain Python (tests and the browser test call it to know the right answers); :func:`questions`
caches it per model; :func:`draw` is the quiz on the "Start here" page. A question that needs a head the model
lacks (MLM, NSP) is left out, and :attr:`Quiz.skipped` says which and why.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import streamlit as st

from bertcore.readouts import fill_mask
from bertcore.readouts import next_sentence
from bertcore.analysis.attention import activations
from bertcore.analysis.papers import findings as F
from bertcore.loading.sources import LoadedModel
from bertcore.tokenization.tokenizer import encode

from .. import widgets

WORD = "microbiologists"
SENTENCE = "The young doctor quickly read the long report before the meeting."
SENTENCE_B = "Then she went home and slept."
BLANK = "The sun rises in the [MASK] every morning."
NSP_A, NSP_B = "The striker scored twice in the second half to win the match.", "The company said its profits rose."
RESULTS_KEY = "quiz_checked"  # {(model id, question key): the choice checked}
NOTHING = ""  # checked without a choice


@dataclass(frozen=True)
class Question:
    """``prompt`` (Markdown), ``choices`` (plain strings), the measured ``answer`` (one of them) and the
    ``explanation`` (Markdown, with the measured numbers)."""

    key: str
    prompt: str
    choices: tuple[str, ...]
    answer: str
    explanation: str


@dataclass(frozen=True)
class Quiz:
    questions: tuple[Question, ...]
    skipped: tuple[str, ...] = ()


def _head_question(key: str, prompt: str, score: np.ndarray, unit: str, fmt=lambda v: f"{v:.0%}",
                   layers: range | None = None) -> Question | None:
    """Up to four heads to choose from: the one with the highest ``score`` ``(L, heads)`` (from layer
    ``layers.start`` on, 0-based) and three that score clearly lower (a quarter of the way down the ranking, most of
    the way, and the last); None when no head scores lower than the best."""
    first = 0 if layers is None else layers.start
    ranked = sorted(((float(score[lay, h]), lay + 1, h + 1) for lay in range(first, score.shape[0])
                     for h in range(score.shape[1])), key=lambda x: -x[0])  # stable: ties keep (layer, head) order
    top = ranked[0]
    lower = [r for r in ranked if r[0] < top[0] - 1e-6]
    if not lower:
        return None
    picks = {lower[int(i)] for i in np.linspace(len(lower) // 4, len(lower) - 1, 3).round()}
    picks = sorted({top, *picks}, key=lambda r: (r[1], r[2]))
    name = {r: f"head {r[1]}-{r[2]}" for r in picks}
    return Question(key, prompt, tuple(name[r] for r in picks), name[top],
                    f"Measured {unit}: " + ", ".join(f"{name[r]} {fmt(r[0])}" for r in picks)
                    + f". Heads are named layer-head, from 1; {name[top]} is the highest of all "
                    f"{len(ranked)} heads asked about.")


def _pieces(lm: LoadedModel) -> Question:
    pieces = lm.tokenizer.tokenize(WORD)
    n = len(pieces)
    choices = tuple(str(k) for k in sorted({max(1, n - 1), n, n + 1, n + 2} | ({n + 3} if n == 1 else set())))
    return Question("pieces", f"How many WordPiece tokens does this model's tokenizer cut *{WORD}* into?", choices,
                    str(n), f"It cuts it into {n}: " + " ".join(f"`{p}`" for p in pieces) + ".")


def _blank(lm: LoadedModel) -> Question:
    tok = lm.tokenizer
    enc = encode(tok, BLANK, max_length=lm.max_length)
    t = enc.tensors()
    masks = fill_mask.mask_token_positions(tok, t["input_ids"])
    (pred,) = fill_mask.predict(lm.model, tok, t["input_ids"], masks[:1], k=400, attention_mask=t["attention_mask"],
                                token_type_ids=t["token_type_ids"])
    words = [(w, p) for w, p in zip(pred.tokens, pred.probs) if w.isalpha()]  # whole words, no ## pieces or marks
    top = (pred.tokens[0], pred.probs[0])
    others = [w for w in words if w[0] != top[0]]
    picks = [others[min(i, len(others) - 1)] for i in (9, 49, 199)] if others else []
    picks = sorted({top, *picks}, key=lambda w: w[0])
    return Question("blank", f"Which word does the model put in the blank? *{BLANK}*", tuple(w for w, _ in picks),
                    top[0], "Its probabilities: " + ", ".join(f"`{w}` {p:.1%}" for w, p in picks)
                    + f"; `{top[0]}` is its first choice of all {len(tok):,} tokens.")


def _nsp(lm: LoadedModel) -> Question:
    pred = next_sentence.predict(lm.model, lm.tokenizer, NSP_A, NSP_B, max_length=lm.max_length)
    answer = "Yes" if pred.p_is_next > 0.5 else "No"
    return Question("nsp", f"Does the model take sentence B for the next sentence (P(IsNext) > 50%)?  \nA: *{NSP_A}*"
                           f"  \nB: *{NSP_B}*", ("Yes", "No"), answer,
                    f"P(IsNext) = {pred.p_is_next:.1%} (logits IsNext {pred.logits[0]:.2f}, NotNext "
                    f"{pred.logits[1]:.2f}).")


def build(lm: LoadedModel) -> Quiz:
    """The questions for ``lm``, every answer measured on it (a few forward passes)."""
    act = activations.run(lm.encoder, lm.tokenizer, SENTENCE)
    pair = activations.run(lm.encoder, lm.tokenizer, SENTENCE, SENTENCE_B)
    stats = activations.head_stats(pair.attentions, pair.tokens, lm.tokenizer.cls_token, lm.tokenizer.sep_token)
    entropy = F.entropy(act.attentions).mean(-1)  # (L, heads), nats
    last = range(act.num_layers - 1, act.num_layers)
    found = [
        _pieces(lm),
        _head_question("previous", f"On *{SENTENCE}*, which head attends most to the previous token?",
                       F.offset_share(act.attentions, -1), "mean attention on the previous token"),
        _head_question("sep", f"On the pair *{SENTENCE}* / *{SENTENCE_B}*, which head attends most to [SEP]?",
                       stats.to_sep, "mean share of attention on [SEP]"),
        _head_question("entropy", f"On *{SENTENCE}*, which head of the last layer ({act.num_layers}) spreads its "
                                  "attention widest (highest entropy)?", entropy, "mean entropy (nats)",
                       fmt=lambda v: f"{v:.2f}", layers=last),
    ]
    skipped = []
    if lm.has_mlm_head:
        found.append(_blank(lm))
    else:
        skipped.append("Which word goes in the blank? (needs an MLM head)")
    if next_sentence.has_nsp_head(lm.model):
        found.append(_nsp(lm))
    else:
        skipped.append("Is B the next sentence? (needs an NSP head)")
    return Quiz(tuple(q for q in found if q is not None), tuple(skipped))


@st.cache_data(show_spinner="Measuring the quiz's answers on this model ...", max_entries=8)
def questions(key: tuple[str, ...], _loaded: LoadedModel) -> Quiz:
    """:func:`build` cached per model (``key``: :func:`explorer.resources.source_key`)."""
    return build(_loaded)


def model_id(key: tuple[str, ...]) -> str:
    """A short, stable id of a model's source key, for the quiz's widget keys (a new model, fresh answers)."""
    return hashlib.sha1(repr(tuple(key)).encode()).hexdigest()[:8]


def radio_key(key: tuple[str, ...], question: Question) -> str:
    return f"quiz_{model_id(key)}_{question.key}"


def _check(key: tuple[str, ...], question: Question) -> None:
    choice = st.session_state.get(radio_key(key, question))
    st.session_state.setdefault(RESULTS_KEY, {})[(model_id(key), question.key)] = NOTHING if choice is None else choice


def draw(lm: LoadedModel, key: tuple[str, ...]) -> None:
    """The quiz: one radio and a Check button per question; feedback stays until the answer changes."""
    quiz = questions(key, _loaded=lm)
    checked = st.session_state.get(RESULTS_KEY, {})
    for i, q in enumerate(quiz.questions, 1):
        with st.container(border=True, key=f"quiz_box_{q.key}"):
            choice = st.radio(f"**{i}.** {q.prompt}", q.choices, index=None, key=radio_key(key, q),
                              format_func=widgets.escape_md, horizontal=True)
            st.button("Check", key=f"quiz_check_{q.key}", on_click=_check, args=(key, q), icon=":material/done:")
            got = checked.get((model_id(key), q.key))
            if got is None or (got != NOTHING and got != choice):
                continue
            if got == NOTHING:
                st.info("Pick an answer first.", icon=":material/touch_app:")
            elif got == q.answer:
                st.success(f"Right: **{widgets.escape_md(q.answer)}**. {q.explanation}", icon=":material/check:")
            else:
                st.warning(f"Not quite: you chose {widgets.escape_md(got)}; measured on this model, the answer is "
                           f"**{widgets.escape_md(q.answer)}**. {q.explanation}", icon=":material/close:")
    if quiz.skipped:
        st.caption("Left out for this model: " + "; ".join(quiz.skipped) + ". Pick MiniLM-MLM in the sidebar to "
                   "get them.")
    answers = {q.key: q.answer for q in quiz.questions}
    mine = {k: v for (m, k), v in checked.items() if m == model_id(key) and k in answers and v != NOTHING}
    if mine:
        right = sum(v == answers[k] for k, v in mine.items())
        st.caption(f"{right} right of the {len(mine)} checked ({len(quiz.questions)} questions).")
