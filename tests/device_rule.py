"""The device rule, checked on the CPU: inside an analysis, no tensor is made on an implicit device.

A model on CUDA with inputs on CUDA computes everywhere on CUDA only if every tensor an analysis makes takes its
device from the model or the inputs (``torch.zeros(n, device=x.device)``, ``x.new_zeros(n)``,
``torch.zeros_like(x)``). A plain ``torch.zeros(n)`` lands on the CPU, and on a GPU the next operation with the
model's tensors raises. On a machine with no GPU that break is silent, so this module makes it loud:
:class:`ImplicitDevice` is a ``TorchFunctionMode`` that sees every call of a tensor factory (``torch.zeros``,
``torch.tensor``, ``torch.arange`` ...) made with no ``device=`` from a file of the project's own code, and records
where it was made.

Why not ``torch.set_default_device("meta")`` alone: third-party code the analyses call (Captum, scikit-learn's
torch paths) makes CPU tensors of its own on purpose; under a meta default those raise inside the library, not at
our line. The mode here blames the first frame outside torch, and only when that frame is ours.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

ROOT = Path(__file__).resolve().parents[1]
#: the code the rule binds: the library and the app's views (entry points, data and tokenization make CPU tensors
#: by design; they are moved to the model's device by the code that uses them)
RULED = tuple(str(ROOT / p) for p in ("bertcore/analysis", "bertcore/sae", "bertcore/circuits", "bertcore/modeling",
                                      "bertcore/readouts", "bertcore/vectors.py", "explorer/views",
                                      "explorer/whatif.py"))
FACTORIES = {
    torch.zeros, torch.ones, torch.empty, torch.full, torch.arange, torch.tensor, torch.rand, torch.randn,
    torch.randint, torch.randperm, torch.eye, torch.linspace, torch.logspace, torch.as_tensor, torch.scalar_tensor,
    torch.empty_strided, torch.tril_indices, torch.triu_indices,
}
_TORCH = str(Path(torch.__file__).parent)
_PASS_THROUGH = (_TORCH, __file__)
#: functions that make tensors on the device their caller names (``Encoding.tensors(device)``): the caller is blamed
_BY_CALLER = {(str(ROOT / "bertcore/tokenization/tokenizer.py"), "tensors")}


@dataclass(frozen=True)
class Site:
    """One factory call with no device: where (file relative to the repository, line) and which factory."""

    file: str
    line: int
    factory: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.factory}"


def _by_caller(frame) -> bool:
    """A frame of :data:`_BY_CALLER` (or a comprehension inside one: its own frame before Python 3.12)."""
    code = frame.f_code
    if code.co_name.startswith("<") and frame.f_back is not None:
        return code.co_filename == frame.f_back.f_code.co_filename and _by_caller(frame.f_back)
    return (code.co_filename, code.co_name) in _BY_CALLER


def _caller() -> tuple[str, int] | None:
    """The first frame outside torch and :data:`_BY_CALLER`; None when that frame builds a module (an
    ``nn.Module``'s ``__init__`` makes its parameters on the default device, and whoever built it moves it)."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_code.co_filename.startswith(_PASS_THROUGH) or _by_caller(frame)):
        frame = frame.f_back
    if frame is None:
        return None
    if frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), torch.nn.Module):
        return None
    return frame.f_code.co_filename, frame.f_lineno


class ImplicitDevice(TorchFunctionMode):
    """Records every tensor factory called with no ``device=`` from a file under :data:`RULED`.

    ``with ImplicitDevice() as seen: ...`` then ``seen.sites``: the distinct :class:`Site` s, in order. A factory
    whose input is a tensor (``torch.as_tensor(t)``, ``torch.tensor(t)``) keeps that tensor's device and is not
    recorded.
    """

    def __init__(self):
        super().__init__()
        self.sites: list[Site] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and kwargs.get("device") is None and not (args and isinstance(args[0], torch.Tensor)):
            where = _caller()
            if where is not None and where[0].startswith(RULED):
                site = Site(str(Path(where[0]).relative_to(ROOT)), where[1], func.__name__)
                if site not in self.sites:
                    self.sites.append(site)
        return func(*args, **kwargs)
