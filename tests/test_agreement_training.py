"""Agreement supervision in pretraining: selective verb masking (masking.force, the collator), counterfactual rows,
the margin loss at the verb, --corpus-weights, the new options on the command line, and tiny end-to-end runs."""

import copy
import json

import pytest
import torch

from bertcore import data as D
from bertcore import runs as R
from bertcore.data import agreement_training as AT
from bertcore.data import counterfactual as CF
from bertcore.data.corpora import CORPORA, Corpus
from bertcore.modeling.heads import BertForPreTraining
from bertcore.tokenization.masking import MASKED, NOT_SELECTED, mask_tokens
from bertcore.tokenization.tokenizer import load_tokenizer
from bertcore.training.cli import build_parser
from bertcore.runs.config import OptionError, TrainConfig
from bertcore.training.losses import margin_loss, verb_logit_diff
from bertcore.training.tasks import PretrainTask

from .conftest import ROOT, TINY_CORPUS, tiny_bert
from .test_masking import synthetic_batch
from .test_training import run_trainer, tiny_pretrain_argv


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(ROOT / "models" / "minilm-mlm")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def pair_rows(tok):
    """The rows of two pairs: 'the keys to the cabinet are ...' (an attractor) and 'his sister was ...'."""
    items, _ = CF.mine([["The keys to the cabinet are on the table.", "His sister was very tired."]], tok)
    assert len(items) == 2
    ctx = tok("It is old.", add_special_tokens=False)["input_ids"]
    return [r for it in items for r in AT.item_rows(tok, it, ctx, True, 0, 32)]


# ----------------------------------------------------------------------------- selective masking
def test_force_masks_its_positions_and_leaves_every_other_draw_unchanged():
    ids, eligible = synthetic_batch(b=64, t=48)
    force = torch.zeros_like(eligible)
    force[torch.arange(64), torch.randint(1, 3, (64,))] = True  # eligible word positions
    force[0, 0] = True  # [CLS]: never masked, even when forced
    plain = mask_tokens(ids, eligible, mask_token_id=4, vocab_size=1000, generator=torch.Generator().manual_seed(5))
    forced = mask_tokens(ids, eligible, mask_token_id=4, vocab_size=1000, generator=torch.Generator().manual_seed(5),
                         force=force)
    on = force & eligible
    assert bool((forced.decision[on] == MASKED).all()) and bool((forced.input_ids[on] == 4).all())
    assert torch.equal(forced.labels[on], ids[on]) and forced.decision[0, 0] == NOT_SELECTED
    for a, b in ((plain.input_ids, forced.input_ids), (plain.labels, forced.labels), (plain.decision, forced.decision)):
        assert torch.equal(a[~on], b[~on])  # the same 15% / 80-10-10 everywhere else
    assert (plain.decision[on] != MASKED).any()  # without force some verbs would not have been [MASK]ed


def test_collator_always_masks_the_verb_and_leaves_the_rest_as_before(tok, pair_rows):
    collate = D.PretrainCollator(tok, mlm_probability=0.15)
    plain_rows = [{k: v for k, v in r.items() if k not in D.AGREEMENT_COLUMNS} for r in pair_rows]
    for step in range(50):
        batch = collate(pair_rows, D.batch_generator(0, step))
        plain = collate(plain_rows, D.batch_generator(0, step))
        pos = batch["agreement_position"]
        rows = torch.arange(len(pair_rows))
        assert bool((batch["decision"][rows, pos] == MASKED).all())
        assert bool((batch["input_ids"][rows, pos] == tok.mask_token_id).all())
        assert torch.equal(batch["labels"][rows, pos], batch["agreement_good"])
        off = torch.ones_like(batch["decision"], dtype=torch.bool)
        off[rows, pos] = False
        for key in ("input_ids", "labels", "decision"):
            assert torch.equal(batch[key][off], plain[key][off])


def test_pair_rows_differ_at_the_subject_and_verb_only(tok, pair_rows):
    for orig, cf in zip(pair_rows[::2], pair_rows[1::2]):
        diff = [i for i, (a, b) in enumerate(zip(orig["input_ids"], cf["input_ids"])) if a != b]
        assert len(orig["input_ids"]) == len(cf["input_ids"]) and len(diff) == 2
        assert diff[1] == orig["agreement_position"] == cf["agreement_position"]
        assert orig["input_ids"][diff[1]] == orig["agreement_good"] == cf["agreement_bad"]
        assert cf["input_ids"][diff[1]] == cf["agreement_good"] == orig["agreement_bad"]
    goods = tok.convert_ids_to_tokens([r["agreement_good"] for r in pair_rows])
    assert goods == ["are", "is", "was", "were"]  # both numbers, balanced


