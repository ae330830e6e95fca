"""Every role's prompt once on the embedded SmolLM2-135M (greedy), all in one batch.

A 135M model is weak, so only the easy no-document answer is required to be well formed;
the test prints how many roles produced a valid output (run with ``-s`` to see it).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from marag.roles import ROLES, get_role
from marag.types import Passage

pytestmark = pytest.mark.slow


def _hotpot_case(qa_data):
    with open(qa_data / "hotpotqa.questions.jsonl", encoding="utf-8") as f:
        q = json.loads(f.readline())
    wanted = set(q["context_passage_ids"][:4])
    docs = []
    with open(qa_data / "hotpotqa.corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["id"] in wanted:
                docs.append(Passage(d["id"], d["title"], d["text"]))
            if len(docs) == len(wanted):
                break
    return q["question"], docs


def _calls(question, docs):
    state = [["Who portrayed Corliss Archer in Kiss and Tell?", "unknown"]]
    note = "Corliss Archer in the film Kiss and Tell was played by Shirley Temple."
    pairs = [("Who portrayed Corliss Archer in Kiss and Tell?", "Shirley Temple"),
             ("What government position did Shirley Temple hold?", "Chief of Protocol")]
    return [
        ("planner", {"question": question}, {}),
        ("adaptive.classify", {"question": question}, {}),
        ("QR", {"question": "What position did this actress hold?", "context": pairs[:1]},
         {"question": "What position did this actress hold?"}),
        ("QDS", {"question": question}, {}),
        ("QDP", {"question": "Are Lyon and Munich in the same country?"}, {}),
        ("DS", {"question": question, "docs": docs}, {"n_docs": len(docs)}),
        ("AG", {"question": "What is the capital of Italy?"}, {}),
        ("AS", {"question": question, "pairs": pairs}, {}),
        ("mmoa.QR", {"question": question}, {}),
        ("mask.plan", {"question": question}, {}),
        ("mask.search", {"question": question, "state": state, "history": []}, {}),
        ("mask.summary", {"question": question, "query": "Corliss Archer Kiss and Tell actress",
                          "docs": docs[:2]}, {}),
        ("mask.update", {"question": question, "state": state,
                         "query": "Corliss Archer Kiss and Tell actress",
                         "evidence": "Shirley Temple played Corliss Archer in Kiss and Tell."},
         {"n_pairs": 1}),
        ("mask.answer", {"question": question, "state": [list(p) for p in pairs]}, {}),
        ("search-r1", {"question": question,
                       "transcript": "<think>Find the actress first.</think>\n<search> Corliss "
                                     "Archer Kiss and Tell </search>\n\n<information>Doc 1(Title: "
                                     "Kiss and Tell) Shirley Temple played Corliss Archer."
                                     "</information>\n\n"}, {}),
        ("search-o1", {"question": question,
                       "transcript": "I need the actress first.\n<|begin_search_query|>Corliss "
                                     "Archer Kiss and Tell<|end_search_query|>\n\n"
                                     "<|begin_search_result|>Shirley Temple played Corliss Archer."
                                     "<|end_search_result|>\n\n"}, {}),
        ("search-o1.rid", {"prev_reasoning": "Step 1: I need the actress first.",
                           "query": "Corliss Archer Kiss and Tell", "docs": docs[:2]}, {}),
        ("ircot", {"question": question, "docs": docs,
                   "thoughts": ["Corliss Archer in Kiss and Tell was played by Shirley Temple."]},
         {}),
        ("deepnote.init", {"question": question, "docs": docs[:2]}, {}),
        ("deepnote.query", {"question": question, "note": note, "history": []},
         {"history": []}),
        ("deepnote.update", {"question": question, "note": note, "docs": docs[2:]}, {}),
        ("deepnote.compare", {"question": question, "best": note,
                              "new": note + " Shirley Temple was later Chief of Protocol."}, {}),
        ("deepnote.answer", {"question": question,
                             "note": note + " Shirley Temple was later Chief of Protocol."}, {}),
        # a Self-RAG checkpoint's prompt on a model that is not one: the parser must cope
        ("self-rag", {"question": question, "passage": docs[0]}, {"kind": "evidence"}),
    ]


def test_every_role_on_smollm2(qa_data):
    import torch

    from marag.config import LLMConfig
    from marag.llm.base import SamplingParams
    from marag.llm.factory import make_llm

    threads = torch.get_num_threads()  # n_threads below is process-wide; restored at the end
    question, docs = _hotpot_case(qa_data)
    calls = _calls(question, docs)
    assert {name for name, _, _ in calls} == set(ROLES)
    # One torch thread: on a shared, busy CPU more threads only spin against each other.
    llm = make_llm(LLMConfig(max_batch_size=len(calls), batch_wait_ms=500.0, n_threads=1))

    async def run_all():
        async def one(name, inputs):
            role = get_role(name)
            # Capped so the padded batch stays short; only mask.plan's budget is larger.
            params = SamplingParams(max_tokens=min(role.max_tokens, 64), stop=role.stop)
            return (await llm.generate([role.build(**inputs)], params))[0]

        try:
            return await asyncio.gather(*(one(name, inputs) for name, inputs, _ in calls))
        finally:
            await llm.aclose()

    try:
        completions = asyncio.run(run_all())
    finally:
        torch.set_num_threads(threads)
    results = {}
    for (name, _, ctx), completion in zip(calls, completions):
        parsed = get_role(name).parse(completion.text, **ctx)
        results[name] = parsed
        print(f"{name:13} valid={parsed.valid!s:5} {parsed.reason:35} {completion.text!r:.100}")
    print(f"valid: {sum(p.valid for p in results.values())} of {len(results)} roles")
    assert results["AG"].valid and "rome" in results["AG"].value.lower()
