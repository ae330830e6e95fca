"""IRCoT's reasoning step: one LLM extends a chain of thought by one sentence at a time.

The protocol follows IRCoT (Trivedi et al., ACL 2023) and its authors' code
(StonyBrookNLP/ircot, ``commaqa/inference/ircot.py``), element by element:

* the reader sees every paragraph collected so far, each as ``Wikipedia Title: <title>``
  followed by its text (cut to 350 words, the authors' ``max_para_num_words``), then the
  question after ``Q:``; the chain of thought so far is the answer being written, so each call
  continues it (an open assistant turn, as Search-R1's trajectory is continued);
* one worked demonstration shows a whole chain ending in ``So the answer is: <answer>.``
  (marag's own example and instruction; the paper's demonstrations are not copied);
* decoding stops at the end of the line (the authors' ``stop=["\\n"]``) and only the first
  sentence of the reply is kept (the authors split with spaCy; marag with a rule that does
  not cut initials, decimals or a few common abbreviations);
* a sentence that says "answer is" (with or without the colon, the authors' regex
  ``.* answer is:? (.*)``) ends the chain; the answer is what follows, without a final full
  stop;
* the CoT reader call (``reader=True``): its own instruction, the same demonstration and
  paragraphs, a chain written afresh and kept whole (its line), its answer extracted the
  same way, the whole line being the answer when it has none (the authors'
  ``match_all_on_failure``), recorded invalid;
* the direct reader call (``direct=True``, the paper's reader for its Flan-T5 runs): a
  reasoning step's prompt with a request for the answer alone after the question; the
  answer is what follows "answer is", else the whole line. Its prompt repeats a step's up to
  the question, so a backend with a prefix cache reads the paragraphs the last step read
  only once.

An empty reply and an "answer is" with nothing after it are invalid (and end the chain, as
the authors' exit controller does on an empty sentence: ``workflows.ircot``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from marag.roles.base import Messages, Parsed, Role
from marag.roles.prompt import clip_words
from marag.types import Passage

NAME = "ircot"

# the authors' max_para_num_words: each paragraph is cut to this many words in the prompt
PARA_WORDS = 350

_STEP = """Answer the question by reasoning over the Wikipedia paragraphs. Write only the \
next sentence of the reasoning. Once it gives the answer, write "So the answer is: <answer>."\
"""

_READER = """Answer the question by reasoning over the Wikipedia paragraphs, on one line, \
ending with "So the answer is: <answer>."\
"""

# the direct reader's request comes after the question, so its prompt up to there is a
# reasoning step's (system, example, paragraphs, question) and the hf backend reuses that
# step's KV instead of reading every paragraph again (``PrefixCache.shared``)
_DIRECT = 'Now give only the answer, as "So the answer is: <answer>."'

# one short worked chain (small models copy a reply's shape; short: tiny contexts hold it)
_EXAMPLE_PARAS = (
    ("The Old Man and the Sea", "A 1952 novel by Ernest Hemingway."),
    ("Ernest Hemingway", "An American writer, born in Oak Park, Illinois."),
)
_EXAMPLE_Q = "Where was the author of The Old Man and the Sea born?"
_EXAMPLE_A = ("The Old Man and the Sea was written by Ernest Hemingway. Hemingway was born in "
              "Oak Park, Illinois. So the answer is: Oak Park, Illinois.")


def paragraphs(docs: Sequence[Passage], max_words: int = PARA_WORDS) -> str:
    """The collected paragraphs in the paper's layout, in the order they were collected."""
    return "\n\n".join(f"Wikipedia Title: {d.title}\n{clip_words(d.text, max_words)}"
                       for d in docs)


def _user(question: str, docs: Sequence[Passage]) -> str:
    head = paragraphs(docs)
    q = "Q: " + " ".join(question.split())
    return f"{head}\n\n{q}" if head else q


def build(question: str, docs: Sequence[Passage] = (), thoughts: Sequence[str] = (),
          reader: bool = False, direct: bool = False) -> Messages:
    """System instruction, the worked demonstration, the paragraphs and the question; then,
    for a reasoning step with sentences already written, the chain so far as an open
    assistant turn that the model continues. The CoT reader (``reader``) starts a chain of
    its own under its own instruction; the direct reader (``direct``) is a step's prompt with
    a request for the answer alone after the question."""
    example = [Passage(f"example-{i}", t, x) for i, (t, x) in enumerate(_EXAMPLE_PARAS)]
    last = _user(question, docs)
    messages: Messages = [
        {"role": "system", "content": _READER if reader and not direct else _STEP},
        {"role": "user", "content": _user(_EXAMPLE_Q, example)},
        {"role": "assistant", "content": _EXAMPLE_A},
        {"role": "user", "content": f"{last}\n\n{_DIRECT}" if direct else last},
    ]
    so_far = " ".join(s.strip() for s in thoughts if s.strip())
    if so_far and not (reader or direct):
        messages.append({"role": "assistant", "content": so_far})
    return messages


