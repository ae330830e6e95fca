"""Per-step rewards of a scored Trace, one function per paper (pure; coefficients in config).

:func:`step_rewards` returns one entry per ``trace.steps`` element: ``None`` for a retrieval
(not an LLM call, so nothing to train), a float for every LLM step, frozen roles included (the
trainer drops the steps of roles it does not train). Where in a response the reward lands
(its last token, usually) and how it flows back to earlier steps (GAE, per-step, GRPO) is the
trainer's business; these functions only say what each step earned.

The final answer's F1 is ``trace.metrics["f1"]`` as the engine scored it; a trace with
``status="failed"`` scores F1 = 0 whatever its metrics say. A trace without golden answers,
or an unfailed one that was never scored, is a ValueError: nothing can be rewarded.

``RewardConfig.format_penalty`` is the size of the format penalty of JADE (r_format, Eq. 7)
and MAO-ARAG (R_FP, Eq. 5), both 1 in the papers. M-ASK's reward has no format penalty: for
``m-ask`` (and the outcome-only ``final`` kind) it is marag's own option. Unset (None) it is
the paper's value for the reward kind: 1 for ``jade`` and ``mao-arag``, 0 for ``m-ask``, 1 for
``final`` (marag's). MMOA-RAG's penalties are per role (``qr_penalty``, ``ds_penalty``,
``ag_penalty``) and do not use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from marag.config import RewardConfig
from marag.methods import REGISTRY
from marag.metrics import exact_match, f1_score
from marag.roles.tags import numbered, scan
from marag.types import Node, Step, Trace
from marag.workflows.turns import jade_turns

__all__ = [
    "PAPER_REWARDS", "final_f1", "final_rewards", "jade_rewards", "mao_arag_rewards",
    "mao_arag_workflow_cost", "mask_rewards", "mmoa_rewards", "search_r1_rewards", "step_rewards",
]

Rewards = list[float | None]

# kind "auto": which paper's rewards a method's traces get
AUTO_KIND = {m.name: m.reward for m in REGISTRY}

# the workflow MAO-ARAG's App. A names as its most expensive (its cost scales token cost to 1)
MAO_COSTLIEST = ("QR", "DS", "AG", "AS")
RETRIEVAL_CODES = frozenset({"R", "RA"})  # marag's and MAO-ARAG's names for the retriever


def step_rewards(trace: Trace, cfg: RewardConfig) -> Rewards:
    """One reward per step of ``trace`` (None for retrievals), by ``cfg.kind``; ``auto``
    follows ``trace.method`` (vanilla and llm-only get ``final``)."""
    kind = cfg.kind
    if kind == "auto":
        try:
            kind = AUTO_KIND[trace.method]
        except KeyError:
            raise ValueError(
                f"reward kind 'auto' does not know method {trace.method!r}; set train reward "
                f"kind to one of {sorted(PAPER_REWARDS)}") from None
    return PAPER_REWARDS[kind](trace, cfg)


def final_f1(trace: Trace) -> float:
    """The final answer's F1: ``trace.metrics["f1"]``, or 0 for a failed trace."""
    if not trace.golden_answers:
        raise ValueError(f"trace {trace.id!r} has no golden answers: it cannot be rewarded")
    if trace.status == "failed":
        return 0.0
    f1 = trace.metrics.get("f1")
    if f1 is None:
        raise ValueError(
            f"trace {trace.id!r} was not scored (no metrics['f1']); score it first with "
            "marag.metrics.score_trace")
    return float(f1)


def final_rewards(trace: Trace, cfg: RewardConfig) -> Rewards:
    """Outcome only: the last LLM step gets F1, every malformed LLM step ``-format_penalty``
    (the methods without a paper-specific reward: vanilla, llm-only)."""
    return _terminal(trace, cfg, final_f1(trace))


def jade_rewards(trace: Trace, cfg: RewardConfig) -> Rewards:
    """JADE Eq. 6-8. Every malformed step (``valid is False``) gets ``r_format = -1`` (Eq. 7,
    ``format_penalty``); the terminal step, the last LLM step in trace order, also gets
    ``R_global = F1 - alpha*min(T/rounds_max, 1) - beta*min(N_ret/retrievals_max, 1)`` (Eq. 6,
    8), with T the rounds of Algorithm 1 (:func:`marag.workflows.turns.jade_turns`: one per
    planner call) and N_ret the retrieval steps of the whole trace."""
    f1 = final_f1(trace)
    rounds = jade_turns(trace)
    retrievals = sum(1 for s in trace.steps if not s.is_llm)
    r_global = (f1 - cfg.alpha * min(rounds / cfg.rounds_max, 1.0)
                - cfg.beta * min(retrievals / cfg.retrievals_max, 1.0))
    return _terminal(trace, cfg, r_global)


