"""The table of one ``benchmarks/flashrag_side_by_side.sh OUT`` run: FlashRAG's standard RAG
and marag's ``vanilla`` per dataset (EM/F1/acc, AG format-valid, prompt tokens, wall).

    python benchmarks/side_by_side_table.py runs/sbs-dev [nq_open hotpotqa]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(out: Path, dataset: str) -> list[str]:
    peer = json.loads((out / f"flashrag-{dataset}" / "rag" / "result.json").read_text())
    fm, ft = peer["flashrag_metrics"], peer["timing"]
    mine = json.loads((out / f"marag-{dataset}" / "metrics.json").read_text())
    wall = json.loads((out / f"marag-{dataset}.wall.json").read_text())["marag_wall_s"]
    ag = mine.get("roles", {}).get("AG", {})
    valid = f"{100 * ag['rate']:.0f}" if "rate" in ag else "-"
    return [
        (f"| {dataset} | FlashRAG 0.1.2 standard RAG | {peer['n']} | {100 * fm['em']:.1f} | "
        f"{100 * fm['f1']:.1f} | {100 * fm['acc']:.1f} | - | {fm['avg_input_tokens']:.0f} | "
        f"{ft['process_wall_s']:.1f} |"),
        (f"| {dataset} | marag `vanilla` | {mine['n']} | {100 * mine['em']:.1f} | "
        f"{100 * mine['f1']:.1f} | {100 * mine['acc']:.1f} | {valid} | "
        f"{mine['cost']['prompt_tokens']:.0f} | {wall:.1f} |"),
    ]


def main(argv: list[str]) -> str:
    out = Path(argv[0])
    datasets = argv[1:] or ["nq_open", "hotpotqa"]
    lines = ["| dataset | system | n | EM | F1 | acc | AG valid % | prompt tok/q | wall s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ds in datasets:
        if (out / f"marag-{ds}" / "metrics.json").exists():
            lines += rows(out, ds)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main(sys.argv[1:]))
