"""MkDocs hook: the docstrings' Sphinx roles (:func:`x`, :class:`x`, ...) render as plain code in the API pages.

Markdown turns ``:func:`x` `` into ``:func:<code>x</code>``; the role prefix is dropped from the page's HTML, outside
code blocks too (no page writes a role on purpose). Listed under ``hooks:`` in mkdocs.yml.
"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const|ref|term):(?=<code)")


def on_page_content(html: str, **kwargs) -> str:
    return ROLE.sub("", html)
