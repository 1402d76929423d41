"""The environment variables of BERT Explorer, in one place: every ``BERT_EXPLORER_*`` variable is a field of
:class:`Settings` (``pydantic-settings``: the prefix, types, ranges and the message for a bad value are its).

:func:`settings` returns them: read from the environment when the environment's ``BERT_EXPLORER_*`` values change,
and parsed once per set of values (a test or an operator that sets a variable sees it on the next call). An empty
variable counts as unset. The table in ``docs/settings.md`` is :func:`table`'s (a test compares the two).

This module imports neither torch nor streamlit.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from pydantic import Field, PositiveFloat, PositiveInt, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

PREFIX = "BERT_EXPLORER_"


class SettingsError(ValueError):
    """A ``BERT_EXPLORER_*`` variable holds a value its setting does not take; the message names it."""


class Settings(BaseSettings):
    """Every ``BERT_EXPLORER_*`` environment variable (the field's name upper-cased, after the prefix)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True, frozen=True, extra="ignore")

    cache: Path = Field(Path.home() / ".cache" / "bert-explorer",
                        description="Folder for derived data: tokenized corpora, trained vocabularies, fitted "
                                    "lenses.")
    runs: Path = Field(Path("runs"), description="Folder of training runs (the Train page's and the command "
                                                 "line's).")
    device: str = Field("auto", description="Where the app computes: auto (CUDA when there is one, else the CPU), "
                                            "cpu, cuda, cuda:N or mps. In shared-server mode the operator's TOML "
                                            "file's device, when given, wins.")
    threads: PositiveInt | None = Field(None, description="Torch threads of the app's own computations (default: "
                                                          "half the CPU cores, at least 1).")
    heavy_slots: PositiveInt | None = Field(None, description="Heavy jobs (scans, searches, graphs) the app's server "
                                                              "runs at once (default: half the CPU cores, at least "
                                                              "1).")
    view_cache_mb: PositiveFloat = Field(512.0, description="Megabytes of view results the server keeps for every "
                                                            "session (least recently used go first).")
    warmup: bool = Field(True, description="0: no background thread imports the pages' packages after the "
                                           "server starts.")
    shared: bool = Field(False, description="1: serve the app to other people (shared-server mode: no local paths, "
                                            "quotas). Also read from a root-level key of .streamlit/secrets.toml.")
    shared_config: Path | None = Field(None, description="The shared-server mode's TOML file of the operator's "
                                                          "options. Also read from .streamlit/secrets.toml.")

    def half_the_cores(self, value: int | None) -> int:
        """``value``, or half the CPU cores (at least 1) when it is None."""
        return value if value is not None else max(1, (os.cpu_count() or 2) // 2)

    @property
    def app_threads(self) -> int:
        """:attr:`threads`, or half the CPU cores."""
        return self.half_the_cores(self.threads)

    @property
    def slots(self) -> int:
        """:attr:`heavy_slots`, or half the CPU cores."""
        return self.half_the_cores(self.heavy_slots)


def variable(name: str) -> str:
    """The environment variable of the field ``name``: ``"view_cache_mb"`` -> ``"BERT_EXPLORER_VIEW_CACHE_MB"``."""
    return PREFIX + name.upper()


@functools.lru_cache(maxsize=16)
def _parse(values: tuple[tuple[str, str], ...]) -> Settings:
    del values  # the cache key: Settings reads the same values from the environment
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(f"{variable(str(e['loc'][0]))}={e.get('input')!r}: {e['msg']}" for e in exc.errors())
        raise SettingsError(f"a BERT_EXPLORER_* environment variable is unusable: {problems}") from None


def settings() -> Settings:
    """The current :class:`Settings`.

    Raises:
        SettingsError: a variable that its field cannot take (``BERT_EXPLORER_THREADS=two``, a cache size of 0).
    """
    return _parse(tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(PREFIX))))


def table() -> str:
    """The settings as a Markdown table: variable, default, meaning."""
    rows = ["| Variable | Default | What it sets |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = field.default
        shown = "unset" if default is None else ("`1`" if default is True else "`0`" if default is False else
                                                 f"`{str(default).replace(str(Path.home()), '~')}`")
        rows.append(f"| `{variable(name)}` | {shown} | {field.description} |")
    return "\n".join(rows) + "\n"
