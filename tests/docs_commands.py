"""How ``tests/test_docs.py`` checks a documented command without running it.

:func:`check_command` checks one command of a fenced block against what it names: an ``opct`` or ``opct-lab``
command line (also as ``python -m opct.cli`` or under ``accelerate launch``) is parsed by the real command
tree (:func:`parse_cli`: every subcommand, option, argument count and option value as the command would take
them, no callback of the command itself run, nothing loaded); ``make`` names Makefile targets; a script's
file exists and declares every ``--option`` given; ``inspect eval opct/<task>`` names a task opct registers
and its ``-T`` arguments; every repository file a command names exists. It raises :class:`StaleCommand` on
the first thing that does not hold, and returns how the command was checked. :func:`check_inline` checks a
command quoted in running text, which may be a fragment (``opct report``, ``opct <command> --help``): its
subcommands and options must exist.
"""

from __future__ import annotations

import inspect
import itertools
import re
import shlex
from functools import cache

import typer
from conftest import REPO
from typer._click.core import Command, UsageError

#: The site build the docs give; tests/test_docs.py's site test runs exactly this.
DOCS_BUILD = "mkdocs build --strict"
#: Programs the tests do not run or parse, each only in a block marked long or needs (why it cannot run here).
OUTSIDE = {"pip": "installs from PyPI", "lm_eval": "lm-evaluation-harness, evaluates a model",
           "inspect": "Inspect, evaluates a model", "$(": "a shell substitution"}
#: A repository file a page or command names: a path under these folders, ending in one of these suffixes
#: (``tokenizer.json.xz`` and ``trend-inputs.json.gz`` end in none: not checked).
REPO_PATH = re.compile(
    r"(?<![\w./-])(?:configs|lab|opct|benchmarks|docs|tests|\.ci)/[\w./-]*\.(?:ya?ml|json|py|sh|txt|toml|md)(?!\.?[\w/-])")


class StaleCommand(AssertionError):
    """A documented command that names something the repository does not have (an option, a target, a file)."""


@cache
def roots() -> dict[str, Command]:
    """The real ``opct`` and ``opct-lab`` command trees."""
    from opct.cli.main import app
    from opct_lab.cli import app as lab_app

    return {"opct": typer.main.get_command(app), "opct-lab": typer.main.get_command(lab_app)}


def parse_cli(argv: list[str]) -> list[str]:
    """Parse ``argv`` (``["opct", "train", "--config", ...]``) as the command would, through each group down to
    the command, and return the command's path. Only the parameters' own processing runs (values converted and
    range-checked, ``--help`` printed); the command itself is not invoked. :class:`StaleCommand` names what the
    command line gets wrong: an unknown command or option, a missing or extra argument, a value it refuses."""
    cmd = roots()[argv[0]]
    ctx = cmd.context_class(cmd, info_name=argv[0])
    args, path = list(argv[1:]), [argv[0]]
    try:
        while True:
            rest = Command.parse_args(cmd, ctx, args)  # a group's remaining words: its subcommand and that one's args
            if not hasattr(cmd, "get_command"):
                return path
            if not rest:
                raise UsageError("no command given", ctx)
            name, *args = rest
            sub = cmd.get_command(ctx, name)
            if sub is None:
                raise UsageError(f"No such command {name!r}", ctx)
            path.append(name)
            ctx, cmd = sub.context_class(sub, parent=ctx, info_name=name), sub
    except UsageError as error:
        raise StaleCommand(f"{shlex.join(argv)}: {' '.join(path)}: {error.format_message()}") from None
    except typer.Exit as done:  # --help, --version: printed, exit 0
        if done.exit_code:
            raise StaleCommand(f"{shlex.join(argv)}: exit {done.exit_code}") from None
        return path


