"""The workflow engine: a per-question recorder that runs roles and retrievals and writes Steps.

A method is a plain async function of a :class:`Run`. The run builds each role's messages,
sets ``current_role`` around the backend call (so backends can key behaviour by role), parses
the completion with the role's parser and appends one :class:`~marag.types.Step` per LLM call
or per retrieval query, in the order they finished. :func:`execute` turns any per-question
failure (dead backend, broken retriever, bad config) into a Trace with ``status="failed"`` that
keeps every step recorded before the failure.

The hot path allocates one Step per call and nothing else of note: messages built by the role
are stored as they are (never copied), and backend routing plus sampling parameters are
resolved once per role name and cached on the Context.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from marag.config import Config, ConfigError, Price
from marag.llm.base import LLM, LLMError, SamplingParams, current_role
from marag.llm.pricing import charge, find_price
from marag.metrics import score_trace
from marag.retrieval.base import RetrievalError, Retriever
from marag.roles.base import Parsed, Role
from marag.roles.tags import reclose
from marag.types import EMPTY_QUESTION, Hits, Node, Question, Step, Trace, is_blank
from marag.workflows.turns import paper_turns

log = logging.getLogger(__name__)

Body = Callable[["Run"], Awaitable[None]]
Method = Callable[..., Awaitable[Trace]]  # (question, ctx, sample=0) -> Trace


class RunListener(Protocol):
    """Told about a question's progress as it happens (live views, progress displays).

    ``on_step`` gets each Step as it is recorded (concurrent QDP children interleave here; the
    Trace keeps them grouped). ``on_node`` gets a Node when it is added or when its question,
    answer, workflow, children or solved flag changed; changes made by workflow code between
    two actions are reported when the next action starts (or when the run ends). Listeners
    run inside the event loop and must be quick; an exception from one is logged and ignored.
    """

    def on_step(self, step: Step) -> None: ...

    def on_node(self, node: Node) -> None: ...


@dataclass(slots=True)
class Route:
    """Where one role's calls go and how they are decoded (resolved once per role)."""

    role: Role
    backend: str
    llm: LLM
    params: SamplingParams


