"""The widgets every page shares, by what they hold (``from explorer import widgets``; every name is here):

    model.py     the model every page reads: the sidebar's picker, the session state of the choice (``model_*``)
    inputs.py    a text or a sentence pair, clamped sliders, layer and head pickers ("layer 1" is block 0), words
    messages.py  bertcore's errors as messages (never a traceback), Markdown escaping, the cut-input notice
    charts.py    every chart drawn with the export format; CSV and HTML downloads

A page's own session-state keys start with its prefix (``tok_``, ``att_``, ``ws_`` ...), passed to these helpers.
"""

from .messages import (
    escape_md, lines_phrase, show_error, truncation_notice,
)
from .model import (
    ERROR_KEY, KINDS, PACKAGED_KEY, SERVER_KIND, SERVER_LABEL, SOURCE_KEY, current_model, current_source,
    model_picker, picker_kinds, source_picker, source_refusal, use_device, use_source,
)
from .inputs import (
    WORDS_HELP, clamped_slider, head_number, head_picker, layer_label, layer_number, layer_picker,
    text_or_pair, words_toggle,
)
from .charts import (
    EXPORT_FORMATS, EXPORT_FORMAT_KEY, chart_config, download_csv, download_html, export_picker, plotly_chart,
    standalone_html,
)

__all__ = [
    "escape_md", "lines_phrase", "show_error", "truncation_notice", "ERROR_KEY", "KINDS", "PACKAGED_KEY",
    "SERVER_KIND", "SERVER_LABEL", "SOURCE_KEY", "current_model", "current_source", "model_picker",
    "picker_kinds", "source_picker", "source_refusal", "use_device", "use_source", "WORDS_HELP", "clamped_slider",
    "head_number", "head_picker", "layer_label", "layer_number", "layer_picker", "text_or_pair", "words_toggle",
    "EXPORT_FORMATS", "EXPORT_FORMAT_KEY", "chart_config", "download_csv", "download_html", "export_picker",
    "plotly_chart", "standalone_html",
]
