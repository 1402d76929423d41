"""Command-line options from the fields of a run's option dataclass: one ``--flag-name`` per field, the one
mechanism of ``python -m bertcore.training`` (:class:`bertcore.runs.config.TrainConfig`) and
``python -m bertcore.sae train`` (:class:`bertcore.sae.config.SAETrainConfig`).

Why not ``transformers.HfArgumentParser``: it passes a field's whole ``metadata`` to ``add_argument``, and
TrainConfig's metadata also holds what the Train page reads (group, tasks, min / max, per-task defaults); and its
list options take values apart by spaces, where ``--layers 1,3,5`` is what the docs, the runs' ``argv`` and the Train
page's launcher write.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def blocks(text: str) -> tuple[int, ...]:
    """``"1,3,5"`` -> ``(1, 3, 5)``: 0-based block numbers separated by commas (an argparse ``type``)."""
    try:
        return tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes 0-based block numbers separated by commas, e.g. 1,3,5; got {text!r}")


def _kind(annotation: Any) -> Any:
    """The type argparse converts a value with: ``int | None`` -> ``int``; ``bool`` stays ``bool``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return annotation if annotation in (int, float, str, bool) else str


def add_options(parser: argparse.ArgumentParser, config: type, fields: Iterable[dataclasses.Field] | None = None, *,
                defaults: Mapping[str, Any] | None = None, groups: Mapping[str, str] | None = None,
                kinds: Mapping[str, Callable[[str], Any]] | None = None) -> dict[str, argparse._ArgumentGroup]:
    """Add ``--flag-name`` (``dest``: the field's name) for each of ``fields`` of the dataclass ``config`` (default:
    all but a ``dict`` field of extras).

    A field's ``metadata`` may give ``help``, ``type``, ``choices``, ``group`` (a key of ``groups``: the options are
    shown under that title) and ``negatable``; without it the type comes from the annotation. A ``bool`` is
    ``--x / --no-x`` unless ``negatable`` is False (then ``--x`` alone). ``defaults``: a default per field name other
    than the field's own; ``kinds``: a conversion per field name (:func:`blocks` for ``layers``). Returns the
    argument groups made, by their key (to add more options to them).
    """
    hints = typing.get_type_hints(config)
    if fields is None:
        fields = [f for f in dataclasses.fields(config) if dict not in (hints[f.name], typing.get_origin(hints[f.name]))]
    defaults, groups, kinds = defaults or {}, groups or {}, kinds or {}
    made: dict[str, argparse._ArgumentGroup] = {}
    for f in fields:
        meta = f.metadata
        where = parser
        if meta.get("group") is not None:
            where = made.get(meta["group"]) or made.setdefault(meta["group"],
                                                                parser.add_argument_group(groups[meta["group"]]))
        flag = "--" + f.name.replace("_", "-")
        default = defaults.get(f.name, None if f.default is dataclasses.MISSING else f.default)
        help_text = meta["help"].replace("%", "%%") if meta.get("help") else None  # argparse expands %-formats
        kind = kinds.get(f.name) or meta.get("type") or _kind(hints[f.name])
        if kind is bool:
            action = argparse.BooleanOptionalAction if meta.get("negatable", True) else "store_true"
            where.add_argument(flag, dest=f.name, action=action, default=bool(default), help=help_text)
        else:
            where.add_argument(flag, dest=f.name, type=kind, default=default, choices=meta.get("choices"),
                               help=help_text)
    return made
