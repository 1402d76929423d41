"""bertcore.device: the one rule for choosing a device (auto, cpu, cuda, cuda:N, mps), reading a model's device, and
the app's device (``BERT_EXPLORER_DEVICE``, the Overview's card)."""

from __future__ import annotations

import pytest
import torch

from bertcore import device as D
from bertcore.loading import sources


def test_auto_takes_cuda_only_where_there_is_one(monkeypatch):
    assert D.resolve("auto") == D.resolve(None) == D.resolve("") == torch.device(
        "cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert D.resolve("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert D.resolve("auto") == torch.device("cuda")
    assert D.resolve(" CPU ") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_a_device_that_is_not_here_is_a_clear_error():
    with pytest.raises(D.DeviceError, match="CUDA is not available here"):
        D.resolve("cuda")
    with pytest.raises(D.DeviceError, match="not a device"):
        D.resolve("gpu please")
    with pytest.raises(D.DeviceError, match="cpu, cuda or mps"):
        D.resolve("meta")


def test_a_models_device_is_its_weights():
    assert D.device_of(torch.nn.Linear(2, 2)) == torch.device("cpu")
    assert D.device_of(torch.nn.ReLU()) == torch.device("cpu")
    assert D.device_of(torch.ones(1, device="meta")) == torch.device("meta")
    assert D.describe("cpu").startswith("cpu (")


def test_load_puts_the_model_on_the_device_asked_for():
    lm = sources.load(sources.PACKAGED_MLM, device="cpu")
    assert lm.device == torch.device("cpu")
    with pytest.raises(D.DeviceError):
        sources.load(sources.PACKAGED_MLM, device="not-a-device")


def test_the_app_chooses_its_device_from_the_setting_and_the_card_says_it(monkeypatch):
    from explorer.views import core, overview

    monkeypatch.setenv("BERT_EXPLORER_DEVICE", "cpu")
    assert core.choose_device() == torch.device("cpu")
    assert core.load(sources.PACKAGED_MLM).device == torch.device("cpu")
    assert overview.card.fn(sources.PACKAGED_MLM).device.startswith("cpu (")
    monkeypatch.setenv("BERT_EXPLORER_DEVICE", "cuda:7")
    if torch.cuda.device_count() <= 7:
        with pytest.raises(D.DeviceError):
            core.choose_device()
    assert core.choose_device("cpu") == torch.device("cpu")  # the operator's device wins over the environment


def test_an_out_of_memory_error_in_a_view_is_a_message(monkeypatch):
    from explorer.views import core

    def full(n):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    view = core.View(full)
    with pytest.raises(D.DeviceMemoryError, match="out of memory: other sessions or a training run"):
        view(1)


def test_the_operators_file_may_name_the_device(tmp_path):
    from explorer.server import shared_settings as S

    path = tmp_path / "shared.toml"
    path.write_text('device = "cpu"\n')
    assert S.load_config(path)["device"] == "cpu"
    path.write_text("device = 3\n")
    with pytest.raises(S.SharedConfigError, match="device must be a device name"):
        S.load_config(path)
