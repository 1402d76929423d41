"""What transformers is told about a checkpoint folder: the Python that loads it (transformers where it computes
the model exactly, bertcore otherwise), a paragraph saying which library loads it, and the re-export of an older
pre-LN folder into the current format. The formats themselves are :mod:`bertcore.modeling.hf_format`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

from ..modeling.checkpoint import CheckpointError, read_config_json
from ..modeling.families import HF_CLASSES as FAMILY_CLASSES, OTHER_FAMILIES
from ..modeling.config import ConfigError
from ..modeling.hf_format import (BERT, LEGACY_PRELN, NSP_FILE, OUR_CLASSES, PRELN, bertcore_line, config_from_dict,
    read_format, why_not_transformers)
from .sources import HEAD_CLASSES, TOKENIZER_FILES, detect_head


# ----------------------------------------------------------------------------- re-export of older folders
def reexport_checkpoint(folder: str | Path, card: Callable[[Path], str] | None = None) -> Path:
    """Rewrite a checkpoint folder in its current format (an older pre-LN ``bert`` folder becomes
    RobertaPreLayerNorm), keeping every other file (tokenizer, ``trainer_state.pt``); ``card(new folder)`` gives
    a new ``README.md``. The new folder is written beside it (dot-named, which run listings skip) and swapped in
    with ``os.replace``, so the folder is the old one or the new one whatever happens. Returns the folder.

    Raises:
        bertcore.modeling.checkpoint.CheckpointError: the folder does not load.
    """
    folder = Path(folder)
    head = detect_head(folder)
    model = HEAD_CLASSES[head].from_pretrained(folder)
    tmp = folder.parent / f".{folder.name}.reexport-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        skip = {"config.json", "model.safetensors", "pytorch_model.bin", NSP_FILE, "README.md"}
        for item in folder.iterdir():
            if item.is_file() and item.name not in skip and not item.name.startswith("."):
                shutil.copy2(item, tmp / item.name)
        model.save_pretrained(tmp)
        if card is not None:
            (tmp / "README.md").write_text(card(tmp), encoding="utf-8")
        old = folder.parent / f".{folder.name}.old-{os.getpid()}"
        os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


# ----------------------------------------------------------------------------- the code that loads a folder
DEFAULT_TEXT = "The government said it would [MASK] the new law next week."


def usage_note(fmt: str, head: str, folder: str | Path | None = None) -> str:
    """One paragraph for people: which library loads a folder of this format, and what it gives; for a
    :data:`~bertcore.modeling.hf_format.BERTCORE_ONLY` folder, why no transformers class computes it (read from the
    folder's config: :func:`bertcore.modeling.hf_format.why_not_transformers`)."""
    if fmt == BERT:
        return ("A plain BERT (post-LayerNorm): every transformers class loads it and computes the same logits as "
                "BERT Explorer (AutoModel, AutoModelForMaskedLM, AutoModelForPreTraining, BertForPreTraining, "
                "BertForMaskedLM, pipeline('fill-mask')).")
    if fmt == PRELN:
        nsp = (" The next-sentence (NSP) head has no transformers class here: it is kept in "
               f"`{NSP_FILE}` and only bertcore loads it (`BertForPreTraining`)." if head == "pretraining" else "")
        return ("A pre-LayerNorm BERT, saved in transformers' RobertaPreLayerNorm format (model_type "
                "roberta-prelayernorm), which computes exactly this model: AutoModel, AutoModelForMaskedLM, "
                "AutoModelForPreTraining and pipeline('fill-mask') give BERT Explorer's logits; transformers' Bert* "
                "classes refuse the folder (they are post-LayerNorm). Positions are stored shifted by "
                "pad_token_id + 1 rows, as RoBERTa counts them; logits at [PAD] positions of a padded batch differ "
                "(nothing attends to them), and output_hidden_states[-1] is before the final LayerNorm in "
                "transformers (last_hidden_state is after it, as here)." + nsp)
    if fmt in OTHER_FAMILIES:
        name = FAMILY_CLASSES[fmt].get(head, FAMILY_CLASSES[fmt]["base"])
        return (f"A {fmt} model in transformers' own format (model_type {fmt}): {name}, the matching Auto class "
                "and pipeline('fill-mask') for an MLM head compute BERT Explorer's logits "
                "(bertcore.modeling.families maps the weight names).")
    if fmt == LEGACY_PRELN:
        return ("An older pre-LayerNorm checkpoint (model_type bert with pre_layer_norm: true): transformers loads "
                "it WITHOUT an error but computes a different model (its Bert classes are post-LayerNorm and drop "
                "the final LayerNorm). Load it with bertcore, or re-export it (Train page) in the RobertaPreLayerNorm "
                "format that transformers computes exactly.")
    reason = None
    if folder is not None:
        try:
            reason = why_not_transformers(config_from_dict(read_config_json(Path(folder))))
        except (CheckpointError, ConfigError):
            pass  # an unreadable config: the general sentence
    return (f"A model no transformers class computes ({reason or 'a pre-LayerNorm BERT whose activation is not GELU'}"
            "): every transformers class refuses the folder with a message saying so. Load it with bertcore, from "
            "the BERT Explorer repository (bertcore is not on PyPI).")


def usage_code(folder: str | Path, text: str | None = None) -> str:
    """Python that loads the checkpoint in ``folder`` and computes ``logits`` for ``text`` (a sentence with
    [MASK], for a model with an MLM head): transformers where it computes the model exactly, bertcore otherwise.
    The code ends with ``logits`` set (MLM: ``(1, T, V)``; classification: ``(1, num_labels)``; base: the last
    hidden state ``(1, T, H)``).

    Raises:
        bertcore.modeling.checkpoint.CheckpointError: the folder has no readable config, weights or tokenizer.
    """
    folder = Path(folder).resolve()
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise CheckpointError(f"no tokenizer in {folder}: expected {' or '.join(TOKENIZER_FILES)}")
    data = read_config_json(folder)
    try:
        config_from_dict(data)
    except ConfigError as exc:
        raise CheckpointError(f"{folder / 'config.json'}: {exc}") from exc
    fmt = read_format(data)
    head = detect_head(folder)
    text = text if text and (head not in ("mlm", "pretraining") or "[MASK]" in text) else (
        DEFAULT_TEXT if head in ("mlm", "pretraining") else "The new law was passed last week.")
    lines = ["import torch"]
    if fmt in (BERT, PRELN, *OTHER_FAMILIES):
        auto = {"mlm": "AutoModelForMaskedLM", "pretraining": "AutoModelForMaskedLM",
                "classification": "AutoModelForSequenceClassification", "base": "AutoModel"}[head]
        lines += [f"from transformers import {auto}, AutoTokenizer", "",
                  f"path = {str(folder)!r}  # this checkpoint folder",
                  "tokenizer = AutoTokenizer.from_pretrained(path)",
                  f"model = {auto}.from_pretrained(path).eval()"
                  + ("  # RobertaPreLayerNorm: the same pre-LN model" if fmt == PRELN else "")]
        if head == "pretraining" and fmt == BERT:
            lines.append("# MLM + NSP heads: transformers.BertForPreTraining.from_pretrained(path)")
        if head == "pretraining" and fmt == PRELN:
            lines += ["# MLM + NSP heads (NSP has no transformers class; it is in nsp_head.safetensors), with bertcore",
                      "# from the BERT Explorer repository:",
                      "# " + bertcore_line("pretraining", "path").replace('"path"', "path")]
    else:
        cls = {v: k for k, v in OUR_CLASSES.items()}[head]
        module = "bertcore.modeling.model" if cls == "BertModel" else "bertcore.modeling.heads"
        lines += ["from transformers import AutoTokenizer", f"from {module} import {cls}  # run from the BERT "
                  "Explorer repository", "",
                  f"path = {str(folder)!r}  # this checkpoint folder",
                  "tokenizer = AutoTokenizer.from_pretrained(path)",
                  f"model = {cls}.from_pretrained(path).eval()"]
    lines += [f"inputs = tokenizer({text!r}, return_tensors='pt')", "with torch.no_grad():",
              "    out = model(**inputs)"]
    if head in ("mlm", "pretraining"):
        attr = "prediction_logits" if fmt not in (BERT, PRELN) and head == "pretraining" else "logits"
        lines += [f"logits = out.{attr}  # (1, tokens, vocabulary)",
                  "masked = inputs['input_ids'][0] == tokenizer.mask_token_id",
                  "for row in logits[0, masked]:",
                  "    print(tokenizer.convert_ids_to_tokens(row.topk(5).indices.tolist()))"]
    elif head == "classification":
        lines += ["logits = out.logits  # (1, labels)",
                  "print(logits.softmax(-1))  # class probabilities"]
    else:
        lines += ["logits = out.last_hidden_state  # (1, tokens, hidden): the encoder's output"]
    return "\n".join(lines) + "\n"
