"""Each paper's reward, hand-computed on hand-built traces and on traces the workflows record."""

from __future__ import annotations

import pytest

from marag.config import RewardConfig, load_config
from marag.llm.scripted import ScriptedLLM
from marag.metrics import score
from marag.retrieval.base import Retriever
from marag.train.rewards import (
    final_f1,
    final_rewards,
    jade_rewards,
    mao_arag_rewards,
    mao_arag_workflow_cost,
    mask_rewards,
    mmoa_rewards,
    step_rewards,
)
from marag.types import Hits, Node, Passage, Question, Step, Trace
from marag.workflows import Context, run_method

MSG = [{"role": "user", "content": "q"}]
# Table 3 of MAO-ARAG, in units of 1e-4 dollars; QR, DS, AG, AS together cost 6.02
COSTLIEST = 0.88 + 2.08 + 1.58 + 1.48


def llm(role: str, rnd: int = 1, *, node: int = 0, turn: int = 0, valid: bool = True,
        parsed: object = None, raw: str = "") -> Step:
    return Step(role=role, node_id=node, round=rnd, turn=turn, messages=MSG, valid=valid,
                parsed=parsed, raw=raw)


def ret(rnd: int = 1, node: int = 0, turn: int = 0) -> Step:
    return Step(role="R", node_id=node, round=rnd, turn=turn, raw="query", doc_ids=["d0"])


def scored(method: str, steps: list[Step], f1: float, nodes: list[Node] | None = None,
           status: str = "ok") -> Trace:
    return Trace(id="t", question="q", method=method, golden_answers=["gold"], steps=steps,
                 nodes=nodes or [], status=status, metrics={"f1": f1})


def approx(values):  # type: ignore[no-untyped-def]
    return [None if v is None else pytest.approx(v, abs=1e-12) for v in values]


# ----------------------------------------------------------------------------- F1 and dispatch


def test_final_f1_needs_golden_answers_and_a_score():
    with pytest.raises(ValueError, match="no golden answers"):
        final_f1(Trace(id="a", question="q", method="jade", metrics={"f1": 1.0}))
    with pytest.raises(ValueError, match="not scored"):
        final_f1(Trace(id="b", question="q", method="jade", golden_answers=["x"]))
    # a failed trace scores 0 even when it was scored
    assert final_f1(scored("jade", [], 0.8, status="failed")) == 0.0
    assert final_f1(scored("jade", [], 0.8)) == 0.8


def test_step_rewards_dispatch():
    steps = [llm("planner", valid=False), ret(), llm("AG")]
    cfg = RewardConfig()
    assert step_rewards(scored("jade", steps, 0.5), cfg) == jade_rewards(
        scored("jade", steps, 0.5), cfg)
    for method in ("vanilla", "llm-only"):
        assert step_rewards(scored(method, steps, 0.5), cfg) == approx([-1.0, None, 0.5])
    # an explicit kind overrides the method
    assert step_rewards(scored("jade", steps, 0.5), RewardConfig(kind="final")) == approx(
        [-1.0, None, 0.5])
    with pytest.raises(ValueError, match="does not know method 'custom'"):
        step_rewards(scored("custom", steps, 0.5), cfg)
    assert step_rewards(scored("custom", steps, 0.5), RewardConfig(kind="final"))[2] == 0.5


def test_final_rewards_penalise_format_and_pay_the_last_llm_step():
    steps = [llm("AG", valid=False), ret(), llm("AG"), ret()]
    cfg = RewardConfig(format_penalty=0.5)
    assert final_rewards(scored("vanilla", steps, 0.25), cfg) == approx([-0.5, None, 0.25, None])
    # the terminal step may itself be malformed: penalty and F1 add
    steps = [ret(), llm("AG", valid=False)]
    assert final_rewards(scored("vanilla", steps, 0.25), cfg) == approx([None, -0.25])


# ----------------------------------------------------------------------------- JADE


