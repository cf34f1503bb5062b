"""Translate a file, or standard input, one sentence per line, with beam search in batches.

    python scripts/translate.py runs/de-en test.de > test.en
    echo "Ein Hund läuft über die Wiese." | python scripts/translate.py user/transformer-de-en
    python scripts/translate.py runs/de-en test.de -o test.en --batch_size 64 --num_beams 5 --device cuda
    python scripts/translate.py runs/de-en test.de --quantize int8 > test.en   # int8 weights on the CPU

Output: one line per input line, in input order (blank lines stay blank). The input is translated 1,000 lines at a
time, each lot batched by length, longest first, to waste little padding, and written as soon as it is done: Ctrl-C
keeps what is written and says how much. A progress bar goes to stderr unless --quiet. Beam search follows the
model's generation config (the paper's 4 beams and length penalty 0.6) unless overridden here.

With no FILE and standard input a terminal, it translates each line as it is entered, as fairseq-interactive does:
type a sentence and Enter, read its translation; Ctrl-D (Ctrl-Z then Enter on Windows) ends.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import re
import signal
import stat
import sys
import threading
from pathlib import Path

import torch
from huggingface_hub.utils import disable_progress_bars
from tqdm.auto import tqdm
from transformers import AutoModelForSeq2SeqLM, MarianMTModel, pipeline
from transformers.utils import logging

from .conversion import converted_marian
from .data import (
    cr_line_ends_message, decode_utf8_text, has_cr_line_ends, nul_bytes_message, text_lines, utf16_encoding,
)
from .errors import (
    InputError,
    command_parser,
    debugging,
    device_from_name,
    output_file_problem,
    shown_list,
    unwritable,
    usable_device,
)
from .hub import loading_from, model_location
from .packed_linear import quantize_int8
from .pipeline_translation import TASK, normalize_text, reads_special_tokens_as_text, translate_sentences
from .tokenization import check_tokenizer_fits_model, load_tokenizer


def parse_arguments(argv: list[str] | None = None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    parser = command_parser(__doc__)
    parser.add_argument("model", metavar="MODEL", help="a saved model directory or a Hub repo id")
    parser.add_argument("file", metavar="FILE", nargs="?", default="-",
                        help="text to translate, one sentence per line (default or '-': standard input)")
    parser.add_argument("-o", "--output", default="-", help="where to write the translations (default: stdout)")
    parser.add_argument("--batch_size", type=int, default=32, help="sentences per batch (default: 32)")
    parser.add_argument("--num_beams", type=int, help="beam size (default: the model's generation config)")
    parser.add_argument("--length_penalty", type=float, help="beam length penalty (default: the model's)")
    parser.add_argument("--max_new_tokens", type=int,
                        help="longest translation in tokens (default: the model's; source length + 50)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps, ... (default: cuda if available)")
    parser.add_argument("--revision", default=None, help="branch, tag or commit of a Hub model")
    parser.add_argument("--quantize", choices=["int8"],
                        help="int8: dynamic int8 quantization of the linear layers, on the CPU (quantize_int8; "
                             "faster on some CPUs; translations may differ slightly from fp32's and with the batch)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = parser.parse_intermixed_args(argv)  # the file after the options too: MODEL --quiet FILE
    for name in ("batch_size", "num_beams", "max_new_tokens"):
        if (value := getattr(args, name)) is not None and value < 1:
            parser.error(f"--{name} must be at least 1, got {value}.")
    if args.length_penalty is not None and not math.isfinite(args.length_penalty):
        parser.error(f"--length_penalty must be a finite number, got {args.length_penalty}.")
    if args.quantize and args.device is not None and args.device.split(":")[0] != "cpu":
        parser.error(f"--quantize {args.quantize} runs on the CPU: pass --device cpu (got {args.device}).")
    if args.device is not None:
        try:
            device_from_name(args.device)
        except InputError as error:
            refuse(parser, error)
    if args.output != "-":
        output = Path(args.output)
        if problem := output_file_problem(output, f"-o {args.output}", f"-o {output / 'translations.txt'}"):
            parser.error(problem)
        if args.file != "-" and output.resolve() == Path(args.file).resolve():
            parser.error(f"-o {args.output} is the input file, which the translations would replace: give another name.")
        if reason := unwritable(output):  # now, not after hours of translating
            parser.error(f"-o {args.output} cannot be written ({reason}): give a file in a folder you may write to.")
    return args, parser


def refuse(parser: argparse.ArgumentParser, error: Exception, message: str | None = None):
    """parser.error's one line (`message`, or the error's own) and exit status 2 for a mistake of the user's; with
    HF_VANILLA_TRANSFORMER_DEBUG set, `error` is raised instead, so that its traceback shows, as run_command shows
    those raised through it."""
    if debugging():
        raise error
    parser.error(message or str(error))


def read_lines(file: str) -> list[str]:
    """The lines of `file` ("-": standard input); InputError for what is not UTF-8 text (naming the line, or the
    encoding it is in where that shows: UTF-16, UTF-32, gzip), holds NUL bytes or ends its lines in CR alone."""
    where = "Standard input" if file == "-" else file
    if file != "-":
        with open(file, "rb") as handle:
            data = handle.read()
    elif sys.stdin is None:  # started with standard input closed (`<&-`)
        raise InputError("Standard input is closed: give the FILE to translate, or pipe the text in.")
    elif hasattr(sys.stdin, "buffer"):  # bytes where there are any: text mode would also end a line at a lone "\r"
        data = sys.stdin.buffer.read()
    else:
        data = sys.stdin.read().encode("utf-8", "surrogateescape")
    if message := other_encoding(data, file):
        raise InputError(f"{where} {message}")
    if file != "-":
        text = decode_utf8_text(data, file)
    else:
        try:
            text = data.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark is no part of line 1
        except UnicodeDecodeError as error:
            line, start = data.count(b"\n", 0, error.start) + 1, data.rfind(b"\n", 0, error.start) + 1
            raise InputError(
                f"Standard input is not valid UTF-8 (line {line}: {error.reason} at byte {error.start - start} of the "
                "line): re-encode it, e.g. "
                "`iconv -f CP1252 -t UTF-8 input.txt | python scripts/translate.py MODEL`."
            ) from error
    lines = text_lines(text)
    if old_mac := next((number for number, line in enumerate(lines, 1) if has_cr_line_ends(line)), None):
        raise InputError(cr_line_ends_message(file, old_mac))
    if nul := next((number for number, line in enumerate(lines, 1) if "\0" in line), None):
        raise InputError(nul_bytes_message(f"{where} is not text" if file == "-" else f"{where} is not a text file",
                                           nul))
    return lines


def other_encoding(data: bytes, file: str) -> str | None:
    """What to say of `data` that is plainly not UTF-8 text (from `file`, "-" for standard input), with the command
    that converts it: UTF-32 or UTF-16 (a byte-order mark, or UTF-16 text without one: a NUL byte beside each ASCII
    character), gzip. None for anything else."""
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        encoding = "UTF-32"
    else:  # the training data's test, on the first line: "UTF-16" (its byte-order mark), "UTF-16LE", "UTF-16BE"
        encoding = utf16_encoding(data[: data.find(b"\n") + 1 or None])
    if encoding is not None:
        how = ("begins with a byte-order mark" if encoding in ("UTF-32", "UTF-16")
               else "has a NUL byte beside each ASCII character")
        return (f"is {encoding} text (it {how}), not UTF-8: convert it first, e.g. `iconv -f {encoding} -t UTF-8 "
                f"{'input.txt' if file == '-' else file} | python scripts/translate.py MODEL`.")
    if data.startswith(b"\x1f\x8b"):
        return (f"is gzip-compressed: decompress it first, e.g. `zcat {'input.gz' if file == '-' else file} | "
                "python scripts/translate.py MODEL`.")
    return None


SENTENCE_BREAK = re.compile(
    r"(?<=\w{3})[.!?…]['\"”»)]*\s+[\"“„«(]*[A-ZÀ-ÖØ-ÞА-ЯЁΑ-Ω]"  # Latin, Cyrillic, Greek: a capital after the end
    r"|[。！？][」』）”\"]*(?=[^\s。！？」』）”\"])"  # Chinese, Japanese: more text after a full stop
)
"""The end of a sentence (after a word of 3 letters or more: not "Dr." or "St.") and the capital letter that begins
the next one, within a line; in Chinese and Japanese, which have no capitals, a full stop with text after it."""


def several_sentences(lines: list[str]) -> list[int]:
    """Line numbers (from 1) of lines holding two sentences or more, where the model was trained on one sentence a
    line and translates such a line short, leaving sentences out (the Multi30k model: "A man is sleeping. A dog runs
    in the park." -> "Ein Mann schläft im Park mit einem Hund.")."""
    return [number for number, line in enumerate(lines, 1) if SENTENCE_BREAK.search(line)]


LONG_LINE_TOKENS = 256
"""Source tokens beyond which a line is warned about: train_translation.py cuts its training sources to 256 tokens
(its --max_source_length default), so a longer line is unlike any the model learned from."""


def overlong_lines(lines: list[str], tokenizer, max_positions: int) -> tuple[list[int], int]:
    """(numbers from 1 of the lines longer than the limit, the limit): LONG_LINE_TOKENS, or the model's
    max_position_embeddings where that is less. A line is tokenized as the pipeline reads it, and only where it has
    limit/2 bytes or more: fewer cannot make that many tokens."""
    limit = min(LONG_LINE_TOKENS, max_positions or LONG_LINE_TOKENS)
    candidates = [number for number, line in enumerate(lines, 1) if 2 * len(line.encode("utf-8")) + 2 > limit]
    if not candidates:
        return [], limit
    lengths = tokenizer([normalize_text(lines[number - 1]) for number in candidates], return_length=True,
                        split_special_tokens=reads_special_tokens_as_text(tokenizer))["length"]
    return [number for number, length in zip(candidates, lengths) if length > limit], limit


def warn_about_several_sentences(lines: list[str], first: int = 1) -> None:
    """One warning naming the lines of `lines` (numbered from `first`) that hold several sentences."""
    if not (numbers := [first - 1 + number for number in several_sentences(lines)]):
        return
    shown = shown_list(numbers, 5)
    lines_hold = "1 line holds" if len(numbers) == 1 else f"{len(numbers)} lines hold"
    print(f"translate.py: warning: {lines_hold} several sentences (line{'s' * (len(numbers) > 1)} {shown}); the model "
          "translates one sentence a line and may leave sentences out: split the text into sentences first, one a "
          "line.", file=sys.stderr)


def warn_about_long_lines(lines: list[str], tokenizer, max_positions: int, first: int = 1) -> None:
    """One warning naming the lines (numbered from `first`) longer than the model can sensibly translate: they took
    minutes and gigabytes (attention's time and memory grow with the square of the length) for a translation cut
    short or nonsense."""
    numbers, limit = overlong_lines(lines, tokenizer, max_positions)
    if not numbers:
        return
    numbers = [first - 1 + number for number in numbers]
    shown = shown_list(numbers, 5)
    lines_are = "1 line is" if len(numbers) == 1 else f"{len(numbers)} lines are"
    why = ("the model's max_position_embeddings" if max_positions and limit == max_positions
           else "the longest sources train_translation.py trains on (--max_source_length 256)")
    print(f"translate.py: warning: {lines_are} longer than {limit} tokens (line{'s' * (len(numbers) > 1)} {shown}), "
          f"{why}: the model translates such a line slowly, with much memory, and often cut short or into nonsense. "
          "Split long lines into sentences, one a line.", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    args, parser = parse_arguments(argv)
    try:
        model = model_location(args.model, args.revision)
        if args.device is not None:
            usable_device(args.device)  # here, not when parsing: a GPU command line parses on any machine
    except (FileNotFoundError, InputError) as error:
        refuse(parser, error)
    # someone typing at a terminal: each line translated as it is entered (`translate_interactively`), the model
    # loaded first, so that the first translation comes at once; anything else is read whole before the model loads
    interactive = args.file == "-" and is_terminal(sys.stdin)
    if not interactive:
        lines = read_input(args, parser)
        warn_about_several_sentences(lines)
        if not any(line.strip() for line in lines):  # as a filter does: nothing in, nothing out (blanks stay blank)
            if not args.quiet:
                print(f"translate.py: nothing to translate: {'standard input' if args.file == '-' else args.file} has "
                      "no text.", file=sys.stderr)
            with open_output(args, parser) as output:
                write_translations([""] * len(lines), output, args, parser)
            return

    if args.quiet:
        disable_progress_bars()
        logging.disable_progress_bar()
    translator = load_translator(model, args, parser)
    if not interactive:
        warn_about_long_lines(lines, translator.tokenizer, translator.model.config.max_position_embeddings)
    if args.quantize:
        try:
            quantize_int8(translator.model)
        except (RuntimeError, ValueError) as error:
            refuse(parser, error, f"Cannot quantize {args.model}: {error}")
    generate_kwargs = {key: value for key in ("num_beams", "length_penalty", "max_new_tokens")
                       if (value := getattr(args, key)) is not None}
    if args.max_new_tokens is not None:  # it replaces the model's own max_length (a converted Marian model's 512),
        translator.model.generation_config.max_length = None  # which transformers would warn about at every batch
    if isinstance(translator.model, MarianMTModel):  # kept as it is: a table of positions, an IndexError past it
        generate_kwargs.update(table_of_positions_limits(translator.model, args, parser))
    if interactive:
        translate_interactively(translator, args, parser, generate_kwargs)
    else:
        translate_in_windows(translator, lines, args, parser, generate_kwargs)


def table_of_positions_limits(model, args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    """The pipeline's arguments for a model whose positions are a table of max_position_embeddings rows (a
    MarianMTModel kept as it is), where a longer source or translation is an IndexError inside torch: sources cut
    there, and translations ended there (a --max_new_tokens past it refused)."""
    positions = model.config.max_position_embeddings
    if args.max_new_tokens is not None and args.max_new_tokens >= positions:
        parser.error(f"--max_new_tokens {args.max_new_tokens}: {args.model} has {positions} positions, so its "
                     f"translations end by {positions - 1} new tokens: give at most that.")
    if args.max_new_tokens is None:
        limit = model.generation_config.max_length
        model.generation_config.max_length = min(limit, positions) if limit else positions
    return {"truncation": True}


def read_input(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """The lines of FILE (or standard input), refused in parser.error's one line where they cannot be read."""
    try:
        return read_lines(args.file)
    except InputError as error:
        refuse(parser, error)
    except OSError as error:
        refuse(parser, error, f"Cannot read {args.file}: {error.strerror or error}.")


def is_terminal(stream) -> bool:
    """Whether `stream` (sys.stdin, sys.stdout, ...) is a terminal; False for None (a closed stream), a pipe, a file,
    a StringIO."""
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def load_translator(model: str, args: argparse.Namespace, parser: argparse.ArgumentParser):
    """The translation pipeline of `model` (a folder, or a Hub repo's snapshot) on --device; parser.error's one line
    for a model or tokenizer that cannot be loaded or do not fit."""
    device = args.device or ("cuda" if torch.cuda.is_available() and not args.quantize else "cpu")
    if args.quantize and torch.device(device).type != "cpu":
        parser.error(f"--quantize {args.quantize} runs on the CPU: leave --device out, or pass --device cpu (got "
                     f"{device}).")
    try:
        with loading_from(args.model):  # each apart: the pipeline would hide why a model or tokenizer failed to load
            # the model first: a Hub repo (or branch) with neither is said to have no model, not no tokenizer
            # int8 is made from float32 weights, whatever dtype the model was saved in
            loaded = AutoModelForSeq2SeqLM.from_pretrained(model, revision=args.revision,
                                                           **({"dtype": torch.float32} if args.quantize else {}))
            tokenizer = load_tokenizer(model, revision=args.revision)
        check_tokenizer_fits_model(tokenizer, loaded.config.vocab_size, args.model)
        if isinstance(loaded, MarianMTModel):  # an opus-mt model: the same function, on this package's fast paths
            try:  # (packed CPU weights, --quantize int8)
                loaded = converted_marian(loaded, args.model)
            except InputError as error:  # separate vocabularies: it translates as it is
                if args.quantize:
                    refuse(parser, error, f"--quantize {args.quantize} quantizes this package's model, and {error}")
                print(f"translate.py: warning: {error.args[0].rstrip('.')}: it translates as it is, sources cut at "
                      f"its {loaded.config.max_position_embeddings} positions.", file=sys.stderr)
        return pipeline(TASK, model=loaded, tokenizer=tokenizer, device=device)
    except InputError as error:
        refuse(parser, error)


BUFFER_LINES = 1000
"""Lines translated at a time (or --batch_size, where that is more), sorted by length among themselves and written
as soon as they are done, as fairseq-interactive's and Marian's buffers do: Ctrl-C loses these at most, not the whole
file. A file of this many lines or fewer is batched as one."""


def translate_in_windows(translator, lines: list[str], args: argparse.Namespace, parser: argparse.ArgumentParser,
                         generate_kwargs: dict) -> None:
    """Translate `lines` BUFFER_LINES at a time, under one progress bar, writing each lot's translations when they
    are done. Ctrl-C raises a KeyboardInterrupt that says how many were written, for run_command to print, even one
    that Python dropped (`interrupt_not_lost`)."""
    window = max(BUFFER_LINES, args.batch_size)
    written, cut_short = 0, []
    try:
        with interrupt_not_lost() as check_interrupt, open_output(args, parser) as output, \
                tqdm(total=sum(1 for line in lines if line.strip()), unit="sentence", disable=args.quiet) as bar:
            gc.collect()  # transformers' import-time garbage, now rather than mid-translation
            check_interrupt()
            progress = CheckingBar(bar, check_interrupt)
            for start in range(0, len(lines), window):
                part, cut = lines[start : start + window], []
                translations = translate_sentences(translator, part, batch_size=args.batch_size, progress=progress,
                                                   cut_short=cut, **generate_kwargs)
                cut_short += [start + 1 + index for index in cut]
                with interrupt_held(output if output is not None else sys.stdout), bar_cleared(bar, output):
                    if not write_translations(translations, output, args, parser):
                        return
                    written += len(translations)
                check_interrupt()
    except KeyboardInterrupt as interrupt:
        where = f"are in {args.output}" if args.output != "-" else "were written"
        raise KeyboardInterrupt(f"the first {written} of {len(lines)} translations {where}.") from interrupt
    warn_about_cut_short(sorted(cut_short), sum(1 for line in lines if line.strip()), translator, args)


def warn_about_cut_short(numbers: list[int], translated: int, translator, args: argparse.Namespace) -> None:
    """One warning naming the lines whose translation stopped at the length limit before its end token: cut short by
    a limit set too low (--max_new_tokens 3 cut every one without a word), or a model repeating itself up to it."""
    if not numbers:
        return
    config = translator.model.generation_config
    limit = (f"--max_new_tokens {args.max_new_tokens}" if args.max_new_tokens is not None else
             f"the model's max_new_tokens {config.max_new_tokens}" if config.max_new_tokens else
             f"the model's max_length {config.max_length}" if config.max_length else "source length + 50 tokens")
    of = f"{len(numbers)} of the {translated} translations" if len(numbers) > 1 else "1 translation"
    print(f"translate.py: warning: {of} stopped at the length limit ({limit}) before the end token (line"
          f"{'s' * (len(numbers) > 1)} {shown_list(numbers, 5)}): cut short, or a model repeating itself. Raise "
          "--max_new_tokens where translations need more tokens; a model that repeats itself needs more training.",
          file=sys.stderr)


def bar_cleared(bar, output):
    """tqdm's external_write_mode while translations go to standard output (`output` None) and it and the progress
    bar's standard error are terminals, one terminal as a rule: the bar is cleared before they are written and drawn
    again below them. Otherwise the first translation went onto the end of the bar's line and the bar was drawn again
    among them. Nothing is done for -o, a pipe or a file, whose bytes stay as they were, nor with no bar (--quiet)."""
    if output is not None or bar.disable or not (is_terminal(sys.stdout) and is_terminal(sys.stderr)):
        return contextlib.nullcontext()
    return type(bar).external_write_mode(file=sys.stdout)


TERMINAL_NOTE = ("translate.py: reading sentences from the terminal, one a line, each translated when it is entered; "
                 "end with Ctrl-D (Ctrl-Z then Enter on Windows), or give a FILE.")
"""What translate.py says, on standard error, before it reads a terminal: with nothing shown, it looked hung."""


def translate_interactively(translator, args: argparse.Namespace, parser: argparse.ArgumentParser,
                            generate_kwargs: dict) -> None:
    """Translate the lines typed at the terminal that standard input is, each written as soon as it is entered and
    translated, as fairseq-interactive does, until Ctrl-D (the end of the input), with no progress bar. A terminal
    read to its end first, as a file is, showed nothing until Ctrl-D: the command looked hung.

    TERMINAL_NOTE goes to stderr first, with --quiet too, which is about progress bars: without it a terminal that
    waits for input looks like one that hangs, and a user at a terminal is there to read it. A line that is not
    UTF-8 text, or holds a NUL byte, is named on stderr and has a blank line for its translation, so that the output
    keeps one line per line entered; a line of several sentences, or too long, is warned about as in a file. Ctrl-C
    raises the KeyboardInterrupt that run_command reports in one line, with status 130 (with -o, saying how many
    translations the file holds)."""
    max_positions = translator.model.config.max_position_embeddings
    number = written = 0
    try:
        with interrupt_not_lost() as check_interrupt, open_output(args, parser) as output:
            gc.collect()  # transformers' import-time garbage, now rather than after the first line
            check_interrupt()
            print(TERMINAL_NOTE, file=sys.stderr, flush=True)
            while data := read_terminal_line():
                number += 1
                try:
                    line = terminal_line(data, number)
                except InputError as error:
                    print(f"translate.py: {error}", file=sys.stderr, flush=True)
                    line = ""
                warn_about_several_sentences([line], first=number)
                warn_about_long_lines([line], translator.tokenizer, max_positions, first=number)
                cut = []
                translations = translate_sentences(translator, [line], batch_size=1, cut_short=cut, **generate_kwargs)
                warn_about_cut_short([number] if cut else [], 1, translator, args)
                check_interrupt()
                with interrupt_held(output if output is not None else sys.stdout):
                    if not write_translations(translations, output, args, parser):
                        return
                    written += 1
                check_interrupt()
    except KeyboardInterrupt as interrupt:
        if args.output == "-":  # each translation is on the screen, or in the file stdout goes to, as it is done
            raise
        are = "translation is" if written == 1 else "translations are"
        raise KeyboardInterrupt(f"{written} {are} in {args.output}.") from interrupt


def read_terminal_line() -> bytes:
    """The next line typed at the terminal, with its line end; b"" at Ctrl-D. Bytes, as read_lines reads standard
    input, to be decoded as UTF-8 whatever the locale's encoding."""
    if hasattr(sys.stdin, "buffer"):
        return sys.stdin.buffer.readline()
    return sys.stdin.readline().encode("utf-8", "surrogateescape")


def terminal_line(data: bytes, number: int) -> str:
    """Line `number` typed at the terminal (`data`, as read) without its line end ("\\n", or Windows' "\\r\\n");
    InputError for one that is not UTF-8 or holds a NUL byte (Ctrl-@), which the tokenizer would read as a token."""
    try:
        line = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"line {number} is not valid UTF-8 ({error.reason} at byte {error.start}), so it is left "
                         "untranslated (a blank line): set the terminal's character encoding to UTF-8.") from error
    line = line.removesuffix("\n").removesuffix("\r")
    if "\0" in line:
        raise InputError(f"line {number} holds a NUL byte (Ctrl-@), so it is left untranslated (a blank line).")
    return line


@contextlib.contextmanager
def interrupt_not_lost():
    """Yield a function that raises KeyboardInterrupt if Ctrl-C was pressed in the block, to call between batches.
    Python raises Ctrl-C's KeyboardInterrupt wherever the main thread is; in a `__del__` that the garbage collector
    runs (regex's Group.__del__, on transformers' import-time garbage) it prints "Exception ignored" and drops it,
    and the run translated everything and exited 0. This SIGINT handler notes each press before it raises. Where
    SIGINT is not Python's (ignored in a background job, a caller's own handler), or off the main thread, no
    handler is set and the function checks nothing."""
    pressed = []

    def on_sigint(number, frame):
        pressed.append(number)
        raise KeyboardInterrupt

    def check():
        if pressed:
            raise KeyboardInterrupt

    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield check
        return
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, previous)


class CheckingBar:
    """A progress bar that calls `check` after each update, which translate_sentences makes once a batch."""

    def __init__(self, bar, check):
        self.bar, self.check = bar, check

    def update(self, n=1):
        self.bar.update(n)
        self.check()


@contextlib.contextmanager
def open_output(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """-o opened for writing, and emptied: from now on it holds the translations done so far; None for standard
    output."""
    if args.output == "-":
        yield None
        return
    try:
        output = open(args.output, "w", encoding="utf-8")
    except OSError as error:  # checked before translating, but the folder may be gone
        refuse(parser, error, f"Cannot write the translations to {args.output}: {error.strerror or error}.")
    try:
        yield output
    finally:
        with contextlib.suppress(OSError):  # each write was flushed, and its error reported: what failed, fails again
            output.close()


@contextlib.contextmanager
def interrupt_held(stream):
    """Ctrl-C held back until the block ends where `stream` is a regular file: a lot of translations goes into it
    whole and is counted, never half a line. Not for a pipe or a terminal, whose write may wait on its reader for as
    long as it likes: Ctrl-C must stop that. Signals reach the main thread only, so elsewhere nothing is held."""
    try:
        regular = stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # None (`>&-`), a StringIO (io.UnsupportedOperation)
        regular = False
    if not regular or threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: pressed.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed and callable(previous):  # Python's own handler raises the KeyboardInterrupt
        previous(signal.SIGINT, None)


def write_translations(translations: list[str], output, args: argparse.Namespace,
                       parser: argparse.ArgumentParser) -> bool:
    """One translation a line, to `output` (-o, open) or standard output (None), flushed at once; False where the
    reader stopped early (`| head -1`): what it read is all that was wanted, and nothing more need be translated."""
    text = "".join(line + "\n" for line in translations)
    try:
        if output is not None:
            output.write(text)
            output.flush()
        elif sys.stdout is None:  # started with standard output closed (`>&-`)
            raise OSError("it is closed")
        elif hasattr(sys.stdout, "buffer"):  # UTF-8, as the input is read and -o writes, whatever the locale's is
            sys.stdout.flush()
            sys.stdout.buffer.write(text.encode("utf-8"))
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except BrokenPipeError:
        if output is None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit fails no more
        return False
    except OSError as error:  # checked before translating, but the disk may be full or the folder gone
        where = args.output if args.output != "-" else "standard output"
        refuse(parser, error, f"Cannot write the translations to {where}: {error.strerror or error}.")
    return True