def test_shorten_pair_follows_the_verb(pair_rows):
    row = {**pair_rows[0], "input_ids": [*pair_rows[0]["input_ids"][:-1], *[2000] * 20, 102],
           "token_type_ids": pair_rows[0]["token_type_ids"] + [1] * 20}
    short = D.shorten_pair(row, 16)
    assert short["input_ids"][short["agreement_position"]] == row["input_ids"][row["agreement_position"]]
    assert D.shorten_pair(row, 9)["agreement_position"] == -1  # A lost its start: the verb is gone


# ----------------------------------------------------------------------------- the margin loss
def task_of(**opts):
    return PretrainTask(TrainConfig.create("pretrain", **opts))


def test_margin_loss_picks_the_verb_rows_of_the_masked_only_logits(tok, pair_rows):
    model = tiny_bert(BertForPreTraining, seed=1)
    batch = D.PretrainCollator(tok)(pair_rows, D.batch_generator(0, 3))
    with torch.no_grad():
        sel = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"],
                    masked_only=True).prediction_logits  # (N, V)
        full = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).prediction_logits
    args = [batch[k] for k in D.AGREEMENT_COLUMNS]
    d_sel, d_full = verb_logit_diff(sel, batch["labels"], *args), verb_logit_diff(full, batch["labels"], *args)
    torch.testing.assert_close(d_sel, d_full, rtol=1e-5, atol=1e-5)
    rows = torch.arange(len(pair_rows))
    expect = (full[rows, args[0], args[1]] - full[rows, args[0], args[2]])
    torch.testing.assert_close(d_full, expect)
    assert margin_loss(d_full, 1.0) == pytest.approx(float(torch.clamp(1.0 - expect, min=0).mean()))


def test_the_verbs_rows_found_on_the_host_give_the_margin_the_device_finds(tok, pair_rows):
    """The collator's ``agreement_rows`` / ``agreement_logit_rows`` (a row without a verb among them) pick what the
    device's ``nonzero`` picks, for masked-only and full logits; without them the loss finds them itself."""
    model = tiny_bert(BertForPreTraining, seed=1)
    plain = {k: v for k, v in pair_rows[0].items() if k not in D.AGREEMENT_COLUMNS}
    rows = [pair_rows[0], {**plain, **dict.fromkeys(D.AGREEMENT_COLUMNS, -1)}] + pair_rows[1:]
    batch = D.PretrainCollator(tok)(rows, D.batch_generator(0, 3))
    assert batch["agreement_rows"].tolist() == [0] + list(range(2, len(rows)))
    with torch.no_grad():
        sel = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"],
                    masked_only=True).prediction_logits  # (N, V)
        full = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).prediction_logits
    args = [batch[k] for k in D.AGREEMENT_COLUMNS]
    host = [batch[k] for k in D.AGREEMENT_ROWS]
    for logits in (sel, full):
        assert torch.equal(verb_logit_diff(logits, batch["labels"], *args, *host),
                           verb_logit_diff(logits, batch["labels"], *args))
    task = task_of(agreement_pairs=10, agreement_margin_weight=2.0)
    without = {k: v for k, v in batch.items() if k not in D.AGREEMENT_ROWS}
    assert torch.equal(task.forward(model, batch).loss, task.forward(model, without).loss)


def test_weight_zero_gives_exactly_the_loss_of_before(tok, pair_rows):
    model = tiny_bert(BertForPreTraining, seed=1)
    batch = D.PretrainCollator(tok)(pair_rows, D.batch_generator(0, 3))
    before = task_of().forward(model, batch).loss  # the task without agreement options
    zero = task_of(agreement_pairs=10, agreement_margin_weight=0.0).forward(model, batch)
    assert torch.equal(zero.loss, before) and torch.equal(zero.loss, zero.mlm_loss + zero.nsp_loss)
    two = task_of(agreement_pairs=10, agreement_margin_weight=2.0, agreement_margin=3.0).forward(model, batch)
    diff = verb_logit_diff(two.prediction_logits, batch["labels"], *(batch[k] for k in D.AGREEMENT_COLUMNS))
    added = (two.loss - before).item()
    assert added > 0 and added == pytest.approx(2.0 * torch.clamp(3.0 - diff, min=0).mean().item(), rel=1e-5)


