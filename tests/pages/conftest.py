"""Helpers of the AppTest page tests (one file a page, ``tests/pages/test_<page>.py``): open a page alone,
with a model source and session state, or through app.py; read its messages, charts and tables; the
bad texts every text page gets; tiny model sources; a temporary runs root and hand-written runs."""

from __future__ import annotations

import base64
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertcore import runs
from bertcore.modeling.heads import BertForPreTraining
from bertcore.modeling.model import BertModel
from bertcore.loading.sources import ModelSource, list_run_sources

from ..conftest import ROOT, mark_complete, save_tiny_bert, save_with_tokenizer, tiny_bert

PAGES = ROOT / "explorer" / "app_pages"
APP = str(ROOT / "app.py")
TIMEOUT = 240  # seconds one script run may take (a loaded 2-core machine is slow, not wrong)

# What users type that the text pages must answer with a message (or just render), never an exception.
BAD_TEXTS = {
    "empty": "",
    "whitespace": "   \n\t  ",
    "20k_chars": ("Long text keeps going. " * 900)[:20_000],
    "over_max_positions": "token " * 600,
    "emoji": "😀🎉 emoji only then words 👍🏽",
    "rtl": "مرحبا بالعالم שלום עולם",
    "zero_width_control": "zero\u200bwidth\u200c and\u0000 control\x07 chars\u200d",
    "only_zero_width": "\u200b\u200c\u200d",
    "no_maskable_token": "[MASK] [SEP] [CLS]",
    "typed_mask": "The capital of France is [MASK].",
    "lower_mask": "the [mask] sat on the mat",
    "html": "<script>alert(1)</script> <b>bold</b>",
}


# ----------------------------------------------------------------------------- opening a page
def page(name: str, source: ModelSource | None = None, **state) -> AppTest:
    """``explorer/app_pages/<name>.py`` alone, run once, with ``model_source`` = ``source`` (default: the
    packaged model) and the given session state."""
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=TIMEOUT)
    if source is not None:
        at.session_state["model_source"] = source
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def open_page(name: str) -> AppTest:
    """The app as a user opens it (app.py, its navigation and sidebar), switched to page ``name``."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    if name != "overview":
        at.switch_page(f"explorer/app_pages/{name}.py").run()
    assert not at.exception, at.exception
    return at


# ----------------------------------------------------------------------------- reading a page
def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def messages(at: AppTest) -> dict[str, list[str]]:
    """The page's messages by kind: error, warning, info, success."""
    return {kind: texts(getattr(at, kind)) for kind in ("error", "warning", "info", "success")}


def assert_clean(at: AppTest) -> None:
    """No exception box and no traceback text anywhere in the page."""
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at.markdown) + sum(messages(at).values(), [])
    assert not any("Traceback" in t for t in shown)


