"""The Circuits page's sections: how to get transcoders, the node picker and a node's details (its activation,
direct effect and top held-out contexts), and steering a node or a named supernode in the real model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from bertcore.loading.sources import LoadedModel
from explorer import widgets
from explorer.server import heavy
from explorer.views import circuits as views

#: what the steered run keeps from the clean run: ``(freeze_attention, freeze_layer_norms)`` of
#: :func:`bertcore.circuits.steer.steer`
HOLD = {"attention patterns": (True, False), "attention and LayerNorm scales (as the graph)": (True, True),
        "nothing (all recomputed)": (False, False)}


def how_to_train(lm: LoadedModel) -> None:
    """What to do when no transcoder set fits the sidebar's model."""
    n = lm.config.num_hidden_layers
    st.info(f"**{widgets.escape_md(lm.source.name)} has no transcoders yet.** An attribution graph replaces each "
            f"of its {n} feed-forward blocks by a transcoder trained on that block's input and output. Train a set "
            "on the **Train** page (recipe *Transcoders for every layer*: resumable, its newest checkpoint shows "
            "here while it runs), or from a terminal:", icon=":material/info:")
    st.code(f"python -m bertcore.sae train --kind transcoder --run-dir runs/transcoders \\\n"
            f"    --model {lm.path or 'MODEL_FOLDER'} \\\n"
            f"    --layers {','.join(str(b) for b in range(n))} --d-sae {16 * lm.config.hidden_size} --k 32 "
            "--max-time 600\n"
            "python -m bertcore.sae resume --run-dir runs/transcoders   # after a stop: on from its last checkpoint",
            language="bash")


def typed_folder(folder: str) -> Path | None:
    """The typed transcoder folder, or None (nothing typed, or not a folder here: said on the page)."""
    if not folder.strip():
        return None
    path = Path(folder.strip()).expanduser()
    try:
        found = path.is_dir()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        found = False
    if not found:
        st.warning("No folder at that path on this machine: type the folder that holds layer-1/ … layer-N/.",
                   icon=":material/folder_off:")
    return path if found else None


def _name(c: views.Circuit, i: int) -> str:
    return (f"{c.labels[i]} at {c.tokens[c.positions[i]]!r} (position {c.positions[i]}) · influence "
            f"{c.influence[i]:.3f}")


def node_picker(c: views.Circuit) -> str | None:
    """A select box of the kept feature and error nodes, most influential first (a click on the graph selects
    too); returns the chosen node's id."""
    order = [i for i in sorted(range(len(c.node_ids)), key=lambda i: -c.influence[i])
             if c.kinds[i] in ("feature", "error")]
    clicked = st.session_state.get("cir_graph")
    points = (clicked or {}).get("selection", {}).get("points", []) if isinstance(clicked, dict) else []
    picked = next((p.get("customdata") for p in points if p.get("customdata") in c.node_ids), None)
    if picked is not None and picked != st.session_state.get("cir_node"):
        st.session_state["cir_node"] = picked
    ids = [c.node_ids[i] for i in order]
    if st.session_state.get("cir_node") not in ids:
        st.session_state.pop("cir_node", None)
    if not ids:
        st.info("Pruning kept no feature or error node at this threshold: raise it.", icon=":material/info:")
        return None
    return st.selectbox("Node (or click one in the graph)", ids, key="cir_node",
                        format_func=lambda node: _name(c, c.node_ids.index(node)))


def node_details(lm: LoadedModel, c: views.Circuit, selected: str | None, transcoders) -> None:
    """The chosen node: its activation and direct effect on the target; a feature's top held-out contexts on a
    click (a heavy view, through the queue)."""
    if selected is None:
        return
    i = c.node_ids.index(selected)
    m = st.columns(3)
    m[0].metric("Activation" if c.kinds[i] == "feature" else "Error norm", f"{c.activations[i]:.3g}")
    m[1].metric("Direct effect on the target", f"{c.logit_effect[i]:+.3g}",
                help="Its edge to the target logit(s): what it adds there, through the frozen attention, with every "
                     "other node held fixed (weighted by each target's probability).")
    m[2].metric("Influence", f"{c.influence[i]:.3g}", help="Its share of the influence on the prediction, through "
                                                            "every path of the graph (circuit-tracer's definition).")
    if c.kinds[i] != "feature":
        st.caption("An error node holds what the transcoder of this block misses at this position: it has no "
                   "feature to look at.")
        return
    layer, feature = int(c.layers[i]), int(c.features[i])
    if st.toggle("Show its top held-out contexts (a few seconds)", key="cir_contexts"):
        ctx = heavy.run_view(views.contexts, "the feature's top contexts", lm.source, transcoders, layer, feature)
        st.caption(f"Block {layer} latent {feature} fires on {ctx.density:.2%} of held-out tokens; its strongest "
                   "sentences (the peak token in bold):")
        st.markdown("\n".join(
            f"- {a:.2f}: " + " ".join(f"**{widgets.escape_md(t)}**" if j == p else widgets.escape_md(t)
                                      for j, t in enumerate(toks))
            for toks, p, a in zip(ctx.tokens, ctx.position, ctx.activation)))