def jade_serial_trace(f1: float) -> Trace:
    """QDS into two; sub-question 1 has a malformed plan, sub-question 2 a malformed DS."""
    return scored("jade", [
        llm("planner", 1), llm("QDS", 1),
        llm("QR", 2, node=1), llm("planner", 2, node=1, valid=False), ret(2, 1), llm("AG", 2, node=1),
        llm("QR", 3, node=2), llm("planner", 3, node=2), ret(3, 2), llm("DS", 3, node=2, valid=False),
        llm("AG", 3, node=2),
        llm("AS", 4),
    ], f1)


def test_jade_format_penalties_and_terminal_global_reward():
    cfg = RewardConfig(alpha=0.1, beta=0.2)
    # T = 3 planner rounds, N_ret = 2: R_global = 0.5 - 0.1*min(3/3,1) - 0.2*min(2/3,1)
    r_global = 0.5 - 0.1 * 1.0 - 0.2 * (2 / 3)
    assert r_global == pytest.approx(0.266666666667)
    assert jade_rewards(jade_serial_trace(0.5), cfg) == approx([
        0.0, 0.0,
        0.0, -1.0, None, 0.0,
        0.0, 0.0, None, -1.0, 0.0,
        r_global,
    ])


def test_jade_costs_are_normalised_and_capped():
    # 5 planner rounds and 4 retrievals: both normalised costs cap at 1
    steps = [s for _ in range(4) for s in (llm("planner"), ret())] + [llm("planner"), llm("AG")]
    cfg = RewardConfig(alpha=0.3, beta=0.1)
    assert jade_rewards(scored("jade", steps, 1.0), cfg)[-1] == pytest.approx(1 - 0.3 - 0.1)
    # with a limit of 6 the same trace costs 5/6 and 4/6
    cfg = RewardConfig(alpha=0.3, beta=0.1, rounds_max=6, retrievals_max=6)
    assert jade_rewards(scored("jade", steps, 1.0), cfg)[-1] == pytest.approx(
        1 - 0.3 * 5 / 6 - 0.1 * 4 / 6)


def test_jade_defaults_pay_plain_f1():
    # alpha = beta = 0 by default: the terminal step gets F1, a malformed one loses 1 too
    steps = [llm("planner"), ret(), llm("AG", valid=False)]
    assert jade_rewards(scored("jade", steps, 0.75), RewardConfig()) == approx(
        [0.0, None, -0.25])


# ----------------------------------------------------------------------------- MAO-ARAG


def test_mao_arag_workflow_cost_arithmetic():
    cfg = RewardConfig()
    node2 = Node(id=0, question="q", children=[1, 2])
    node4 = Node(id=0, question="q", children=[1, 2, 3, 4])
    node5 = Node(id=0, question="q", children=[1, 2, 3, 4, 5])
    cases = [
        (["AG"], None, 1.58 / COSTLIEST),
        (["R", "AG"], None, 1.58 / COSTLIEST + 1),
        (["RA", "AG"], None, 1.58 / COSTLIEST + 1),  # the paper's name for retrieval
        (["QR", "R", "DS", "AG"], None, (0.88 + 2.08 + 1.58) / COSTLIEST + 1),
        (["QR", "DS", "AG", "AS"], None, 1.0),  # App. A's costliest workflow scales to 1
        (["AS"], None, 1.48 / COSTLIEST),
        # App. A's text: QDP adds one round whatever the number of sub-questions...
        (["QDP"], node4, 1.00 / COSTLIEST + 0.25),
        # ...QDS one per sub-question, at most 1
        (["QDS"], node2, 0.91 / COSTLIEST + 0.5),
        (["QDS"], node4, 0.91 / COSTLIEST + 1.0),
        (["QDS"], node5, 0.91 / COSTLIEST + 1.0),
        ([], None, 0.0),
    ]
    for workflow, node, expected in cases:
        assert mao_arag_workflow_cost(workflow, node, cfg) == pytest.approx(expected), workflow
    assert 1.58 / COSTLIEST == pytest.approx(0.262458471761)


