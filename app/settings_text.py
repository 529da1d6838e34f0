"""Settings files read as text, before Qt reads them: nothing stored in one is ever run.

PySide6's QSettings stores a Python object in an INI file as ``@Variant(...PySide::PyObjectWrapper...)`` (a
pickle) and unpickles it as soon as Qt parses the section that holds it (``contains``, ``value``, and the merge
before a write all do): a crafted settings file would run any code it likes. latticelab stores only plain values
(text, numbers, booleans) and window layouts (``@ByteArray``), so a file holding any ``@Variant`` is refused
before Qt sees it. The file is decoded here the way Qt decodes an INI value (line continuations, quotes,
backslash escapes such as ``\\x40`` for ``@``), so an escaped or split ``@Variant`` is found as well.
"""
from __future__ import annotations

import re

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_HEX = re.compile(r"[0-9a-fA-F]*")
_OCTAL = re.compile(r"[0-7]+")
# what Qt turns into a QVariant read from a QDataStream: any stored type, a pickled Python object among them
_SERIALIZED = ("@Variant(", "PyObjectWrapper")


def unescape(text: str) -> str:
    """``text`` with Qt's INI escapes replaced and its quotes dropped (a value's decoded characters)."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        i += 1
        if c == '"':
            continue
        if c != "\\" or i >= len(text):
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c in "xX":
            digits = _HEX.match(text, i).group()
            i += len(digits)
            code = int(digits, 16) if digits else 0
            out.append(chr(code) if code < 0x110000 else "\ufffd")
        elif c in "01234567":
            digits = _OCTAL.match(text, i - 1).group()
            i += len(digits) - 1
            code = int(digits, 8)
            out.append(chr(code) if code < 0x110000 else "\ufffd")
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _logical_lines(text: str):
    """(line number, line, the line as joined without the continuation's indent) with Qt's continuations (a
    backslash at the end of a line) joined, with and without the next line's leading blanks."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    number = 0
    while number < len(lines):
        first, line = number + 1, lines[number]
        tight = line
        number += 1
        while line.endswith("\\") and number < len(lines):
            line, tight = line[:-1] + lines[number], tight[:-1] + lines[number].lstrip()
            number += 1
        yield first, line, tight


def _key(section: str, key: str) -> str:
    key = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), key.strip()).replace("\\", "/")
    return key if section in ("", "General") else f"{section}/{key}"


def serialized_object_key(text: str) -> str | None:
    """The first key of a settings file's ``text`` whose value is a serialized object (``@Variant``: a pickled
    Python object or any other stored type), or None when every value is plain. A match anywhere on a line counts,
    in its raw or its decoded form: a refusal too many (a note that happens to name @Variant) costs a message,
    one too few would run code."""
    section = ""
    for number, line, tight in _logical_lines(text):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
            continue
        forms = (line, unescape(line), tight, unescape(tight))
        if any(mark in form for form in forms for mark in _SERIALIZED):
            key = line.split("=", 1)[0] if "=" in line else f"line {number}"
            return _key(section, key) if "=" in line else key
    return None
