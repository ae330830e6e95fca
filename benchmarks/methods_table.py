"""One table of every method from ``benchmarks/prompts.py`` result files (``--variants
default`` per method): EM/F1/acc, format validity per role, workflow mix, seconds and tokens
per question, per dataset.

    python benchmarks/methods_table.py docs/results/methods/smollm2-*.json > table.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(paths: list[str]) -> str:
    lines = [("| model | method | dataset | n | EM | F1 | acc | valid % per role | workflows "
              "| s/q | prompt tok/q | compl. tok/q |"),
             "|---|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|"]
    for path in paths:
        data = json.loads(Path(path).read_text())
        model, method = data.get("model", "?"), data.get("method", "?")
        for r in data["rows"]:
            valid = ", ".join(f"{k} {v:.0f}" for k, v in r["valid"].items() if k != "R")
            wf = ", ".join(f"{k} {v}" for k, v in r["workflows"].items())
            lines.append(
                f"| {model} | {method} | {r['dataset']} | {r['n']} | {r['em']:.1f} | "
                f"{r['f1']:.1f} | {r['acc']:.1f} | {valid or '-'} | {wf} | {r['s_per_q']:.2f} | "
                f"{r['prompt_tokens']:.0f} | {r['completion_tokens']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(main(sys.argv[1:]))