def test_mao_arag_cost_config():
    # turn_cost is per added round; agent costs are read from config
    cfg = RewardConfig(turn_cost=0.5, agent_costs={"QDS": 1, "QDP": 1, "QR": 1, "DS": 1,
                                                   "AG": 2, "AS": 1})
    assert mao_arag_workflow_cost(["R", "AG"], None, cfg) == pytest.approx(2 / 5 + 1)
    node = Node(id=0, question="q", children=[1, 2, 3])
    assert mao_arag_workflow_cost(["QDS"], node, cfg) == pytest.approx(1 / 5 + 1.0)
    # a lone decomposition costlier than QR+DS+AG+AS becomes the scale
    cfg = RewardConfig(agent_costs={"QDS": 10, "QDP": 1, "QR": 1, "DS": 1, "AG": 1, "AS": 1})
    assert mao_arag_workflow_cost(["AG"], None, cfg) == pytest.approx(0.1 + 0)
    with pytest.raises(ValueError, match="no cost for 'AS'"):
        mao_arag_workflow_cost(["AS"], None, RewardConfig(agent_costs={"AG": 1.0}))


def test_mao_arag_rewards_planner_steps_with_their_own_workflows():
    # root QDP into 3; child 1 plans AG; child 2 writes an invalid plan and the fallback
    # R, AG runs; child 3 plans R, AG; the engine's AS answers the root
    nodes = [Node(id=0, question="q", workflow=["QDP"], children=[1, 2, 3]),
             Node(id=1, question="a", parent=0, kind="parallel", workflow=["AG"]),
             Node(id=2, question="b", parent=0, kind="parallel", workflow=["R", "AG"]),
             Node(id=3, question="c", parent=0, kind="parallel", workflow=["R", "AG"])]
    steps = [
        llm("planner", 1, parsed=["QDP"]), llm("QDP", 1),
        llm("planner", 2, node=1, parsed=["AG"]), llm("AG", 2, node=1),
        llm("planner", 2, node=2, parsed=["R", "R", "AG"], valid=False), ret(2, 2),
        llm("AG", 2, node=2),
        llm("planner", 2, node=3, parsed=["R", "AG"]), ret(2, 3), llm("AG", 2, node=3),
        llm("AS", 3),
    ]
    cfg = RewardConfig(alpha=0.5)
    f1 = 0.8
    qdp = 1.00 / COSTLIEST + 0.25
    ag = 1.58 / COSTLIEST
    rag = 1.58 / COSTLIEST + 1
    assert mao_arag_rewards(scored("mao-arag", steps, f1, nodes), cfg) == approx([
        f1 - 0.5 * qdp, 0.0,
        f1 - 0.5 * ag, 0.0,
        f1 - 0.5 * rag - 1.0, None, 0.0,  # charged for the fallback that ran, plus R_FP
        f1 - 0.5 * rag, None, 0.0,
        0.0,
    ])
    assert f1 - 0.5 * qdp == pytest.approx(0.8 - 0.5 * 0.416112956811)


def test_mao_arag_decomposition_without_subquestions_is_charged_its_fallback():
    nodes = [Node(id=0, question="q", workflow=["R", "AG"])]
    steps = [llm("planner", parsed=["QDS"]), llm("QDS", valid=False), ret(), llm("AG")]
    r = mao_arag_rewards(scored("mao-arag", steps, 1.0, nodes), RewardConfig(alpha=1.0))
    assert r[0] == pytest.approx(1.0 - (1.58 / COSTLIEST + 1))
    # a plan the engine never got to run (the question failed) is charged for itself
    nodes = [Node(id=0, question="q")]
    steps = [llm("planner", parsed=["QR", "R", "AG"])]
    r = mao_arag_rewards(scored("mao-arag", steps, 0.0, nodes, status="failed"),
                         RewardConfig(alpha=1.0))
    assert r[0] == pytest.approx(0.0 - ((0.88 + 1.58) / COSTLIEST + 1))


def test_mao_arag_planner_as_turn():
    # MAO-ARAG's Case 3 has "Planner: AS" as a turn of its own: it costs AS's tokens only
    nodes = [Node(id=0, question="q", workflow=["QDP"], children=[1]),
             Node(id=1, question="a", parent=0, kind="parallel", workflow=["AG"])]
    steps = [llm("planner", 1, parsed=["QDP"]), llm("QDP", 1),
             llm("planner", 2, node=1, parsed=["AG"]), llm("AG", 2, node=1),
             llm("planner", 3, parsed=["AS"]), llm("AS", 3)]
    r = mao_arag_rewards(scored("mao-arag", steps, 1.0, nodes), RewardConfig(alpha=1.0))
    assert r[4] == pytest.approx(1.0 - 1.48 / COSTLIEST)


