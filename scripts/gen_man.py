"""Generate man/kafkactl.1 and man/kafkactl-<subcommand>.1 from the kafkactl Typer app.

    python scripts/gen_man.py           # (re)write the committed pages
    python scripts/gen_man.py --check   # exit 1 and name the stale ones

Real roff (the man macros): NAME, SYNOPSIS, DESCRIPTION, OPTIONS, COMMANDS (for command
groups), ENVIRONMENT (the variables the page's commands read: an option's `envvar`), SEE
ALSO. Read one with `man -l man/kafkactl.1`. The pages carry no date, so
they change only when the app's help texts do; tests/distribution/test_man.py fails when
the committed pages are stale and when groff warns while rendering them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import typer
import typer.main

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_tree import (  # noqa: E402
    PROG,
    REPO,
    ArgumentSpec,
    CommandSpec,
    OptionSpec,
    command_tree,
    write_outputs,
)

MANUAL = "kafkactl manual"

# What an environment variable means, where more is to say than "the default of OPTION".
ENVIRONMENT_HELP = {
    "KAFKACTL_BOOTSTRAP": (
        "The brokers to connect to, host:port[,host:port], when neither -b/--bootstrap-server "
        "nor bootstrap.servers of a --command-config file names them; without it, "
        "127.0.0.1:9092."),
}

# command path -> (variable, the option it is the default of) of the commands that read it
Environment = dict[tuple[str, ...], list[tuple[str, str]]]


def environment(app: typer.Typer | None = None) -> Environment:
    """The environment variables each command reads: its options' `envvar`s."""
    import importlib

    if app is None:
        app = importlib.import_module("kafkactl.cli.app").app
    out: Environment = {}

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        for param in cmd.params:
            names = param.envvar if isinstance(param.envvar, list | tuple) else \
                [param.envvar] if param.envvar else []
            long = max(param.opts, key=len) if param.opts else param.name
            out.setdefault(path, []).extend((name, long) for name in names)
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return {k: v for k, v in out.items() if v}


def _environment_section(cmd: CommandSpec, env: Environment) -> list[str]:
    """ENVIRONMENT: the variables read by `cmd` or the commands below it."""
    found: dict[str, str] = {}
    for sub in cmd.walk():
        for name, option in env.get(sub.path, []):
            found.setdefault(name, option)
    if not found:
        return []
    out = [".SH ENVIRONMENT"]
    for name, option in sorted(found.items()):
        text = ENVIRONMENT_HELP.get(name, f"The default of {option}.")
        out += [".TP", _bold(name), *paragraphs(text)]
    return out


def esc(text: str) -> str:
    """Escape text for roff: backslashes, hyphens (real minus signs) and quotes."""
    return text.replace("\\", "\\e").replace("-", "\\-").replace('"', '\\(dq')


def _line(text: str) -> str:
    """One text line; a leading . or ' would be read as a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def paragraphs(text: str) -> list[str]:
    """Help text as roff: blank lines separate paragraphs; Click's \\b keeps a block as is."""
    out: list[str] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        if out:
            out.append(".PP")
        lines = block.split("\n")
        if lines[0].strip() == "\b":
            out.append(".nf")
            out += [_line(esc(line.rstrip())) for line in lines[1:]]
            out.append(".fi")
        else:
            out.append(_line(esc(" ".join(block.split()))))
    return out


def _bold(text: str) -> str:
    return f"\\fB{esc(text)}\\fR"


def _italic(text: str) -> str:
    return f"\\fI{esc(text)}\\fR"


def option_term(o: OptionSpec) -> str:
    names = ", ".join(_bold(n) for n in (*o.names, *o.secondary))
    return f"{names} {_italic(o.metavar)}" if o.metavar else names


def synopsis(cmd: CommandSpec) -> list[str]:
    parts = [_bold(cmd.name)]
    for o in cmd.options:
        if o.required:
            parts.append(f"{_bold(o.names[-1])} {_italic(o.metavar)}")
    if any(not o.required for o in cmd.options):
        parts.append("[\\fIOPTIONS\\fR]")
    for a in cmd.arguments:
        arg = _italic(a.name)
        parts.append(arg if a.required else f"[{arg}]")
    if cmd.subcommands:
        parts.append("\\fICOMMAND\\fR [\\fIARGS\\fR]...")
    return [".SH SYNOPSIS", " ".join(parts)]


