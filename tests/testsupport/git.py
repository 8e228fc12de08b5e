"""Git in a scratch repository a test builds (a fixed author, no global config needed)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(root: Path, *args: str) -> str:
    """Run ``git ARGS`` in ``root``; its stdout, stripped. A failure raises."""
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip()
