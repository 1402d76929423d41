"""The Positional embeddings page's Rotary positions section: RoPE's frequencies, its relative property with a
numeric check, its long-range decay, ModernBERT's two bases side by side, and, for a model with rotary positions,
its real frequencies and what its heads do with relative offsets (:func:`explorer.views.positions.offset_profile`)."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from bertcore.modeling import rotary
from bertcore.loading.sources import LoadedModel
from explorer import widgets
from explorer.figures import rotary as rotary_figures
from explorer.views import positions as views

#: ModernBERT's bases (Warner et al. 2024, section 2.1.1): global layers, local (sliding-window) layers
MODERNBERT_BASES = (160_000.0, 10_000.0)
MODERNBERT_WINDOW = 128
#: the shifts of the numeric check, up to ModernBERT's 8192 positions
SHIFTS = (1, 3, 17, 100, 1000, 8000)
CHECK_TOLERANCE = 1e-5


def rotary_section(lm: LoadedModel) -> None:
    """Draw the section for the current model ``lm`` (its own bases and head size when it has rotary positions)."""
    cfg = lm.config
    has_rope = cfg.position_embedding_type == "rotary"
    st.header("Rotary positions (RoPE)")
    st.markdown(
        "The encoders that replaced BERT in 2024-2025 add **no** position vector. Rotary position embeddings "
        "(Su et al. 2021, *RoFormer*) **rotate** each query and key instead, just before their dot product: the "
        "head's *d* dimensions form *d/2* planes, and at position *m* plane *j* is turned by the angle "
        "*m · θⱼ*, with *θⱼ = base^(−2j/d)*. A rotation by *m* then a rotation back by *n* is a rotation by "
        "*m − n*, so **q(m)·k(n) depends only on the distance m − n**: attention sees relative positions, and "
        "nothing is added to the token's own vector. ModernBERT (Warner et al. 2024) uses a base of 160,000 on "
        "its global layers and 10,000 on its local layers, which only see 128 tokens around each token.")
    if has_rope:
        bases = (cfg.rope_theta, cfg.local_rope_theta)
        head_size = cfg.head_size
        st.caption(f"This model rotates by its own settings: head size {head_size}, base {bases[0]:,.0f} on global "
                   f"layers and {bases[1]:,.0f} on local ones (a window of {cfg.local_attention or 'all'} tokens).")
    else:
        bases, head_size = MODERNBERT_BASES, 64
        st.caption(f"This {cfg.family} model adds learned positions, so the views below use ModernBERT-base's "
                   "settings (head size 64, bases 160,000 and 10,000). Load a ModernBERT to see its own.")
    labels = (f"global layers (base {bases[0]:,.0f})", f"local layers (base {bases[1]:,.0f})")
    tab_freq, tab_rel, tab_decay, tab_heads = st.tabs(
        ["Frequencies", "Relative property", "Long-range decay", "This model's heads"])
    with tab_freq:
        st.caption("How many positions each plane needs for one full turn (2π/θⱼ). The first planes turn every "
                   "few tokens and tell neighbours apart; the last turn so slowly that over a whole document they "
                   "barely move. A larger base slows every plane: ModernBERT's global layers can still tell "
                   "positions 8,000 tokens apart, while its local layers never look beyond the dotted line.")
        curves = {label: rotary.wavelengths(head_size, b).numpy() for label, b in zip(labels, bases)}
        window = (cfg.local_attention if has_rope else MODERNBERT_WINDOW) or None
        widgets.plotly_chart(rotary_figures.wavelengths(curves, window), key="rope_wavelengths")
    with tab_rel:
        _relative(head_size, bases)
    with tab_decay:
        st.caption("Su et al. 2021 (section 3.4.3) bound |q(m)·k(n)| by a sum that shrinks as m − n grows: far "
                   "tokens can score less, whatever q and k are. With a larger base the decay starts later, which "
                   "is why long-context models raise it.")
        distances = np.unique(np.geomspace(1, 8192, 200).round())
        curves = {label: rotary.long_range_decay(head_size, b, torch.tensor(distances)).numpy()
                  for label, b in zip(labels, bases)}
        widgets.plotly_chart(rotary_figures.decay(distances, curves), key="rope_decay")
    with tab_heads:
        if not has_rope:
            st.info("This model has no rotary positions; its heads are on the Attention page.", icon=":material/info:")
        else:
            _heads(lm)


def _relative(head_size: int, bases: tuple[float, float]) -> None:
    base = st.selectbox("Base", bases, format_func=lambda b: f"{b:,.0f}", key="rope_base")
    n = widgets.clamped_slider("Positions shown", "rope_positions", 8, 128, 48)
    st.caption("One fixed random query q and key k, each rotated to every position: cell (m, n) is q(m)·k(n). "
               "Every diagonal (same m − n) has one colour: the score depends on the distance only.")
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(head_size, generator=gen, dtype=torch.float64) for _ in range(2))
    widgets.plotly_chart(rotary_figures.score_grid(rotary.score_grid(q, k, n, base).numpy()), key="rope_grid")
    pairs = [(0, 0), (5, 2), (2, 9), (40, 7), (100, 163)]
    err = rotary.shift_error(q, k, base, pairs, list(SHIFTS))
    verdict = "holds" if err < CHECK_TOLERANCE else "FAILS"
    st.metric(f"Largest |q(m)·k(n) − q(m+s)·k(n+s)| over {len(pairs)} pairs and shifts s = "
              f"{', '.join(map(str, SHIFTS))}", f"{err:.1e}", f"relative property {verdict} (< {CHECK_TOLERANCE:g})",
              delta_color="normal" if verdict == "holds" else "inverse")


def _heads(lm: LoadedModel) -> None:
    text = st.text_input("Sentence", "The old man the boats while the young sailors watch from the shore.",
                         key="rope_text")
    try:
        result = views.offset_profile(lm.source, text)
    except ValueError as exc:
        widgets.show_error(exc, "Cannot run the model")
        return
    layer = widgets.layer_picker("rope", result.profile.shape[0])  # 0-based block
    kind = "global" if lm.config.is_global_layer(layer) else "local"
    st.caption(f"Layer {widgets.layer_number(layer)} is a {kind} layer. Each row is one head: its mean attention to "
               "the key at each distance from the query. A bright cell at −1 is a previous-token head, at 0 a self "
               "head; a head spread evenly over the offsets ignores position.")
    widgets.plotly_chart(rotary_figures.offset_profile(result.profile[layer], result.offsets), key="rope_heads")
