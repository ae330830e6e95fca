"""Run listeners: each Step and Node change is reported while the question runs."""

from __future__ import annotations

import asyncio

from marag.llm.scripted import ScriptedLLM, decomposing
from marag.types import Node, Question, Step
from marag.workflows import METHODS


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def on_step(self, step: Step) -> None:
        self.events.append(("step", step.to_dict()))

    def on_node(self, node: Node) -> None:
        self.events.append(("node", node.to_dict()))


class Broken:
    def on_step(self, step: Step) -> None:
        raise RuntimeError("watcher bug")

    def on_node(self, node: Node) -> None:
        raise RuntimeError("watcher bug")


def _team() -> ScriptedLLM:
    return decomposing(["Who is A?", "Where is he?"], ["Bob", "Rome"], "Rome",
                       rewrites={"Where is he?": "Where is Bob?"})


def test_steps_and_node_changes_arrive_in_order(ctx_for, hotpot_retriever):
    rec = Recorder()
    ctx = ctx_for(_team(), hotpot_retriever)
    trace = asyncio.run(METHODS["jade"](Question("q", "Where is A?"), ctx.listening(rec, Broken())))
    assert trace.status == "ok" and trace.answer == "Rome"  # a broken watcher changes nothing
    steps = [d for k, d in rec.events if k == "step"]
    assert [s["role"] for s in steps] == [s.role for s in trace.steps]
    nodes = [d for k, d in rec.events if k == "node"]
    # every state a node passed through, each reported once, the final state last
    for n in trace.nodes:
        mine = [d for d in nodes if d["id"] == n.id]
        assert mine[-1] == n.to_dict()
        assert len({repr(d) for d in mine}) == len(mine)
    assert nodes[0] == {**nodes[0], "id": 0, "answer": None, "workflow": None}
    # node 1's answer and node 2's rewritten question were reported before node 2's planner ran
    idx = {id(e): i for i, e in enumerate(rec.events)}
    ans1 = next(e for e in rec.events if e[0] == "node" and e[1]["id"] == 1 and e[1]["answer"])
    q2 = next(e for e in rec.events if e[0] == "node" and e[1]["question"] == "Where is Bob?")
    plan2 = next(e for e in rec.events if e[0] == "step" and e[1]["node_id"] == 2
                 and e[1]["role"] == "planner")
    assert idx[id(ans1)] < idx[id(q2)] < idx[id(plan2)]
    # the shared context was not changed
    assert ctx.listeners == ()


def test_parallel_branches_report_to_the_same_listeners(ctx_for, hotpot_retriever):
    llm = ScriptedLLM({"planner": lambda m: "<workflow>QDP</workflow>" if "QDS" in m[0]["content"]
                       else "<workflow>R, AG</workflow>",
                       "QDP": "<q1>one?</q1><q2>two?</q2>", "AG": "<answer>x</answer>",
                       "AS": "<answer>y</answer>"})
    rec = Recorder()
    ctx = ctx_for(llm, hotpot_retriever).listening(rec)
    trace = asyncio.run(METHODS["jade"](Question("q", "both?"), ctx))
    steps = [d for k, d in rec.events if k == "step"]
    assert sorted(map(repr, steps)) == sorted(repr(s.to_dict()) for s in trace.steps)
    assert len(steps) == len(trace.steps) == 9  # planner, QDP, 2x(planner, R, AG), AS
