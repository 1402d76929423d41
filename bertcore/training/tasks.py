"""What differs between pretraining and fine-tuning, in one object each (the loop has no task branches).

A task owns its data (build, tokenize, collate), its model class, the forward pass and loss, the
per-batch sums it logs and how they become metrics, and what it does after an evaluation (the probe)
and at the end (test results and the TF-IDF baseline).

Pretraining loss = MLM cross-entropy on the selected positions only (labels != -100; the MLM head
runs on those rows only, ``masked_only=True``) + ``nsp_weight`` x NSP cross-entropy (2 classes)
(Devlin et al. 2019, section 3.1). The MLM accuracy is split by how each selected token was
corrupted (:mod:`bertcore.tokenization.masking` decision codes): at [MASK] positions (the headline number), at
random replacements and at unchanged positions; ``mlm_acc`` is their mix.

With ``--agreement-pairs`` the training split also holds counterfactual number pairs
(:mod:`bertcore.data.agreement_training`) whose verb is always [MASK]ed; ``--agreement-margin-weight`` w adds
w x max(0, m - (logit(correct) - logit(other number))) at those verbs (:mod:`.losses`; Noji & Takamura 2020), and
the train records log ``agreement_margin_loss`` (unweighted), ``agreement_acc`` (share of verbs whose correct form
leads) and ``agreement_logit_diff`` whenever a logged window held such verbs.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import torch

from .. import data as D
from ..modeling.heads import BertForPreTrainingOutput, BertForSequenceClassification
from ..tokenization.masking import MASKED, RANDOM, UNCHANGED, special_ids
from .baseline import macro_f1, tfidf_baseline
from ..runs.config import PROBE_AUTO, PROBE_SEP, TrainConfig
from ..data.agreement_training import add_agreement_rows
from ..data.batching import AGREEMENT_COLUMNS, AGREEMENT_ROWS
from .dist import autocast
from .losses import margin_loss, verb_logit_diff
from .models import data_tokenizer, pretraining_class
from .probe_choice import choose_probes, mask_labels

AGREE = AGREEMENT_COLUMNS[0]

Log = Callable[[str], None]


def _host_rows(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The verbs' rows the collator found on the host (:data:`~bertcore.data.batching.AGREEMENT_ROWS`), or Nones for
    a batch collated without them (the loss then finds them on the device)."""
    return tuple(batch.get(k) for k in AGREEMENT_ROWS)


def _sums(values: list, device: torch.device) -> torch.Tensor:
    """``(K,)`` float64 on ``device`` from tensors / numbers (left there: a copy to the host would wait for the
    device; the loop reads its sums every ``log_every`` steps)."""
    def as_t(v):  # a number is filled in on the device (torch.tensor(v, device=...) copies and waits for it)
        return v.detach().to(torch.float64) if torch.is_tensor(v) else torch.full((), float(v), dtype=torch.float64,
                                                                                  device=device)
    return torch.stack([as_t(v) for v in values])


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def _pretraining_output(out) -> BertForPreTrainingOutput:
    """A :class:`~bertcore.modeling.heads.BertForMaskedLM` output (a model without an NSP head: ModernBERT-style) as
    :class:`~bertcore.modeling.heads.BertForPreTrainingOutput` without NSP; a pretraining output unchanged."""
    if isinstance(out, BertForPreTrainingOutput):
        return out
    return BertForPreTrainingOutput(out.loss, out.logits, None, mlm_loss=out.loss, mlm_labels=out.labels,
                                    hidden_states=out.hidden_states, attentions=out.attentions)