@dataclass
class Context:
    """What every question of a run shares: backends by config name, the config, a retriever.

    ``logprobs=True`` asks backends for token ids and logprobs on every call (training).
    ``cache_prompts=True`` asks them to keep every call's whole prompt for reuse
    (``SamplingParams.cache_prompt``), as a role that sets ``Role.cache_prompt`` does: a
    trainer's samples of one question send the same prompts.
    Routes are cached per (method, role) on first use, so change ``config`` before the first
    question. The role comes from the prompt profile ``config.method.prompts`` for the method
    that calls it (``Trace.method``).
    """

    llms: dict[str, LLM]
    config: Config
    retriever: Retriever | None = None
    logprobs: bool = False
    cache_prompts: bool = False
    listeners: tuple[RunListener, ...] = ()
    _routes: dict[tuple[str, str], Route] = field(default_factory=dict, repr=False)
    _prices: dict[str, Price | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        from marag.roles.registry import check_roles

        check_roles(self.config)

    def route(self, role_name: str, method: str | None = None) -> Route:
        """Where ``role_name``'s calls go for ``method`` (default: ``config.method.name``)."""
        key = (method or self.config.method.name, role_name)
        r = self._routes.get(key)
        if r is None:
            r = self._routes[key] = self._resolve(role_name, key[0])
        return r

    def listening(self, *listeners: RunListener) -> Context:
        """A copy that reports to ``listeners`` and shares everything else (backends, the
        retriever, route and price caches): one per question when each has its own watcher."""
        return replace(self, listeners=(*self.listeners, *listeners))

    def price(self, model: str) -> Price | None:
        """The config's price for ``model`` (or a built-in list price), cached per model."""
        if model not in self._prices:
            self._prices[model] = find_price(model, self.config.prices)
        return self._prices[model]

    def _resolve(self, role_name: str, method: str) -> Route:
        from marag.roles import role_for
        from marag.roles.model_profiles import role_prompts

        backend = self.config.backend_for(role_name)
        m = self.config.method
        variants = role_prompts(self.config.llms[backend].model, m.role_prompts,
                                prompts=m.prompts, enabled=m.model_prompts)
        role = role_for(role_name, m.prompts, method, variants)
        llm = self.llms.get(backend)
        if llm is None:
            raise ConfigError(
                f"role '{role_name}' runs on LLM '{backend}', but no backend of that name was "
                f"built (have: {sorted(self.llms)})"
            )
        s = self.config.sampling
        # The role knows how long its output may be (method.max_tokens overrides it); config
        # stop strings add to the role's.
        stop = tuple(dict.fromkeys([*s.stop, *role.stop]))
        limits = self.config.method.max_tokens
        limit = limits.get(role_name, limits.get("default", role.max_tokens))
        params = SamplingParams(
            temperature=s.temperature, top_p=s.top_p, max_tokens=limit, stop=stop,
            seed=s.seed, logprobs=self.logprobs, cache_prompt=role.cache_prompt or self.cache_prompts,
        )
        return Route(role=role, backend=backend, llm=llm, params=params)

    async def aclose(self) -> None:
        """Close every backend and the retriever (errors are logged, not raised)."""
        for llm in {id(v): v for v in self.llms.values()}.values():
            try:
                await llm.aclose()
            except Exception as e:  # noqa: BLE001 - closing must not hide the run's result
                log.warning("closing LLM backend %s failed: %s", getattr(llm, "name", "?"), e)
        if self.retriever is not None:
            try:
                await self.retriever.aclose()
                self.retriever.close()
            except Exception as e:  # noqa: BLE001 - as above
                log.warning("closing retriever failed: %s", e)


# Backends that can restrict decoding to a role's allowed text (a vocabulary mask).
RESTRICTING_BACKENDS = frozenset({"hf"})


class Run:
    """Records one question's execution. ``branch()`` gives a recorder for a concurrent part
    (QDP children) that shares the trace and cost but collects its own steps; ``merge`` puts
    the branches' steps back in branch order, so a trace's steps are deterministic: each
    parallel child's steps are contiguous, in child order."""

    __slots__ = ("_calls", "_seen", "ctx", "listeners", "round", "steps", "t0", "trace")

    def __init__(self, ctx: Context, question: Question, method: str, sample: int = 0) -> None:
        self.ctx = ctx
        self.trace = Trace.from_question(question, method, sample=sample)
        self.steps = self.trace.steps
        self.round = 0
        self.t0 = time.perf_counter()
        # calls made so far per (node, role): shared with branches (their nodes differ)
        self._calls: dict[tuple[int, str], int] = {}
        self.listeners = ctx.listeners
        # node id -> the state last reported to listeners (shared with branches on purpose)
        self._seen: dict[int, tuple[Any, ...]] = {}

    # ------------------------------------------------------------------ structure

    @property
    def config(self) -> Config:
        return self.ctx.config

    def add_node(self, question: str, *, parent: Node | None = None, kind: str = "root") -> Node:
        nodes = self.trace.nodes
        node = Node(
            id=len(nodes), question=question, parent=None if parent is None else parent.id,
            kind=kind, depth=0 if parent is None else parent.depth + 1,
        )
        nodes.append(node)
        if parent is not None:
            parent.children.append(node.id)
        if self.listeners:
            self.report_nodes()
        return node

    def answer(self, node: Node, value: Any) -> str:
        """Write ``value`` (a role's parsed answer) as ``node``'s answer and mark it solved; the
        root's answer is the trace's answer. Returns the text written."""
        text = as_answer(value)
        node.answer, node.solved = text, True
        if node.parent is None:
            self.trace.answer = text
        return text

    def note(self, text: str) -> None:
        self.trace.notes.append(text)
        log.debug("%s: %s", self.trace.id, text)

    # ------------------------------------------------------------------ listeners

    def report_nodes(self) -> None:
        """Tell listeners about every node whose state changed since it was last reported."""
        for node in self.trace.nodes:
            state = (node.question, node.query, node.answer, node.solved, len(node.children),
                     None if node.workflow is None else tuple(node.workflow))
            if self._seen.get(node.id) != state:
                self._seen[node.id] = state
                self._tell("on_node", node)

    def _tell(self, what: str, item: Step | Node) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, what)(item)
            except Exception:  # a broken watcher must not fail the question
                log.exception("run listener %r failed in %s", listener, what)

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        if self.listeners:
            self._tell("on_step", step)

    def branch(self) -> Run:
        b = copy.copy(self)
        b.steps = []
        return b

    def merge(self, branches: Sequence[Run]) -> None:
        for b in branches:
            self.steps.extend(b.steps)

    def restricts(self, role_name: str, key: str, what: str) -> bool:
        """Whether ``role_name`` decodes restricted to its allowed text (``what``) in this run:
        the option ``method.<key>``, or when None, whether the role's backend can restrict. A
        backend that cannot gets a trace note instead (it would ignore the restriction, and the
        step's sampling record would claim one that was never applied)."""
        cfg = self.config
        if self.ctx.route(role_name, self.trace.method).role.allowed_text is None:
            return False  # this role's prompt (e.g. a paper profile's) defines no restriction
        wanted = getattr(cfg.method, key)
        backend = cfg.llms[cfg.backend_for(role_name)].backend
        able = backend in RESTRICTING_BACKENDS or backend == "scripted"
        if wanted is None:
            if backend not in RESTRICTING_BACKENDS and backend != "scripted":
                self.note(f"{role_name} decodes freely: the {backend} backend cannot restrict "
                          f"decoding to {what}; the parser still checks the output")
            return backend in RESTRICTING_BACKENDS
        if wanted and not able:
            self.note(f"method.{key} is on but the {backend} backend cannot restrict "
                      f"decoding; {role_name} decodes freely")
            return False
        return wanted

    # ------------------------------------------------------------------ actions

    async def call(
        self, role_name: str, node_id: int = 0, *, round: int | None = None, turn: int = 0,
        sampling: dict[str, Any] | None = None, constrained: bool = False, **inputs: Any,
    ) -> tuple[Parsed, Step]:
        """Run one role: build messages from ``inputs``, call its backend, parse, record.

        The role derives its parser's context from ``inputs``; ``constrained`` restricts
        decoding to what the role allows for these inputs (local backends)."""
        if self.listeners:
            self.report_nodes()
        route = self.ctx.route(role_name, self.trace.method)
        messages = route.role.build(**inputs)
        prefix = route.role.reply_prefix if getattr(route.llm, "continues_reply", False) else ""
        if prefix:
            messages = [*messages, {"role": "assistant", "content": prefix}]
        if constrained:
            sampling = {**(sampling or {}), "allowed_text": route.role.constraint(inputs)}
        params = route.params.replace(**sampling) if sampling else route.params
        if params.stop_when is not None and route.role.closes_stop:
            # a reply ended by stop_when would get a closing tag it never wrote (the reply
            # does not say whether a stop string or the predicate ended it)
            raise ValueError(f"role {role_name!r} puts its stop string back (closes_stop), "
                             f"so it cannot be decoded with stop_when")
        if params.seed is not None:
            params = params.replace(seed=self._call_seed(params.seed, role_name, node_id))
        started = time.perf_counter()
        token = current_role.set(role_name)
        try:
            out = await route.llm.generate([messages], params)
        finally:
            current_role.reset(token)
        latency = time.perf_counter() - started
        if len(out) != 1:
            raise LLMError(f"backend '{route.backend}' returned {len(out)} completions for 1 prompt")
        c = out[0]
        raw = c.text
        if route.role.closes_stop and c.finish_reason == "stop":
            raw = reclose(raw, route.role.stop)
        parsed = route.role.read(prefix + raw, inputs)
        if prefix and parsed.valid and c.finish_reason == "length":
            # the reply began inside the format; running out of tokens is leaving it unclosed
            parsed = Parsed(parsed.value, False, f"reply cut at {params.max_tokens} tokens "
                                                 "before it was closed")
        model = c.model or route.llm.model
        step = Step(
            role=role_name, node_id=node_id, round=self.round if round is None else round,
            messages=messages, raw=raw, parsed=parsed.value, valid=parsed.valid,
            reason=parsed.reason, prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens, prompt_token_ids=c.prompt_token_ids,
            token_ids=c.token_ids, logprobs=c.logprobs, latency=latency,
            started=started - self.t0, backend=route.backend, model=model, turn=turn,
            sampling=_sampling_record(params), weights_version=c.weights_version,
            top_logprobs=c.top_logprobs,
        )
        self._record(step)
        cost = self.trace.cost
        cost.llm_calls += 1
        cost.prompt_tokens += c.prompt_tokens
        cost.completion_tokens += c.completion_tokens
        price = self.ctx.price(model)
        if price is not None:
            cost.money += charge(price, c.prompt_tokens, c.completion_tokens)
        if not parsed.valid:
            log.debug("%s: %s output invalid: %s", self.trace.id, role_name, parsed.reason)
        return parsed, step

    def _call_seed(self, base: int, role_name: str, node_id: int) -> int:
        """A seed per call, fixed by (base seed, question id, sample, node, role, how many
        calls this role made on this node): n samples of one question differ, a rerun with the
        same seed repeats them, and concurrent branches cannot shift each other's seeds."""
        key = (node_id, role_name)
        k = self._calls.get(key, 0)
        self._calls[key] = k + 1
        return derive_seed(base, self.trace.id, self.trace.sample, node_id, role_name, k)

    async def retrieve(
        self, queries: list[str], k: int, node_id: int = 0, *, round: int | None = None,
        turn: int = 0,
    ) -> list[Hits]:
        """Search all ``queries`` in one batch; records one retrieval Step (role ``R``) per query
        with the query as ``raw``, the doc ids, and ``parsed = {"titles", "scores"}``."""
        retriever = self.ctx.retriever
        if retriever is None:
            raise RetrievalError("this method retrieves, but no retriever is configured")
        if self.listeners:
            self.report_nodes()
        started = time.perf_counter()
        hits = await retriever.search(queries, k)
        latency = time.perf_counter() - started
        if len(hits) != len(queries):
            raise RetrievalError(f"retriever returned {len(hits)} results for {len(queries)} queries")
        rnd = self.round if round is None else round
        for q, h in zip(queries, hits):
            self._record(Step(
                role="R", node_id=node_id, round=rnd, raw=q, doc_ids=h.ids,
                parsed={"titles": [p.title for p in h.passages], "scores": list(h.scores)},
                latency=latency, started=started - self.t0, backend=retriever.name, turn=turn,
            ))
        self.trace.cost.retrieval_calls += len(queries)
        return hits


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any printable parts (stable across processes and Python runs)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _sampling_record(params: SamplingParams) -> dict[str, Any]:
    rec: dict[str, Any] = {"temperature": params.temperature, "top_p": params.top_p,
                           "seed": params.seed}
    if params.allowed_text:
        rec["allowed_text"] = list(params.allowed_text)
    if params.min_tokens:
        rec["min_tokens"] = params.min_tokens
    if params.stop_when is not None:  # the hf backend may have ended the reply mid-text
        f = params.stop_when
        rec["stop_when"] = f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', repr(f))}"
    if params.cache_prompt:
        rec["cache_prompt"] = True
    return rec


