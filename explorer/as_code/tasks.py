"""Snippets of "BERT's tasks": Masking (one masking draw and the model's guesses) and Next sentence. Each function
takes the inputs the page used and returns the snippet's text; its ``result`` is what the page passes to
``as_code.expander``."""

from __future__ import annotations

from bertcore.loading.sources import ModelSource

from .common import snippet


def masking(source: ModelSource, text: str, text_pair: str | None, rate: float, whole_word: bool,
            mask_fraction: float, random_fraction: float, seed: int, temperature: float, top_k: int, top_p: float,
            k: int, max_panels: int) -> str:
    """One masking draw as the training collator makes it, and the MLM head's top-k at every selected or typed
    [MASK] position: ``result`` = ``{"input_ids": (T,) what the model is fed, "probs": (positions, k)}``."""
    body = f"""tok = lm.tokenizer
marked = [None if s is None else fill_mask.normalise_mask_markers(s, tok) for s in (text, text_pair)]
enc = encode(tok, *marked, max_length=lm.max_length)
t = enc.tensors()
# which tokens may be selected, then BERT's 15% / 80-10-10 draw (Devlin et al. 2019, section 3.1)
eligible = masking.eligible_positions(tok, t["input_ids"], t["attention_mask"])  # (1, T) bool
word_ids = masking.whole_word_ids(tok, t["input_ids"], eligible) if whole_word else None
drawn = masking.mask_tokens(t["input_ids"], eligible, mask_token_id=tok.mask_token_id, vocab_size=len(tok),
                            mlm_probability=rate, mask_fraction=mask_fraction, random_fraction=random_fraction,
                            word_ids=word_ids, generator=torch.Generator().manual_seed(seed))
print("fed to the model:", tok.convert_ids_to_tokens(drawn.input_ids[0].tolist()))

# %%
# the MLM head's guesses at every selected position and every [MASK] typed in the text
selected = [i for i, d in enumerate(drawn.decision[0].tolist()) if d != masking.NOT_SELECTED]
positions = sorted(set(selected) | set(fill_mask.mask_token_positions(tok, t["input_ids"])))
logits = fill_mask.mlm_logits_at(lm.model, drawn.input_ids, positions, t["attention_mask"], t["token_type_ids"])
decoding = fill_mask.Decoding(temperature, top_k, top_p)  # softmax(logits / T), then top-k / top-p
preds = fill_mask.predictions_from_logits(tok, drawn.input_ids, positions, logits, drawn.labels, k, decoding)
for p in preds:
    print(p.position, enc.tokens[p.position], [f"{{w}} {{q:.3f}}" for w, q in zip(p.tokens, p.probs)])
result = {{"input_ids": drawn.input_ids[0].numpy(), "probs": np.array([p.probs for p in preds])}}
shown = preds[:{max_panels}]
fig = mask_figures.topk_figure([f"pos {{p.position}}: {{enc.tokens[p.position]}}" for p in shown],
                               [p.tokens for p in shown], [p.probs for p in shown],
                               [None if p.original_id is None else enc.tokens[p.position] for p in shown])
fig.show()"""
    return snippet("Masking: one masking draw and the model's guesses", source,
                   ["import numpy as np", "import torch", "from bertcore.readouts import fill_mask",
                    "from bertcore.tokenization import masking", "from bertcore.tokenization.tokenizer import encode",
                    "from explorer.figures import masking as mask_figures"],
                   {"text": text, "text_pair": text_pair, "rate": rate, "whole_word": whole_word,
                    "mask_fraction": mask_fraction, "random_fraction": random_fraction, "seed": seed,
                    "temperature": temperature, "top_k": top_k, "top_p": top_p, "k": k}, body)


def next_sentence(source: ModelSource, a: str, b: str, head: int | None, words: bool) -> str:
    """The NSP head's answer and where [CLS] looks: ``result`` = ``{"p_is_next": float, "cls_attention": (L,
    heads, T) (or words)}``; ``head``: 0-based, None = the mean over heads."""
    lines = ["pred = next_sentence.predict(lm.model, lm.tokenizer, a, b, max_length=lm.max_length)",
             "enc = pred.encoding",
             "print(f\"P(IsNext) = {pred.p_is_next:.1%} (logits IsNext {pred.logits[0]:.2f}, NotNext "
             "{pred.logits[1]:.2f})\")",
             "cls_attention, labels, types = pred.cls_attention, enc.tokens, enc.token_type_ids  # (L, heads, T)"]
    imports = ["from bertcore.readouts import next_sentence",
               "from explorer.figures import next_sentence as nsp_figures"]
    if words:
        imports.append("from bertcore.analysis.attention.words import merge_vector, word_groups")
        lines += ["# words, not WordPieces: a word gets the sum of its pieces' attention",
                  "groups = word_groups(enc.tokens, enc.word_ids)",
                  "cls_attention = merge_vector(cls_attention, groups, \"sum\")  # (L, heads, words)",
                  "labels, types = groups.labels, [enc.token_type_ids[m[0]] for m in groups.members]"]
    lines += ["result = {\"p_is_next\": pred.p_is_next, \"cls_attention\": cls_attention}",
              "fig = nsp_figures.cls_attention_figure(cls_attention, labels, types, head)  # head None: mean of heads",
              "fig.show()"]
    return snippet("Next sentence prediction: P(IsNext) and where [CLS] looks", source, imports,
                   {"a": a, "b": b, "head": head}, "\n".join(lines))