class PretrainTask:
    """MLM (+ NSP) on sentence pairs of a corpus; see the module docstring."""

    name = "pretrain"
    eval_by_length = False
    STATS = ("mlm_loss_sum", "n_selected", "correct", "nsp_loss_sum", "n_pairs", "nsp_correct", "tokens",
             "n_mask", "correct_mask", "n_random", "correct_random", "n_unchanged", "correct_unchanged", "top5_mask",
             "n_agree", "agree_hinge_sum", "agree_correct", "agree_diff_sum")

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.labels = None
        self.reference: dict[str, Any] = {}

    @property
    def model_class(self):
        """:class:`~bertcore.modeling.heads.BertForPreTraining`, or ``BertForMaskedLM`` for a model without an NSP head
        (:func:`.models.pretraining_class`)."""
        return pretraining_class(self.cfg)

    def load_data(self, log: Log, tokenizer=None) -> None:
        """Corpus -> NSP pairs with the tokenizer the run starts from (before the model is built), or with
        ``tokenizer`` (a checkpoint's, when its metrics are recomputed: the same split and pairs)."""
        c = self.cfg
        tok = tokenizer if tokenizer is not None else data_tokenizer(c)
        weights = c.part_weights()
        self.data = D.build_pretraining_data(tok, c.corpus, c.max_seq_len, seed=c.seed, pair_seed=c.train_data_seed,
                                             max_docs=c.max_docs, val_fraction=c.val_fraction,
                                             short_seq_prob=c.short_seq_prob, random_next_prob=0.5 if c.nsp else 0.0,
                                             weights=weights, balance_nsp=c.nsp_balance)
        if c.agreement_pairs:
            self.data = add_agreement_rows(self.data, tok, c.corpus, c.agreement_pairs, c.max_seq_len, seed=c.seed,
                                           pair_seed=c.train_data_seed, val_fraction=c.val_fraction,
                                           max_docs=c.max_docs, nsp=c.nsp, weights=weights,
                                           attractor_repeat=c.agreement_attractor_repeat, log=log)
        ref = D.unigram_reference(self.data.train["input_ids"], special_ids(tok).tolist())
        mf = ref.pop("most_frequent_token_id")
        ref["most_frequent_token"] = None if mf is None else tok.convert_ids_to_tokens(mf)
        self.reference = ref
        self.data.stats.update(ref)
        self.probes = []
        if c.probe == PROBE_AUTO:  # held-out sentences whose masked word the neighbours predict
            train_docs, val_docs = self.data.documents
            self.probes = choose_probes(train_docs, val_docs, tok, c.max_seq_len - 2)
            self.data.stats["probe_sentences"] = self.probes
        log(f"data: {json.dumps(self.data.stats)}")

    def prepare(self, tokenizer, model) -> None:
        c = self.cfg
        self.train_ds, self.val_ds, self.test_ds = self.data.train, self.data.val, None
        self.collate = D.PretrainCollator(tokenizer, c.mlm_probability, c.whole_word_mask, model.config.vocab_size,
                                          mask_replace_prob=c.mask_replace_prob,
                                          random_replace_prob=c.random_replace_prob)

    @torch.no_grad()
    def init_model(self, model) -> None:
        """Data-dependent initialisation of a new from-scratch model (never on resume or a continued model):
        ``--unigram-init`` sets the MLM output bias to the log of the training tokens' frequencies (unseen
        tokens share 0.1% of the mass), so the first prediction is the unigram distribution (loss at the
        unigram line, not ln V);
        ``--position-init sinusoidal`` replaces the position embeddings by the sinusoidal table
        (:func:`bertcore.readouts.positional.sinusoidal`) scaled to the RMS of a normal(0, initializer_range) row."""
        c = self.cfg
        if not c.scratch:
            return
        if c.unigram_init:
            import numpy as np

            vocab = model.config.vocab_size
            flat = np.fromiter((t for s in self.data.train["input_ids"] for t in s), dtype=np.int64)
            counts = np.bincount(flat, minlength=vocab)[:vocab].astype(np.float64)
            counts += 1e-3 * counts.sum() / vocab  # tokens never seen share 0.1% of the mass
            bias = model.cls.predictions.bias
            bias.copy_(torch.as_tensor(np.log(counts / counts.sum()), dtype=bias.dtype))
        if c.position_init == "sinusoidal":
            from ..readouts.positional import sinusoidal

            table = model.bert.embeddings.position_embeddings.weight  # (P, H)
            sin = torch.as_tensor(sinusoidal(*table.shape), dtype=table.dtype)  # RMS 1/sqrt(2)
            table.copy_(sin * (model.config.initializer_range * 2 ** 0.5))

    def collate_train(self, rows: list[dict[str, Any]], generator: torch.Generator, max_len: int | None):
        """A training batch; ``max_len`` (the sequence-length schedule) shortens pairs first."""
        if max_len:
            rows = [D.shorten_pair(r, max_len) for r in rows]
        batch = self.collate(rows, generator)
        if AGREE in batch and not bool((batch[AGREE] >= 0).any()):  # on the host: the step need not ask the device
            for k in AGREEMENT_COLUMNS + AGREEMENT_ROWS:
                batch.pop(k, None)
        return batch

    def forward(self, model, batch: dict[str, torch.Tensor]):
        """Loss = MLM + ``nsp_weight`` x NSP (NSP left out with ``--no-nsp``) + ``agreement_margin_weight`` x the
        margin loss at the verbs of counterfactual rows (:mod:`.losses`; only when the weight is above 0 and the
        batch has such rows)."""
        c = self.cfg
        nsp = {"next_sentence_label": batch["next_sentence_label"]} if c.nsp else {}  # BertForMaskedLM: no NSP
        out = _pretraining_output(model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                                        labels=batch["labels"], masked_only=True,
                                        masked_positions=batch.get("mlm_positions"), **nsp))
        out.loss = out.mlm_loss + c.nsp_weight * out.nsp_loss if c.nsp else out.mlm_loss
        if c.agreement_margin_weight > 0 and AGREE in batch:  # (collate_train drops them when no row has a verb)
            diff = verb_logit_diff(out.prediction_logits, batch["labels"], *(batch[k] for k in AGREEMENT_COLUMNS),
                                   *_host_rows(batch))
            out.loss = out.loss + c.agreement_margin_weight * margin_loss(diff, c.agreement_margin)
        return out

    @torch.no_grad()
    def batch_stats(self, out, batch) -> torch.Tensor:
        """``(len(STATS),)`` float64 sums over the batch (summed over steps and DDP ranks, then
        :meth:`summarize` divides)."""
        labels = out.mlm_labels  # (N,) the selected positions, row-major, as the model picked them
        logits = out.prediction_logits  # (N, V)
        hit = logits.argmax(-1) == labels  # (N,)
        positions = batch.get("mlm_positions")  # (N,) flat, found on the host (a boolean index waits for the device)
        decision = (batch["decision"].reshape(-1).index_select(0, positions) if positions is not None
                    else batch["decision"][batch["labels"] != -100])  # (N,) same order
        is_mask, is_random, is_unchanged = decision == MASKED, decision == RANDOM, decision == UNCHANGED
        top5 = (logits.topk(min(5, logits.size(-1)), dim=-1).indices == labels[:, None]).any(-1)  # (N,)
        nsp_label = batch["next_sentence_label"]
        n, b = labels.numel(), nsp_label.numel()
        nsp_loss = out.nsp_loss.float() * b if out.nsp_loss is not None else 0.0
        nsp_hit = (out.seq_relationship_logits.argmax(-1) == nsp_label).sum() if out.nsp_loss is not None else 0
        if out.nsp_loss is None:
            b = 0
        agree = [0, 0.0, 0, 0.0]
        if AGREE in batch:  # counterfactual rows: the margin at their verbs, logged whatever its weight
            diff = verb_logit_diff(logits, batch["labels"], *(batch[k] for k in AGREEMENT_COLUMNS),
                                   *_host_rows(batch))  # (n,)
            hinge = torch.clamp(self.cfg.agreement_margin - diff, min=0)
            agree = [diff.numel(), hinge.sum(), (diff > 0).sum(), diff.sum()]
        return _sums([out.mlm_loss.float() * n, n, hit.sum(), nsp_loss, b, nsp_hit,
                      batch["attention_mask"].sum(), is_mask.sum(), (hit & is_mask).sum(), is_random.sum(),
                      (hit & is_random).sum(), is_unchanged.sum(), (hit & is_unchanged).sum(), (top5 & is_mask).sum(),
                      *agree], labels.device)

    def summarize(self, sums: torch.Tensor) -> dict[str, float]:
        s = dict(zip(self.STATS, sums.tolist()))
        mlm_loss, nsp_loss = _ratio(s["mlm_loss_sum"], s["n_selected"]), _ratio(s["nsp_loss_sum"], s["n_pairs"])
        out = {"loss": mlm_loss + self.cfg.nsp_weight * nsp_loss, "mlm_loss": mlm_loss,
               "mlm_acc": _ratio(s["correct"], s["n_selected"])}
        for name, n in (("mask", "n_mask"), ("random", "n_random"), ("unchanged", "n_unchanged")):
            if s[n]:  # a split with 0% of a kind (e.g. 100% [MASK]) logs no accuracy for it
                out[f"mlm_acc_{name}"] = s[f"correct_{name}"] / s[n]
        if s["n_mask"]:
            out["mlm_top5_mask"] = s["top5_mask"] / s["n_mask"]
        if s["n_pairs"]:  # NSP on
            out.update(nsp_loss=nsp_loss, nsp_acc=_ratio(s["nsp_correct"], s["n_pairs"]))
        if s["n_agree"]:  # counterfactual verbs in these batches: the margin loss (unweighted) and its accuracy
            out.update(agreement_margin_loss=s["agree_hinge_sum"] / s["n_agree"],
                       agreement_acc=s["agree_correct"] / s["n_agree"],
                       agreement_logit_diff=s["agree_diff_sum"] / s["n_agree"])
            out["loss"] += self.cfg.agreement_margin_weight * out["agreement_margin_loss"]
        return out

    def eval_collect(self, out, batch, store: dict[str, list]) -> None:
        """Nothing beyond the sums for pretraining."""

    def eval_extra(self, store: dict[str, list]) -> dict[str, Any]:
        return {}

    def probe_sentences(self) -> tuple[list[str], list[str] | None]:
        """The probe's sentences (``--probe``: one sentence, several separated by :data:`PROBE_SEP`, or
        ``auto``: chosen by :func:`.probe_choice.choose_probes` in :meth:`load_data`) and, for ``auto``,
        the word each [MASK] hides in the held-out text."""
        text = self.cfg.probe
        if text == PROBE_AUTO:
            probes = getattr(self, "probes", [])
            return [p["text"] for p in probes], [p["answer"] for p in probes]
        return [t.strip() for t in (text or "").split(PROBE_SEP) if "[MASK]" in t], None

    @torch.no_grad()
    def probe(self, model, tok, device: torch.device, step: int) -> dict[str, Any] | None:
        """Top-5 predictions at each [MASK] of the probe sentences: ``{"step", "text" (the sentences joined by
        " | "), "predictions": [[[token, probability], ...] per [MASK], sentence by sentence]}`` (probabilities
        rounded to 1e-4), with several sentences also ``"sentences"`` and ``"labels"`` (each [MASK]'s two
        words either side), and for ``--probe auto`` ``"answers"``; None without a probe."""
        sentences, answers = self.probe_sentences()
        if not sentences:
            return None
        enc = tok([s.replace("[MASK]", tok.mask_token) for s in sentences], return_tensors="pt", padding=True,
                  truncation=True, max_length=self.cfg.max_seq_len)
        ids = enc["input_ids"].to(device)  # (S, L)
        was = model.training
        model.eval()
        with autocast(device, self.cfg.precision):
            out = _pretraining_output(model(ids, enc["attention_mask"].to(device), enc["token_type_ids"].to(device)))
        model.train(was)
        pos = (ids == tok.mask_token_id).nonzero()  # (M, 2): sentence, position (row-major)
        probs = out.prediction_logits[pos[:, 0], pos[:, 1]].float().softmax(-1)  # (M, V)
        top = probs.topk(5, dim=-1)
        preds = [[[tok.convert_ids_to_tokens(int(i)), round(float(p), 4)] for p, i in zip(tp, ti)]
                 for tp, ti in zip(top.values, top.indices)]
        rec: dict[str, Any] = {"step": step, "text": PROBE_SEP.join(sentences), "predictions": preds}
        if len(sentences) > 1:
            rec.update(sentences=sentences, labels=mask_labels(sentences, pos[:, 0].tolist()))
        if answers:
            rec["answers"] = answers
        return rec

    def after_eval(self, trainer) -> None:
        """Log the probe sentence's top predictions (``probe.jsonl``)."""
        rec = self.probe(trainer.model, trainer.tokenizer, trainer.device, trainer.step)
        if rec is not None:
            trainer.writer.log_probe(rec)

    def finish(self, trainer) -> None:
        """Pretraining ends with its last checkpoint only."""


