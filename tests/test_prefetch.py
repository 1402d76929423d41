"""bertcore.training.prefetch: batches prepared ahead give the same run, exceptions reach the loop, the
thread stops; and a training step reads nothing from the device on the host between two metric lines."""

import sys
import threading
from collections import Counter

import pytest
import torch

from bertcore import runs as R
from bertcore.loading import sources
from bertcore.modeling.attention import additive_mask
from bertcore.modeling.config import BertConfig
from bertcore.modeling.embeddings import InputError
from bertcore.modeling.model import BertModel
from bertcore.training.cli import parse_args, to_config
from bertcore.training import dist
from bertcore.training.loop import Trainer
from bertcore.training.prefetch import Prefetcher, Prepared, StepWindow

from .test_training import run_trainer, tiny_finetune_argv, tiny_pretrain_argv


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


def prepared(i):
    return Prepared(i, 0, {"x": torch.tensor([i])}, None)


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_prefetcher_keeps_the_order_and_raises_where_the_item_would_be(depth):
    def source():
        yield from range(5)
        raise RuntimeError("corpus file vanished")

    with Prefetcher(source(), prepared, depth) as it:
        assert [next(it).step for _ in range(5)] == [0, 1, 2, 3, 4]
        with pytest.raises(RuntimeError, match="vanished"):
            next(it)


def test_prefetcher_runs_ahead_in_another_thread_and_close_stops_it():
    threads, ready = [], threading.Event()

    def prepare(i):
        threads.append(threading.current_thread().name)
        if i == 2:
            ready.set()
        return prepared(i)

    def endless():
        i = 0
        while True:
            yield i
            i += 1

    it = Prefetcher(endless(), prepare, depth=2)
    assert next(it).step == 0
    assert ready.wait(5)  # steps 1 and 2 were prepared before anybody asked for them
    assert set(threads) == {"batch-prefetch"}
    it.close()
    assert not it._thread.is_alive()
    with pytest.raises(ValueError, match="depth"):
        Prefetcher(iter(()), prepared, -1)


def test_step_window_leaves_paused_time_out():
    now = [0.0]
    w = StepWindow(lambda: now[0])
    w.add(torch.tensor([1.0, 2.0], dtype=torch.float64), 10)
    now[0] = 2.0
    w.pause()
    now[0] = 7.0  # an evaluation of 5 s
    w.resume()
    now[0] = 8.0
    w.add(torch.tensor([3.0, 4.0], dtype=torch.float64), 10)
    sums, padded = w.reduced(lambda t: t)
    assert w.seconds() == pytest.approx(3.0) and w.steps == 2 and padded == 20.0
    assert sums.tolist() == [4.0, 6.0]


@pytest.mark.parametrize("make_argv", [tiny_pretrain_argv, tiny_finetune_argv], ids=["pretrain", "finetune"])
def test_prefetched_run_equals_the_serial_one(tmp_path, make_argv):
    """Dropout 0.3, so the model's RNG stream is in play: the prefetch thread must not draw from it."""
    serial, s1 = run_trainer(make_argv(tmp_path / "serial", "--dropout", "0.3", "--prefetch", "0"))
    ahead, s2 = run_trainer(make_argv(tmp_path / "ahead", "--dropout", "0.3", "--prefetch", "3"))
    assert s1 == s2 == "done"
    a, b = serial.model.state_dict(), ahead.model.state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
    losses = [[r["loss"] for r in R.read_metrics(tmp_path / d, "train")] for d in ("serial", "ahead")]
    assert losses[0] == losses[1] and len(losses[0]) == 6