# ----------------------------------------------------------------------------- MMOA-RAG


def test_mmoa_role_penalties():
    cfg = RewardConfig()
    five = "".join(f"<q{i}>query {i}</q{i}>" for i in range(1, 6))
    long_answer = " ".join(["word"] * 31)
    steps = [llm("mmoa.QR", raw=five, parsed=[f"query {i}" for i in range(1, 6)], valid=False),
             ret(), ret(), ret(), ret(),
             llm("DS", valid=False, parsed=[0, 1]),
             llm("AG", parsed=long_answer)]
    assert mmoa_rewards(scored("mmoa-rag", steps, 0.6), cfg) == approx(
        [0.6 - 0.5, None, None, None, None, 0.6 - 1.0, 0.6 - 0.5])
    # four queries, a valid selection and a 30-word answer: no penalty
    four = "".join(f"<q{i}>query {i}</q{i}>" for i in range(1, 5))
    steps = [llm("mmoa.QR", raw=four, parsed=[f"query {i}" for i in range(1, 5)]), ret(),
             llm("DS", parsed=[0]), llm("AG", parsed=" ".join(["word"] * 30))]
    assert mmoa_rewards(scored("mmoa-rag", steps, 0.6), cfg) == approx([0.6, None, 0.6, 0.6])
    # the count is of tags written: five tags with a duplicate are still five
    dup = four + "<q5>query 1</q5>"
    step = llm("mmoa.QR", raw=dup, parsed=[f"query {i}" for i in range(1, 5)], valid=False)
    assert mmoa_rewards(scored("mmoa-rag", [step], 1.0), cfg) == approx([0.5])
    # coefficients come from config
    cfg = RewardConfig(qr_max_subquestions=2, qr_penalty=0.25, ag_max_words=3, ag_penalty=1.0,
                       ds_penalty=0.5)
    steps = [llm("mmoa.QR", raw="<q1>a</q1><q2>b</q2><q3>c</q3>", parsed=["a", "b", "c"]),
             llm("DS", valid=False), llm("AG", parsed="one two three four")]
    assert mmoa_rewards(scored("mmoa-rag", steps, 1.0), cfg) == approx([0.75, 0.5, 0.0])


# ----------------------------------------------------------------------------- M-ASK


def mask_trace(answers: list[str], *, final: str | None = None, invalid: frozenset[int] = frozenset(),
               plan_answer: str = "wrong") -> Trace:
    """A plan, one searching turn per entry of ``answers`` (an answer every turn), then
    ``<end>``; with ``final`` the answers are dropped and one final answer follows the
    ``<end>`` instead (an inference trace). ``invalid`` names step indices marked malformed."""
    steps = [llm("mask.plan", 1, turn=0, parsed={"pairs": [], "answer": plan_answer})]
    for t, a in enumerate(answers, 1):
        steps += [llm("mask.search", t + 1, turn=t, parsed={"query": f"query {t}"}),
                  ret(t + 1, turn=t),
                  llm("mask.summary", t + 1, turn=t, parsed="evidence"),
                  llm("mask.update", t + 1, turn=t, parsed={"op": "add", "index": t})]
        if final is None:
            steps.append(llm("mask.answer", t + 1, turn=t, parsed=a))
    end = len(answers) + 1
    steps.append(llm("mask.search", end + 1, turn=end, parsed={"end": True}))
    if final is not None:
        steps.append(llm("mask.answer", end + 1, turn=end, parsed=final))
    for i in invalid:
        steps[i].valid = False
    last = final if final is not None else (answers[-1] if answers else plan_answer)
    t = Trace(id="m", question="q", method="m-ask", golden_answers=["red apple"], steps=steps,
              answer=last)
    t.metrics = dict(score(last, t.golden_answers))
    return t


