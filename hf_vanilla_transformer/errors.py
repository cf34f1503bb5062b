"""Errors in what a user gave (a file, a flag, a folder), and how the scripts report them: one message and exit
status 2, as argparse does for a bad flag, instead of a traceback. Any other exception is a bug and keeps its
traceback.

    from hf_vanilla_transformer.errors import run_command
    if __name__ == "__main__":
        run_command(main)

`HF_VANILLA_TRANSFORMER_DEBUG=1` shows the traceback of user errors too.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DEBUG_VARIABLE = "HF_VANILLA_TRANSFORMER_DEBUG"
USAGE_ERROR_STATUS = 2


class InputError(ValueError):
    """Bad input: an empty, damaged or non-UTF-8 file, an unknown flag, a value out of range, a folder without a
    model. The message says what is wrong and what to do. A ValueError, so that callers catching ValueError still
    catch it."""


class MissingFileError(FileNotFoundError):
    """A file or folder the user named is not there (or not what it should be); a FileNotFoundError."""


USER_ERRORS = (InputError, MissingFileError)


def shown_list(items, limit: int) -> str:
    """The first `limit` of `items` for a message, "a, b, c, ..." where there are more."""
    items = list(items)
    return ", ".join(map(str, items[:limit])) + (", ..." if len(items) > limit else "")


def file_above(path: str | os.PathLike) -> Path | None:
    """The nearest of `path`'s parent folders that is a file, where no folder can be made: what a script's output
    path is checked for before its work, not after it."""
    return next((folder for folder in Path(path).parents if folder.exists() and not folder.is_dir()), None)


def output_file_problem(path: Path, named: str, example: str) -> str | None:
    """What is wrong with `path` as an output file that a script is about to write (`named`: how its command line
    gave it, e.g. "-o out.txt"; `example`: a file name to suggest for a folder), or None: a folder, a path under a
    file, or one in a folder that does not exist. Checked before the script's work, not after it."""
    if path.is_dir():
        return f"{named} is a folder: give a file name, e.g. {example}."
    if file := file_above(path):
        return f"{named}: {file} is a file, not a folder."
    if not path.resolve().parent.is_dir():
        return f"{named}: the folder {path.parent} does not exist; create it first."
    return None


def unwritable(path: Path) -> str | None:
    """Why `path` cannot be written, or None: opened for appending, which leaves a file there as it is (the
    translations replace it only once translating begins), and removed again if this made it, so that a run that
    fails before leaves no empty file behind. Anything but a regular file there (a FIFO, /dev/stdout) is asked with
    os.access: opening a FIFO waits for its reader. A symbolic link is followed: its target is the file written (and
    left as it was), the link kept."""
    if path.is_symlink() and not path.exists():  # a link to a file not made yet: writing makes its target
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file():
        return None if os.access(path, os.W_OK) else "permission denied"
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as error:
        return (error.strerror or str(error)).lower()
    if not existed:
        path.unlink(missing_ok=True)
    return None


def first_line(error: BaseException) -> str:
    """The first line of a library's error message (some span many), ending with a full stop: a reason to put in
    one of ours."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text if text.endswith((".", "!", "?")) else text + "."


INTERRUPTED_STATUS = 130
"""The shell's status for a command stopped by Ctrl-C (128 + SIGINT)."""
TERMINATED_STATUS = 143
"""The shell's status for a command stopped by SIGTERM (128 + SIGTERM): `kill`, a scheduler's time limit, `docker
stop`."""


