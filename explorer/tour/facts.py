"""The guided tour's numbers, measured on the model in use when a step is drawn: nothing in a step's text that
states a fact about the model is written in (``explorer.tour.steps`` holds the words around them).

Each measurement takes the loaded model and the step's inputs (``{session key: value}``, what the page shows)
and returns a :class:`Fact`: one or two Markdown sentences and the ``focus``, the session state that points the
page at the thing measured (a head, a layer, a token). :func:`measured` caches them per model
(:func:`explorer.resources.source_key`) and inputs. Input the model cannot read (an empty text, a model without
the head a step needs) gives a sentence that says so, never an exception. Steps 1-8 (inside BERT) are here,
steps 9-17 (its tasks and what it knows) in :mod:`explorer.tour.facts_tasks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bertcore.readouts import anatomy
from bertcore.readouts import positional
from bertcore.analysis.attention import activations, flows, neurons
from bertcore.analysis.papers import findings as F
from bertcore.loading.sources import LoadedModel
from bertcore.tokenization.tokenizer import encode

from ..views import attention as attention_views
from ..widgets import head_number, layer_number


@dataclass(frozen=True)
class Fact:
    """What a step measured: ``text`` (Markdown), ``focus`` (session state pointing the page at it) and ``ok``
    (False when nothing could be measured and ``text`` says why)."""

    text: str
    focus: dict = field(default_factory=dict)
    ok: bool = True


def code(token: str) -> str:
    """A token as inline code (Markdown), safe for any text: backticks inside are replaced."""
    return "`" + str(token).replace("`", "ˋ").replace("\n", " ") + "`"


def pct(x: float) -> str:
    return f"{100 * float(x):.0f}%"


def text_pair(values: dict, prefix: str) -> tuple[str, str | None]:
    """``(text, text_pair)`` of a page's :func:`explorer.widgets.text_or_pair` inputs (pair None when off)."""
    text = values.get(f"{prefix}_text") or ""
    return str(text), (str(values.get(f"{prefix}_text_b") or "") if values.get(f"{prefix}_pair_on") else None)


def head_name(layer: int, head: int) -> str:
    """Clark et al.'s name of a head, numbered from 1 as the UI labels it: block 2, head 8 (0-based) -> "3-9"."""
    return f"{layer_number(layer)}-{head_number(head)}"


def head_focus(layer: int, head: int) -> dict:
    """The Attention page's layer and head pickers set to the 0-based ``(layer, head)``: their session values
    keep the labels' numbers (:func:`explorer.widgets.layer_picker`)."""
    return {"att_layer": layer_number(layer), "att_head": head_number(head)}


def _forward(lm: LoadedModel, values: dict) -> activations.Activations:
    """The Attention page's forward of its text (the same cache the page reads)."""
    text, pair = text_pair(values, "att")
    return attention_views.forward(lm.source, text, pair)


def previous_token_head(attn: np.ndarray) -> tuple[int, int, np.ndarray]:
    """``(layer, head, share)``: the head (0-based block and head) that puts the most attention on the previous
    token, and every head's mean share there ``(L, heads)`` (Clark et al. 2019, section 3.1)."""
    share = F.offset_share(attn, -1)
    layer, head = np.unravel_index(int(share.argmax()), share.shape)
    return int(layer), int(head), share


# ----------------------------------------------------------------------------- steps 1-8
def tokens(lm: LoadedModel, values: dict) -> Fact:
    text, pair = text_pair(values, "tok")
    enc = encode(lm.tokenizer, text, pair, max_length=lm.max_length)
    rows = activations.word_rows(enc, lm.tokenizer)
    out = (f"This model's tokenizer ({len(lm.tokenizer):,} pieces) makes **{len(enc)} tokens** of this text, "
           "[CLS] and [SEP] included")
    split = max(rows, key=lambda r: r["n_pieces"], default=None)
    if split is not None and split["n_pieces"] > 1:
        out += (f"; {code(split['typed'])} is cut into **{split['n_pieces']} pieces**: "
                + " ".join(code(p) for p in split["pieces"].split(" ")))
    return Fact(out + ".")


def embeddings(lm: LoadedModel, values: dict) -> Fact:
    text, pair = text_pair(values, "emb")
    enc = encode(lm.tokenizer, text, pair, max_length=lm.max_length)
    t = enc.tensors()
    parts = anatomy.embedding_breakdown(lm.model, t["input_ids"], t["token_type_ids"])
    pick = next((i for i, tk in enumerate(enc.tokens) if tk == "bank"), min(1, len(enc) - 1))

    def norm(x) -> str:
        return f"{float(np.linalg.norm(x[pick].numpy())):.2f}"

    return Fact(f"For {code(enc.tokens[pick])} at position {pick}: the token vector has length {norm(parts.word)}, "
                f"the position vector {norm(parts.position)}, the segment vector {norm(parts.segment)}; their sum "
                f"{norm(parts.total)}, and {norm(parts.output)} after LayerNorm. Recomputed by hand from the weights, "
                f"it equals the model's own embedding output to {parts.max_abs_diff['model']:.1e}.",
                {"emb_token": pick})


