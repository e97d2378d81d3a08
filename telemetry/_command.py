"""What every ``outcome-telemetry`` subcommand does the same way, so each one's ``main`` holds only
its own work: the exit codes, argparse's own exits, a reader that went away, and the two kinds of
failure (bad input is one line and exit 2; a bug keeps its traceback and exits 3).

Private to the package: the subcommands (``forensics``, ``watch``, ``audit``, ``demo``) import it;
users see only the exit codes, which each command's ``--help`` documents.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Callable, Sequence, Union

__all__ = ["EXIT_FINDINGS", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "command_parser", "parse", "run", "silence_stdout"]

EXIT_OK = 0
"""The command did its work (and, where it looks for findings, found none it was asked to fail on)."""
EXIT_FINDINGS = 1
"""The command worked and found what ``--fail-on``/``--fail-on-findings`` asked it to fail on."""
EXIT_INPUT = 2
"""Bad input: an argument, a file, a server; the message on stderr says which and what to do."""
EXIT_INTERNAL = 3
"""A bug or an environment failure: the traceback on stderr says where."""


def command_parser(command: str, description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``outcome-telemetry COMMAND``: its name in usage lines, and ``description`` and
    ``epilog`` printed as written (they hold examples and exit-code tables whose lines must stay)."""
    prog = f"outcome-telemetry {command}" if command else "outcome-telemetry"
    return argparse.ArgumentParser(prog=prog, description=description, epilog=epilog,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Union[argparse.Namespace, int]:
    """``argv`` parsed, or the exit code argparse chose (0 after ``--help``, 2 on a usage error).

    argparse raises ``SystemExit``; a command run in-process (tests, the top-level CLI) wants the
    code returned instead, so that nothing past ``main`` is skipped.
    """
    try:
        return parser.parse_args(list(argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush does not fail on a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout has no descriptor (captured): nothing to flush into a pipe
        pass


def run(
    body: Callable[[], int],
    *,
    input_errors: tuple[type[BaseException], ...],
    prefix: str,
    what: str,
) -> int:
    """Run ``body`` and turn how it ended into the command's exit code.

    A reader that went away (``| head``) is a normal end; an exception in ``input_errors`` prints
    ``prefix`` and its message and exits 2; anything else prints its traceback and exits 3, saying
    that ``what`` failed. stdout is flushed inside, so a closed pipe shows up here, not at exit.
    """
    try:
        code = body()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        silence_stdout()
        return EXIT_OK
    except input_errors as exc:
        print(f"{prefix}{exc}", file=sys.stderr)
        return EXIT_INPUT
    except Exception:
        traceback.print_exc()
        print(f"{prefix}{what} failed unexpectedly (exit 3); the traceback above says where", file=sys.stderr)
        return EXIT_INTERNAL
