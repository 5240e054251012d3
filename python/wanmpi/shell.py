"""Running system commands given as argument lists (never shell strings)."""
from __future__ import annotations

import subprocess
from typing import Sequence


class CommandError(RuntimeError):
    """A command failed; the message names the command and what it printed."""

    def __init__(self, argv: Sequence[str], returncode: int, output: str):
        shown = " ".join(argv)
        detail = output.strip().splitlines()[-1] if output.strip() else "no output"
        super().__init__(f"`{shown}` failed (exit {returncode}): {detail}")
        self.argv, self.returncode, self.output = list(argv), returncode, output


def run(argv: Sequence[str], *, check: bool = True, input: str | None = None,
        timeout: float | None = 60) -> subprocess.CompletedProcess:
    """Run argv, capture its output as text, raise CommandError on failure."""
    try:
        done = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                              timeout=timeout)
    except FileNotFoundError:
        raise CommandError(argv, 127, f"{argv[0]}: command not found") from None
    except subprocess.TimeoutExpired:
        raise CommandError(argv, -1, f"timed out after {timeout} s") from None
    if check and done.returncode != 0:
        raise CommandError(argv, done.returncode, done.stderr or done.stdout)
    return done


def output(argv: Sequence[str], **kwargs) -> str:
    return run(argv, **kwargs).stdout
