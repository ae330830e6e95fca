"""Each paper's own count of a trace's turns (``Cost.turns``), beside marag's ``cost.rounds``.

The four papers count differently, and their rewards and turn plots depend on the count:

* **JADE** (Eq. 6's T, Algorithm 1): a round selects one unsolved node, plans it (step k=0)
  and runs that plan. Every round therefore holds exactly one planner call, and T is the
  number of planner calls. Parallel siblings are planned one per round in Algorithm 1, so
  each counts (marag runs them concurrently in one ``Step.round``). The final AS synthesis
  (line 32) sits outside the loop and is no round, whether it answers a decomposed root or,
  with ``method.final_synthesis="always"``, an undecomposed one; nor is marag's budget
  answer. Case 1 (QDS into two sub-questions) has T = 3, Case 2 (``R, DS, AG``) T = 1.
* **MAO-ARAG** (App. E case studies): turn 0 plans the root; all parallel sub-questions share
  one turn, each serial sub-question takes a turn of its own, and the planner's AS that
  answers a decomposed node is a turn of its own ("Planner: AS", a planner call and the AS
  call in one round). That is exactly the set of marag's rounds, so the count is the number
  of distinct ``Step.round`` values among the steps: Cases 1 (``AG``) and 2 (``RA, AG``) have
  1 turn, Case 3 (QDP into four) 3, Case 4 (QDS into two) 4. The budget answer and a final
  synthesis under ``method.final_synthesis="always"`` share the last round and add no turn.
  (MAO-ARAG's Table 7 lists MMOA-RAG with 2 turns; marag counts a fixed pipeline as 1, see
  below.)
* **M-ASK** (App. G case study): the turns of the search loop that were begun, the one whose
  search agent wrote ``<end>`` included; the plan is "Init", not a turn. The Puebla case has
  three searches and an ``<end>``: 4 turns.
* **mmoa-rag, vanilla, llm-only**: one pass, 1 turn.

A trace with no steps (it failed before the first call) has 0 turns under every rule.
"""

from __future__ import annotations

from collections.abc import Callable

from marag.types import Trace

__all__ = ["PAPER_TURNS", "jade_turns", "mao_arag_turns", "mask_turns", "paper_turns",
           "round_turns", "single_turn"]


def jade_turns(trace: Trace) -> int:
    """JADE's T (Eq. 6): one round per planner call (Algorithm 1, lines 5-9)."""
    return sum(1 for s in trace.steps if s.role == "planner")


def mao_arag_turns(trace: Trace) -> int:
    """MAO-ARAG's turns as its case studies number them: the distinct rounds that ran a step."""
    return round_turns(trace)


def mask_turns(trace: Trace) -> int:
    """M-ASK's turns: search turns begun (``mask.search`` steps' distinct ``turn`` >= 1)."""
    return len({s.turn for s in trace.steps if s.role == "mask.search" and s.turn >= 1})


def single_turn(trace: Trace) -> int:
    """A fixed single-pass pipeline (mmoa-rag, vanilla, llm-only): 1, or 0 if nothing ran."""
    return 1 if trace.steps else 0


def round_turns(trace: Trace) -> int:
    """marag's rounds as the steps record them: the distinct ``Step.round`` values."""
    return len({s.round for s in trace.steps})


PAPER_TURNS: dict[str, Callable[[Trace], int]] = {
    "jade": jade_turns,
    "mao-arag": mao_arag_turns,
    "m-ask": mask_turns,
    "mmoa-rag": single_turn,
    "vanilla": single_turn,
    "llm-only": single_turn,
}


def paper_turns(trace: Trace) -> int:
    """The turn count of ``trace.method``'s paper. A method no paper defines (one a user
    wrapped with ``workflows.engine.method``) counts its distinct rounds."""
    return PAPER_TURNS.get(trace.method, round_turns)(trace)
