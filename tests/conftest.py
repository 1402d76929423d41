"""Shared test set-up: offline hub, deterministic torch, training runs and caches in a temporary
folder, the packaged model loaded once, and builders of tiny saved models.

Layout: ``tests/test_<module>.py`` test bertcore, ``tests/figures/`` the pure figure functions of
``explorer/figures``, ``tests/pages/`` each Streamlit page through AppTest (helpers in
``tests/pages/conftest.py``), ``tests/browser/`` the app in a real browser.
"""

import atexit
import os
import shutil
import sys
import copy
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
TINY_CORPUS = FIXTURES / "tiny_corpus.txt"  # 12 short documents (pretraining, WordPiece training)
sys.path.insert(0, str(ROOT))

# Whatever the tests (and the runs and pages they start) write goes to a folder of this session, never
# to ~/.cache/bert-explorer or ./runs; a test that needs its own folder still sets these itself.
SCRATCH = Path(tempfile.mkdtemp(prefix="bert-explorer-tests-"))
os.environ["BERT_EXPLORER_CACHE"] = str(SCRATCH / "cache")
os.environ["BERT_EXPLORER_RUNS"] = str(SCRATCH / "runs")
os.environ["BERT_EXPLORER_WARMUP"] = "0"  # explorer/server/warmup.py: no import thread beside the tests
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)

import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

# AppTests run the pages in this process: keep torch's default thread count here (explorer/server/heavy.py would set
# half the cores when a page loads a model); the browser tests' server drops this and runs the app's default
os.environ.setdefault("BERT_EXPLORER_THREADS", str(torch.get_num_threads()))

from bertcore import BertConfig  # noqa: E402
from bertcore.loading.sources import packaged_model_dir  # noqa: E402
from bertcore.tokenization.tokenizer import load_tokenizer  # noqa: E402

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
# A tiny BERT with the packaged WordPiece vocabulary; the builders below start from these fields.
TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 64, "max_position_embeddings": 64}
# --model-overrides of the tiny training runs the tests start (2 layers of width 32).
TINY_RUN = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
# A small vocabulary for tokenizer-independent checks (transformers parity, fill-mask).
SMALL_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "sat", "on", "mat", "a", "rug",
               "ran", "to", "##s", "big", "small", "."] + [f"w{i}" for i in range(40)]


@pytest.fixture(scope="session")
def packaged():
    """The packaged all-MiniLM-L6-v2 as a bertcore ``LoadedModel`` (loaded once per session)."""
    from bertcore.loading import sources

    return sources.load(sources.PACKAGED)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _threads_unchanged(request):
    """Each test leaves torch's thread count as it found it. The count is a setting of the calling thread (OpenMP's
    nthreads-var): code that sets it in the test's thread and keeps it computes there with another reduction order
    than the pages AppTest runs in threads of their own, and float32 results then differ by 1e-6 in a later test."""
    before = torch.get_num_threads()
    yield
    after = torch.get_num_threads()
    if after != before:
        torch.set_num_threads(before)
        pytest.fail(f"the test left torch.get_num_threads() at {after}, not {before}: the code it ran sets the count "
                    "and does not restore it")


# ----------------------------------------------------------------------------- parity (docs/LAYERING.md, "Parity")
PARITY_ATOL = 1e-9  # float64: a wrong formula is off by 1e-3 or more, float64 rounding by about 1e-13


def double(model: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of ``model`` in eval mode (the original, often a shared fixture, is left alone)."""
    return copy.deepcopy(model).double().eval()


def assert_parity(actual: torch.Tensor, expected: torch.Tensor, atol: float = PARITY_ATOL, msg=None) -> None:
    """Parity of two implementations of the same math: both sides float64 (models cast with :func:`double`),
    equal to ``atol``. Machine-independent: no CPU's accumulation order moves float64 results by 1e-9."""
    assert actual.dtype == torch.float64 and expected.dtype == torch.float64, (
        f"compare parity in float64 (cast both models with double()); got {actual.dtype} and {expected.dtype}")
    torch.testing.assert_close(actual, expected, atol=atol, rtol=0, msg=msg)


def assert_close_scaled(actual: torch.Tensor, expected: torch.Tensor, rel: float = 1e-5, floor: float = 1e-6) -> None:
    """Where float32 must be checked: ``|actual - expected| <= rel * max|expected| + floor`` elementwise (the
    tolerance scales with the output's magnitude, as float32 rounding does)."""
    tol = rel * float(expected.detach().abs().max()) + floor
    torch.testing.assert_close(actual, expected.to(actual.dtype), atol=tol, rtol=0)


# ----------------------------------------------------------------------------- tiny models
def tiny_config(**kw) -> BertConfig:
    """A bertcore config small enough for exact comparisons (99-token vocabulary, odd FFN width)."""
    fields = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64)
    return BertConfig(**{**fields, **kw})