@contextmanager
def termination_as_interrupt() -> Iterator[list[int]]:
    """SIGTERM raises KeyboardInterrupt in the block, as Ctrl-C does, so that what a run keeps is said (the last
    complete checkpoint) where the process would end without a word; the list yielded holds the signal once one came.
    Only the main thread receives signals: elsewhere the block runs as it is."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def interrupt(signum, frame):
        received.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def sibling_script(name: str) -> str:
    """scripts/`name` as the user reaches it, for a command a message suggests: beside the running script (one of
    this package's scripts) as they typed its path, else as from the repository's folder."""
    script = Path(sys.argv[0])
    if script.suffix == ".py" and script.with_name(name).is_file():  # also `python train_translation.py` in scripts/
        return str(script.with_name(name))
    return f"scripts/{name}"


def debugging() -> bool:
    """Whether HF_VANILLA_TRANSFORMER_DEBUG asks for tracebacks instead of one-line messages."""
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def run_command(main: Callable[[], Any], *, name: str | None = None) -> Any:
    """Call `main()`; on a user error print `<name>: error: <message>` to stderr and exit with status 2, and on
    Ctrl-C print `<name>: interrupted` (with what the interrupt's message says, e.g. how to resume) and exit with
    status 130, unless the environment variable HF_VANILLA_TRANSFORMER_DEBUG is set (then the traceback shows).
    SIGTERM is taken as Ctrl-C, `<name>: terminated (SIGTERM)` and status 143.

    Characters the terminal's encoding lacks (an emoji of the data on a cp1252 console or under a Latin-1 locale)
    are printed escaped, `\U0001f600`, where they would end the run with a UnicodeEncodeError."""
    name = name or Path(sys.argv[0]).name
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    debug = debugging()
    with termination_as_interrupt() as terminated:
        try:
            return main()
        except USER_ERRORS as error:
            if debug:
                raise
            print(f"{name}: error: {error}", file=sys.stderr)
            sys.exit(USAGE_ERROR_STATUS)
        except KeyboardInterrupt as interrupt:
            if debug:
                raise
            what = "terminated (SIGTERM)" if terminated else "interrupted"
            print(f"\n{name}: {what}" + (f": {interrupt}" if str(interrupt) else "."), file=sys.stderr)
            sys.exit(TERMINATED_STATUS if terminated else INTERRUPTED_STATUS)


@contextmanager
def interrupts_deferred() -> Iterator[list[int]]:
    """Ctrl-C (SIGINT) waits until the block has run: files it writes are written whole (a model card left without
    the scores beside them). The list yielded holds the signal if one came; the caller says what was done. Only the
    main thread receives signals: elsewhere the block runs as it is."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


def one_line_errors(parser):
    """`parser` (argparse's, or HfArgumentParser) reporting its errors as one line, `<prog>: error: <message>`, and
    exit status 2, as `run_command` reports the others; argparse would print its usage block first, over a hundred
    lines for the training script's flags (`--help` shows it)."""
    parser.error = lambda message: parser.exit(USAGE_ERROR_STATUS, f"{parser.prog}: error: {message}\n")
    return parser


def command_parser(doc: str):
    """The argparse parser of a command whose module docstring is `doc`: its first line the description, the rest
    (the examples) the epilog, shown as written; errors in one line (`one_line_errors`)."""
    import argparse

    return one_line_errors(argparse.ArgumentParser(description=doc.splitlines()[0], epilog=doc.split("\n\n", 1)[1],
                                                   formatter_class=argparse.RawDescriptionHelpFormatter))


def device_from_name(value: str, flag: str = "--device"):
    """`value` ("cpu", "cuda", "cuda:1", "mps", ...) as a `torch.device`, whether or not this machine has it (a
    command line parses anywhere); an InputError naming `flag` for a name torch does not know."""
    import torch

    try:
        return torch.device(value)
    except RuntimeError:
        raise InputError(f"{flag} {value}: not a device name; give cpu, cuda, cuda:1, mps, xpu, ...") from None


def usable_device(value: str, flag: str = "--device"):
    """`value` as a `torch.device` this machine has and computes on; an InputError naming `flag` for a name torch does
    not know (`device_from_name`), the meta device, a device type it cannot use here, or an index past the last
    device."""
    import torch

    device = device_from_name(value, flag)
    if device.type == "meta":
        raise InputError(f"{flag} {value}: the meta device holds shapes without numbers, so nothing is computed on "
                         f"it; pass {flag} cpu, or a GPU's.")
    if device.type == "cpu":
        return device
    module = getattr(torch, device.type, None)
    if module is None or not getattr(module, "is_available", lambda: False)():
        raise InputError(
            f"{flag} {value}: this torch ({torch.__version__}) has no usable {device.type} device here; "
            f"pass {flag} cpu, or install a torch build for the device and its driver."
        )
    count = module.device_count() if hasattr(module, "device_count") else None
    if device.index is not None and count is not None and device.index >= count:
        raise InputError(f"{flag} {value}: there are {count} {device.type} devices here, numbered from 0.")
    return device