def _terminal(trace: Trace, cfg: RewardConfig, value: float) -> Rewards:
    """Format penalties on every malformed LLM step, plus ``value`` on the last LLM step."""
    out = _format_only(trace.steps, cfg)
    last = _last_llm(trace.steps)
    if last is not None:
        out[last] += value  # type: ignore[operator]
    return out


def mao_arag_rewards(trace: Trace, cfg: RewardConfig) -> Rewards:
    """MAO-ARAG Eq. 3-6: every planner step gets
    ``R_planner = F1 - alpha*(Token_cost + Turn_cost + I(S)) - R_FP``, costs of the workflow
    that planner call put to work (:func:`mao_arag_workflow_cost`), ``R_FP = format_penalty``
    when the plan was invalid (Eq. 5). The paper trains the planner only (executors frozen),
    so every other LLM step gets 0.0."""
    f1 = final_f1(trace)
    out: Rewards = []
    for s in trace.steps:
        if not s.is_llm:
            out.append(None)
        elif s.role != "planner":
            out.append(0.0)
        else:
            workflow = _planner_workflow(trace, s)
            cost = mao_arag_workflow_cost(workflow, _node(trace, s), cfg)
            out.append(f1 - cfg.alpha * cost - (0.0 if s.valid else _penalty(cfg, 1.0)))
    return out


def mao_arag_workflow_cost(workflow: Sequence[str], node: Node | None, cfg: RewardConfig) -> float:
    """MAO-ARAG's R_CP (Eq. 4, App. A) of one planner's workflow: token + turn + retrieval.

    * Token cost: the sum of ``agent_costs`` of the workflow's codes (the retriever costs no
      tokens), divided by the cost of the costliest workflow, ``QR, DS, AG, AS`` in App. A
      (6.02e-4 with Table 3's costs), so it lies in [0, 1]. With other ``agent_costs`` the
      divisor is the larger of that sum and a lone QDS or QDP.
    * Turn cost: ``turn_cost`` (0.25) per round the workflow adds, at most 1. App. A's text
      says QDP adds one round (its sub-questions run in parallel) and QDS one per sub-question
      (they run in order; counted from ``node.children``). Its Table 4 has the two swapped
      (QDS 0.25; QDP 0.25 to 1.0); marag follows the text, whose reasoning Table 4 contradicts.
    * I(S): 1 when the workflow retrieves (``R``, or the paper's ``RA``).
    """
    costs = cfg.agent_costs
    token = sum(_agent_cost(c, costs) for c in workflow)
    scale = max(sum(_agent_cost(c, costs) for c in MAO_COSTLIEST),
                _agent_cost("QDS", costs), _agent_cost("QDP", costs))
    added = 0
    if "QDP" in workflow:
        added = 1
    elif "QDS" in workflow:
        added = len(node.children) if node is not None else 0
    turn = min(cfg.turn_cost * added, 1.0)
    retrieval = 1.0 if any(c in RETRIEVAL_CODES for c in workflow) else 0.0
    return (token / scale if scale > 0 else 0.0) + turn + retrieval


def mmoa_rewards(trace: Trace, cfg: RewardConfig) -> Rewards:
    """MMOA-RAG Eq. 3, 6, 9 (S4.2): every LLM step gets the shared F1 plus its role's penalty:
    QR (``mmoa.QR``) ``-qr_penalty`` for more than ``qr_max_subquestions`` sub-questions
    (counted from the raw ``<qN>`` tags, since the workflow truncates and the parser drops
    duplicates), DS ``-ds_penalty`` when its output is invalid (bad format, repeated or
    out-of-range ids), AG ``-ag_penalty`` when its answer has more than ``ag_max_words`` words
    (the paper says only "a certain length"; 30 words is marag's choice). MMOA-RAG has no
    other format penalty, so ``format_penalty`` is not used."""
    f1 = final_f1(trace)
    out: Rewards = []
    for s in trace.steps:
        if not s.is_llm:
            out.append(None)
            continue
        penalty = 0.0
        if s.role == "mmoa.QR" and _count_subquestions(s) > cfg.qr_max_subquestions:
            penalty = cfg.qr_penalty
        elif s.role == "DS" and not s.valid:
            penalty = cfg.ds_penalty
        elif s.role == "AG" and len(_text(s.parsed, s.raw).split()) > cfg.ag_max_words:
            penalty = cfg.ag_penalty
        out.append(f1 - penalty)
    return out