@cache
def make_targets() -> frozenset[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^([A-Za-z0-9_.-]+):(?!=)", text, re.MULTILINE))


def check_script(script: str, args: list[str]) -> None:
    """A script the docs run: its file exists and its source spells each ``--option`` given before a ``--``."""
    path = REPO / script
    if not path.is_file():
        raise StaleCommand(f"{script}: no such file")
    source = path.read_text(encoding="utf-8")
    for arg in args:
        if arg == "--":
            break
        option = arg.split("=", 1)[0]
        if option.startswith("--") and not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", source):
            raise StaleCommand(f"{script}: declares no option {option}")


def check_inspect_eval(args: list[str]) -> None:
    """``inspect eval opct/<task> ... -T key=value``: a task opct registers for Inspect, and each ``-T`` key one
    of that task's parameters."""
    from opct.inspect_eval import registry

    tasks = {**registry.AXIS_TASKS, "eval": registry.any_axis}
    task = args[0]
    if not task.startswith("opct/") or task.removeprefix("opct/") not in tasks:
        raise StaleCommand(f"inspect eval {task}: opct registers no such task (it has {sorted(tasks)})")
    parameters = inspect.signature(inspect.unwrap(tasks[task.removeprefix("opct/")])).parameters
    for flag, value in itertools.pairwise(args):
        if flag == "-T" and value.split("=", 1)[0] not in parameters:
            raise StaleCommand(f"inspect eval {task}: the task takes no argument {value.split('=', 1)[0]!r}")


def check_command(command: str) -> str:
    """Check one command of a fenced block (see the module docstring); return how it was checked:
    ``parsed`` (an opct or opct-lab command line), ``make``, ``script``, ``site build``, ``task`` (an Inspect
    task of opct's), or ``outside`` (a program in :data:`OUTSIDE`, which the tests neither run nor parse)."""
    if "$(" in command:
        return "outside"
    argv = shlex.split(command)
    while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]):  # OMP_NUM_THREADS=1 PYTHONPATH=. ...
        argv = argv[1:]
    for path in REPO_PATH.findall(" ".join(argv)):
        if not (REPO / path).exists():
            raise StaleCommand(f"{command}: names {path}, which the repository does not have")
    program, args = argv[0], argv[1:]
    if program in ("opct", "opct-lab"):
        parse_cli(argv)
        return "parsed"
    if program in ("python", "python3") and args[:2] == ["-m", "opct.cli"]:
        parse_cli(["opct", *args[2:]])
        return "parsed"
    if program == "accelerate":
        if "-m" not in args or args[args.index("-m") + 1] != "opct.cli":
            raise StaleCommand(f"{command}: accelerate launch of something other than -m opct.cli")
        parse_cli(["opct", *args[args.index("-m") + 2:]])
        return "parsed"
    if program in ("python", "python3", "bash") or "/" in program:
        script, *rest = args if program in ("python", "python3", "bash") else argv
        check_script(script, rest)
        return "script"
    if program == "make":
        missing = [target for target in args if target not in make_targets()]
        if not args or missing:
            raise StaleCommand(f"{command}: the Makefile has no target {missing or '(none given)'}")
        return "make"
    if program == "mkdocs":
        if command != DOCS_BUILD:
            raise StaleCommand(f"{command!r}: the site test runs {DOCS_BUILD!r}")
        return "site build"
    if program == "inspect" and args[:1] == ["eval"]:
        check_inspect_eval(args[1:])
        return "task"
    if program in OUTSIDE:
        return "outside"
    raise StaleCommand(f"{command}: {program} is neither opct's nor a program tests/docs_commands.py knows")


def _placeholder(word: str) -> bool:
    """``<command>``, ``COMMAND``, ``DIR``, ``[--out FILE]``, ``...``: a word that stands for one."""
    return bool(re.search(r"[<>\[\]]", word)) or (word.isupper() and word.isalpha()) or set(word) == {"."}


def _refused_naming_the_lab(group: Command, ctx, word: str) -> bool:
    """Whether ``opct <word>`` is no command whose error names the ``opct-lab`` command to run instead."""
    try:
        group.resolve_command(ctx, [word])
    except UsageError as error:
        return "opct-lab" in error.format_message()
    return False


def check_inline(command: str) -> None:
    """A command quoted in running text (``opct-lab demo --rule good_behaviour``, ``opct report``, ``opct
    <command> --help``): each subcommand it names exists, and each option it gives is one of the command's
    own (values and arguments are not checked: the quote may be a fragment; tests/test_docs.py checks every
    repository file a page names). A command the CLI refuses by name, pointing to the lab's (``opct select``),
    may be quoted: its own error says where it went."""
    words = command.replace("[", " ").replace("]", " ").split()
    cmd = roots()[words[0]]
    ctx, path = cmd.context_class(cmd, info_name=words[0]), [words[0]]
    for word in words[1:]:
        if word.startswith("-") and not re.fullmatch(r"-\d[\d.]*", word):
            option = word.split("=", 1)[0]
            names = {name for param in cmd.get_params(ctx) for name in (*param.opts, *param.secondary_opts)}
            if option not in names:
                raise StaleCommand(f"`{command}`: {' '.join(path)} has no option {option} (it has {sorted(names)})")
        elif hasattr(cmd, "get_command") and not _placeholder(word):
            sub = cmd.get_command(ctx, word)
            if sub is None and _refused_naming_the_lab(cmd, ctx, word):
                return  # opct select: no command, and its error names the lab's (the text says so)
            if sub is None:
                raise StaleCommand(f"`{command}`: {' '.join(path)} has no command {word!r}")
            path.append(word)
            ctx, cmd = sub.context_class(sub, parent=ctx, info_name=word), sub
        elif hasattr(cmd, "get_command"):
            return  # opct <command> --help: a placeholder for any command, whose options are not known
