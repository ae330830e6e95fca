"""What each agent sees, against the papers: JADE's intra-round context (Algorithm 1 lines 13
and 19) and serial QR input (Eq. 3), its final synthesis option (line 32), M-ASK's search
history (App. C.2), MAO-ARAG's AS turn when the planner writes something else, and MMOA-RAG's
restricted selector decoding by backend."""

from __future__ import annotations

from marag.config import load_config
from marag.llm.scripted import ScriptedLLM
from marag.types import Question
from marag.workflows import Context, run_method

Q = "Which river flows through the capital of the country where the Eiffel Tower stands?"
REWRITE = "Seine river Paris capital France"


async def test_qr_rewrite_reaches_ds_and_ag(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"planner": "<workflow>QR, R, DS, AG</workflow>",
                       "QR": f"<query>{REWRITE}</query>",
                       "DS": "<id>0</id>", "AG": "<answer>Seine</answer>"})
    t = await run_method("jade", Question("x", Q), ctx_for(llm, hotpot_retriever))
    assert [s.role for s in t.steps] == ["planner", "QR", "R", "DS", "AG"]
    r, ds, ag = t.steps[2], t.steps[3], t.steps[4]
    assert r.raw == REWRITE
    for step in (ds, ag):
        prompt = step.messages[-1]["content"]
        assert Q in prompt and f"Rewritten as: {REWRITE}" in prompt


async def test_qr_ds_ag_without_retrieval_shows_the_rewrite(hotpot_retriever, ctx_for):
    # A plan QR, AG: the rewrite is not lost (before, AG saw only the node's question).
    llm = ScriptedLLM({"planner": "<workflow>QR, AG</workflow>",
                       "QR": f"<query>{REWRITE}</query>", "AG": "<answer>Seine</answer>"})
    t = await run_method("jade", Question("x", Q), ctx_for(llm, hotpot_retriever))
    assert [s.role for s in t.steps] == ["planner", "QR", "AG"]
    assert f"Rewritten as: {REWRITE}" in t.steps[-1].messages[-1]["content"]


async def test_invalid_rewrite_adds_no_context(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"planner": "<workflow>QR, R, AG</workflow>", "QR": "<query></query>",
                       "AG": "<answer>Seine</answer>"})
    t = await run_method("jade", Question("x", Q), ctx_for(llm, hotpot_retriever))
    assert t.steps[2].raw == Q and "Rewritten as" not in t.steps[-1].messages[-1]["content"]


SERIAL = {
    "planner": ["<workflow>QDS</workflow>", "<workflow>AG</workflow>", "<workflow>AG</workflow>"],
    "QDS": "<q1>In which country is the Eiffel Tower?</q1><q2>What river flows through its "
           "capital?</q2>",
    "QR": ["<query>Eiffel Tower country</query>", "<query>river through Paris</query>"],
    "AG": ["<answer>France</answer>", "<answer>Seine</answer>"],
    "AS": "<answer>Seine</answer>",
}


async def test_serial_qr_sees_original_question_sub_question_and_solved_pairs(
        hotpot_retriever, ctx_for):
    t = await run_method("jade", Question("s", Q), ctx_for(ScriptedLLM(SERIAL), hotpot_retriever))
    qrs = [s for s in t.steps if s.role == "QR"]
    assert len(qrs) == 2
    second = qrs[1].messages[-1]["content"]
    assert f"Original question: {Q}" in second
    assert "What river flows through its capital?" in second
    assert "Eiffel Tower country -> France" in second  # the solved pair (rewritten form)


