"""The agreement margin loss at a masked verb (Noji & Takamura 2020, "An Analysis of the Utility of Explicit
Negative Examples to Improve the Syntactic Abilities of Neural Language Models", section 3: a token-level margin
between the correct word and its minimally different wrong word).

For each sequence of a counterfactual agreement pair (:mod:`bertcore.data.agreement_training`) the verb is
[MASK]ed and the loss is ``max(0, m - (logit(correct) - logit(other number)))`` at that position, averaged over
the sequences of the batch that have one; the training task adds it with weight ``w``
(``--agreement-margin-weight``, ``--agreement-margin``).
"""

from __future__ import annotations

import torch

from ..tokenization.masking import verb_rows


class AgreementLossError(ValueError):
    """Verb positions that the logits do not cover (the message says which)."""


def verb_logit_diff(prediction_logits: torch.Tensor, labels: torch.Tensor, position: torch.Tensor,
                    good: torch.Tensor, bad: torch.Tensor, rows: torch.Tensor | None = None,
                    logit_rows: torch.Tensor | None = None) -> torch.Tensor:
    """``logit(good) - logit(bad)`` at each sequence's verb, for the sequences that have one.

    Args:
        prediction_logits: ``(B, T, V)``, or ``(N, V)`` for the selected positions only in row-major order
            (``BertForPreTraining(..., masked_only=True)``, aligned with ``labels != -100``).
        labels: ``(B, T)`` long MLM labels (-100 where not selected); the verb positions must be selected.
        position: ``(B,)`` long index of the verb in each sequence, -1 for sequences without one.
        good / bad: ``(B,)`` long ids of the correct and the other-number verb.
        rows, logit_rows: ``(n,)`` long, the sequences with a verb and each verb's row in the masked-only logits, as
            the collator finds them on the host (:func:`bertcore.tokenization.masking.verb_rows`); given, nothing
            waits for the device (no ``nonzero``, no check: the collator force-masks the verbs).
    Returns:
        ``(n,)`` float32, n = sequences with ``position >= 0`` (in batch order); differentiable.
    Raises:
        AgreementLossError: a verb position that is not selected (the masked-only logits have no row for it).
    """
    if rows is None:  # found here, on the logits' device (a nonzero: the step waits for it)
        rows, logit_rows = verb_rows(position, labels)
        if prediction_logits.dim() == 2 and bool((logit_rows < 0).any()):
            raise AgreementLossError("a verb position is not selected for MLM: the collator must force-mask it")
    if prediction_logits.dim() == 3:
        logits = prediction_logits[rows, position[rows]]  # (n, V)
    else:
        logits = prediction_logits[logit_rows]  # (n, V)
    logits = logits.float()
    return logits.gather(1, good[rows, None]).squeeze(1) - logits.gather(1, bad[rows, None]).squeeze(1)  # (n,)


def margin_loss(diff: torch.Tensor, margin: float) -> torch.Tensor:
    """Mean of ``max(0, margin - diff)`` over ``diff`` ``(n,)`` (logits; 0 with a gradient path when n = 0)."""
    if diff.numel() == 0:
        return diff.sum()
    return torch.clamp(margin - diff, min=0).mean()
