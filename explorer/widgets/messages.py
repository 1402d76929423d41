"""Messages in the page: bertcore's errors as warnings or errors (never a traceback), user text escaped for
Markdown, an input cut at the model's length."""

from __future__ import annotations

import re

import streamlit as st

from bertcore.device import out_of_memory
from bertcore.modeling.checkpoint import CheckpointError
from bertcore.modeling.config import ConfigError
from bertcore.modeling.embeddings import InputError
from bertcore.loading.sources import SourceError
from bertcore.tokenization.tokenizer import TextError


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^])")


def escape_md(text: str) -> str:
    """Backslash-escape Markdown punctuation so user text shows literally inside st.markdown / st.warning."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


# ----------------------------------------------------------------------------- errors
def show_error(exc: BaseException, where: str = "") -> None:
    """Show a bertcore error as a message in the page (never a traceback).

    ``TextError`` / ``InputError`` (what the user typed) -> ``st.warning``; ``SourceError``,
    ``CheckpointError``, ``ConfigError`` (a model that cannot be loaded) -> ``st.error``;
    a ``ValueError`` from a figure -> ``st.error``; the GPU out of memory (another session or a training run is
    using it) -> ``st.error`` saying so; anything else is re-raised.
    """
    prefix = f"{where}: " if where else ""
    message = prefix + escape_md(str(exc))
    if out_of_memory(exc):
        st.error(prefix + "The GPU is out of memory: other sessions or a training run are using it. Try again in a "
                 "moment, or with a shorter input (the server's operator can set BERT_EXPLORER_DEVICE=cpu).",
                 icon=":material/memory:")
    elif isinstance(exc, (TextError, InputError)):
        st.warning(message, icon=":material/edit_note:")
    elif isinstance(exc, (SourceError, CheckpointError, ConfigError)):
        st.error(message, icon=":material/error:")
    elif isinstance(exc, ValueError):
        st.error(message, icon=":material/error:")
    else:
        raise exc


def truncation_notice(n_tokens: int, max_length: int, note: str = "", reader: str = "this model") -> None:
    """The one message for an input longer than ``reader`` reads (``n_tokens`` before the cut; ``reader``: "this
    page" where a page reads less than the model); ``note``: what the cut means on this page, appended."""
    st.warning(f"The input has {n_tokens:,} tokens but {reader} reads at most {max_length}: the last "
               f"{n_tokens - max_length:,} were cut off.{' ' + note if note else ''}", icon=":material/content_cut:")


def lines_phrase(lines: list[int]) -> str:
    """"Line 2 was" / "Lines 2, 5 were" (1-based ``lines``): the start of a sentence that says what happened to some
    lines of a multi-line input."""
    return f"Line {lines[0]} was" if len(lines) == 1 else f"Lines {', '.join(map(str, lines))} were"
