"""The attention views (word merge, rollout, flow, neurons, head ablation) once the forward is cached: what each
costs next to the forward itself.

    python bench/bench_views.py [--reps 5] [--threads N]

For inputs of 128 and 512 tokens of BBC News text on the packaged MiniLM, prints the median
milliseconds of the forward (``bertcore.analysis.attention.activations.run``: all attentions and hidden states, the
reference, measured in the same run) and of each view's computation and figure (built and
serialised to JSON, as Streamlit sends it), with the ratio view / forward. Attention flow is
timed at the largest length the page offers (``rollout.FLOW_MAX_TOKENS``) and at 32 tokens.
"""
# ruff: noqa: B023, PLC3002, RUF100  (each lambda runs inside its own loop iteration)

from __future__ import annotations

import harness

import numpy as np
import torch

from bertcore import BertForPreTraining, data
from bertcore.loading import sources
from bertcore.analysis.attention import activations
from bertcore.analysis.attention import ablation, neurons, rollout, words
from explorer.figures import ablation as abl_figures
from explorer.figures import attention as att_figures
from explorer.figures import rollout as rollout_figures


def long_text() -> str:
    files = sorted(data.bbc_dir().glob("*/*.txt"))
    return " ".join(data.read_text(f) for f in files[:6])


def main() -> None:
    args = harness.parse(__doc__, lambda ap: ap.add_argument("--reps", type=int, default=5))
    lm = sources.load(sources.PACKAGED)
    enc_model, tok = lm.encoder, lm.tokenizer
    cfg = lm.config
    mlm_model = BertForPreTraining(cfg).eval()  # random heads on the MiniLM shape: the held-out loss's cost
    mlm_model.bert.load_state_dict(enc_model.state_dict())
    text = long_text()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, reps {args.reps} (median)")
    print(f"{'tokens':>6} {'view':<44} {'ms':>9} {'x forward':>10}")
    for t in (128, 512, rollout.FLOW_MAX_TOKENS, 32):
        fwd = lambda: activations.run(enc_model, tok, text, max_length=t)  # noqa: E731
        ref = harness.median_ms(fwd, args.reps, warmup=1, name=f"forward (reference), {t} tokens")
        act = fwd()
        att, tokens, enc = act.attentions, act.tokens, act.encoding
        groups = words.word_groups(tokens, enc.word_ids)
        roll = rollout.rollout(att)
        special = np.array(enc.special_tokens_mask, dtype=bool)
        mask = ablation.make_head_mask(cfg.num_hidden_layers, cfg.num_attention_heads, layers=[0])
        before = ablation.readout(lm.model, lm.head, tok, enc, None)
        query = 5
        rows: list[tuple[str, callable]] = [("forward (reference)", fwd)]
        if t in (128, 512):
            rows += [
                ("hide [CLS]/[SEP] (all layers)", lambda: activations.hide_tokens(att, special)),
                ("word merge, one layer (12 heads)", lambda: words.merge_attention(att[0], groups)),
                ("word merge, all layers x heads (thumbnails)", lambda: words.merge_attention(att, groups)),
                ("rollout, word level (head mean, merge, roll)", lambda: rollout.rollout(
                    words.merge_attention(att.astype(np.float64).mean(1), groups)[:, None])),
                ("rollout (all layers, all tokens)", lambda: rollout.rollout(att)),
                ("rollout figure (+ JSON)", lambda: rollout_figures.contributions_figure(
                    {"raw": att[:, :, query].mean(1), "rollout": roll[:, query], "flow": None}, tokens,
                    tokens[query]).to_json()),
                ("neuron view (compute)", lambda: neurons.neuron_view(enc_model, act.hidden_states[2], 2, 3, query)),
                ("neuron view figure (+ JSON)", lambda: rollout_figures.neuron_figure(
                    *(lambda v: (v.query_vector, v.key_vectors, v.product, v.scores, v.probs))(
                        neurons.neuron_view(enc_model, act.hidden_states[2], 2, 3, query)), tokens,
                    tokens[query]).to_json()),
                ("head view figure, word level (+ JSON)", lambda: att_figures.head_view(
                    words.merge_attention(att[0, 0], groups), groups.labels, 1).to_json()),
                ("ablation: one forward with head_mask", lambda: ablation.readout(lm.model, lm.head, tok, enc, mask)),
                ("ablation: movement + figures (+ JSON)", lambda: abl_figures.movement_figure(
                    ablation.movement(before, ablation.readout(lm.model, lm.head, tok, enc, mask)).per_layer,
                    [str(i) for i in range(cfg.num_hidden_layers + 1)], 1.0, 1.0).to_json()),
            ]
        else:
            rows += [(f"attention flow (SciPy), {t} tokens", lambda: rollout.flow(att, query))]
            if t <= 32:
                rows += [(f"attention flow (networkx), {t} tokens", lambda: rollout.flow_networkx(att, query, 32))]
        if t == 128:
            batch = ablation.heldout_batch(tok, ablation.heldout_texts())
            rows += [(f"held-out MLM loss ({ablation.HELDOUT_DOCS} x {ablation.HELDOUT_TOKENS} tokens)",
                      lambda: ablation.mlm_loss(mlm_model, batch, mask))]
        for name, fn in rows:
            ms = ref if fn is fwd else harness.median_ms(fn, args.reps, warmup=1, name=f"{name}, {t} tokens")
            print(f"{len(tokens):>6} {name:<44} {ms:>9.1f} {ms / ref:>10.2f}")
    harness.save(args.json)


if __name__ == "__main__":
    main()
