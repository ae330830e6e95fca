"""Scripted replays of the papers' case studies: each role's completion is what the paper
shows; retrieval is a real BM25 index over the HotpotQA passages."""

from __future__ import annotations

from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import run_method

ASTAIRE_Q = "Something's Gotta Give was first performed by an actor of what heritage?"
SUB1 = "Who is the actor that first performed Something's Gotta Give?"
SUB2 = "What is the heritage of this actor?"


def roles_of(trace):  # type: ignore[no-untyped-def]
    return [(s.role, s.node_id, s.round) for s in trace.steps]


async def test_jade_serial_decomposition_heritage(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": ["<workflow>QDS</workflow>", "<workflow>R, AG</workflow>",
                    "<workflow>R, DS, AG</workflow>"],
        "QDS": f"<q1>{SUB1}</q1><q2>{SUB2}</q2>",
        "QR": ["<query>Actor who first performed Something's Gotta Give</query>",
               "<query>Heritage of Fred Astaire, the American actor and dancer</query>"],
        "AG": ["<answer>Fred Astaire</answer>", "<answer>American</answer>"],
        "DS": "<id>Document0, Document1, Document2, Document4</id>",
        "AS": "<answer>American</answer>",
    })
    ctx = ctx_for(llm, hotpot_retriever)
    t = await run_method("jade", Question("c1", ASTAIRE_Q, ["American"]), ctx)
    assert t.status == "ok" and t.error is None
    assert t.answer == "American"
    assert roles_of(t) == [
        ("planner", 0, 1), ("QDS", 0, 1),
        ("QR", 1, 2), ("planner", 1, 2), ("R", 1, 2), ("AG", 1, 2),
        ("QR", 2, 3), ("planner", 2, 3), ("R", 2, 3), ("DS", 2, 3), ("AG", 2, 3),
        ("AS", 0, 4),
    ]
    root, n1, n2 = t.nodes
    assert root.workflow == ["QDS"] and root.children == [1, 2] and root.answer == "American"
    assert (n1.kind, n1.depth, n1.parent, n1.answer) == ("serial", 1, 0, "Fred Astaire")
    assert n1.question == "Actor who first performed Something's Gotta Give"
    assert SUB1 in t.steps[2].messages[-1]["content"]  # QR saw the sub-question...
    assert n1.question in t.steps[3].messages[-1]["content"]  # ...and the planner its rewrite
    # the second sub-question was made self-contained with the first one's answer
    assert n2.question == "Heritage of Fred Astaire, the American actor and dancer" and n2.answer == "American"
    assert n2.workflow == ["R", "DS", "AG"]
    qr = t.steps[6]
    assert "Fred Astaire" in qr.messages[-1]["content"] and SUB2 in qr.messages[-1]["content"]
    # DS kept documents 0, 1, 2, 4 of the five retrieved for the rewritten query
    r2, ds, ag2 = t.steps[8], t.steps[9], t.steps[10]
    assert r2.raw == "Heritage of Fred Astaire, the American actor and dancer" and len(r2.doc_ids) == 5
    assert ds.parsed == [0, 1, 2, 4] and ds.valid
    kept_titles = [r2.parsed["titles"][i] for i in (0, 1, 2, 4)]
    dropped = r2.parsed["titles"][3]
    ag_prompt = ag2.messages[-1]["content"]
    # "(title)" as the prompt shows it: a bare title can be part of another one's title
    assert all(f"({title})" in ag_prompt for title in kept_titles)
    assert f"({dropped})" not in ag_prompt
    assert all(s.valid for s in t.steps)
    assert t.cost.llm_calls == 10 and t.cost.retrieval_calls == 2 and t.cost.rounds == 4
    # JADE's T (Eq. 6): the root's round and one per sub-question; AS is the final synthesis
    assert t.cost.turns == 3
    assert t.cost.prompt_tokens == sum(s.prompt_tokens for s in t.steps)
    assert t.cost.completion_tokens == sum(s.completion_tokens for s in t.steps) > 0
    assert [c[0] for c in llm.calls] == [s.role for s in t.steps if s.role != "R"]