def test_mask_delta_f1_chain():
    # F1 against "red apple" goes 0 -> 0.5 -> 0.5 -> 1: the plan's "wrong" shares no token;
    # "red banana" and "apple pear" have precision 1/2 and recall 1/2; "red apple" is exact
    t = mask_trace(["red banana", "apple pear", "red apple"])
    r = mask_rewards(t, RewardConfig())
    roles = [s.role for s in t.steps]
    assert roles == ["mask.plan"] + ["mask.search", "R", "mask.summary", "mask.update",
                                     "mask.answer"] * 3 + ["mask.search"]
    assert r == approx([
        0.0,                              # plan: F1(a0) = F1("wrong") = 0
        0.5, None, 0.5, 0.5, 0.5,         # turn 1: 0.5 - 0; answer 0.5
        0.0, None, 0.0, 0.0, 0.5,         # turn 2: 0.5 - 0.5; answer 0.5
        0.5, None, 0.5, 0.5, 1.0,         # turn 3: 1 - 0.5; answer 1
        0.0,                              # <end>
    ])


def test_mask_format_penalties_on_top():
    # the turn-2 summary (index 8) and the <end> search (index 16) are malformed
    t = mask_trace(["red banana", "apple pear", "red apple"], invalid=frozenset({8, 16}))
    r = mask_rewards(t, RewardConfig(format_penalty=0.5))
    assert r[8] == pytest.approx(0.0 - 0.5) and r[16] == pytest.approx(-0.5)
    assert r[11] == pytest.approx(0.5)


def test_mask_plan_answer_is_a0():
    # a plan already right: the first turn that keeps it right gains nothing
    t = mask_trace(["red apple"], plan_answer="red apple")
    assert mask_rewards(t, RewardConfig()) == approx([1.0, 0.0, None, 0.0, 0.0, 1.0, 0.0])
    # and one that breaks it loses
    t = mask_trace(["red banana"], plan_answer="red apple")
    assert mask_rewards(t, RewardConfig()) == approx([1.0, -0.5, None, -0.5, -0.5, 0.5, 0.0])


def test_mask_final_only_ablation():
    t = mask_trace(["red banana", "apple pear", "red apple"], invalid=frozenset({8}))
    r = mask_rewards(t, RewardConfig(final_only=True, format_penalty=1.0))
    expected = [None if s.role == "R" else 1.0 for s in t.steps]
    expected[8] = 0.0  # F1 1 minus marag's format penalty, set explicitly
    assert r == approx(expected)
    # unset, the penalty is M-ASK's: none
    r = mask_rewards(t, RewardConfig(final_only=True))
    assert r == approx([None if s.role == "R" else 1.0 for s in t.steps])


def test_unset_format_penalty_is_the_papers_value():
    # M-ASK's reward has no format penalty (S3.3); JADE's r_format (Eq. 7) and MAO-ARAG's
    # R_FP (Eq. 5) are 1, and marag's outcome-only kind keeps 1
    assert RewardConfig().format_penalty is None
    t = mask_trace(["red banana", "apple pear", "red apple"], invalid=frozenset({8, 16}))
    assert mask_rewards(t, RewardConfig()) == approx(
        mask_rewards(t, RewardConfig(format_penalty=0.0)))
    assert mask_rewards(t, RewardConfig())[8] == pytest.approx(0.0)
    steps = [llm("planner", valid=False), ret(), llm("AG")]
    assert jade_rewards(scored("jade", steps, 0.5), RewardConfig())[0] == pytest.approx(-1.0)
    assert step_rewards(scored("vanilla", steps, 0.5), RewardConfig(kind="final"))[0] == (
        pytest.approx(-1.0))


def test_mask_inference_trace_shares_the_gain_across_unanswered_turns():
    # answered once after <end>: F1 0 (plan) -> 1 (final) over 3 searching turns
    t = mask_trace(["", "", ""], final="red apple")
    r = mask_rewards(t, RewardConfig())
    third = 1 / 3
    assert r == approx([
        0.0,
        third, None, third, third,
        third, None, third, third,
        third, None, third, third,
        0.0, 1.0,
    ])
    assert sum(x for x, s in zip(r, t.steps) if s.role == "mask.update") == pytest.approx(1.0)


