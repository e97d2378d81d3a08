"""What every ``outcome-telemetry`` subcommand does the same way, so each one's code holds only its
own work: the parser's settings, the exit codes, argparse's own exits, a reader that went away,
output paths that cannot be written, and the two kinds of failure (bad input is one line and
exit 2; a bug keeps its traceback and exits 3).

A subcommand is a ``build_parser()`` and an ``execute(args) -> int``; :func:`dispatch` runs the
pair, and is the only way any of them is run (``telemetry.cli`` for the console script, each
module's ``main`` for a caller in-process). Private to the package: users see only the exit
codes, which each command's ``--help`` documents.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast

from ._terminal import printing_safely
from .exceptions import TelemetryError

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "CommandError",
    "command_parser",
    "dispatch",
    "make_folder",
    "output_file",
    "output_folder",
    "parse",
    "run",
    "server_stdout",
    "silence_stdout",
    "writing",
]

EXIT_OK = 0
"""The command did its work (and, where it looks for findings, found none it was asked to fail on)."""
EXIT_FINDINGS = 1
"""The command worked and found what ``--fail-on`` asked it to fail on (or the demo missed its score)."""
EXIT_INPUT = 2
"""Bad input: an argument, a file, a server, a missing extra; one line on stderr says which and what to do."""
EXIT_INTERNAL = 3
"""A bug or an environment failure: the traceback on stderr says where."""
EXIT_INTERRUPTED = 130
"""Ctrl-C, as a shell reports it (128 + SIGINT); ``watch`` and ``metrics-serve`` stop with 0 instead."""


class CommandError(Exception):
    """Bad input a command found after parsing: printed as one line, exit 2 (never a traceback)."""


class _Parser(argparse.ArgumentParser):
    """Every parser of the command: no abbreviated flags (``--fail`` is not ``--fail-on``: a script
    that abbreviates breaks the day a second flag shares the prefix), and descriptions and epilogs
    printed as written (they hold examples and exit-code tables whose lines must stay). Subcommand
    parsers are built by this class too (argparse's ``add_subparsers`` uses the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)


def command_parser(command: str, description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``outcome-telemetry COMMAND``: its name in usage lines, ``description`` and
    ``epilog`` printed as written."""
    prog = f"outcome-telemetry {command}" if command else "outcome-telemetry"
    return _Parser(prog=prog, description=description, epilog=epilog)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace | int:
    """``argv`` parsed, or the exit code argparse chose (0 after ``--help``, 2 on a usage error,
    an unknown flag included).

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


def run(body: Callable[[], int], *, prog: str | Callable[[], str]) -> int:
    """Run ``body`` and turn how it ended into the command's exit code.

    A reader that went away (``| head``) is a normal end (0, nothing printed); a
    :class:`CommandError` or any :class:`~telemetry.exceptions.TelemetryError` (the package's
    named errors: a bad file, a target that cannot be loaded, a missing extra, ...) prints
    ``PROG: error: MESSAGE`` and exits 2; Ctrl-C exits 130; anything else prints its traceback
    and exits 3. stdout is flushed inside, so a closed pipe shows up here, not at exit. ``prog``
    may be a callable, read when a message is printed (the verb is known only once parsed).
    Everything printed meanwhile, on stdout and stderr, passes :func:`telemetry._terminal.safe`.
    """

    def name() -> str:
        return prog() if callable(prog) else prog

    with printing_safely():  # no value a command prints may act on the terminal (telemetry._terminal)
        return _ended(body, name)


def _ended(body: Callable[[], int], name: Callable[[], str]) -> int:
    """:func:`run`'s work: ``body``'s exit code, or the code of how it failed."""
    try:
        code = body()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"{name()}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (CommandError, TelemetryError) as exc:
        print(f"{name()}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except Exception:
        traceback.print_exc()
        print(f"{name()}: failed unexpectedly (exit 3); the traceback above says where", file=sys.stderr)
        return EXIT_INTERNAL


def dispatch(parser: argparse.ArgumentParser, execute: Callable[[argparse.Namespace], int], argv: Sequence[str]) -> int:
    """Parse ``argv`` with ``parser`` and run ``execute`` on the result, under :func:`run`: the one
    way every subcommand runs, so every one has the same exit codes, refuses the same way and
    ends the same way on a closed stdout (``--help | head`` included)."""

    chosen = [parser]

    def body() -> int:
        args = parse(parser, argv)
        if isinstance(args, int):
            return args
        chosen[0] = _chosen(parser, args)
        return execute(args)

    return run(body, prog=lambda: chosen[0].prog)


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser that took ``args``: ``forensics report``'s, not ``forensics``', so that
    errors name the verb that failed."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(getattr(args, action.dest, None) or "")
            if sub is not None:
                return _chosen(sub, args)
    return parser


class _ServerStdout(io.TextIOBase):
    """stdout for a command that serves (``watch``, ``metrics-serve``): its real reader is the
    scraper, so a closed stdout silences the lines instead of ending (or failing) the command."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()
        return len(text)


def server_stdout() -> TextIO:
    """See :class:`_ServerStdout`."""
    return cast(TextIO, _ServerStdout())


def _problem(path: Path, *, folder: bool) -> str | None:
    """Why ``path`` cannot be written as a file (or created as a folder), None when nothing shows
    it yet. Checked before any work and changes nothing; the write itself may still fail (a
    read-only mount, /proc), which :func:`writing` reports the same way."""
    if path.is_dir() and not folder:
        return "is a folder; name a file"
    if path.exists() and not path.is_dir() and folder:
        return "is a file; name a folder (it is created if missing)"
    probe = path if folder else path.parent
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        return f"cannot be created: {probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"cannot be written: {probe} is not writable by this user"
    return None


def output_file(text: str) -> Path:
    """argparse ``type=`` of an output file (``--html``, ``--state``): refused at parse time, with
    exit 2 and the path named, when it cannot be written."""
    path = Path(text).expanduser()
    problem = _problem(path, folder=False)
    if problem:
        raise argparse.ArgumentTypeError(f"{text} {problem}")
    return path


def output_folder(text: str) -> Path:
    """argparse ``type=`` of an output folder (``--out``, ``--to``), as :func:`output_file`."""
    path = Path(text).expanduser()
    problem = _problem(path, folder=True)
    if problem:
        raise argparse.ArgumentTypeError(f"{text} {problem}")
    return path


@contextmanager
def writing(flag: str, path: object, *, within: bool = False) -> Iterator[None]:
    """Around the write of what ``flag`` names: an ``OSError`` becomes one line naming the flag and
    the path (exit 2), not a traceback. ``within``: only an ``OSError`` about ``path`` itself or a
    file below it (around work that does more than write there; any other is left to propagate)."""
    try:
        yield
    except OSError as exc:
        if within and not _below(exc.filename, Path(str(path))):
            raise
        raise CommandError(f"{flag} {path} cannot be written: {exc.strerror or exc}") from None


def _below(filename: object, folder: Path) -> bool:
    """Whether ``filename`` is ``folder``, below it, or one of the parents made to create it."""
    if not isinstance(filename, (str, os.PathLike)):
        return False
    target, base = Path(os.path.abspath(filename)), Path(os.path.abspath(folder))
    return target == base or base in target.parents or target in base.parents


def make_folder(flag: str, path: Path, *, shown: object = None) -> Path:
    """``path`` created (with its parents) and proven writable (a file created and removed in it)
    for the output ``flag`` names, before any work; else a :class:`CommandError` naming ``shown``
    (by default ``path``)."""
    with writing(flag, path if shown is None else shown):
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    return path