def test_one_step_on_a_pair_raises_its_logit_difference(tok, pair_rows):
    def diffs(model, batch):  # read from the full logits, not through the loss's own helper
        with torch.no_grad():
            logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).prediction_logits
        pos, good, bad = (batch[k] for k in D.AGREEMENT_COLUMNS)
        rows = torch.arange(len(pos))
        return logits[rows, pos, good] - logits[rows, pos, bad]

    def step(model, batch, weight, margin_only=False):
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        out = task_of(agreement_pairs=10, agreement_margin_weight=weight, agreement_margin=5.0).forward(model, batch)
        cols = [batch[k] for k in D.AGREEMENT_COLUMNS]
        loss = margin_loss(verb_logit_diff(out.prediction_logits, batch["labels"], *cols), 5.0) if margin_only \
            else out.loss
        loss.backward()
        opt.step()
        return diffs(model, batch)

    base = tiny_bert(BertForPreTraining, seed=2)
    collate = D.PretrainCollator(tok)
    for rows in ([pair_rows[0]], [pair_rows[1]]):  # one sentence: the margin's gradient raises its difference
        batch = collate(rows, D.batch_generator(0, 3))
        assert float(step(copy.deepcopy(base), batch, 1.0, margin_only=True)) > float(diffs(base, batch)) + 1e-3
    # a pair (both numbers: a random model that ignores the subject can hardly raise both): the mean still rises
    batch = collate(pair_rows[:2], D.batch_generator(0, 3))
    assert float(step(copy.deepcopy(base), batch, 1.0, margin_only=True).mean()) > float(diffs(base, batch).mean())
    # in the training loss: the same step raises the differences more with the margin than without
    batch = collate(pair_rows[::2], D.batch_generator(0, 3))  # two original sentences
    with_margin, without = step(copy.deepcopy(base), batch, 1.0), step(copy.deepcopy(base), batch, 0.0)
    assert bool((with_margin > without + 1e-3).all())


# ----------------------------------------------------------------------------- data
def test_agreement_rows_join_the_training_split(tok):
    data = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, val_fraction=0.2)
    n = len(data.train)
    logs = []
    data = D.add_agreement_rows(data, tok, str(TINY_CORPUS), 100, 32, seed=0, pair_seed=0, val_fraction=0.2,
                                max_docs=None, nsp=True, log=logs.append)
    st = data.stats["agreement"]
    assert st["used"]["pairs"] >= 4 and st["rows"] == 2 * st["used"]["pairs"] and len(data.train) == n + st["rows"]
    extra = data.train.select(range(n, len(data.train)))
    assert all(p >= 1 for p in extra["agreement_position"]) and set(data.train["agreement_position"][:n]) == {-1}
    assert all(len(x) <= 32 for x in extra["input_ids"]) and set(extra["next_sentence_label"]) <= {0, 1}
    held_out = {t for d in D.split_documents(D.load_documents(str(TINY_CORPUS))["text"], 0, 0.2)[1]
                for t in D.split_sentences(d)}
    mined = CF.mine(AT.training_documents(str(TINY_CORPUS), seed=0, val_fraction=0.2, max_docs=None), tok)[0]
    assert not {it.text for it in mined} & held_out  # never a held-out document
    assert any("agreement pairs:" in line for line in logs)


def test_attractor_pairs_repeat_with_new_contexts_and_the_first_rows_stay(tok):
    base = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, val_fraction=0.2)
    n = len(base.train)
    kw = dict(seed=0, pair_seed=0, val_fraction=0.2, max_docs=None, nsp=True, log=lambda _: None)
    once = D.add_agreement_rows(copy.deepcopy(base), tok, str(TINY_CORPUS), 100, 32, **kw)
    thrice = D.add_agreement_rows(copy.deepcopy(base), tok, str(TINY_CORPUS), 100, 32, attractor_repeat=3, **kw)
    a, b = once.stats["agreement"], thrice.stats["agreement"]
    attractor_pairs = a["used"]["pairs_with_intervening_noun"]
    assert attractor_pairs >= 1 and a["used"] == b["used"] and b["attractor_repeat"] == 3
    assert b["rows"] == a["rows"] + 2 * 2 * attractor_pairs  # two more times, two rows (both numbers) each
    first = once.train.select(range(n, len(once.train)))
    again = thrice.train.select(range(n, len(thrice.train)))
    assert again["input_ids"][:a["rows"]] == first["input_ids"]  # the rows of before, then the repeats
    extra = again.select(range(a["rows"], b["rows"]))
    originals = {tuple(r) for r in first["input_ids"]}
    assert all(p >= 1 for p in extra["agreement_position"])
    assert len({tuple(r) for r in extra["input_ids"]} - originals) >= 1  # new contexts, not copies
    verbs = lambda d: sorted(zip(d["agreement_good"], d["agreement_bad"]))  # noqa: E731
    assert set(verbs(extra)) <= set(verbs(first))