class ClassifyTask:
    """Sequence classification on a labelled set (BERT section 4.1: a linear layer on the pooled [CLS])."""

    name = "finetune"
    model_class = BertForSequenceClassification
    eval_by_length = True
    STATS = ("loss_sum", "n", "correct", "tokens")

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg

    def load_data(self, log: Log, tokenizer=None) -> None:
        """The labelled set and its split (the labels size the model's head); raw text, so ``tokenizer`` is
        not needed here (``prepare`` tokenizes)."""
        c = self.cfg
        self.data = D.build_classification_data(
            c.dataset, seed=c.seed, val_fraction=c.val_fraction, test_fraction=c.test_fraction,
            max_train_examples=c.max_train_examples, text_column=c.text_column, label_column=c.label_column,
            text_pair_column=c.text_pair_column)
        self.labels = self.data.labels
        log(f"data: {json.dumps(self.data.stats)}")

    reference: dict[str, Any] = {}

    def init_model(self, model) -> None:
        """No data-dependent initialisation for fine-tuning."""

    def collate_train(self, rows: list[dict[str, Any]], generator: torch.Generator, max_len: int | None):
        return self.collate(rows, generator)

    def prepare(self, tokenizer, model) -> None:
        n = self.cfg.max_seq_len
        self.train_ds = D.tokenize_classification(self.data.train, tokenizer, n)
        self.val_ds = D.tokenize_classification(self.data.val, tokenizer, n)
        self.test_ds = D.tokenize_classification(self.data.test, tokenizer, n)
        self.collate = D.ClassificationCollator(tokenizer)

    def forward(self, model, batch: dict[str, torch.Tensor]):
        return model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["label"])

    @torch.no_grad()
    def batch_stats(self, out, batch) -> torch.Tensor:
        b = batch["label"].numel()
        correct = (out.logits.argmax(-1) == batch["label"]).sum()
        return _sums([out.loss.float() * b, b, correct, batch["attention_mask"].sum()], batch["label"].device)

    def summarize(self, sums: torch.Tensor) -> dict[str, float]:
        s = dict(zip(self.STATS, sums.tolist()))
        return {"loss": _ratio(s["loss_sum"], s["n"]), "acc": _ratio(s["correct"], s["n"])}

    def eval_collect(self, out, batch, store: dict[str, list]) -> None:
        store.setdefault("preds", []).extend(out.logits.argmax(-1).tolist())
        store.setdefault("golds", []).extend(batch["label"].tolist())

    def eval_extra(self, store: dict[str, list]) -> dict[str, Any]:
        return {"f1": macro_f1(store.get("golds", []), store.get("preds", []), len(self.labels))}

    def probe(self, model, tok, device: torch.device, step: int) -> None:
        """No probe sentence for classification."""
        return None

    def after_eval(self, trainer) -> None:
        """No probe for classification."""

    def finish(self, trainer) -> None:
        """Test metrics, confusion matrix, classification report and the baseline into ``results.json``."""
        from sklearn.metrics import classification_report, confusion_matrix

        labels = self.labels
        store: dict[str, list] = {}
        res = trainer.evaluate(self.test_ds, 0, store)
        preds, golds = store.get("preds", []), store.get("golds", [])
        ids = list(range(len(labels)))
        results: dict[str, Any] = {
            "step": trainer.step, "labels": labels,
            "test": {**res, "n": len(golds)},
            "confusion_matrix": confusion_matrix(golds, preds, labels=ids).tolist(),
            "classification_report": classification_report(golds, preds, labels=ids, target_names=labels,
                                                           output_dict=True, zero_division=0),
            "classification_report_text": classification_report(golds, preds, labels=ids, target_names=labels,
                                                                zero_division=0),
            "majority_fraction": self.data.stats.get("majority_fraction"),
            "data": self.data.stats, "wall_time_s": round(trainer.elapsed(), 1),
        }
        if not self.cfg.no_baseline:
            try:
                results["baseline"] = tfidf_baseline(self.data.train, self.data.test, labels)
            except Exception as exc:  # noqa: BLE001 - the baseline is a comparison only
                results["baseline"] = {"error": f"{type(exc).__name__}: {exc}"}
        trainer.writer.write_results(results)
        b = results.get("baseline", {})
        trainer.log(f"test acc {res.get('acc'):.4f} f1 {res.get('f1'):.4f}; "
                    f"baseline acc {b.get('acc')} f1 {b.get('f1')}")
        trainer.log("\n" + results["classification_report_text"])


TASK_CLASSES = {"pretrain": PretrainTask, "finetune": ClassifyTask}


def make_task(cfg: TrainConfig):
    """The task object of a config (:class:`PretrainTask` or :class:`ClassifyTask`)."""
    return TASK_CLASSES[cfg.task](cfg)
