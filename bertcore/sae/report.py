"""The held-out measures of SAE folders, written beside them (``metrics.json``), and the goals a shipped SAE must meet.

:func:`evaluate_folders` is what ``python -m bertcore.sae evaluate`` runs and what the shipped SAEs' card quotes: it
measures the *files* (written first in the storage dtype when ``out`` is given, then read back), so anyone who
loads them by SAELens's field names gets the same numbers on the same text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ..loading.shipped_file import model_hash
from . import io as sae_io
from .metrics import reconstruction, spliced
from .stream import shuffled_heldout_chunks

#: the goals for a shipped SAE, on held-out sotu
GOALS = {"fvu": 0.10, "l0": 40, "dead": 0.02, "delta_ce": 0.25, "share_of_zero": 0.15}


def meets_goals(m: dict[str, Any]) -> dict[str, bool]:
    """Each goal of :data:`GOALS` against a ``metrics.json`` dict."""
    return {"fvu": m["fvu"] <= GOALS["fvu"], "l0": m["l0"] <= GOALS["l0"], "dead": m["dead"] <= GOALS["dead"],
            "delta_ce": m["delta_ce_sae"] <= GOALS["delta_ce"],
            "share_of_zero": m["delta_ce_sae"] <= GOALS["share_of_zero"] * m["delta_ce_zero"]}


def evaluate_folders(folders: Sequence[Path], model_spec: str = "shipped", n_tokens: int = 1_000_000,
                     spliced_chunks: int = 256, out: Path | None = None, dtype: str = "float16",
                     threads: int = 2, progress: Callable[[str], None] | None = None) -> dict[int, dict[str, Any]]:
    """Measure SAE folders on held-out ``sotu`` and write each one's ``metrics.json``.

    Args:
        folders: SAE folders (SAELens layout), one per layer, all of the same model.
        n_tokens: held-out tokens for FVU, L0 and dead latents; spliced_chunks: sequences (<= 128 tokens) for the
            spliced MLM loss; both from ``sotu``'s chunks in a fixed random order (seed 0).
        out: if given, each SAE is first written to ``out/layer-<l>/`` (``l`` = block + 1,
            :func:`bertcore.sae.io.folder_name`) in ``dtype`` and the written files measured.
    Returns:
        ``{block: metrics}`` keyed by the 0-based block each SAE reads (fvu, l0, dead, tokens, ce_clean,
        delta_ce_sae / zero / mean, masked, goals; ``metrics["layer"]`` is the label, block + 1, as the folder).
    Raises:
        bertcore.sae.io.SAEError: a folder that cannot be read or does not fit the model.
    """
    from .start import load_model

    say = progress or (lambda s: None)
    torch.set_num_threads(max(1, threads))
    model, tokenizer, folder = load_model(model_spec)
    saes, targets = {}, {}
    for f in folders:
        sae, cfg = sae_io.load(f)
        sae_io.check_fits(cfg, model.config.hidden_size, model.config.num_hidden_layers)
        layer = cfg["layer"]
        target = Path(f)
        if out is not None:
            target = Path(out) / sae_io.folder_name(layer)
            meta = {k: v for k, v in (cfg.get("metadata") or {}).items()
                    if k not in ("norm_scaling_factor", "hook_name", "weights_dtype")}
            meta["bert_explorer"] = {**(meta.get("bert_explorer") or {}), "model_hash": model_hash(folder)}
            sae_io.save(sae, target, layer, model_name=folder.name, dtype=dtype, metadata=meta,
                        num_layers=model.config.num_hidden_layers)
            sae, cfg = sae_io.load(target)
        saes[layer], targets[layer] = sae, target
    chunks = shuffled_heldout_chunks(tokenizer)
    say(f"reconstruction on {n_tokens:,} held-out tokens")
    rec = reconstruction(model, tokenizer, saes, chunks, n_tokens)
    say(f"spliced MLM loss on {spliced_chunks} held-out sequences")
    spl = spliced(model, tokenizer, saes, chunks, {layer: r.mean for layer, r in rec.items()}, n_chunks=spliced_chunks)
    results = {}
    for layer, r in rec.items():
        m = {"layer": sae_io.label(layer), "hook_name": sae_io.hook_name(layer), "model": folder.name, "fvu": r.fvu,
             "l0": r.l0,
             "dead": r.dead, "tokens": r.tokens, "ce_clean": spl.clean, "delta_ce_sae": spl.delta_sae[layer],
             "delta_ce_zero": spl.delta_zero[layer], "delta_ce_mean": spl.delta_mean[layer], "masked": spl.masked,
             "heldout": "sotu", "spliced_sequences": spliced_chunks}
        m["goals"] = meets_goals(m)
        previous = sae_io.read_metrics(targets[layer]) or {}
        sae_io.write_metrics(targets[layer], {**previous, **m})
        results[layer] = m
    return results


#: the held-out sentences indexed for the shipped SAEs' dashboards (and the label-purity numbers of their card)
SHIPPED_SENTENCES = 3000
#: what the Features page indexes for an SAE without a stored index (about a minute on 2 CPU cores)
QUICK_SENTENCES = 400


def feature_params(layer: int, sentences: int, seed: int = 0) -> dict:
    """The parameters a ``features.npz`` is keyed by (with the model's and the SAE's files), for the SAE of block
    ``layer`` (0-based); the stored key names it by its label, block + 1 (:func:`bertcore.sae.io.label`), as the
    shipped indexes were written.

    Raises:
        ValueError: a negative block.
    """
    if int(layer) < 0:
        raise ValueError(f"an SAE's layer is a 0-based block, 0..L-1; got {layer}")
    return {"layer": sae_io.label(layer), "sentences": sentences, "seed": seed, "random": 6144, "top": 20,
            "version": 1}


def index_features(sae_folder: Path, model, tokenizer, model_folder: Path, sentences: int = SHIPPED_SENTENCES,
                   seed: int = 0, progress: Callable[[float], None] | None = None, text=None):
    """Compute and store ``features.npz`` for one SAE or transcoder folder (:mod:`bertcore.sae.features`; either kind,
    :func:`bertcore.sae.catalog.load`), its features' labels included (:mod:`bertcore.sae.labels`); returns the
    index. ``text``: the
    :class:`~bertcore.sae.features.LabelledText` of these ``sentences`` if already parsed.

    Raises:
        bertcore.sae.io.SAEError: the folder cannot be read or does not fit the model.
        bertcore.tokenization.spacy_pipeline.SyntaxUnavailable: spaCy is missing.
    """
    from . import catalog, features, labels

    sae, cfg = catalog.load(sae_folder, model.config.hidden_size, model.config.num_hidden_layers)
    if text is None:
        text = features.labelled_text(tokenizer, features.heldout_sentences(sentences, seed))
    index = features.collect(model, tokenizer, sae, cfg["layer"], text, seed=seed, progress=progress)
    index.labels = labels.to_json(labels.feature_labels(model, tokenizer, sae, cfg["layer"], index))
    features.write(sae_folder, model_folder, index, feature_params(cfg["layer"], sentences, seed))
    return index


def label_features(sae_folder: Path, model, tokenizer, model_folder: Path, score_text=None) -> dict:
    """Label the features of an SAE or transcoder folder whose ``features.npz`` is stored for this model
    (:mod:`bertcore.sae.labels`; the index itself is kept as it is) and write the labels into it; with
    ``score_text`` (a :class:`~bertcore.sae.features.LabelledText` of held-out sentences not in the index) also score
    them as detectors. Returns ``{"labelled", "examples"[, "detector"]}``.

    Raises:
        bertcore.sae.io.SAEError: the folder cannot be read, does not fit the model, or has no stored index.
    """
    from . import catalog, features, labels

    sae, cfg = catalog.load(sae_folder, model.config.hidden_size, model.config.num_hidden_layers)
    index, params = stored_index_and_params(sae_folder, model_folder, cfg["layer"])
    if index is None:
        raise sae_io.SAEError(f"{sae_folder} has no features.npz for this model: run `python -m bertcore.sae features "
                              f"--sae {sae_folder}` first")
    found = labels.feature_labels(model, tokenizer, sae, cfg["layer"], index)
    index.labels = labels.to_json(found)
    features.write(sae_folder, model_folder, index, params)
    out = {"labelled": len(found), "examples": [lb.text for lb in found[:5]]}
    if score_text is not None:
        out["detector"] = labels.score(model, tokenizer, sae, cfg["layer"], found, score_text,
                                       index.top_values[:, 0]).summary()
    return out


def _stored(read, sae_folder: Path, model_folder, layer: int):
    """``(read(folder, model_folder, params), params)`` for the first stored size that gives something: the shipped
    one (:data:`SHIPPED_SENTENCES`), then the Features page's quick one (:data:`QUICK_SENTENCES`); else ``(None,
    None)``."""
    for n in (SHIPPED_SENTENCES, QUICK_SENTENCES):
        params = feature_params(layer, n)
        found = read(sae_folder, model_folder, params)
        if found is not None:
            return found, params
    return None, None


def stored_index_and_params(sae_folder: Path, model_folder, layer: int):
    """``(index, params)``: the folder's ``features.npz`` if it belongs to these model and SAE files, at the shipped
    size or the quick one, and the parameters it is keyed by; ``(None, None)`` when there is none."""
    from . import features

    return _stored(features.read, sae_folder, model_folder, layer)


def stored_index(sae_folder: Path, model_folder, layer: int):
    """The folder's stored feature index for this model (:func:`stored_index_and_params`), or None."""
    return stored_index_and_params(sae_folder, model_folder, layer)[0]