def test_mask_unanswered_turns_after_the_last_answer_gain_nothing():
    # a failed trace: two answered turns, a third turn that stopped after its update
    t = mask_trace(["red banana", "red apple", "x"])
    del t.steps[-2:]  # drop turn 3's answer and the <end>
    t.status, t.error = "failed", "LLMError: boom"
    r = mask_rewards(t, RewardConfig())
    assert r[11:] == approx([0.0, None, 0.0, 0.0])
    assert r[6:10] == approx([0.5, None, 0.5, 0.5])


# ----------------------------------------------------------------------------- real workflows


class FixedRetriever(Retriever):
    name = "fixed"

    def search_batch(self, queries: list[str], k: int) -> list[Hits]:
        docs = [Passage(f"d{i}", f"T{i}", f"text {i}") for i in range(k)]
        return [Hits(q, docs, [1.0] * k) for q in queries]


def ctx(llm_: ScriptedLLM, *overrides: str) -> Context:
    cfg = load_config(None, ["llms.default.backend=scripted", *overrides])
    return Context(llms={"default": llm_}, config=cfg, retriever=FixedRetriever())


async def test_jade_rewards_on_a_recorded_trace():
    script = ScriptedLLM({"planner": ["<workflow>QDS</workflow>", "<workflow>R, AG</workflow>",
                                      "<workflow>R, R, AG</workflow>"],
                          "QDS": "<q1>first?</q1><q2>second?</q2>",
                          "QR": "<query>second, rewritten</query>",
                          "AG": ["<answer>Fred</answer>", "<answer>red</answer>"],
                          "AS": "<answer>red apple pie</answer>"})
    t = await run_method("jade", Question("j", "q?", ["red apple"]), ctx(script))
    assert t.status == "ok" and t.metrics["f1"] == pytest.approx(0.8)
    assert [(s.role, s.valid) for s in t.steps] == [
        ("planner", True), ("QDS", True), ("QR", True), ("planner", True), ("R", True),
        ("AG", True), ("QR", True), ("planner", False), ("R", True), ("AG", True), ("AS", True)]
    cfg = RewardConfig(alpha=0.3, beta=0.3)
    # T = 3 planner calls, 2 retrievals: 0.8 - 0.3*1 - 0.3*2/3 = 0.3
    assert t.cost.turns == 3
    assert step_rewards(t, cfg) == approx(
        [0.0, 0.0, 0.0, 0.0, None, 0.0, 0.0, -1.0, None, 0.0, 0.3])


@pytest.mark.parametrize("as_turn,valid", [("<workflow>AS</workflow>", True),
                                            ("<workflow>R, AG</workflow>", False)])
async def test_mao_arag_rewards_on_a_recorded_trace(as_turn, valid):
    script = ScriptedLLM({"planner": ["<workflow>QDP</workflow>", "<workflow>AG</workflow>",
                                      "<workflow>bogus</workflow>", as_turn],
                          "QDP": "<q1>a?</q1><q2>b?</q2>",
                          "AG": "<answer>red apple</answer>", "AS": "<answer>red apple</answer>"})
    t = await run_method("mao-arag", Question("m", "q?", ["red apple"]), ctx(script))
    assert t.status == "ok" and t.metrics["f1"] == 1.0
    assert [s.role for s in t.steps] == ["planner", "QDP", "planner", "AG", "planner", "R",
                                         "AG", "planner", "AS"]
    assert t.nodes[2].workflow == ["R", "AG"]  # the fallback after "bogus"
    assert t.steps[7].valid is valid  # the AS turn: anything but AS is malformed, AS runs
    r = step_rewards(t, RewardConfig(alpha=0.1))
    assert r == approx([
        1 - 0.1 * (1.00 / COSTLIEST + 0.25), 0.0,
        1 - 0.1 * (1.58 / COSTLIEST), 0.0,
        1 - 0.1 * (1.58 / COSTLIEST + 1) - 1.0, None, 0.0,
        1 - 0.1 * (1.48 / COSTLIEST) - (0.0 if valid else 1.0), 0.0,
    ])


