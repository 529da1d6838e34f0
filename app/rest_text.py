"""Docstrings and help texts, written in reStructuredText, as the rich text a Qt label shows (*About the model*).

Only the inline constructs the models' texts use are converted: ``literal`` (code), **strong**, *emphasis*, and
paragraphs separated by blank lines; everything else is shown as written, HTML-escaped. (docutils would render all
of reST, but is not a dependency of the desktop for a few lines of help.)
"""
from __future__ import annotations

import html
import inspect
import re

_INLINE = (          # after the literals are taken out (``inline_html``)
    (re.compile(r"\*\*(.+?)\*\*"), r"<b>\1</b>"),
    (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), r"<i>\1</i>"),
)


def inline_html(text: str) -> str:
    """One piece of reST text (no paragraphs) as escaped HTML with its inline markup converted. Literals are
    converted first and their content is left alone (``a*b*c`` stays as written)."""
    pieces = re.split(r"(``.+?``)", text)
    out = []
    for piece in pieces:
        if piece.startswith("``") and piece.endswith("``") and len(piece) > 4:
            out.append(f"<code>{html.escape(piece[2:-2])}</code>")
            continue
        piece = html.escape(piece, quote=False)
        for pattern, replacement in _INLINE:
            piece = pattern.sub(replacement, piece)
        out.append(piece)
    return "".join(out)


def rest_to_html(text: str) -> str:
    """A docstring as HTML paragraphs (its indentation removed, lines of a paragraph joined)."""
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(text or ""))
    return "".join(f"<p>{inline_html(' '.join(p.split()))}</p>" for p in paragraphs if p.strip())
