"""A deterministic fake LLM for unit tests of workflow logic. Never a default.

Rules map a role name (as set in ``current_role`` by the engine) or a regular expression
(``"re:<pattern>"``, searched in the whole conversation) to a reply: a string, a list of
strings consumed one per call, or a function of the messages. A call that no rule answers,
or that exhausts a list, raises ``LLMError`` so a wrong test script fails loudly.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

from marag.llm.base import LLMError, Messages, SamplingParams, current_role
from marag.types import Completion

Reply = str | list[str] | Callable[[Messages], str]


class ScriptedLLM:
    name = "scripted"

    def __init__(self, rules: dict[str, Reply] | None = None, *, latency: float = 0.0,
                 model: str = "scripted") -> None:
        self.model = model
        self.latency = latency
        self.calls: list[tuple[str, Messages]] = []  # (role, messages) for assertions
        self.params: list[SamplingParams] = []  # each call's decoding parameters, as calls
        # generate() calls waiting at once, now and at most: tests of concurrency assert on
        # these instead of wall-clock time
        self.in_flight = 0
        self.max_in_flight = 0
        self._rules: list[tuple[str, re.Pattern[str] | None, Reply]] = []
        self._cursor: dict[int, int] = {}
        for key, reply in (rules or {}).items():
            self.add(key, reply)

    def add(self, key: str, reply: Reply) -> None:
        pattern = re.compile(key[3:], re.DOTALL) if key.startswith("re:") else None
        self._rules.append((key, pattern, reply))

    async def generate(self, batch: list[Messages], params: SamplingParams) -> list[Completion]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
            return [self._one(messages, params) for messages in batch]
        finally:
            self.in_flight -= 1

    def _one(self, messages: Messages, params: SamplingParams) -> Completion:
        t0 = time.perf_counter()
        role = current_role.get()
        self.calls.append((role, messages))
        self.params.append(params)
        text = self._reply(role, messages)
        for s in params.stop:
            if s and s in text:
                text = text[: text.index(s)]
        prompt_tokens = sum(len(m.get("content", "").split()) for m in messages)
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(text.split()),
            model=self.model,
            latency=time.perf_counter() - t0,
        )

    def _reply(self, role: str, messages: Messages) -> str:
        convo = "\n".join(m.get("content", "") for m in messages)
        for i, (key, pattern, reply) in enumerate(self._rules):
            hit = pattern.search(convo) is not None if pattern else key == role
            if not hit:
                continue
            if callable(reply):
                return reply(messages)
            if isinstance(reply, list):
                k = self._cursor.get(i, 0)
                if k >= len(reply):
                    raise LLMError(f"scripted rule {key!r} has no reply left (call {k + 1})")
                self._cursor[i] = k + 1
                return reply[k]
            return reply
        head = convo[-200:].replace("\n", " ")
        raise LLMError(f"scripted LLM has no rule for role {role!r}; prompt ends: ...{head}")

    async def aclose(self) -> None:
        return None


def _asked(messages: Messages) -> str:
    """The question in a role's last user message (every role writes ``Question: ...``)."""
    found = re.findall(r"Question: (.*)", messages[-1].get("content", ""))
    return found[-1].strip() if found else ""


def decomposing(sub_questions: list[str], answers: list[str], final: str, *,
                rewrites: dict[str, str] | None = None, latency: float = 0.0) -> ScriptedLLM:
    """A scripted team that splits every root question serially into ``sub_questions``, makes
    each self-contained with QR (``rewrites``: sub-question -> rewritten form), solves it with
    R, DS, AG (the i-th gets ``answers[i]``) and summarises to ``final``: a deterministic
    multi-node trace for tests and demos, whatever the question."""
    if len(sub_questions) != len(answers):
        raise ValueError("one answer per sub-question")
    rewrites = dict(rewrites or {})
    by_question = {**dict(zip(sub_questions, answers)),
                   **{rewrites[q]: a for q, a in zip(sub_questions, answers) if q in rewrites}}

    def plan(messages: Messages) -> str:
        # the planner is offered decomposition only on the root (default max_depth)
        split = "QDS" in messages[0].get("content", "")
        return "<workflow>QDS</workflow>" if split else "<workflow>R, DS, AG</workflow>"

    def rewrite(messages: Messages) -> str:
        q = _asked(messages)
        return f"<query>{rewrites.get(q, q)}</query>"

    def answer(messages: Messages) -> str:
        # any other question (the root, answered directly when a budget ends the run) gets final
        return f"<answer>{by_question.get(_asked(messages), final)}</answer>"

    subs = "".join(f"<q{i}>{q}</q{i}>" for i, q in enumerate(sub_questions, 1))
    return ScriptedLLM({"planner": plan, "QDS": subs, "QR": rewrite, "DS": "<id>0, 1</id>",
                        "AG": answer, "AS": f"<answer>{final}</answer>"}, latency=latency)