async def test_jade_single_hop_canada(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": "<workflow>R, DS, AG</workflow>",
        "DS": "<id>Document0, Document1, Document4</id>",
        "AG": "<answer>1982</answer>",
    })
    ctx = ctx_for(llm, hotpot_retriever)
    q = Question("c2", "when did canada become fully independent from britain?", ["1982"])
    t = await run_method("jade", q, ctx)
    assert t.status == "ok" and t.answer == "1982"
    assert [s.role for s in t.steps] == ["planner", "R", "DS", "AG"]
    assert t.steps[1].raw == q.question and 1 <= len(t.steps[1].doc_ids) <= 5
    assert t.steps[2].parsed == [0, 1, 4]
    assert len(t.nodes) == 1 and t.nodes[0].workflow == ["R", "DS", "AG"]
    assert t.cost.rounds == 1 and t.cost.llm_calls == 3 and t.cost.retrieval_calls == 1
    assert t.cost.turns == 1
    assert t.metrics["em"] == 1.0 and t.metrics["f1"] == 1.0


BDB = "Which performance act has a higher instrument to person ratio, Badly Drawn Boy or Wolf Alice?"
BDB_SUBS = [
    "How many members are in the performance act Badly Drawn Boy?",
    "How many instruments are typically used in a performance by Badly Drawn Boy?",
    "How many members are in the performance act Wolf Alice?",
    "How many instruments are typically used in a performance by Wolf Alice?",
]
BDB_ANSWERS = ["One member",
               "Typically four instruments are used in a performance by Badly Drawn Boy.",
               "Four", "Four instruments"]


def _bdb_planner(messages):  # type: ignore[no-untyped-def]
    text = messages[-1]["content"]
    if "Answered sub-questions" in text:  # Turn 2: "planner: AS"
        return "<workflow>AS</workflow>"
    if BDB in text:
        return "<workflow>QDP</workflow>"
    return "<workflow>R, AG</workflow>" if "Wolf Alice?" in text and "instruments" in text \
        else "<workflow>AG</workflow>"


def _bdb_answer(messages):  # type: ignore[no-untyped-def]
    text = messages[-1]["content"]
    for q, a in zip(BDB_SUBS, BDB_ANSWERS):
        if q in text:
            return f"<answer>{a}</answer>"
    raise AssertionError("AG asked an unexpected question")


async def test_mao_arag_parallel_decomposition_badly_drawn_boy(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": _bdb_planner,
        "QDP": "".join(f"<q{i}>{q}</q{i}>" for i, q in enumerate(BDB_SUBS, 1)),
        "AG": _bdb_answer,
        "AS": "<answer>Badly Drawn Boy</answer>",
    })
    ctx = ctx_for(llm, hotpot_retriever)
    t = await run_method("mao-arag", Question("c3", BDB, ["Badly Drawn Boy"]), ctx)
    assert t.status == "ok" and t.answer == "Badly Drawn Boy"
    assert t.method == "mao-arag"
    # each child's steps are contiguous, children in order; all children share round 2
    assert roles_of(t) == [
        ("planner", 0, 1), ("QDP", 0, 1),
        ("planner", 1, 2), ("AG", 1, 2),
        ("planner", 2, 2), ("AG", 2, 2),
        ("planner", 3, 2), ("AG", 3, 2),
        ("planner", 4, 2), ("R", 4, 2), ("AG", 4, 2),
        ("planner", 0, 3), ("AS", 0, 3),
    ]
    assert t.steps[-2].parsed == ["AS"] and t.steps[-2].valid
    assert [n.kind for n in t.nodes] == ["root"] + ["parallel"] * 4
    assert [n.answer for n in t.nodes[1:]] == BDB_ANSWERS
    assert [n.workflow for n in t.nodes[1:]] == [["AG"]] * 3 + [["R", "AG"]]
    as_prompt = t.steps[-1].messages[-1]["content"]
    assert all(q in as_prompt and a in as_prompt for q, a in zip(BDB_SUBS, BDB_ANSWERS))
    assert t.cost.rounds == 3 and t.cost.retrieval_calls == 1 and t.cost.llm_calls == 12
    # the case study's Turn 0 (QDP), Turn 1 (four parallel sub-questions), Turn 2 (AS)
    assert t.cost.turns == 3
    # sub-questions did not decompose again (max_depth 1): the planner was told so
    assert all(s.valid for s in t.steps)


PUEBLA = "What Mexican city had an Athletic Club whose football team played in the Primera Fuerza in 1943?"
P_Q2 = ("What is a significant event or fact about Puebla A.C.'s football team's "
        "participation in the Primera Fuerza in 1943?")
P_Q3 = ("What Mexican city, specifically Puebla, had an Athletic Club, Puebla A.C., whose "
        "football team played in the Primera Fuerza in 1943?")
