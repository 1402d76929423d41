"""The view cache (explorer.views.core): keyed on the model's files and the parameters, one computation for two
sessions asking at once, bounded in bytes, read-only results; and the one model cache."""

from __future__ import annotations

import shutil
import threading
import time

import numpy as np
import pytest
import torch

from bertcore.loading import sources
from bertcore.modeling.checkpoint import save_pretrained
from bertcore.settings import settings
from explorer.views import core
from explorer.views import masking as views

from ..conftest import ROOT

TEXT = "The keys to the cabinet [MASK] on the table."
ARGS = (TEXT, None, 0.0, False, 0.8, 0.1, 0)  # rate 0: the typed [MASK] is the only position


@pytest.fixture
def fresh():
    """The server's view cache, emptied before and after the test; ``fresh()`` is how many computations ran."""
    core.clear()
    before = core.stats()["computed"]
    yield lambda: core.stats()["computed"] - before
    core.clear()


def test_a_rewritten_model_file_gives_a_new_result(fresh, tmp_path):
    """A model folder whose weights one step of the real optimizer changed (file rewritten in place) is a new key:
    the view computes again from the new weights, and equals the new weights' answer."""
    folder = tmp_path / "mlm"
    shutil.copytree(ROOT / "models" / "minilm-mlm", folder, ignore=shutil.ignore_patterns("sae", "*.npz"))
    source = sources.ModelSource("local", str(folder), "copy")
    before = views.guesses(source, *ARGS)
    assert views.guesses(source, *ARGS) is before and fresh() == 3  # encoding, draw, guesses; then kept

    lm = sources.load(source)
    lm.model.train()
    opt = torch.optim.AdamW(lm.model.parameters(), lr=1e-2)
    enc = lm.tokenizer(TEXT.replace("[MASK]", lm.tokenizer.mask_token), return_tensors="pt")
    labels = torch.full_like(enc["input_ids"], -100)
    labels[enc["input_ids"] == lm.tokenizer.mask_token_id] = lm.tokenizer.convert_tokens_to_ids("is")
    lm.model(**enc, labels=labels).loss.backward()
    opt.step()
    lm.model.eval()
    time.sleep(0.01)  # a new modification time even on a coarse clock
    save_pretrained(lm.model, folder)  # the folder's files rewritten in place
    after = views.guesses(source, *ARGS)
    assert after is not before
    assert not np.allclose(after.probs, before.probs, atol=1e-4)
    want = views.guesses.fn(source, *ARGS)  # the body itself, no cache: the new file's answer
    np.testing.assert_allclose(after.probs, want.probs, atol=1e-6)


def test_another_parameter_gives_another_result_and_the_same_gives_the_same(fresh):
    a = views.guesses(sources.PACKAGED_MLM, *ARGS, temperature=1.0)
    b = views.guesses(sources.PACKAGED_MLM, *ARGS, temperature=2.0)
    assert views.guesses(sources.PACKAGED_MLM, *ARGS, temperature=1.0) is a
    assert b is not a and b.probs[0, 0] < a.probs[0, 0]  # a hotter softmax is flatter
    assert views.guesses(sources.PACKAGED_MLM, TEXT, None, 0.0, False, 0.8, 0.1, 0, 1.0) is a  # by position too


_calls: list[str] = []


@core.view
def _slow(source, text: str):
    _calls.append(text)
    time.sleep(0.5)
    return np.arange(4.0)


def test_two_sessions_asking_at_once_compute_once(fresh):
    _calls.clear()
    got = [None, None]
    start = threading.Barrier(2)

    def ask(i):
        start.wait()
        got[i] = _slow(sources.PACKAGED_MLM, "same")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _calls == ["same"] and got[0] is got[1] and fresh() == 1
    _slow(sources.PACKAGED_MLM, "other")
    assert _calls == ["same", "other"]


def test_a_failed_computation_is_not_kept_and_the_waiter_tries_again(fresh):
    attempts = []

    @core.view
    def flaky(x: int):
        attempts.append(x)
        if len(attempts) == 1:
            raise ValueError("first try fails")
        return x

    with pytest.raises(ValueError):
        flaky(3)
    assert flaky(3) == 3 and attempts == [3, 3]


def test_the_bound_holds_and_results_are_read_only():
    cache = core.results_cache(3000 / 2**20)

    def block(i: int, size: int = 1000):
        return {"x": np.full(size // 8, float(i))}

    block = core.View(block, cache=cache)
    for i in range(10):
        r = block(i)
        assert cache.currsize <= 3000
        with pytest.raises(ValueError):
            r["x"][0] = -1.0  # read-only: no session changes what another sees
    assert len(cache) == 3 and block.cached(9) is not None and block.cached(0) is None
    big = block(99, size=8000)  # larger than the whole cache: returned, not kept
    assert big["x"].size == 1000 and block.cached(99, size=8000) is None and cache.currsize <= 3000
    assert cache.maxsize == 3000 and core.stats()["limit"] == int(settings().view_cache_mb * 2**20)


def test_the_key_holds_the_files_stamp_and_refuses_unhashable_arguments(tmp_path):
    f = tmp_path / "lens.pt"
    f.write_bytes(b"1")
    k1 = views.lens.key(sources.PACKAGED_MLM, *ARGS, tuned=f)
    time.sleep(0.01)
    f.write_bytes(b"22")
    assert views.lens.key(sources.PACKAGED_MLM, *ARGS, tuned=f) != k1
    assert sources.files_stamp(sources.PACKAGED_MLM) in str(views.guesses.key(sources.PACKAGED_MLM, *ARGS))
    with pytest.raises(TypeError):
        _slow.key(sources.PACKAGED_MLM, bytearray(b"x"))  # mutable: no key can be made of it
    with pytest.raises(TypeError):
        _slow.key(sources.PACKAGED_MLM, "x", "too many")


def test_the_model_cache_loads_once_and_again_after_a_rewrite(tmp_path):
    folder = tmp_path / "mlm"
    shutil.copytree(ROOT / "models" / "minilm-mlm", folder, ignore=shutil.ignore_patterns("sae", "*.npz"))
    source = sources.ModelSource("local", str(folder), "copy")
    a = core.load(source)
    assert core.load(source) is a
    time.sleep(0.01)
    (folder / "config.json").write_text((folder / "config.json").read_text() + "\n")
    assert core.load(source) is not a


def test_a_view_reports_its_progress_to_the_queue_that_runs_it(fresh, monkeypatch):
    """heavy.run_view runs a view inside core.reporting: the view's progress(done, total) calls reach the queue's
    report as fractions; outside a queue they do nothing; the corpus search view passes it to its computation."""
    from explorer.server import heavy
    from explorer.views import corpus_search

    seen: list[float] = []
    with core.reporting(seen.append):
        core.progress(3, 4)
        core.progress(0.5)
    core.progress(1, 2)  # no queue: nothing
    assert seen == [0.75, 0.5]

    reports: list[float] = []

    def run_with_status(key, compute, what, keep):
        return compute(reports.append)

    monkeypatch.setattr(heavy, "run_with_status", run_with_status)
    lm = core.load(sources.PACKAGED_MLM)
    result = heavy.run_view(corpus_search.search, "the corpus index", sources.PACKAGED_MLM,
                            "The bank was closed.", 2, 2, 5, n_segments=3)
    assert result.hits and reports and reports[-1] == pytest.approx(1.0) and lm is not None