async def test_final_synthesis_default_and_always(hotpot_retriever, ctx_for):
    script = {"planner": "<workflow>R, AG</workflow>", "AG": "<answer>Seine</answer>",
              "AS": "<answer>the Seine</answer>"}
    q = Question("f", Q)
    plain = await run_method("jade", q, ctx_for(ScriptedLLM(script), hotpot_retriever))
    assert [s.role for s in plain.steps] == ["planner", "R", "AG"] and plain.answer == "Seine"
    always = await run_method("jade", q, ctx_for(ScriptedLLM(script), hotpot_retriever,
                                                  "method.final_synthesis=always"))
    assert [(s.role, s.round) for s in always.steps] == [
        ("planner", 1), ("R", 1), ("AG", 1), ("AS", 1)]
    assert always.answer == "the Seine"
    assert f"{Q} -> Seine" in always.steps[-1].messages[-1]["content"]
    # the synthesis is outside Algorithm 1's loop: no round, no turn
    assert always.cost.rounds == 1 and always.cost.turns == 1
    # a decomposed root is answered by AS already: no second AS
    dec = await run_method("jade", q, ctx_for(ScriptedLLM(SERIAL), hotpot_retriever,
                                               "method.final_synthesis=always"))
    assert [s.role for s in dec.steps].count("AS") == 1 and dec.steps[-1].role == "AS"