def test_corpus_weights_repeat_parts_with_new_pairs(tok, monkeypatch):
    docs = TINY_CORPUS.read_text().split("\n\n")
    monkeypatch.setitem(CORPORA, "part-a", Corpus(lambda: (docs[:6], [f"a{i}" for i in range(6)]), lambda: "a"))
    monkeypatch.setitem(CORPORA, "part-b", Corpus(lambda: (docs[6:], [f"b{i}" for i in range(len(docs) - 6)]),
                                                  lambda: "b"))
    monkeypatch.setitem(CORPORA, "parts", Corpus.mixture(("part-a", "part-b")))
    plain = D.build_pretraining_data(tok, "parts", 32, seed=0, val_fraction=0.2)
    same = D.build_pretraining_data(tok, "parts", 32, seed=0, val_fraction=0.2, weights={"part-a": 1})
    assert plain.train["input_ids"] == same.train["input_ids"]  # weight 1: the data of before
    heavy = D.build_pretraining_data(tok, "parts", 32, seed=0, val_fraction=0.2, weights={"part-b": 3})
    pa, pb = plain.stats["train_pairs_by_part"], heavy.stats["train_pairs_by_part"]
    assert pb["part-a"] == pa["part-a"] and pb["part-b"] >= 2.5 * pa["part-b"] and pa["part-b"] > 0
    assert heavy.val["input_ids"] == plain.val["input_ids"]  # validation is never weighted
    assert heavy.stats["corpus_weights"] == {"part-b": 3}
    off = D.build_pretraining_data(tok, "parts", 32, seed=0, val_fraction=0.2, weights={"part-a": 0})
    assert off.stats["train_pairs_by_part"]["part-a"] == 0 and off.stats["parts"]["part-a"]["val_documents"] == 2
    with pytest.raises(D.DataError, match="not a part of corpus 'parts'"):
        D.build_pretraining_data(tok, "parts", 32, seed=0, val_fraction=0.2, weights={"wiki": 2})


def test_options_are_checked_and_on_the_command_line(capsys):
    assert TrainConfig.create("pretrain", corpus_weights="wiki=2, wordnet=0.5").part_weights() == {
        "wiki": 2.0, "wordnet": 0.5}
    for bad in ("wiki", "wiki=x", "wiki=17", "=2"):
        with pytest.raises(OptionError, match="--corpus-weights"):
            TrainConfig.create("pretrain", corpus_weights=bad).check()
    with pytest.raises(OptionError, match="needs --agreement-pairs"):
        TrainConfig.create("pretrain", agreement_margin_weight=1.0).check()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pretrain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--agreement-pairs", "--agreement-margin-weight", "--agreement-margin ", "--corpus-weights",
                 "--agreement-attractor-repeat", "--nsp-balance"):
        assert flag in text
    assert "Noji & Takamura 2020" in text and "Lil-Bevo" in text


# ----------------------------------------------------------------------------- runs
def test_a_tiny_run_with_agreement_pairs_logs_the_margin_loss(tmp_path):
    run = tmp_path / "runs" / "agree"
    argv = tiny_pretrain_argv(run, "--agreement-pairs", "50", "--agreement-margin-weight", "1", "--batch-size", "16")
    _, state = run_trainer(argv)
    assert state == "done"
    train = [m for m in R.read_metrics(run) if m["split"] == "train"]
    logged = [m for m in train if "agreement_margin_loss" in m]
    assert logged and all(0 <= m["agreement_acc"] <= 1 for m in logged)
    assert all(m["loss"] == pytest.approx(m["mlm_loss"] + m["nsp_loss"] + m["agreement_margin_loss"], rel=1e-4)
               for m in logged)
    stats = R.read_config(run)["data"]["agreement"]
    assert stats["used"]["pairs"] >= 4 and stats["rows"] == 2 * stats["used"]["pairs"]


def test_a_corpus_without_agreement_sentences_trains_without_the_loss_and_says_so(tmp_path, capsys):
    corpus = tmp_path / "plain.txt"
    corpus.write_text("\n\n".join(f"Go home now, friend number {i}. Eat your soup slowly. Sleep well tonight."
                                  for i in range(12)))
    run = tmp_path / "runs" / "none"
    argv = tiny_pretrain_argv(run, "--agreement-pairs", "50", "--agreement-margin-weight", "1")
    argv[argv.index("--corpus") + 1] = str(corpus)
    _, state = run_trainer(argv)
    assert state == "done"
    assert "no counterfactual agreement pair found" in capsys.readouterr().out  # the run's log (log.txt)
    assert not any("agreement_margin_loss" in m for m in R.read_metrics(run))
    assert json.loads((run / "run.json").read_text())["data"]["agreement"]["used"]["pairs"] == 0
