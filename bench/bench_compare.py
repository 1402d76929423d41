"""Model comparison (linear CKA, Jensen-Shannon per head) and attribution (integrated gradients,
Captum) on the packaged MiniLM, against the forward pass they start from, in one run.

    python bench/bench_compare.py [--reps 5] [--lengths 128 512] [--steps 50] [--threads N]

For each input length T prints the median milliseconds of: the reference, one bertcore forward
with all attentions and hidden states (what the pages cache); the layer x layer CKA matrix of two
models' hidden states (7 x 7 layers over T tokens); the (layers, heads) Jensen-Shannon matrix;
integrated gradients at the page's step count; and building + serialising each new figure (what
a rerun costs once the numbers are cached). Ratios are to the forward, so machine noise cancels.
"""

from __future__ import annotations

import harness

import numpy as np
import torch

from bertcore.loading import sources
from bertcore.analysis.attention import activations
from bertcore.analysis.causal import attribution
from bertcore.analysis.representations import compare
from explorer.figures import attention as att_figures
from explorer.figures import attribution as attr_figures
from explorer.figures import compare as cmp_figures

TEXT = ("The bank raised its interest rates again this quarter, and shares of the lender fell sharply as investors "
        "worried about the housing market. ")


def bench_length(lm, t: int, reps: int, steps: int) -> str:
    """One table row: the medians at input length ``t`` (tokens, [CLS]/[SEP] included)."""
    model, tok = lm.encoder, lm.tokenizer
    act = activations.run(model, tok, TEXT * 40, max_length=t)  # T tokens exactly (truncated)
    enc = act.encoding
    text = tok.decode(enc.input_ids[1:-1])
    rng = np.random.default_rng(0)
    hidden_b = act.hidden_states + 0.1 * rng.standard_normal(act.hidden_states.shape).astype(np.float32)
    attn_b = act.attentions[:, :, :, ::-1].copy()
    fwd = harness.median_ms(lambda: activations.run_encoding(model, enc), reps, name=f"forward, {t} tokens")
    cka = harness.median_ms(lambda: compare.cka_matrix(act.hidden_states, hidden_b), reps, name=f"CKA, {t} tokens")
    js = harness.median_ms(lambda: compare.head_js(act.attentions, attn_b), reps, name=f"JS per head, {t} tokens")
    ig = harness.median_ms(
        lambda: attribution.explain_similarity(lm.model, tok, text, "Markets and banks.", n_steps=steps),
        max(1, reps // 2), name=f"integrated gradients ({steps} steps), {t} tokens")
    res = attribution.explain_similarity(lm.model, tok, text, "Markets and banks.", n_steps=steps)
    matrix = compare.cka_matrix(act.hidden_states, hidden_b)
    js_heads = compare.head_js(act.attentions, attn_b)

    def figures():
        for fig in (cmp_figures.by_layer(np.diagonal(matrix), js_heads.mean(1)), cmp_figures.cka_heatmap(matrix),
                    att_figures.stat_heatmap(js_heads, "Jensen-Shannon distance", 0, 1),
                    cmp_figures.side_by_side(act.attentions[5, 0], attn_b[5, 0], enc.tokens),
                    attr_figures.attribution_bars(res.tokens, res.scores, res.target)):
            fig.to_json()

    figs = harness.median_ms(figures, reps, name=f"figures, {t} tokens")
    return (f"{len(enc):>4} {fwd:>11.1f} | {cka:>8.1f} {cka / fwd:>5.2f} | {js:>8.1f} {js / fwd:>5.2f} | "
            f"{ig:>9.0f} {ig / fwd:>6.1f} | {figs:>10.1f} {figs / fwd:>5.2f}   "
            f"(IG completeness gap {100 * res.relative_error:.2f}% of f(x) - f(baseline))")


def main() -> None:
    def options(ap):
        ap.add_argument("--reps", type=int, default=5)
        ap.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
        ap.add_argument("--steps", type=int, default=attribution.DEFAULT_STEPS)

    args = harness.parse(__doc__, options)
    lm = sources.load(sources.PACKAGED)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, IG steps {args.steps}, reps {args.reps}")
    print(f"{'T':>4} {'forward ms':>11} | {'CKA ms':>8} {'x':>5} | {'JS ms':>8} {'x':>5} | {'IG ms':>9} {'x':>6} | "
          f"{'figures ms':>10} {'x':>5}")
    for t in args.lengths:
        print(bench_length(lm, t, args.reps, args.steps))
    harness.save(args.json)


if __name__ == "__main__":
    main()