def check(at: AppTest, expected: str | None) -> dict[str, list[str]]:
    """No exception and no error message; a message of kind ``expected`` if given. Returns the messages."""
    assert not at.exception, [e.value for e in at.exception]
    msgs = messages(at)
    assert not msgs["error"], msgs["error"]
    if expected is not None:
        assert msgs[expected], f"expected a {expected} message, got {msgs}"
    return msgs


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def chart_specs(at: AppTest) -> list[dict]:
    """The Plotly figures of the page, as the JSON Streamlit sends to the browser."""
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def array(value) -> np.ndarray:
    """A Plotly JSON array: a list, or a typed array ``{"dtype", "bdata", "shape"}`` (plotly >= 6)."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):
            shape = [int(x) for x in shape.split(",")]
        return data.reshape(shape) if shape else data
    return np.asarray(value, dtype=float)


def dataframes(at: AppTest) -> list:
    return [d.value for d in at.dataframe]


def table(at: AppTest, column: str):
    """The first data frame of the page that has ``column``."""
    return next(d for d in dataframes(at) if column in d.columns)


# ----------------------------------------------------------------------------- what every page must survive
ATT_TABS = ["One head", "All heads of a layer", "All layers × heads", "Head view", "Head statistics",
            "Rollout and flow", "What flows", "Neuron view"]


def each_attention_tab(at: AppTest, expected: str | None = None) -> None:
    """Open every (lazy) tab of the Attention page in turn: each must show its one chart, with no exception."""
    for label in ATT_TABS:
        at.session_state["att_tab"] = label
        at.run()
        check(at, expected)
        if label == "What flows":  # five maps, rollouts, route graph, a node's row; or "shorten the text"
            assert charts(at) >= 3 or any("up to 128 tokens" in i for i in messages(at)["info"]), label
        else:
            assert charts(at) == 1, label
    at.session_state["att_tab"] = ATT_TABS[0]
    at.run()


def assert_bad_texts_answered(at: AppTest, key: str, skip: tuple[str, ...] = ()) -> None:
    """Type every :data:`BAD_TEXTS` entry but ``skip`` into the text area ``key`` in turn: the page stays
    clean, never shows an error, and says so when the text is empty."""
    for case, text in BAD_TEXTS.items():
        if case in skip:
            continue
        at.text_area(key=key).input(text).run()
        assert_clean(at)
        if case in ("empty", "whitespace"):
            assert any("empty" in w for w in messages(at)["warning"]), case
        assert not messages(at)["error"], (case, messages(at))


def assert_bad_texts_handled(at: AppTest, key: str, own: tuple[str, ...] = ()) -> dict[str, dict[str, list[str]]]:
    """Type every :data:`BAD_TEXTS` entry in turn into the text area ``key`` (one session, as a user would):
    the page stays clean; empty text and text without tokens get a warning, over-long text a "cut off"
    warning, the rest no warning and no error, except the cases in ``own`` (the caller checks them); user
    markup is escaped in every figure. Returns the messages of each case."""
    seen = {}
    for case, text in BAD_TEXTS.items():
        at.text_area(key=key).input(text).run()
        assert_clean(at)
        msgs = seen[case] = messages(at)
        if case in own:
            pass  # the caller checks these
        elif case in ("empty", "whitespace"):
            assert any("empty" in w for w in msgs["warning"]), (case, msgs)
        elif case == "only_zero_width":
            assert any("no token" in w for w in msgs["warning"]), (case, msgs)
        elif case in ("20k_chars", "over_max_positions"):
            assert any("cut off" in w for w in msgs["warning"]), (case, msgs)
        else:
            assert not msgs["error"] and not msgs["warning"], (case, msgs)
        if case == "html":  # user text is escaped in every figure, never rendered as markup
            dumped = json.dumps(chart_specs(at), ensure_ascii=False)
            # (not "<b>bold": a figure bolds the token "bold" itself where the model predicts it back)
            assert "<script>" not in dumped and "</script>" not in dumped and "alert(1)" not in dumped
            assert "&lt;" in dumped  # the tokens "<", ">" are shown, escaped
    return seen


# ----------------------------------------------------------------------------- models and runs
@pytest.fixture(scope="module")
def mlm_source(tmp_path_factory) -> ModelSource:
    """A tiny transformers BertForMaskedLM (random weights) with the packaged WordPiece tokenizer."""
    import transformers

    folder = save_tiny_bert(tmp_path_factory.mktemp("tiny_mlm"), transformers.BertForMaskedLM, tokenizer="full",
                            max_position_embeddings=512)
    return ModelSource("local", str(folder), "tiny MLM")


@pytest.fixture
def runs_root(tmp_path, monkeypatch):
    """A temporary runs root ($BERT_EXPLORER_RUNS); at teardown every run still alive there is stopped
    (even if the test failed)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(folder))
    yield folder
    for info in runs.list_runs(folder):
        status = runs.read_json(info.path / "status.json") or {}
        pid = status.get("pid")
        if status.get("state") in ("queued", "running") and runs.pid_alive(pid) and pid != os.getpid():
            runs.cancel(info.path, timeout_s=20)
            if runs.pid_alive(pid):
                os.killpg(status.get("pgid") or pid, signal.SIGKILL)


def tiny_folder(folder: Path, model_class=BertModel, max_positions: int = 64) -> Path:
    """A tiny bertcore model (random, seed 0) with the packaged vocab.txt, saved in ``folder``."""
    return save_tiny_bert(folder, model_class, max_position_embeddings=max_positions)


# Compare models and Attribution: tiny transformers models, a few layers, larger weights (the IG target moves)
COMPARE_TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
                "intermediate_size": 64, "max_position_embeddings": 128, "initializer_range": 0.2}
