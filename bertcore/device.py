"""Where the project computes: the one rule for choosing a device, and for reading the device a model is on.

Only entry points choose a device: the app (``BERT_EXPLORER_DEVICE``, :mod:`bertcore.settings`), the command lines
(``--device``) and ``bertcore.load(..., device=)``. Everything below them takes its device (and dtype) from the
model or its inputs: ``torch.zeros(n, device=x.device)``, ``x.new_zeros(n)``, ``enc.tensors(device_of(model))``
(``tests/test_device_rule.py`` checks every view, the SAE trainer and the graph builder for tensors made on an
implicit device).

Names: ``"auto"`` (CUDA when there is one, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"mps"``.
"""

from __future__ import annotations

AUTO = "auto"


class DeviceError(ValueError):
    """A device name this machine cannot compute on (not a device, or CUDA / MPS asked for but absent); the message
    says what is here."""


class DeviceMemoryError(DeviceError):
    """The accelerator ran out of memory during a computation (other work shares it: a training run, other
    sessions); the message says which device and what to try."""


def resolve(name: str | None = AUTO):
    """The ``torch.device`` a device name means on this machine.

    Args:
        name: ``"auto"``, ``None`` or ``""`` (CUDA when ``torch.cuda.is_available()``, else the CPU), or a torch
            device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``).
    Raises:
        DeviceError: not a device name, or a device that is not here (CUDA without a GPU, ``cuda:3`` with two).
    """
    import torch

    text = AUTO if name in (None, "") else str(name).strip().lower()
    if text == AUTO:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise DeviceError(f"{name!r} is not a device: use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"device {name!r} asked for, but CUDA is not available here: use cpu (or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"device {name!r} asked for, but this machine has {torch.cuda.device_count()} GPU(s)")
    elif device.type == "mps":
        if not (getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()):
            raise DeviceError(f"device {name!r} asked for, but MPS is not available here: use cpu (or auto)")
    elif device.type != "cpu":
        raise DeviceError(f"{name!r}: BERT Explorer computes on cpu, cuda or mps")
    return device


def device_of(obj):
    """The device a model (its first parameter, else its first buffer) or a tensor is on; the CPU for a module
    with neither."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.device
    for tensor in (*obj.parameters(), *obj.buffers()):
        return tensor.device
    return torch.device("cpu")


def describe(device) -> str:
    """A device in words for a page: ``"cuda:0 (NVIDIA H200, 139 GiB)"``, ``"cpu (2 threads)"``."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return f"cuda:{index} ({props.name}, {props.total_memory / 2**30:.0f} GiB)"
    if device.type == "cpu":
        n = torch.get_num_threads()
        return f"cpu ({n} thread{'s' if n != 1 else ''})"
    return str(device)


def out_of_memory(exc: BaseException) -> bool:
    """True for an accelerator's out-of-memory error (``torch.cuda.OutOfMemoryError``, MPS's RuntimeError)."""
    import torch

    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


def memory_error(exc: BaseException, device=None) -> DeviceMemoryError:
    """The :class:`DeviceMemoryError` to raise (``from exc``) for an accelerator's out-of-memory error, after
    handing the allocator's cached blocks back so the next computation has room."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    where = f" ({describe(device)})" if device is not None else ""
    return DeviceMemoryError(f"the GPU{where} is out of memory: other sessions or a training run are using it. "
                             "Try again in a moment, or with a shorter input.")
