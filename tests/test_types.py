import gzip
import json

import pytest

from marag.types import (
    Completion,
    Cost,
    Hits,
    Node,
    Passage,
    Question,
    Step,
    Trace,
    append_jsonl,
    iter_jsonl,
    read_jsonl,
    write_jsonl,
)


def _trace() -> Trace:
    return Trace(
        id="q1",
        question="Who directed Something's Gotta Give?",
        method="jade",
        golden_answers=["Nancy Meyers"],
        nodes=[Node(id=0, question="root?", answer="x", children=[1]),
               Node(id=1, question="sub?", answer="y", parent=0, kind="serial", depth=1, solved=True)],
        steps=[
            Step(role="planner", messages=[{"role": "user", "content": "plan"}], raw="<workflow>R, AG</workflow>",
                 parsed=["R", "AG"], prompt_tokens=12, completion_tokens=7, token_ids=[1, 2], logprobs=[-0.5, -0.25]),
            Step(role="R", raw="query", doc_ids=["d1", "d2"], latency=0.01),
            Step(role="AG", parsed="Nancy Meyers", valid=False, reason="no <answer> tag", reward=-1.0),
        ],
        answer="Nancy Meyers",
        notes=["budget: max_rounds"],
        metrics={"f1": 1.0},
        cost=Cost(llm_calls=2, prompt_tokens=12, completion_tokens=7, retrieval_calls=1, rounds=1, seconds=0.5),
    )


def test_trace_round_trips_through_jsonl(tmp_path):
    t = _trace()
    path = tmp_path / "traces.jsonl"
    assert write_jsonl(path, [t, t]) == 2
    back = read_jsonl(path, Trace)
    assert back == [t, t]
    assert back[0].steps[0].logprobs == [-0.5, -0.25]
    assert back[0].cost.retrieval_calls == 1


@pytest.mark.parametrize("record", [
    Question(id="1", question="q", golden_answers=["a", "b"], dataset="nq", metadata={"type": "bridge"}),
    Passage(id="p", title="Paris", text="Capital of France."),
    Hits(query="q", passages=[Passage("p", "T", "x")], scores=[1.5]),
    Completion(text="hi", prompt_tokens=3, completion_tokens=1, token_ids=[5], logprobs=[-0.1]),
])
def test_records_round_trip(tmp_path, record):
    path = tmp_path / "r.jsonl.gz"
    write_jsonl(path, [record])
    with gzip.open(path, "rt") as f:
        assert json.loads(f.readline()) == record.to_dict()
    assert read_jsonl(path, type(record)) == [record]


def test_passage_contents_is_search_r1_form():
    assert Passage("1", "Paris", "Capital.").contents == '"Paris"\nCapital.'
    assert Hits("q", [Passage("a", "A", "x"), Passage("b", "B", "y")], [2.0, 1.0]).ids == ["a", "b"]


def test_append_jsonl_appends(tmp_path):
    path = tmp_path / "a.jsonl"
    append_jsonl(path, _trace())
    append_jsonl(path, _trace())
    assert len(read_jsonl(path, Trace)) == 2


def test_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "1", "question": "q"}\n\n{"id": 2, oops}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:3: invalid JSON"):
        list(iter_jsonl(path))
    path.write_text('{"id": "1", "question": "q", "colour": 1}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not a valid Question.*colour"):
        read_jsonl(path, Question)
    path.write_text('[1, 2]\n')
    with pytest.raises(ValueError, match="expected a JSON object"):
        list(iter_jsonl(path))


def test_trace_from_question_copies_the_question_fields():
    q = Question("q7", "Who?", ["A", "B"], "nq_open", {"type": "x"})
    t = Trace.from_question(q, "vanilla", status="failed", error="boom")
    assert (t.id, t.question, t.golden_answers, t.dataset, t.method) == (
        "q7", "Who?", ["A", "B"], "nq_open", "vanilla")
    assert (t.status, t.error, t.answer, t.steps) == ("failed", "boom", None, [])
    t.golden_answers.append("C")
    assert q.golden_answers == ["A", "B"]  # a copy, not the question's own list