def test_a_compiled_encoder_gives_the_eager_run(tmp_path, monkeypatch):
    """--compile: the encoder runs through torch.compile (Dynamo's graph, here without Inductor's code generation,
    which the GPU benchmark measures) and the run's losses and weights are the eager run's; checkpoints keep the
    eager keys (the run loads back)."""
    torch._dynamo.reset()
    frames = Counter()
    monkeypatch.setattr(dist, "COMPILE_BACKEND", lambda gm, inputs: frames.update(["graph"]) or gm.forward)
    eager, s1 = run_trainer(tiny_pretrain_argv(tmp_path / "eager", "--dropout", "0.3"))
    compiled, s2 = run_trainer(tiny_pretrain_argv(tmp_path / "compiled", "--dropout", "0.3", "--compile", "default"))
    assert s1 == s2 == "done" and frames["graph"] >= 1
    assert compiled.model.bert._compiled_call_impl is not None and eager.model.bert._compiled_call_impl is None
    a, b = eager.model.state_dict(), compiled.model.state_dict()
    assert list(a) == list(b)
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)
    losses = [[r["loss"] for r in R.read_metrics(tmp_path / d, "train")] for d in ("eager", "compiled")]
    assert losses[0] == pytest.approx(losses[1], abs=1e-5) and len(losses[0]) == 6
    assert sources.load(sources.ModelSource("run", str(R.last_checkpoint(tmp_path / "compiled")))).head == "pretraining"


HOST_READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__", "nonzero")
HOST_ONLY = ("check_inputs", "additive_mask")  # read values of CPU tensors only (see the meta-device test)


def test_input_checks_do_not_read_a_tensor_off_the_cpu():
    """On the meta device every host read raises: the model's input checks and mask must not read there."""
    model = BertModel(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=16, max_position_embeddings=16))
    ids = torch.zeros(2, 5, dtype=torch.long, device="meta")
    model.embeddings.check_inputs(ids, torch.zeros_like(ids), None)
    assert additive_mask(torch.ones(2, 5, device="meta"), torch.float32).shape == (2, 1, 1, 5)
    with pytest.raises(InputError):  # on the CPU it still checks
        model.embeddings.check_inputs(torch.full((1, 3), 99), None, None)
    assert additive_mask(torch.ones(2, 5), torch.float32) is None  # and skips the mask when nothing is padded


@pytest.mark.parametrize("make_argv", [tiny_pretrain_argv, tiny_finetune_argv], ids=["pretrain", "finetune"])
def test_no_host_read_between_metric_lines(tmp_path, monkeypatch, make_argv):
    """Every call of the loop's thread that waits for the device on CUDA is counted, by the step count at the
    time: a tensor's value copied to the host, a number copied to the device (``torch.tensor(v, device=...)``), a
    selection by a boolean mask or ``nonzero`` (its size is the device's answer). Between two metric lines (log
    every 4 steps) there is none; at a metric line there are some (the sums, the grad norm)."""
    argv = make_argv(tmp_path / "run", "--max-steps", "12", "--log-every", "4", "--eval-every", "100",
                     "--save-every", "100", "--grad-clip", "1.0")
    trainer = Trainer(to_config(parse_args(argv)), tmp_path / "run", argv, install_signals=False)
    reads: Counter = Counter()
    counting = threading.local()
    main = threading.main_thread()

    def count(device: torch.device, caller: str) -> None:
        on_host = device.type == "cpu" and caller in HOST_ONLY  # off the CPU they do not read (below)
        if (threading.current_thread() is main and trainer.step > 0 and not on_host
                and not getattr(counting, "inside", False)):
            reads[trainer.step] += 1

    def counted(name, original):
        def wrapper(self, *a, **k):
            count(self.device, sys._getframe(1).f_code.co_name)
            counting.inside = True  # a read that calls another (tolist -> item) counts once
            try:
                return original(self, *a, **k)
            finally:
                counting.inside = False
        return wrapper

    def boolean_index(original):
        def wrapper(self, index):
            if any(torch.is_tensor(i) and i.dtype == torch.bool for i in (index if isinstance(index, tuple)
                                                                          else (index,))):
                count(self.device, sys._getframe(1).f_code.co_name)
            return original(self, index)
        return wrapper

    def to_device(original):
        def wrapper(*a, **k):
            if k.get("device") is not None:
                count(torch.device(k["device"]), sys._getframe(1).f_code.co_name)
            return original(*a, **k)
        return wrapper

    for name in HOST_READS:
        monkeypatch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
    monkeypatch.setattr(torch.Tensor, "__getitem__", boolean_index(torch.Tensor.__getitem__))
    monkeypatch.setattr(torch, "tensor", to_device(torch.tensor))
    assert trainer.run() == "done"
    between = {s: n for s, n in reads.items() if s % 4 and s < 12}
    assert between == {}, f"host reads inside steps (step: count): {between}"
    assert reads[4] > 0 and reads[8] > 0  # the counter sees the metric lines' reads
