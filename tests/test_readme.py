"""README.md is assembled from docs/readme/ (python docs/readme/build.py): keep them in step."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_readme_is_built_from_its_sections():
    r = subprocess.run([sys.executable, "docs/readme/build.py", "--check"], cwd=ROOT)
    assert r.returncode == 0, "README.md is stale: run python docs/readme/build.py"


def test_readme_begins_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    block = lines[lines.index("```sh") + 1 : lines.index("```sh") + 3]
    assert block[0].startswith("make run") and block[1].startswith("make test")
    assert "make test" in (ROOT / ".ci/run").read_text()