COMPARE_LABELS = {0: "business", 1: "sport"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Sources: ``base`` (tiny BertModel), ``mlm``, ``shallow`` (2 layers), ``small_vocab`` (another
    tokenizer), and ``runs``: a runs root whose fine-tuning run has a checkpoint = base with its
    last layer changed plus a 2-class classifier."""
    import transformers

    root = tmp_path_factory.mktemp("pages_cmp")
    base = tiny_bert(transformers.BertModel, 0, **COMPARE_TINY)
    src = {"base": save_with_tokenizer(root / "base", base)}
    src["mlm"] = save_tiny_bert(root / "mlm", transformers.BertForMaskedLM, seed=1, **COMPARE_TINY)
    src["shallow"] = save_tiny_bert(root / "shallow", transformers.BertModel, seed=None,
                                    **{**COMPARE_TINY, "num_hidden_layers": 2})
    small_vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "."] + [f"w{i}" for i in range(50)]
    src["small_vocab"] = save_tiny_bert(root / "small_vocab", transformers.BertModel, small_vocab, seed=None,
                                        **COMPARE_TINY)
    tuned = tiny_bert(transformers.BertForSequenceClassification, 2, **COMPARE_TINY, id2label=COMPARE_LABELS,
                      label2id={v: k for k, v in COMPARE_LABELS.items()})
    g = torch.Generator().manual_seed(3)
    tuned.bert.load_state_dict({k: v + (0.3 * torch.randn(v.shape, generator=g)
                                        if k.startswith("encoder.layer.2.") else 0)
                                for k, v in base.state_dict().items()}, strict=False)
    run_dir = root / "runs" / "20261123-120000-finetune-aaaa"
    runs.write_json(run_dir / "run.json", {"run_id": run_dir.name, "task": "finetune"})
    mark_complete(save_with_tokenizer(run_dir / "checkpoints" / "step-000010", tuned), 10)
    sources = {k: ModelSource("local", str(v), f"tiny {k}") for k, v in src.items()}
    sources["runs"] = root / "runs"
    return sources


@pytest.fixture
def run_source(models, monkeypatch):
    """The run checkpoint of :func:`models` as the runs page lists it."""
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(models["runs"]))
    (found,) = list_run_sources()
    return found


def fake_run(root: Path, run_id: str, task: str = "pretrain", state: str = "done", steps=(0, 10, 20),
             error: str | None = None, pid: int | None = None, max_positions: int = 64) -> Path:
    """A run directory as bertcore.training.cli writes it (docs/CONTRACTS.md), with tiny (random) checkpoints."""
    d = root / run_id
    (d / "checkpoints").mkdir(parents=True)
    runs.write_json(d / "run.json", {"run_id": run_id, "task": task, "created": "2026-11-22T10:00:00Z", "argv": [],
                                     "args": {"max_steps": 20, "max_seq_len": 32}, "model_config": {}, "device": "cpu"})
    runs.write_json(d / "status.json", {"state": state, "step": 20 if state == "done" else 8, "total_steps": 20,
                                        "pid": pid, "error": error, "started": "2026-11-22T10:00:00Z",
                                        "updated": "2026-11-22T10:01:00Z", "eta_s": 30.0, "tokens_per_s": 1234.0})
    for s in range(1, 21):
        rec = {"step": s, "time": s, "split": "train", "lr": 1e-3, "tokens_per_s": 1000, "loss": 10 - s * 0.2}
        if task == "pretrain":
            rec.update(mlm_loss=9 - s * 0.2, mlm_acc=s / 40, nsp_loss=0.7, nsp_acc=0.5)
        else:
            rec.update(acc=0.5 + s / 50, f1=0.4 + s / 50)
        runs.append_jsonl(d / "metrics.jsonl", rec)
    runs.append_jsonl(d / "metrics.jsonl", {**rec, "split": "val", "loss": 7.0})
    if task == "pretrain":
        for s, p in ((10, 0.3), (20, 0.6)):
            runs.append_jsonl(d / "probe.jsonl", {"step": s, "text": "the [MASK] sat .",
                                                  "predictions": [[["cat", p], ["dog", 0.2]]]})
    else:
        rep = {"negative": {"precision": 0.8, "recall": 0.7, "f1-score": 0.75, "support": 30},
               "positive": {"precision": 0.9, "recall": 0.93, "f1-score": 0.91, "support": 70},
               "accuracy": 0.87, "macro avg": {"precision": 0.85, "recall": 0.82, "f1-score": 0.83, "support": 100}}
        runs.write_json(d / "results.json", {  # as bertcore.training writes it
            "step": 20, "labels": ["negative", "positive"], "majority_fraction": 0.7,
            "test": {"loss": 0.4, "acc": 0.86, "f1": 0.83, "n": 100},
            "confusion_matrix": [[21, 9], [5, 65]], "classification_report": rep,
            "baseline": {"name": "TF-IDF (1-2 grams) + logistic regression", "acc": 0.85, "f1": 0.8,
                         "confusion_matrix": [[20, 10], [5, 65]], "classification_report": rep}})
    (d / "log.txt").write_text("loading corpus\nstep 1\nTraceback (most recent call last):\nRuntimeError: boom\n")
    for s in steps:
        c = save_tiny_bert(d / "checkpoints" / f"step-{s:06d}", BertForPreTraining, seed=s, hidden_size=16,
                           num_attention_heads=2, intermediate_size=32, max_position_embeddings=max_positions)
        mark_complete(c, s)
    return d