P_E1 = ("Puebla, which has a city of Puebla, had an Athletic Club, Puebla A.C., whose football "
        "team played in the Primera Fuerza.")
P_E2 = ("Puebla A.C.'s football team played in the Primera Fuerza prior to the "
        "professionalization and development of the Primera División de México in 1943.")
P_E3 = ("Puebla, specifically Puebla, had an Athletic Club, Puebla A.C., whose football team "
        "played in the Primera Fuerza in 1943.")


async def test_m_ask_puebla(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "mask.plan": f"<q1>{PUEBLA}</q1><a1>Guadalajara</a1>"
                     "<predicted_answer>Guadalajara</predicted_answer>",
        "mask.search": [f"<search>{PUEBLA}</search>", f"<search>{P_Q2}</search>",
                        f"<search>{P_Q3}</search>", "<end>"],
        "mask.summary": [f"<evidence>{e}</evidence>" for e in (P_E1, P_E2, P_E3)],
        "mask.update": ["<Update>t1</Update>", "<Add>t2</Add>", "<Update>t1</Update>"],
        "mask.answer": "<predicted_answer>Puebla</predicted_answer>",
    })
    ctx = ctx_for(llm, hotpot_retriever, "method.max_turns=4", "method.answer_every_turn=true")
    t = await run_method("m-ask", Question("c4", PUEBLA, ["Puebla"]), ctx)
    assert t.status == "ok" and t.answer == "Puebla"
    turn = ["mask.search", "R", "mask.summary", "mask.update", "mask.answer"]
    assert [(s.role, s.turn) for s in t.steps] == (
        [("mask.plan", 0)] + [(r, 1) for r in turn] + [(r, 2) for r in turn]
        + [(r, 3) for r in turn] + [("mask.search", 4)]
    )
    assert t.steps[0].parsed["answer"] == "Guadalajara"
    updates = [s.parsed for s in t.steps if s.role == "mask.update"]
    assert updates == [{"op": "update", "index": 1}, {"op": "add", "index": 2},
                       {"op": "update", "index": 1}]
    # the final knowledge state: t1 refined twice in place, t2 appended once (K3)
    _, k1, k2 = t.nodes
    assert [c.kind for c in (k1, k2)] == ["knowledge", "knowledge"]
    assert (k1.question, k1.answer) == (P_Q3, P_E3)
    assert (k2.question, k2.answer) == (P_Q2, P_E2)
    # the search agent sees its own history and the current state
    last_search = t.steps[-1].messages[-1]["content"]
    assert P_Q2 in last_search and P_E3 in last_search
    # turn 2's update saw the state after turn 1 (Guadalajara overwritten)
    upd2 = [s for s in t.steps if s.role == "mask.update"][1]
    assert "Guadalajara" not in upd2.messages[-1]["content"]
    assert P_E1 in upd2.messages[-1]["content"]
    assert all(s.valid for s in t.steps)
    assert t.cost.retrieval_calls == 3 and t.cost.rounds == 5
    # Table 6: five passages per search, each about 100 words in the summary's prompt
    assert [len(s.doc_ids) for s in t.steps if s.role == "R"] == [5, 5, 5]
    summ = next(s for s in t.steps if s.role == "mask.summary").messages[-1]["content"]
    titles = next(s for s in t.steps if s.role == "R").parsed["titles"]
    doc_lines = [ln for ln in summ.splitlines() if ln.startswith("Document")]
    assert len(doc_lines) == 5
    for i, (line, title) in enumerate(zip(doc_lines, titles)):
        head = f"Document{i}: ({title}) "
        assert line.startswith(head) and len(line[len(head):].replace(" ...", "").split()) <= 100
    assert t.cost.turns == 4  # Table 6: Turns 1-3 search, Turn 4 writes <end>


async def test_m_ask_answers_once_at_inference(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "mask.plan": f"<q1>{PUEBLA}</q1><a1>unknown</a1><predicted_answer>unknown"
                     "</predicted_answer>",
        "mask.search": [f"<search>{PUEBLA}</search>", "<end>"],
        "mask.summary": f"<evidence>{P_E1}</evidence>",
        "mask.update": "<Update>t1</Update>",
        "mask.answer": "<predicted_answer>Puebla</predicted_answer>",
    })
    t = await run_method("m-ask", Question("c5", PUEBLA), ctx_for(llm, hotpot_retriever))
    assert t.answer == "Puebla" and t.metrics == {}
    assert [s.role for s in t.steps].count("mask.answer") == 1
    assert t.steps[-1].role == "mask.answer" and t.steps[-1].turn == 2
    assert P_E1 in t.steps[-1].messages[-1]["content"]
    assert t.cost.turns == 2


