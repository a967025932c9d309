"""Assemble README.md from docs/readme/: the head, one section per area, the tail.

python docs/readme/build.py     (a test checks README.md is up to date)
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ORDER = ["rcu", "locks", "sync", "timers", "calibration", "prescreen", "app"]


def build() -> str:
    parts = [(HERE / "_head.md").read_text()]
    for name in ORDER:
        text = (HERE / f"{name}.md").read_text()
        # the sections link relative to docs/readme/; README.md sits at the top of the tree
        text = text.replace("](../screenshot-explorer.png)", "](docs/screenshot-explorer.png)").replace(
            "](../notes/", "](docs/notes/"
        )
        parts.append(text.rstrip() + "\n")
    parts.append((HERE / "_tail.md").read_text())
    return "\n".join(parts)


if __name__ == "__main__":
    out = build()
    if "--check" in sys.argv:
        sys.exit(0 if (ROOT / "README.md").read_text() == out else 1)
    (ROOT / "README.md").write_text(out)