def mask_rewards(trace: Trace, cfg: RewardConfig) -> Rewards:
    """M-ASK S3.3 (Eq. 2-3, App. F Algorithm 1):

    * ``mask.plan``: F1(a0), a0 its predicted answer (Eq. 2);
    * ``mask.answer`` at turn t: F1(a_t) of its own answer (Eq. 2);
    * ``mask.search`` / ``mask.summary`` / ``mask.update`` of a turn t that searched:
      F1(a_t) - F1(a_{t-1}) (Eq. 3), with F1(a_0) the plan's;
    * a ``mask.search`` that ended the loop (``<end>``, or an output with neither tag): 0
      (S3.3; Algorithm 1 line 16).

    M-ASK has no format penalty, so unset (None) ``format_penalty`` is 0 here; a value > 0
    subtracts marag's own penalty from every malformed step (``valid is False``).

    a_t is the answer to the state after turn t. Training runs the answer role every turn
    (``method.answer_every_turn``); an inference trace answers once, after the last turn.
    A turn whose state was never answered gets an equal share of the change between the
    answers around it: with plan F1 s0 and one final answer F1 s after n searching turns, each
    of those turns gets (s - s0)/n, so the shares still add up to s - s0 as Eq. 3's
    differences do. Turns after the last answer (a trace that failed mid-turn) get 0. The
    per-turn F1s come from the answers the trace recorded, so a failed trace's recorded
    answers still count; its final F1 of 0 matters only under ``final_only``.

    ``final_only`` is the "w/o T-L Reward" ablation (S4.4.2): every LLM step gets the final
    F1 (the shared outcome reward), marag's format penalty (when > 0) kept.
    """
    f1 = final_f1(trace)
    steps = trace.steps
    if cfg.final_only:
        return [None if r is None else r + f1 for r in _format_only(steps, cfg, 0.0)]
    golds = trace.golden_answers
    plan = next((s for s in steps if s.role == "mask.plan"), None)
    s0 = f1_score(_plan_answer(plan), golds) if plan is not None else 0.0
    searched = sorted({s.turn for s in steps if s.role == "mask.search" and _is_query(s)})
    scored: dict[int, float] = {}  # searching turn -> F1 of the answer to the state after it
    for s in steps:
        if s.role == "mask.answer":
            evaluated = max((t for t in searched if t <= s.turn), default=0)
            if evaluated:
                scored[evaluated] = f1_score(_text(s.parsed, s.raw), golds)
    gains = _turn_gains(searched, scored, s0)
    out: Rewards = []
    for s in steps:
        if not s.is_llm:
            out.append(None)
            continue
        if s.role == "mask.plan":
            r = s0
        elif s.role == "mask.answer":
            r = f1_score(_text(s.parsed, s.raw), golds)
        elif s.role in ("mask.search", "mask.summary", "mask.update"):
            r = gains.get(s.turn, 0.0) if s.role != "mask.search" or _is_query(s) else 0.0
        else:
            r = 0.0
        out.append(r - (0.0 if s.valid else _penalty(cfg, 0.0)))
    return out


def search_r1_rewards(trace: Trace, cfg: RewardConfig) -> Rewards:
    """Search-R1's outcome reward: exact match (0 or 1) of the extracted answer on the last
    LLM step, 0 on every other call, no format term (the paper's reward; a trace that never
    wrote an ``<answer>`` or failed gets 0)."""
    if not trace.golden_answers:
        raise ValueError(f"trace {trace.id!r} has no golden answers: it cannot be rewarded")
    em = 0.0
    if trace.status != "failed" and trace.answer is not None and _answered(trace):
        em = float(exact_match(trace.answer, trace.golden_answers))
    out: Rewards = [None if not s.is_llm else 0.0 for s in trace.steps]
    last = _last_llm(trace.steps)
    if last is not None:
        out[last] = em
    return out


def _answered(trace: Trace) -> bool:
    """Whether the last LLM step wrote its answer in the method's format."""
    last = _last_llm(trace.steps)
    return last is not None and trace.steps[last].valid