async def test_mao_arag_as_turn_other_plan_is_invalid_and_as_runs(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({"planner": ["<workflow>QDP</workflow>", "<workflow>AG</workflow>",
                                   "<workflow>AG</workflow>", "<workflow>R, AG</workflow>"],
                       "QDP": "<q1>a?</q1><q2>b?</q2>", "AG": "<answer>x</answer>",
                       "AS": "<answer>y</answer>"})
    t = await run_method("mao-arag", Question("m", Q), ctx_for(llm, hotpot_retriever))
    assert t.status == "ok" and t.answer == "y"
    turn = t.steps[-2]
    assert (turn.role, turn.node_id, turn.valid) == ("planner", 0, False)
    assert "only plan is AS" in turn.reason and t.steps[-1].role == "AS"
    assert any("AS turn" in n for n in t.notes)
    # the JADE planner is never asked at that point
    j = await run_method("jade", Question("j", Q), ctx_for(ScriptedLLM({
        "planner": ["<workflow>QDP</workflow>", "<workflow>AG</workflow>",
                    "<workflow>AG</workflow>"],
        "QDP": "<q1>a?</q1><q2>b?</q2>", "AG": "<answer>x</answer>",
        "AS": "<answer>y</answer>"}), hotpot_retriever))
    assert [s.role for s in j.steps].count("planner") == 3 and j.steps[-1].role == "AS"


PUEBLA = "What Mexican city had an Athletic Club whose football team played in the Primera Fuerza?"


async def test_mask_search_prompt_carries_each_query_with_its_summary(hotpot_retriever, ctx_for):
    llm = ScriptedLLM({
        "mask.plan": "<q1>Which city?</q1><a1>unknown</a1><predicted_answer>unknown"
                     "</predicted_answer>",
        "mask.search": ["<search>Athletic Club Primera Fuerza city</search>",
                        "<search>Puebla A.C. football</search>", "<end>"],
        "mask.summary": ["<evidence>Puebla A.C. played in the Primera Fuerza.</evidence>",
                         "<evidence>No useful information</evidence>"],
        "mask.update": ["<Update>t1</Update>", "<Add>t2</Add>"],
        "mask.answer": "<predicted_answer>Puebla</predicted_answer>",
    })
    t = await run_method("m-ask", Question("p", PUEBLA), ctx_for(llm, hotpot_retriever))
    searches = [s for s in t.steps if s.role == "mask.search"]
    assert len(searches) == 3
    third = searches[2].messages[-1]["content"]
    assert ("1. query: Athletic Club Primera Fuerza city\n"
            "1. found: Puebla A.C. played in the Primera Fuerza.") in third
    assert "2. query: Puebla A.C. football\n2. found: No useful information" in third
    assert "1. query" not in searches[0].messages[-1]["content"]


async def test_mask_paper_summary_sees_query_and_docs_and_keeps_no_info(hotpot_retriever,
                                                                        ctx_for):
    llm = ScriptedLLM({
        "mask.plan": "<q1>Which city?</q1><a1>unknown</a1><predicted_answer>unknown"
                     "</predicted_answer>",
        "mask.search": ["<search>Puebla A.C. football</search>", "<end>"],
        "mask.summary": "<evidence>No useful information</evidence>",
        "mask.update": "<Add>t2</Add>",
        "mask.answer": "<predicted_answer>Puebla</predicted_answer>",
    })
    t = await run_method("m-ask", Question("p", PUEBLA),
                         ctx_for(llm, hotpot_retriever, "method.prompts=paper"))
    summ = next(s for s in t.steps if s.role == "mask.summary")
    shown = "\n".join(m["content"] for m in summ.messages)
    assert "Query: Puebla A.C. football" in shown and PUEBLA not in shown
    assert summ.parsed == "No useful information" and summ.valid
    assert t.nodes[-1].answer == "No useful information"  # kept in the knowledge state
    upd = next(s for s in t.steps if s.role == "mask.update")
    assert "Evidence: No useful information" in upd.messages[-1]["content"]


def _mmoa_ctx(llm, retriever, backend: str,  # type: ignore[no-untyped-def]
              *overrides: str) -> Context:
    # The config names the backend kind; the object answering is scripted either way.
    cfg = load_config(None, [f"llms.default.backend={backend}", "method.name=mmoa-rag",
                             *overrides])
    return Context(llms={"default": llm}, config=cfg, retriever=retriever)


MMOA = {"mmoa.QR": "<q1>Eiffel Tower country</q1><q2>river Paris</q2>",
        "DS": "Document0,Document3", "AG": "<answer>Seine</answer>"}


async def test_mmoa_selector_restricted_by_default_on_hf_only(hotpot_retriever):
    hf = await run_method("mmoa-rag", Question("h", Q),
                          _mmoa_ctx(ScriptedLLM(MMOA), hotpot_retriever, "hf"))
    ds = next(s for s in hf.steps if s.role == "DS")
    assert ds.sampling["allowed_text"][:2] == ["<id>", "</id>"] and ds.valid
    assert ds.parsed == [0, 3] and not hf.notes

    api = await run_method("mmoa-rag", Question("o", Q),
                           _mmoa_ctx(ScriptedLLM(MMOA), hotpot_retriever, "openai"))
    ds = next(s for s in api.steps if s.role == "DS")
    assert "allowed_text" not in ds.sampling
    assert any("openai backend cannot restrict" in n for n in api.notes)

    forced = await run_method("mmoa-rag", Question("f", Q), _mmoa_ctx(
        ScriptedLLM(MMOA), hotpot_retriever, "openai", "method.constrained_selector=true"))
    assert "allowed_text" not in next(s for s in forced.steps if s.role == "DS").sampling
    assert any("constrained_selector is on" in n for n in forced.notes)

    off = await run_method("mmoa-rag", Question("n", Q), _mmoa_ctx(
        ScriptedLLM(MMOA), hotpot_retriever, "hf", "method.constrained_selector=false"))
    assert "allowed_text" not in next(s for s in off.steps if s.role == "DS").sampling


async def test_mmoa_paper_selector_decodes_eq5_vocabulary(hotpot_retriever):
    t = await run_method("mmoa-rag", Question("p", Q), _mmoa_ctx(
        ScriptedLLM(MMOA), hotpot_retriever, "hf", "method.prompts=paper"))
    ds = next(s for s in t.steps if s.role == "DS")
    # the candidates shown (the small fixture corpus may give fewer than K = 10)
    n = ds.messages[2]["content"].count("\nDocument")
    assert n >= 4 and f"Document{n - 1}:" in ds.messages[2]["content"]
    assert ds.sampling["allowed_text"] == ["Document", ",", *map(str, range(n))]
    assert "Document0,Document4,Document6" in ds.messages[-1]["content"]
    assert ds.parsed == [0, 3] and ds.valid
