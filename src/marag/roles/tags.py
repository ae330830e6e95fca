"""Tag extraction shared by every role parser.

Model output is scanned once into a flat list of tags. None of our formats nests tags, so
the body of an opening tag runs to the next tag of any kind. When that next tag is the
matching closing tag the element is ``closed``; otherwise it is left open, which is what a
backend produces when the role's stop string (the closing tag) is cut from the text, and
what a small model produces when it forgets a closing tag.

Everything here is linear in the text length and never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A tag name starts with a letter, so "a < b" or "<3" in prose is not a tag.
_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z][\w.\-]*)\s*/?\s*>")
_NUMBERED = re.compile(r"([A-Za-z_]+?)(\d{1,6})")  # bounded: int() refuses huge digit runs


@dataclass(frozen=True, slots=True)
class Element:
    name: str  # lower-cased tag name
    body: str  # stripped text between the opening tag and the next tag
    closed: bool  # the next tag was this element's closing tag
    start: int  # offset of the opening tag in the text


def scan(text: str) -> list[Element]:
    """All opening tags in order, each with its body (see the module docstring)."""
    if not isinstance(text, str) or "<" not in text:
        return []
    marks = [(m.start(), m.end(), m.group(1) == "/", m.group(2).lower()) for m in _TAG.finditer(text)]
    out: list[Element] = []
    for i, (start, end, closing, name) in enumerate(marks):
        if closing:
            continue
        if i + 1 < len(marks):
            nxt_start, _, nxt_closing, nxt_name = marks[i + 1]
            body = text[end:nxt_start]
            closed = nxt_closing and nxt_name == name
        else:
            body = text[end:]
            closed = False
        out.append(Element(name=name, body=body.strip(), closed=closed, start=start))
    return out


def find_all(text: str, name: str) -> list[Element]:
    """Every element called ``name`` (case-insensitive), in order."""
    key = name.lower()
    return [e for e in scan(text) if e.name == key]


def find_first(text: str, name: str) -> Element | None:
    found = find_all(text, name)
    return found[0] if found else None


def numbered(elements: list[Element], prefix: str) -> list[tuple[int, Element]]:
    """Elements named ``prefix`` + a number (``q1``, ``a2``...), with their numbers, in order."""
    key = prefix.lower()
    out: list[tuple[int, Element]] = []
    for e in elements:
        m = _NUMBERED.fullmatch(e.name)
        if m and m.group(1) == key:
            out.append((int(m.group(2)), e))
    return out


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped (the fallback when a tag is missing)."""
    if not isinstance(text, str):
        return ""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line
    return ""


def strip_tags(text: str) -> str:
    """``text`` without anything that looks like a tag, whitespace folded."""
    return " ".join(_TAG.sub(" ", text).split()) if isinstance(text, str) else ""