def _options_section(options: list[OptionSpec], heading: str) -> list[str]:
    if not options:
        return []
    out = [heading]
    for o in options:
        out += [".TP", option_term(o)]
        out += paragraphs(o.help) if o.help else [esc("(no description)")]
    return out


def _arguments_section(arguments: list[ArgumentSpec], heading: str) -> list[str]:
    documented = [a for a in arguments if a.help]
    if not documented:
        return []
    out = [heading]
    for a in documented:
        out += [".TP", _italic(a.name), *paragraphs(a.help)]
    return out


def _page_name(cmd: CommandSpec) -> str:
    """The man page a command is documented in: kafkactl or kafkactl-<subcommand>."""
    return PROG if not cmd.path else f"{PROG}-{cmd.path[0]}"


def _nested(cmd: CommandSpec) -> list[str]:
    """Sub-subcommands (e.g. `topics create`) are documented inside their group's page."""
    out = [".SH COMMANDS"]
    for sub in cmd.walk()[1:]:
        out += [".SS " + _bold(" ".join(sub.path[1:]))]
        out += [s for s in synopsis(sub)[1:]]
        out += [".PP", *paragraphs(sub.help or sub.summary)]
        out += _arguments_section(sub.arguments, ".PP\n\\fBArguments\\fR")
        options = [o for o in sub.options if "--help" not in o.names]
        out += _options_section(options, ".PP\n\\fBOptions\\fR")
    return out


def page(cmd: CommandSpec, tree: CommandSpec, version: str,
         env: Environment | None = None) -> str:
    title = _page_name(cmd).upper()
    lines = [
        f'.\\" {title}(1) -- generated by scripts/gen_man.py from the kafkactl app; do not edit.',
        f'.TH "{esc(title)}" "1" "" "kafkactl {esc(version)}" "{MANUAL}"',
        ".SH NAME",
        f"{esc(_page_name(cmd))} \\- {esc(cmd.summary or 'kafkactl command')}",
        *synopsis(cmd),
        ".SH DESCRIPTION",
        *(paragraphs(cmd.help) or [esc(cmd.summary)]),
    ]
    lines += _arguments_section(cmd.arguments, ".SH ARGUMENTS")
    lines += _options_section(cmd.options, ".SH OPTIONS")
    if not cmd.path and cmd.subcommands:
        lines.append(".SH COMMANDS")
        for sub in cmd.subcommands:
            lines += [".TP", f"{_bold(sub.path[-1])}", esc(sub.summary)]
            lines.append(f"See \\fB{esc(_page_name(sub))}\\fR(1).")
    elif cmd.subcommands:
        lines += _nested(cmd)
    lines += _environment_section(cmd, env or {})
    see_also = [_page_name(s) for s in tree.subcommands if _page_name(s) != _page_name(cmd)]
    if cmd.path:
        see_also.insert(0, PROG)
    if see_also:
        lines.append(".SH SEE ALSO")
        lines.append(",\n".join(f"\\fB{esc(name)}\\fR(1)" for name in see_also))
    return "\n".join(lines) + "\n"


def render(tree: CommandSpec, out_dir: Path, version: str,
           env: Environment | None = None) -> dict[Path, str]:
    pages = {out_dir / f"{PROG}.1": page(tree, tree, version, env)}
    for sub in tree.subcommands:
        pages[out_dir / f"{_page_name(sub)}.1"] = page(sub, tree, version, env)
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report stale pages")
    parser.add_argument("--out", type=Path, default=REPO / "man")
    args = parser.parse_args(argv)
    from kafkactl import __version__

    outputs = render(command_tree(), args.out, __version__, environment())
    status = write_outputs(outputs, args.check)
    # pages of subcommands that no longer exist are stale too
    extra = sorted(set(args.out.glob(f"{PROG}*.1")) - set(outputs)) if args.out.exists() else []
    for p in extra:
        if args.check:
            print(f"stale: {p} (no such subcommand)")
            status = 1
        else:
            p.unlink()
    return status


if __name__ == "__main__":
    sys.exit(main())
