"""check_verb (the Attention page's statement beside its default sentence): the verdict follows the MLM
probabilities of the two verb forms, and the head named is the one with the most attention from verb to subject."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore.analysis.attention.activations import run_encoding
from bertcore.analysis.grammar.agreement import check_verb
from bertcore.readouts.fill_mask import FillMaskError, mlm_logits_at
from bertcore.tokenization.tokenizer import encode

TEXT = "The keys to the cabinet are on the table."


@pytest.fixture(scope="module")
def tiny_mlm():
    """A random tiny BertForPreTraining over the packaged 30,522-piece vocabulary, and that tokenizer."""
    from bertcore.modeling.heads import BertForPreTraining
    from bertcore.loading.sources import packaged_model_dir
    from bertcore.tokenization.tokenizer import load_tokenizer

    from ...conftest import tiny_bert

    return tiny_bert(BertForPreTraining, seed=1, vocab_size=30522), load_tokenizer(packaged_model_dir())


def test_the_verdict_and_the_head_are_what_the_model_computes(tiny_mlm):
    model, tok = tiny_mlm
    got = check_verb(model, tok, TEXT, "are", "is", "keys", "cabinet")
    enc = encode(tok, TEXT)
    v, s, a = 6, 2, 5  # [CLS] the keys to the cabinet are: first pieces of are / keys / cabinet
    import torch

    ids = torch.tensor([enc.input_ids])
    ids[0, v] = tok.mask_token_id
    p = torch.softmax(mlm_logits_at(model, ids, [v])[0], -1)
    are, is_ = tok.convert_tokens_to_ids(["are", "is"])
    assert got.p_correct == pytest.approx(float(p[are])) and got.p_other == pytest.approx(float(p[is_]))
    assert got.right == (float(p[are]) > float(p[is_]))
    attn = run_encoding(model.base_model, enc).attentions
    layer, head = np.unravel_index(int(np.argmax(attn[:, :, v, s])), attn.shape[:2])
    assert got.head == (layer, head)  # 0-based (block, head)
    assert got.to_attractor == pytest.approx(float(attn[layer, head, v, a]))
    swapped = check_verb(model, tok, TEXT, "are", "is", "keys", "to")  # another attractor: the same head, its weight
    assert swapped.head == got.head and swapped.to_attractor == pytest.approx(float(attn[layer, head, v, 3]))


def test_bad_words_and_a_model_without_mlm_head_raise(tiny_mlm):
    model, tok = tiny_mlm
    with pytest.raises(ValueError, match="not a word"):
        check_verb(model, tok, TEXT, "are", "is", "dogs", "cabinet")
    with pytest.raises(FillMaskError):
        check_verb(model.base_model, tok, TEXT, "are", "is", "keys", "cabinet")