PAPER_REWARDS: dict[str, Callable[[Trace, RewardConfig], Rewards]] = {
    "jade": jade_rewards,
    "mao-arag": mao_arag_rewards,
    "mmoa-rag": mmoa_rewards,
    "m-ask": mask_rewards,
    "search-r1": search_r1_rewards,
    "final": final_rewards,
}


# ----------------------------------------------------------------------------- helpers


def _format_only(steps: Sequence[Step], cfg: RewardConfig, paper: float = 1.0) -> Rewards:
    penalty = _penalty(cfg, paper)
    return [None if not s.is_llm else (0.0 if s.valid else -penalty) for s in steps]


def _penalty(cfg: RewardConfig, paper: float) -> float:
    """``cfg.format_penalty``, or ``paper`` (the method's paper's value) when it is unset."""
    return paper if cfg.format_penalty is None else cfg.format_penalty


def _last_llm(steps: Sequence[Step]) -> int | None:
    return next((i for i in range(len(steps) - 1, -1, -1) if steps[i].is_llm), None)


def _text(value: Any, raw: str) -> str:
    """A role's parsed answer as text (the raw completion when nothing was parsed)."""
    if isinstance(value, str):
        return value
    return raw if value is None else str(value)


def _node(trace: Trace, step: Step) -> Node | None:
    return trace.nodes[step.node_id] if 0 <= step.node_id < len(trace.nodes) else None


def _planner_workflow(trace: Trace, step: Step) -> list[str]:
    """The workflow a planner call put to work: its own plan when valid, else the fallback the
    engine ran (``Node.workflow``); also the fallback when a valid decomposition gave no
    sub-questions. A call whose node never recorded a workflow (the question failed first)
    is charged for its own plan when valid, nothing when not. A node's second planner call is
    MAO-ARAG's AS turn (its sub-questions were solved): AS ran, whatever the plan said."""
    if _is_as_turn(trace, step):
        return ["AS"]
    codes = [c for c in step.parsed if isinstance(c, str)] if isinstance(step.parsed, list) else []
    node = _node(trace, step)
    ran = list(node.workflow) if node is not None and node.workflow is not None else None
    if step.valid and codes:
        decomposed = any(c in ("QDS", "QDP") for c in codes)
        if decomposed and node is not None and not node.children and ran is not None:
            return ran
        return codes
    return ran or []


def _is_as_turn(trace: Trace, step: Step) -> bool:
    """Whether ``step`` (a planner call) came after another planner call on its node: the
    planner loop plans a node once, and asks again only at MAO-ARAG's AS turn."""
    for s in trace.steps:
        if s is step:
            return False
        if s.role == "planner" and s.node_id == step.node_id:
            return True
    return False


def _agent_cost(code: str, costs: dict[str, float]) -> float:
    if code in RETRIEVAL_CODES:
        return 0.0
    try:
        return costs[code]
    except KeyError:
        raise ValueError(f"train reward agent_costs has no cost for {code!r} "
                         f"(have: {sorted(costs)})") from None


def _count_subquestions(step: Step) -> int:
    tagged = sum(1 for _, e in numbered(scan(step.raw), "q") if e.body.strip())
    parsed = len(step.parsed) if isinstance(step.parsed, list) else 0
    return max(tagged, parsed)


def _plan_answer(step: Step) -> str:
    value = step.parsed
    answer = value.get("answer") if isinstance(value, dict) else None
    return answer if isinstance(answer, str) else ""


def _is_query(step: Step) -> bool:
    """Whether a ``mask.search`` step searched (the workflow's own test for going on)."""
    v = step.parsed if isinstance(step.parsed, dict) else {}
    query = v.get("query")
    return not v.get("end") and isinstance(query, str) and bool(query.strip())


def _turn_gains(searched: list[int], scored: dict[int, float], s0: float) -> dict[int, float]:
    """Eq. 3's F1(a_t) - F1(a_{t-1}) per searching turn; a run of unanswered turns ending in
    an answered one shares that answer's change equally; turns after the last answer get 0."""
    gains: dict[int, float] = {}
    prev, pending = s0, []
    for t in searched:
        pending.append(t)
        if t in scored:
            share = (scored[t] - prev) / len(pending)
            gains.update(dict.fromkeys(pending, share))
            prev, pending = scored[t], []
    gains.update(dict.fromkeys(pending, 0.0))
    return gains
