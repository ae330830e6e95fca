"""``marag ask`` end to end with no configuration: the embedded SmolLM2 model through the hf
backend and the built-in wiki-demo BM25 index. Slow (loads a real model)."""

from __future__ import annotations

import json

import pytest

from marag.cli import main
from marag.types import Trace


@pytest.mark.slow
def test_marag_ask_runs_offline_on_the_embedded_defaults(capsys):
    rc = main(["ask", "What is the capital of France?", "--method", "vanilla", "--k", "3",
               "--answer", "Paris", "--json"])
    out = capsys.readouterr().out
    trace = Trace.from_dict(json.loads(out))
    assert rc == 0 and trace.status == "ok", trace.error
    assert [s.role for s in trace.steps] == ["R", "AG"]
    r, ag = trace.steps
    assert len(r.doc_ids) == 3 and all(i.startswith("wiki-demo") for i in r.doc_ids)
    assert ag.backend == "default" and ag.completion_tokens > 0 and ag.raw
    # the documents R found are the ones AG was shown
    assert all(t in ag.messages[-1]["content"] for t in r.parsed["titles"])
    assert isinstance(trace.answer, str) and set(trace.metrics) >= {"em", "f1", "acc"}
