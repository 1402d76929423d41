"""Train a byte-level BPE tokenizer (RoBERTa's and ModernBERT's kind) with the ``tokenizers`` library.

Byte-level BPE (Radford et al. 2019, section 2.2; Sennrich et al. 2016): text is read as bytes, so no character
is ever unknown; the trainer merges the most frequent adjacent pair again and again. The pre-tokenizer splits at
spaces and keeps the space with the following word, shown as ``Ġ``: ``"the cat"`` -> ``the``, ``Ġcat``.

The special tokens and the post-processor follow the family: RoBERTa's ``<s> A </s>`` / ``<s> A </s></s> B </s>``
(``RobertaProcessing``), ModernBERT's ``[CLS] A [SEP]`` / ``[CLS] A [SEP] B [SEP]``. The result is a
``transformers.PreTrainedTokenizerFast`` that :func:`bertcore.tokenization.tokenizer.load_bpe_tokenizer` loads back
after
``save_pretrained``.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from .tokenizer import TokenizerError, shareable

#: special tokens per family, in id order from 0: (cls, pad, sep, unk, mask)
SPECIALS = {"roberta": {"cls_token": "<s>", "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>",
                        "mask_token": "<mask>"},
            "modernbert": {"cls_token": "[CLS]", "pad_token": "[PAD]", "sep_token": "[SEP]", "unk_token": "[UNK]",
                           "mask_token": "[MASK]"}}


def train_byte_level_bpe(texts: Iterable[str], vocab_size: int, family: str = "roberta",
                         model_max_length: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer of about ``vocab_size`` tokens (specials included) learnt from ``texts``.

    Args:
        texts: the training text (sentences or documents).
        vocab_size: target size, at least 256 + 5 (every byte is a token, then the specials).
        family: ``"roberta"`` (ids 0-4: ``<s> <pad> </s> <unk> <mask>``, as roberta-base) or ``"modernbert"``
            (``[CLS] [PAD] [SEP] [UNK] [MASK]``).
        model_max_length: the longest input the tokenizer lets through.
    Raises:
        TokenizerError: an unknown family, a vocabulary below 261 tokens, or no text.
    """
    if family not in SPECIALS:
        raise TokenizerError(f"no byte-level BPE recipe for {family!r}; choose one of {', '.join(SPECIALS)}")
    if vocab_size < 256 + 5:
        raise TokenizerError(f"vocab_size {vocab_size} is below the 256 bytes and 5 special tokens")
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise TokenizerError("no text to learn a vocabulary from")
    names = SPECIALS[family]
    specials = list(names.values())
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    cls, sep = names["cls_token"], names["sep_token"]
    if family == "roberta":
        tok.post_processor = processors.RobertaProcessing((sep, tok.token_to_id(sep)), (cls, tok.token_to_id(cls)),
                                                          trim_offsets=True, add_prefix_space=False)
    else:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
            special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))])
    extra = {"bos_token": cls, "eos_token": sep} if family == "roberta" else {}
    # RoBERTa's mask swallows the space before it, so " <mask>" is one token as "Ġword" would be
    mask = AddedToken(names["mask_token"], lstrip=family == "roberta", special=True)
    return shareable(PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length,
                                             model_input_names=["input_ids", "token_type_ids", "attention_mask"],
                                             **{**names, "mask_token": mask}, **extra))