# MAO-ARAG's App. E cases, replayed with its paper prompt profile: the planner writes bare
# codes as the case studies show them ("RA, AG"), AG answers in bold.
PAPER = "method.prompts=paper"


async def test_mao_arag_case1_answer_generation_alone(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"planner": "AG", "AG": "**non ferrous metal**"})
    q = Question("m1", "Is aluminium a ferrous or non ferrous metal?", ["non-ferrous"])
    t = await run_method("mao-arag", q, ctx_for(llm, hotpot_retriever, PAPER))
    assert t.status == "ok" and t.answer == "non ferrous metal"
    assert roles_of(t) == [("planner", 0, 1), ("AG", 0, 1)]  # Turn 0: Planner AG, Executor AG
    assert t.steps[0].parsed == ["AG"] and all(s.valid for s in t.steps)
    assert t.cost.turns == 1 and t.cost.retrieval_calls == 0


async def test_mao_arag_case2_retrieval_then_answer(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"planner": "RA, AG", "AG": "**Bhupendranath Dutt**"})
    q = Question("m2", "Who was the editor of the journal jugantor published in the time of "
                       "swadeshi movement?", ["Bhupendranath Dutt"])
    t = await run_method("mao-arag", q, ctx_for(llm, hotpot_retriever, PAPER))
    assert t.status == "ok" and t.answer == "Bhupendranath Dutt"
    # Turn 0: "Planner: RA, AG"; RA is read as marag's R
    assert roles_of(t) == [("planner", 0, 1), ("R", 0, 1), ("AG", 0, 1)]
    assert t.steps[0].parsed == ["R", "AG"] and t.steps[0].valid
    assert t.nodes[0].workflow == ["R", "AG"] and t.steps[1].raw == q.question
    assert t.cost.turns == 1 and t.cost.retrieval_calls == 1


HEFF = "Ralph Hefferline was a psychology professor at a university that is located in what city?"
HEFF_SUB1 = "At which university was Ralph Hefferline a psychology professor?"
HEFF_SUB2 = "In what city is this university located?"
HEFF_SUB2_REWRITTEN = "In what city is Columbia University located?"


def _heff_planner(messages):  # type: ignore[no-untyped-def]
    text = "\n".join(m["content"] for m in messages)
    if "Answered sub-questions" in text:
        return "AS"  # Turn 3
    if HEFF in text:
        return "QDS"  # Turn 0
    return "RA, AG" if HEFF_SUB1 in text else "AG"  # Turns 1 and 2


async def test_mao_arag_case4_serial_decomposition_hefferline(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "planner": _heff_planner,
        "QDS": f"{HEFF_SUB1}\n{HEFF_SUB2}",  # Table 8: one sub-question per line
        "QR": HEFF_SUB2_REWRITTEN,  # Table 10: plain text
        "AG": ["**Columbia University**", "**New York City**"],
        "AS": "New York City",
    })
    t = await run_method("mao-arag", Question("m4", HEFF, ["New York City"]),
                         ctx_for(llm, hotpot_retriever, PAPER))
    assert t.status == "ok" and t.answer == "New York City"
    assert roles_of(t) == [
        ("planner", 0, 1), ("QDS", 0, 1),  # Turn 0
        ("planner", 1, 2), ("R", 1, 2), ("AG", 1, 2),  # Turn 1: RA, AG
        ("QR", 2, 3), ("planner", 2, 3), ("AG", 2, 3),  # Turn 2: rewritten, then AG
        ("planner", 0, 4), ("AS", 0, 4),  # Turn 3: Planner AS
    ]
    assert all(s.valid for s in t.steps)
    _, n1, n2 = t.nodes
    assert (n1.kind, n1.question, n1.answer) == ("serial", HEFF_SUB1, "Columbia University")
    assert (n2.question, n2.answer) == (HEFF_SUB2_REWRITTEN, "New York City")
    qr = t.steps[5].messages[-1]["content"]  # the rewrite saw the original question and Turn 1
    assert HEFF in qr and HEFF_SUB1 in qr and "Columbia University" in qr and HEFF_SUB2 in qr
    as_prompt = t.steps[-1].messages[-1]["content"]
    assert "Columbia University" in as_prompt and "New York City" in as_prompt
    assert t.cost.turns == 4 and t.cost.rounds == 4 and t.cost.retrieval_calls == 1
