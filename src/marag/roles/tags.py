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
from collections.abc import Iterator, Sequence
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


def iter_elements(text: str) -> Iterator[Element]:
    """Opening tags in order, each with its body (see the module docstring)."""
    if not isinstance(text, str) or "<" not in text:
        return
    marks = _TAG.finditer(text)
    current = next(marks, None)
    while current is not None:
        following = next(marks, None)
        if current.group(1) != "/":
            name = current.group(2).lower()
            if following is None:
                yield Element(name, text[current.end():].strip(), False, current.start())
            else:
                closed = following.group(1) == "/" and following.group(2).lower() == name
                body = text[current.end():following.start()].strip()
                yield Element(name, body, closed, current.start())
        current = following


def scan(text: str) -> list[Element]:
    return list(iter_elements(text))


def find_all(text: str, name: str) -> list[Element]:
    """Every element called ``name`` (case-insensitive), in order."""
    key = name.lower()
    return [e for e in iter_elements(text) if e.name == key]


def find_first(text: str, name: str) -> Element | None:
    key = name.lower()
    return next((e for e in iter_elements(text) if e.name == key), None)


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


def opening_of(stop: str) -> str | None:
    """The opening that a closing stop string ends: ``<x>`` for ``</x>``, and
    ``<|begin_x|>`` for ``<|end_x|>`` (Search-o1's markers); None for any other string."""
    if stop.startswith("</") and stop.endswith(">"):
        return "<" + stop[2:]
    if stop.startswith("<|end_") and stop.endswith("|>") and len(stop) > 8:
        return "<|begin_" + stop[6:]
    return None


def reclose(text: str, stops: Sequence[str]) -> str:
    """A reply that stopped on a closing tag, with that tag put back (backends drop the stop
    string from the text, as OpenAI's API does): the tag whose opening is the last one left
    unclosed (``opening_of`` pairs them). Text with no open block is returned as it is."""
    best, at = "", -1
    for stop in stops:
        opening = opening_of(stop)
        if opening is None:
            continue
        i = text.rfind(opening)
        if i > at and text.find(stop, i) < 0:
            best, at = stop, i
    return text + best
