"""Supervised warm start: example selection, MMOA-RAG's selector labels, and training."""

from __future__ import annotations

import pytest

from marag.cli import main
from marag.config import SFTConfig
from marag.llm.hf_local import HFBackend
from marag.llm.tiny import build_tiny_model
from marag.train import sft
from marag.types import Passage, Step, Trace


def _trace(f1, valid=True, status="ok"):
    steps = [Step(role="planner", messages=[{"role": "user", "content": "q"}],
                  raw="<workflow>R, AG</workflow>", valid=valid),
             Step(role="R", raw="q"),
             Step(role="AG", messages=[{"role": "user", "content": "q"}],
                  raw="<answer>Paris</answer>")]
    return Trace(id="t", question="q", method="jade", steps=steps, status=status,
                 metrics={"f1": f1})


def test_rejection_sampling_keeps_valid_steps_of_good_traces():
    got = sft.examples_from_traces([_trace(1.0), _trace(0.4), _trace(1.0, valid=False),
                                    _trace(1.0, status="failed")], [], min_f1=0.5)
    assert [e.role for e in got] == ["planner", "AG", "AG"]  # invalid plan dropped
    assert got[0].target == "<workflow>R, AG</workflow>"
    only_ag = sft.examples_from_traces([_trace(1.0)], ["AG"], min_f1=0.5)
    assert [e.role for e in only_ag] == ["AG"]


def test_selector_labels_from_word_overlap():
    docs = [Passage("a", "France", "Paris is the capital of France."),
            Passage("b", "Pizza", "Pizza is a dish from Italy."),
            Passage("c", "Lyon", "Lyon is a city in France.")]
    # an answer word (paris) in doc 0; half the question's content words (france) in doc 2
    assert sft.useful_documents("What is the capital of France?", ["Paris"], docs, 0.5) == [0, 2]
    assert sft.useful_documents("What is the capital of France?", ["Paris"], docs, 1.0) == [0]


def test_sft_lowers_the_loss_and_writes_an_adapter(tmp_path):
    model, tok = build_tiny_model(seed=0)
    backend = HFBackend("tiny", model=model, tokenizer=tok)
    ex = [sft.Example("AG", [{"role": "user", "content": "What is the capital of France?"}],
                      "<answer>Paris</answer>")] * 4
    cfg = SFTConfig(epochs=8, batch_size=4, micro_batch_size=2, lr=1e-2,
                    lora={"r": 4, "target_modules": ["q_proj", "v_proj"]})
    rows = sft.train_sft(backend, ex, cfg, tmp_path)
    assert len(rows) == 8 and rows[-1]["loss"] < 0.5 * rows[0]["loss"]
    assert (tmp_path / "policy" / "adapter_config.json").is_file()
    assert backend.weights_version == 1  # rollouts now sample from the tuned weights
    with pytest.raises(ValueError, match="no SFT examples"):
        sft.train_sft(backend, [], cfg, tmp_path / "empty")


def test_sft_refuses_a_misspelt_role(capsys):
    code = main(["sft", "--traces", "x.jsonl", "--out", "o", "--set", "roles.planer=default"])
    assert code == 2 and "planner" in capsys.readouterr().err
