"""How often the planner's output is a valid plan on the embedded model (prompt engineering aid).

Runs the planner role greedily on the first N questions of the shared HotpotQA and NQ sets
(all prompts in flight at once, so the hf backend batches them) and prints the number of valid
plans and the most common outputs. ``--example`` swaps the worked example's plan to compare
prompt variants, e.g. ``--example "R, DS, AG"``.

    .venv/bin/python benchmarks/planner_validity.py [--n 20] [--example "R, DS, AG"]
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from pathlib import Path

from marag.config import LLMConfig
from marag.llm.base import SamplingParams
from marag.llm.factory import make_llm
from marag.roles import get_role
from marag.types import iter_jsonl

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def questions(n: int) -> list[str]:
    out = []
    for name in ("hotpotqa", "nq_open"):
        for i, (_, d) in enumerate(iter_jsonl(DATA / f"{name}.questions.jsonl")):
            if i >= n:
                break
            out.append(d["question"])
    return out


async def main(args: argparse.Namespace) -> None:
    role = get_role("planner")
    llm = make_llm(LLMConfig(model=args.model))
    params = SamplingParams(max_tokens=role.max_tokens, stop=role.stop)
    qs = questions(args.n)
    batch = []
    for q in qs:
        messages = role.build(question=q)
        if args.example:
            messages[2] = {"role": "assistant", "content": f"<workflow>{args.example}</workflow>"}
        batch.append(messages)
    outs = await asyncio.gather(*(llm.generate([m], params) for m in batch))
    parsed = [role.parse(o[0].text) for o in outs]
    plans = Counter(",".join(p.value) + ("" if p.valid else " (invalid)") for p in parsed)
    print(f"valid plans: {sum(p.valid for p in parsed)}/{len(parsed)}")
    for plan, count in plans.most_common(8):
        print(f"  {count:3d}  {plan}")
    await llm.aclose()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20, help="questions per dataset")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--example", default=None, help="plan shown in the worked example")
    asyncio.run(main(ap.parse_args()))