def supernode_table(c: views.Circuit, members: list[str]) -> pd.DataFrame:
    """The members of a supernode, one row each."""
    rows = [c.node_ids.index(m) for m in members]
    return pd.DataFrame({"node": [c.labels[i] for i in rows], "position": [int(c.positions[i]) for i in rows],
                         "activation": [float(c.activations[i]) for i in rows],
                         "influence": [float(c.influence[i]) for i in rows]})


def steering(lm: LoadedModel, args: tuple, c: views.Circuit) -> None:
    """Group feature nodes into a named supernode (or take one node) and steer it in the real model: the target and
    the top fills before and after, beside the graph's prediction."""
    st.subheader("Steer a node or a supernode in the real model")
    st.caption("Scale the chosen features' activations (−1 turns them around, 0 removes them, 2 doubles them): the "
               "decoder difference is added to the feed-forward output of their block and every later layer "
               "recomputes, in the real model. The graph predicts the change from its edges alone: where the two "
               "agree, the graph says what the model does.")
    features = [i for i in sorted(range(len(c.node_ids)), key=lambda i: -c.influence[i]) if c.kinds[i] == "feature"]
    if not features:
        st.info("Pruning kept no feature at this threshold: raise it to steer one.", icon=":material/info:")
        return
    c1, c2, c3 = st.columns([3, 2, 2])
    members = c1.multiselect("Nodes (several make a supernode)", [c.node_ids[i] for i in features],
                             default=[c.node_ids[features[0]]], key="cir_members",
                             format_func=lambda node: _name(c, c.node_ids.index(node)))
    name = c2.text_input("Supernode name", "my supernode", key="cir_supernode")
    factor = c3.select_slider("Scale by", [-2.0, -1.0, 0.0, 0.5, 1.5, 2.0, 3.0], value=-1.0, key="cir_factor")
    if not members:
        return
    picked = [c.node_ids.index(m) for m in members]
    nodes = tuple((int(c.layers[i]), int(c.positions[i]), int(c.features[i])) for i in picked)
    st.dataframe(supernode_table(c, members), hide_index=True, key="cir_members_table")
    hold = st.radio("In the real model, keep from this input", list(HOLD), index=0, key="cir_hold", horizontal=True,
                    help="Attention frozen is what circuit-tracer's interventions do. The graph itself also holds "
                         "every LayerNorm's scale fixed: freeze them too and only the real feed-forward blocks (in "
                         "place of the transcoders) and the head's GELU separate the model from the graph.")
    if not st.toggle("Steer it (the real model and the full graph: seconds)", key="cir_steer"):
        return
    s = heavy.run_view(views.steered, "the steered run", *args, nodes, float(factor), *HOLD[hold])
    m = st.columns(3)
    what = widgets.escape_md(name if len(members) > 1 else c.labels[picked[0]])
    m[0].metric(f"Target {s.target}: before", f"{s.before:+.3f}")
    m[1].metric(f"After {what} × {factor:g} (real model)", f"{s.after:+.3f}", f"{s.after - s.before:+.3f}")
    m[2].metric("The graph predicted", f"{s.before + (s.predicted or 0.0):+.3f}", f"{s.predicted or 0.0:+.3f}",
                help="The change the graph's edges predict for this scaling, through every path of the frozen "
                     "replacement model.")
    agree = (s.after - s.before) * (s.predicted or 0.0) > 0
    if agree:
        verdict = "The real model moved the way the graph predicts."
    elif s.freeze_layer_norms:
        verdict = ("The real model did not move the way the graph predicts, even with the LayerNorm scales kept: the "
                   "real feed-forward blocks, which the graph replaces by transcoders and error nodes, matter here.")
    else:
        verdict = ("The real model did not move the way the graph predicts: what the graph holds fixed (the "
                   "LayerNorm denominators, the error nodes) matters here. Keep the LayerNorm scales too to see which.")
    st.caption(verdict + " Top fills before: "
               + ", ".join(f"{widgets.escape_md(t)} {p:.0%}" for t, p in s.top_before) + "; after: "
               + ", ".join(f"{widgets.escape_md(t)} {p:.0%}" for t, p in s.top_after) + ".")