async def test_mmoa_rewards_on_a_recorded_trace():
    five = "".join(f"<q{i}>query {i}</q{i}>" for i in range(1, 6))
    script = ScriptedLLM({"mmoa.QR": five, "DS": "<id>0, 0</id>",
                          "AG": "<answer>" + " ".join(["apple"] * 31) + "</answer>"})
    t = await run_method("mmoa-rag", Question("o", "q?", ["red apple"]), ctx(script))
    assert t.status == "ok"
    f1 = t.metrics["f1"]
    assert f1 == pytest.approx(2 * (1 / 31) * (1 / 2) / (1 / 31 + 1 / 2))
    # the workflow kept four of the five queries; the reward still sees five
    assert [s.role for s in t.steps] == ["mmoa.QR", "R", "R", "R", "R", "DS", "AG"]
    assert step_rewards(t, RewardConfig()) == approx(
        [f1 - 0.5, None, None, None, None, f1 - 1.0, f1 - 0.5])


def _mask_script(answers):
    """A 3-turn M-ASK team: plan, two searches (update t1, add t2), then <end>."""
    return {
        "mask.plan": "<q1>which fruit?</q1><a1>unknown</a1><predicted_answer>pear"
                     "</predicted_answer>",
        "mask.search": ["<search>fruit colour</search>", "<search>fruit name</search>",
                        "<end>"],
        "mask.summary": ["<evidence>it is red</evidence>", "<evidence>an apple</evidence>"],
        "mask.update": ["<Update>t1</Update>", "<Add>t2</Add>"],
        "mask.answer": answers,
    }


async def test_mask_rewards_on_a_recorded_training_trace():
    script = ScriptedLLM(_mask_script(["<predicted_answer>red banana</predicted_answer>",
                                       "<predicted_answer>red apple</predicted_answer>"]))
    t = await run_method("m-ask", Question("k", "q?", ["red apple"]),
                         ctx(script, "method.answer_every_turn=true"))
    assert t.status == "ok" and t.answer == "red apple" and t.cost.turns == 3
    assert step_rewards(t, RewardConfig()) == approx([
        0.0,
        0.5, None, 0.5, 0.5, 0.5,
        0.5, None, 0.5, 0.5, 1.0,
        0.0,
    ])
    assert step_rewards(t, RewardConfig(final_only=True)) == approx(
        [None if s.role == "R" else 1.0 for s in t.steps])


async def test_mask_rewards_on_a_recorded_inference_trace():
    script = ScriptedLLM(_mask_script("<predicted_answer>red apple</predicted_answer>"))
    t = await run_method("m-ask", Question("k", "q?", ["red apple"]), ctx(script))
    assert [s.role for s in t.steps][-2:] == ["mask.search", "mask.answer"]
    assert step_rewards(t, RewardConfig()) == approx([
        0.0,
        0.5, None, 0.5, 0.5,
        0.5, None, 0.5, 0.5,
        0.0, 1.0,
    ])


def test_search_r1_reward_is_exact_match_on_the_last_call():
    from marag.train.rewards import search_r1_rewards

    def trace(answer, valid=True, status="ok"):
        steps = [Step(role="search-r1", messages=[{"role": "user", "content": "q"}],
                      raw="<search>x</search>", parsed={"action": "search", "content": "x"}),
                 Step(role="R", raw="x"),
                 Step(role="search-r1", messages=[{"role": "user", "content": "q"}],
                      raw=f"<answer>{answer}</answer>", valid=valid,
                      parsed={"action": "answer", "content": answer})]
        return Trace(id="q", question="q", method="search-r1", steps=steps, answer=answer,
                     golden_answers=["William Shakespeare"], status=status)

    cfg = RewardConfig()
    assert search_r1_rewards(trace("william shakespeare"), cfg) == [0.0, None, 1.0]
    assert search_r1_rewards(trace("Shakespeare"), cfg) == [0.0, None, 0.0]  # EM, not F1
    assert search_r1_rewards(trace("William Shakespeare", valid=False), cfg)[-1] == 0.0
    assert search_r1_rewards(trace("William Shakespeare", status="failed"), cfg)[-1] == 0.0
    assert step_rewards(trace("William Shakespeare"), cfg)[-1] == 1.0  # kind auto