_LABEL = re.compile(r"^(?:A|Answer|Thought|Reasoning)\s*:\s*", re.IGNORECASE)
# a candidate sentence end: . ! or ? (and closing quotes/brackets) before a space or the end
_END = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)")
_PREV_WORD = re.compile(r"(\S{1,24})$")
_ABBREV = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "mt", "ft", "no",
                     "gen", "col", "lt", "sgt", "capt", "prof", "rev", "inc", "ltd", "co",
                     "approx", "ca", "c", "e.g", "i.e", "u.s", "u.k"})
_MARKER = re.compile(r"\banswer is\b\s*:?", re.IGNORECASE)


def _not_an_end(line: str, m: re.Match[str]) -> bool:
    """Whether the full stop at ``m`` belongs to an initial or an abbreviation, or is
    followed by a lower-case word (then it does not end the sentence)."""
    if not m.group().startswith("."):
        return False
    prev = _PREV_WORD.search(line, max(0, m.start() - 24), m.start())
    word = prev.group(1).lstrip("\"'([") if prev else ""
    last = word.rsplit(".", 1)[-1]
    if (len(last) == 1 and last.isalpha() and last.isupper()) or word.lower() in _ABBREV:
        return True  # "J. K. Rowling", "Washington, D.C. is", "Dr. Smith"
    rest = line[m.end():].lstrip()
    return bool(rest) and rest[0].islower()


def first_sentence(line: str) -> str:
    """The first sentence of one line of text (the whole line when no sentence ends in it)."""
    for m in _END.finditer(line):
        if not _not_an_end(line, m):
            return line[:m.end()].strip()
    return line.strip()


def sentence_done(text: str) -> bool:
    """Whether a reasoning step's reply so far settles what ``parse`` reads from it, so that
    no later token can change it: the first non-empty line has ended (a line break follows
    it), or its first sentence has ended and a visible character has come after the space
    that follows (a full stop's reading waits for the next word's case; an undecoded
    character, U+FFFD, does not count). The hf backend stops decoding there
    (``SamplingParams.stop_when``) instead of writing the rest of the line, which the step
    drops. It assumes the decoded text of a token prefix is a prefix of the whole text (true
    of Qwen's and Llama's tokenizers; not of one that cleans up spaces, e.g.
    ``clean_up_tokenization_spaces``, where a later token can rewrite " 's")."""
    for raw in text.splitlines(keepends=True):
        if _LABEL.sub("", raw.strip()).strip():  # the line ``parse`` reads
            if raw.splitlines()[0] != raw:
                return True  # a line break ends it
            break
    line = _line(text)
    sentence = first_sentence(line)
    rest = line[len(sentence):]
    nxt = rest.lstrip()[:1]
    return len(sentence) < len(line) and rest[:1].isspace() and nxt not in ("", "\ufffd")


def answer_in(sentence: str) -> str | None:
    """What follows the last "answer is" of ``sentence`` (its final full stop dropped), or
    None when it says no "answer is"."""
    last = None
    for last in _MARKER.finditer(sentence):
        pass
    if last is None:
        return None
    answer = sentence[last.end():].strip()
    answer = answer.removesuffix(".")  # the authors' remove_last_fullstop
    return answer.strip("\"' ")


def _line(text: str) -> str:
    for raw in text.splitlines():
        line = _LABEL.sub("", raw.strip()).strip()
        if line:
            return " ".join(line.split())
    return ""


def parse(text: str, reader: bool = False, direct: bool = False) -> Parsed:
    """A reasoning step: ``{"sentence": the first sentence, "answer": what follows "answer
    is" in it, or None}``; with ``reader``: ``{"sentence": the whole line, "answer": str}``;
    with ``direct``: the same, a line without "answer is" being the answer itself."""
    reader = reader or direct
    if not isinstance(text, str):
        return Parsed({"sentence": "", "answer": "" if reader else None}, False,
                      "completion is not text")
    line = _line(text)
    if not line:
        return Parsed({"sentence": "", "answer": "" if reader else None}, False, "empty reply")
    sentence = line if reader else first_sentence(line)
    answer = answer_in(sentence)
    if direct and answer is None:
        whole = sentence.strip("\"' ").removesuffix(".").strip("\"' ")
        if not whole:
            return Parsed({"sentence": sentence, "answer": ""}, False, "no answer in the reply")
        return Parsed({"sentence": sentence, "answer": whole}, True)
    if reader and answer is None:
        return Parsed({"sentence": sentence, "answer": sentence}, False,
                      'no "So the answer is:" sentence; the whole reply is the answer')
    if answer is not None and not answer:
        return Parsed({"sentence": sentence, "answer": "" if reader else None}, False,
                      'nothing after "answer is"')
    return Parsed({"sentence": sentence, "answer": answer}, True)


def _context(reader: bool = False, direct: bool = False, **_: object) -> dict[str, bool]:
    return {"reader": bool(reader), "direct": bool(direct)}


# cache_prompt: each step repeats the last one's prompt with new paragraphs before the
# question and a longer chain after it, so the hf backend keeps whole prompts and computes
# only from the first new paragraph on (the first step's paragraphs were computed twice)
ROLE = Role(NAME, build, parse, max_tokens=100, stop=("\n",), parse_context=_context,
            cache_prompt=True)