def label_texts(folder: Path, model_folder, layer: int) -> list[str] | None:
    """The stored label texts of an SAE or transcoder folder for this model (its ``features.npz`` at the shipped
    size or the quick one; :func:`bertcore.sae.features.read_label_texts`), or None."""
    from .features import read_label_texts

    return _stored(read_label_texts, folder, model_folder, layer)[0]


def set_label_texts(transcoder_set: Path, model_folder) -> dict[int, list[str]]:
    """``{block: [label text]}``: each transcoder's stored label texts (:func:`label_texts`), read without the
    indexes: what a graph's nodes are named by. Blocks without labels are left out."""
    from .transcoder import set_folders

    found = {block: label_texts(folder, model_folder, block) for block, folder in set_folders(transcoder_set).items()}
    return {block: texts for block, texts in found.items() if texts is not None}


def cfg_k(folder: Path) -> int:
    """The SAE's ``k`` (its ``cfg.json``)."""
    return int(sae_io.read_cfg(folder)["k"])


def card(folders: Sequence[Path], model_folder: Path, commands: Sequence[str], tried: Sequence[str] = ()) -> str:
    """The shipped SAEs' README (Markdown) from their ``metrics.json`` and ``features.npz`` (no number typed by
    hand): one row per layer, the goals met or not, the label-purity scale, and the commands that made them."""
    from . import features

    rows, purity_rows, missed = [], [], []
    for f in folders:
        m = sae_io.read_metrics(f) or {}
        if "fvu" not in m:
            continue
        goals = m.get("goals") or meets_goals(m)
        missed += [f"layer {m['layer']}: {name}" for name, ok in goals.items() if not ok]
        share = m["delta_ce_sae"] / m["delta_ce_zero"] if m["delta_ce_zero"] else float("nan")
        rows.append(f"| {m['layer']} (`{m['hook_name']}`) | {cfg_k(f)} | {m['fvu']:.3f} | {m['l0']:.1f} "
                    f"| {100 * m['dead']:.2f}% | {m.get('tokens', 0):,} | {m['ce_clean']:.3f} "
                    f"| +{m['delta_ce_sae']:.3f} | {100 * share:.1f}% | +{m['delta_ce_zero']:.3f} "
                    f"| +{m['delta_ce_mean']:.3f} | {m.get('masked', 0):,} |")
        block = sae_io.layer_of(m["hook_name"])  # metrics.json's "layer" is the label, block + 1
        index = features.read(f, model_folder, feature_params(block, SHIPPED_SENTENCES))
        if index is not None:
            p = index.purity
            purity_rows.append(f"| {m['layer']} | label-pure | {100 * p['sae']['share']:.1f}% ({p['sae']['pure']:,} "
                               f"of {p['sae']['alive']:,} alive) | {100 * p['random']['share']:.1f}% | "
                               f"{100 * p['neurons']['share']:.1f}% |")
            for key, name in (("pure_varied", "label-pure, varied words"), ("one_word", "one word")):
                purity_rows.append(f"| {m['layer']} | {name} | " + " | ".join(
                    f"{100 * p[scale][key + '_share']:.1f}%" for scale in ("sae", "random", "neurons")) + " |")
    lines = [
        "# Sparse autoencoders for MiniLM-MLM",
        "",
        "TopK SAEs (Gao et al. 2024) on the residual stream of the packaged fill-mask model, one folder per layer in "
        "SAELens's layout: `layer-<l>` reads the output of block l - 1 (blocks count from 0, as `hook_name` "
        "`bert.encoder.layer.<l - 1>` and bertcore's site `blocks.<l - 1>.hook_normalized_resid_post` for this post-LN "
        "model; `--layers` and `cfg[\"layer\"]` take the block, the rows below the layer l) "
        "(`cfg.json` + `sae_weights.safetensors`, fp16; `sae_lens.SAE.load_from_disk(folder)` loads "
        "them; the input normalisation is folded into the weights, its factor in `metadata.norm_scaling_factor`). "
        "Method, format and commands: `docs/sae.md`. Each folder's `metrics.json` holds the numbers below; "
        "`features.npz` the Features page's held-out top contexts and spaCy labels (keyed by the model's and the "
        "SAE's files).",
        "",
        "Held-out: State of the Union addresses (`sotu`, never trained on by the model or the SAEs): FVU, L0 and "
        "dead features (never active) on the first *tokens* of a fixed random order of its chunks; the MLM loss at "
        "the *[MASK] positions* of the first sequences of that order (15% of the eligible tokens, each replaced by "
        "[MASK]), clean and with the layer's output replaced by the SAE's reconstruction, by zeros and by its mean.",
        "",
        "| layer | k | FVU | L0 | dead | tokens | clean CE (nats) | Δ CE, SAE | SAE / zero | Δ CE, zero | Δ CE, mean "
        "| [MASK] positions |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Goals: FVU <= {GOALS['fvu']}, L0 <= {GOALS['l0']}, dead <= {100 * GOALS['dead']:.0f}%, "
        f"Δ CE <= {GOALS['delta_ce']} nats and <= {100 * GOALS['share_of_zero']:.0f}% of zero-ablation's. "
        + ("All met." if not missed else "**Missed: " + "; ".join(missed) + ".** What was tried is below."),
        "",
    ]
    if purity_rows:
        lines += ["## Meaning, measured: label purity", "",
                  f"{SHIPPED_SENTENCES:,} held-out `sotu` sentences parsed by spaCy (`en_core_web_sm`); a direction is "
                  "label-pure when one value of one label (part of speech, dependency relation, entity type, lemma) "
                  "covers >= 80% of its 20 strongest held-out tokens ([CLS]/[SEP] excluded; features active on fewer "
                  "than 20 tokens are not counted). The scale: 6,144 random unit directions and the 384 neurons of "
                  "the same layer. *Varied words*: label-pure, and no token makes up more than half of the top 20 "
                  "(the purity that is not one word's identity); *one word*: one token makes up >= 80% of them. "
                  "Shares of the alive directions.", "",
                  "| layer | measure | SAE features | random directions | neurons |", "|---|---|---|---|---|",
                  *purity_rows, ""]
    if tried:
        lines += ["## What was tried", "", *tried, ""]
    lines += ["## Commands", "", "```", *commands, "```", ""]
    return "\n".join(lines)