def positions(lm: LoadedModel, values: dict) -> Fact:
    table = positional.learned_positions(lm.model)  # (P, H)
    n = table.shape[0]
    if n < 3:
        return Fact(f"This model has only {n} positions: too few to compare.", ok=False)
    base = min(10, n - 2)
    others = sorted({base + 1, min(base + 10, n - 1), min(base + 90, n - 1)})
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    cos = [float(unit[base] @ unit[o]) for o in others]
    return Fact(f"In this model, position {base}'s vector has cosine similarity "
                + ", ".join(f"**{c:.2f}** with position {o}" for o, c in zip(others, cos))
                + ": near positions look alike, far ones less.")


def query_key(lm: LoadedModel, values: dict) -> Fact:
    act = _forward(lm, values)
    layer, head, _ = previous_token_head(act.attentions)
    toks = act.tokens
    query = next((i for i, tk in enumerate(toks) if tk == "it"), len(toks) // 2)
    nv = neurons.neuron_view(lm.encoder, act.hidden_states[layer], layer, head, query)
    best = int(nv.scores.argmax())
    return Fact(f"In head {head_name(layer, head)} (head size d = {nv.query_vector.size}), the query "
                f"{code(toks[query])} at position {query} scores highest against {code(toks[best])} at position "
                f"{best}: q·k/√d = {float(nv.scores[best]):.2f}, and softmax gives it **{pct(nv.probs[best])}** of "
                "its attention.", {**head_focus(layer, head), "att_nq": query})


def one_head(lm: LoadedModel, values: dict) -> Fact:
    act = _forward(lm, values)
    layer, head, share = previous_token_head(act.attentions)
    a = act.attentions[layer, head]  # (T, T)
    t = a.shape[0]
    if t < 2:
        return Fact("One token only: there is no previous token to look at.", ok=False)
    argmax_prev = float(np.mean(a[1:].argmax(-1) == np.arange(t - 1)))
    toks = act.tokens
    query = next((i for i, tk in enumerate(toks) if tk == "it"), t // 2)
    norms = flows.value_norms(lm.model, act.hidden_states[layer], layer)[head]  # (T,) ||f_h(x_j)||
    arrives = a[query] * norms
    most, sent = int(a[query].argmax()), int(arrives.argmax())
    weighted_sum = (f" What arrives is α × the size of the value vector ([Kobayashi et al. 2020]"
                    f"(https://arxiv.org/abs/2004.10102)): here {code(toks[query])} gives α = {a[query, most]:.2f} to "
                    f"{code(toks[most])}, whose vector has size {norms[most]:.1f}, so {arrives[most]:.2f} arrives; "
                    + ("that is the most of any token." if sent == most else
                       f"more arrives from {code(toks[sent])} (α = {a[query, sent]:.2f} × {norms[sent]:.1f} = "
                       f"{arrives[sent]:.2f}). The *What flows* tab measures this for every token.")
                    if t >= 2 else "")
    return Fact(f"Head **{head_name(layer, head)}** attends most to the previous token in **{pct(argmax_prev)} of "
                f"positions**, with {pct(share[layer, head])} of its attention there on average (Clark et al. "
                "2019 call a head positional above 50%)." + weighted_sum, head_focus(layer, head))


def layer_heads(lm: LoadedModel, values: dict) -> Fact:
    act = _forward(lm, values)
    stats = activations.head_stats(act.attentions, act.tokens, lm.tokenizer.cls_token, lm.tokenizer.sep_token)
    parked = (stats.to_cls + stats.to_sep) > 0.5  # (L, heads)
    layer = int(parked.sum(1).argmax())  # 0-based block
    far = int(stats.distance[layer].argmax())  # 0-based head
    return Fact(f"In layer {layer_number(layer)}, **{int(parked[layer].sum())} of {act.num_heads} heads** put more "
                f"than half of their attention on [CLS] or [SEP]; head {head_name(layer, far)} looks furthest, "
                f"{float(stats.distance[layer, far]):.1f} tokens away on average.",
                {"att_layer": layer_number(layer)})


def all_layers(lm: LoadedModel, values: dict) -> Fact:
    act = _forward(lm, values)
    enc = act.encoding
    counts = F.pattern_counts(act.attentions, np.array(enc.special_tokens_mask, dtype=bool),
                              np.array(enc.token_type_ids)).sum(0)  # (5,)
    total = act.num_layers * act.num_heads
    return Fact(f"On this input, the {total} heads ({act.num_layers} layers × {act.num_heads}) draw: "
                + ", ".join(f"**{int(n)}** {name}" for name, n in zip(F.PATTERNS, counts)) + ".")


def feed_forward(lm: LoadedModel, values: dict) -> Fact:
    rows = [r for r in anatomy.parameter_table(lm.model) if r.group == "encoder layer 0"]
    ffn = sum(r.count for r in rows if r.part.startswith("feed-forward"))
    attn = sum(r.count for r in rows if not r.part.startswith("feed-forward"))
    cfg = lm.config
    return Fact(f"Each of this model's {cfg.num_hidden_layers} layers widens every token from {cfg.hidden_size} to "
                f"{cfg.intermediate_size} numbers and back: its feed-forward block holds **{ffn:,} parameters**, "
                f"attention {attn:,}, so the feed-forward is **{pct(ffn / max(ffn + attn, 1))}** of the layer.")