async def gather_branches(run: Run, jobs: Sequence[Callable[[Run], Awaitable[Any]]]) -> list[Any]:
    """Run ``jobs`` concurrently, each on its own branch of ``run``; merge their steps in job
    order, then re-raise the first failure (after every job has finished, so no step is lost)."""
    branches = [run.branch() for _ in jobs]
    results = await asyncio.gather(*(job(b) for job, b in zip(jobs, branches)),
                                   return_exceptions=True)
    run.merge(branches)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return list(results)


# ---------------------------------------------------------------------- per-question driver


async def execute(name: str, body: Body, question: Question, ctx: Context,
                  sample: int = 0) -> Trace:
    """Run ``body`` for one question (``sample`` numbers repeated runs of it). Never raises for
    a per-question failure: the Trace comes back with ``status="failed"``, the error, and the
    steps recorded until then."""
    run = Run(ctx, question, name, sample)
    trace = run.trace
    try:
        if is_blank(question.question):
            # Recorded like any other per-question failure, so a batch keeps every item.
            trace.status, trace.error = "failed", EMPTY_QUESTION
            log.warning("question %s failed: %s", trace.id, trace.error)
        else:
            await body(run)
    except (LLMError, RetrievalError, ConfigError) as e:
        trace.status, trace.error = "failed", f"{type(e).__name__}: {e}"
        log.warning("question %s failed: %s", trace.id, trace.error)
    except Exception as e:  # an unexpected bug must still not take down a batch of questions
        trace.status, trace.error = "failed", f"{type(e).__name__}: {e}"
        log.exception("question %s failed with an unexpected error", trace.id)
    trace.cost.rounds = run.round
    trace.cost.turns = paper_turns(trace)
    trace.cost.seconds = time.perf_counter() - run.t0
    if trace.golden_answers and trace.answer is not None:
        trace.metrics = score_trace(trace)
    if run.listeners:
        run.report_nodes()
    return trace


def as_answer(value: Any) -> str:
    """A role's parsed answer as answer text (parsers return text; anything else is coerced)."""
    return value if isinstance(value, str) else str(value or "")


def method(name: str, body: Body) -> Method:
    """Wrap a body into the public ``async run(question, ctx) -> Trace`` form."""

    async def run(question: Question, ctx: Context, sample: int = 0) -> Trace:
        return await execute(name, body, question, ctx, sample)

    run.__name__ = run.__qualname__ = f"run_{name.replace('-', '_')}"
    run.__doc__ = body.__doc__
    return run