def tiny_bert(model_cls, seed: int | None = 0, **config) -> torch.nn.Module:
    """A randomly initialised tiny BERT in eval mode: ``model_cls`` is a bertcore or a transformers
    class, built from :data:`TINY` updated with ``config``, after ``torch.manual_seed(seed)``."""
    fields = {**TINY, **config}
    cfg = (transformers.BertConfig if model_cls.__module__.startswith("transformers") else BertConfig)(**fields)
    if seed is not None:
        torch.manual_seed(seed)
    return model_cls(cfg).eval()


def save_with_tokenizer(folder: str | Path, model: torch.nn.Module, tokenizer: Any = "vocab") -> Path:
    """``model.save_pretrained(folder)`` with a tokenizer beside it. ``tokenizer``: ``"vocab"`` the
    packaged ``vocab.txt``; ``"full"`` every packaged tokenizer file; a path: that ``vocab.txt``; a list
    of tokens: a ``vocab.txt`` of them; None: no tokenizer."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(folder)
    if tokenizer in ("vocab", "full"):
        for name in TOKENIZER_FILES[:1] if tokenizer == "vocab" else TOKENIZER_FILES:
            if (packaged_model_dir() / name).exists():
                shutil.copy(packaged_model_dir() / name, folder / name)
    elif isinstance(tokenizer, (str, Path)):
        shutil.copy(tokenizer, folder / "vocab.txt")
    elif tokenizer is not None:
        (folder / "vocab.txt").write_text("\n".join(tokenizer) + "\n", encoding="utf-8")
    return folder


def save_tiny_bert(folder: str | Path, model_cls, tokenizer: Any = "vocab", seed: int | None = 0, **config) -> Path:
    """:func:`tiny_bert` saved with :func:`save_with_tokenizer`; returns the folder."""
    return save_with_tokenizer(folder, tiny_bert(model_cls, seed, **config), tokenizer)


def mark_complete(checkpoint: Path, step: int) -> Path:
    """Make a saved model folder a complete run checkpoint (``trainer_state.pt``, as bertcore.runs.RunDir reads)."""
    torch.save({"step": step}, checkpoint / "trainer_state.pt")
    return checkpoint


def hf_folder(tmp_path: Path, cls_name: str, seed: int = 0):
    """A tiny transformers checkpoint (random weights, eager attention) over :data:`SMALL_VOCAB`, with its
    tokenizer saved beside it, in ``tmp_path / cls_name``. Returns (folder, the transformers model)."""
    folder = tmp_path / cls_name
    folder.mkdir()
    (tmp_path / "vocab.txt").write_text("\n".join(SMALL_VOCAB) + "\n", encoding="utf-8")
    load_tokenizer(tmp_path).save_pretrained(folder)
    hf = tiny_bert(getattr(transformers, cls_name), seed, vocab_size=len(SMALL_VOCAB), intermediate_size=37,
                   max_position_embeddings=24, attn_implementation="eager")
    hf.save_pretrained(folder)
    return folder, hf


def random_attention(rng, layers: int = 4, heads: int = 3, t: int = 7):
    """Random attention maps ``(layers, heads, t, t)`` whose rows sum to 1 (peaked: uniform values cubed)."""
    a = rng.random((layers, heads, t, t)) ** 3
    return a / a.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def tiny_nsp(tmp_path_factory):
    """A tiny transformers BertForPreTraining (:func:`hf_folder`) loaded by bertcore: (LoadedModel, the
    transformers model), for next-sentence checks."""
    from bertcore.loading import sources

    folder, hf = hf_folder(tmp_path_factory.mktemp("nsp"), "BertForPreTraining", seed=3)
    return sources.load(sources.ModelSource("local", str(folder), "tiny NSP")), hf


# ----------------------------------------------------------------------------- waiting
def wait_for(cond: Callable[[], Any], timeout: float = 900.0, alive: Callable[[], bool] | None = None,
             poll: float = 0.2, what: str | Callable[[], str] = "the condition") -> Any:
    """Poll ``cond()`` until it is truthy and return its value; fail at once if ``alive()`` says the
    process it waits on has died, and after ``timeout`` seconds (a loaded machine is slow, not wrong).
    ``what`` (or what it returns) says in the failure what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        if alive is not None and not alive():
            value = cond()
            if value:
                return value
            raise AssertionError(f"the process ended before {what() if callable(what) else what}")
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
