"""Click options made from an options table (`scanrewrite.options.table`): the flags of both
commands, `scanrewrite` and `scanrewrite-tune`, with their types, metavars, help and defaults
read from the one definition of each option."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import click

from scanrewrite.options import Flag, Kind, Option

__all__ = ["OptionType", "click_option", "with_flags"]


class OptionType(click.ParamType):
    """The values of a `scanrewrite.options.Kind`, as click's type: text (from the command
    line, or a string from TOML) is parsed, any other value from TOML checked."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.name = kind.metavar

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> object:
        try:
            return self.kind.parse(value) if isinstance(value, str) else self.kind.check(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def click_option(option: Option, flag: Flag) -> Callable[[Callable], Callable]:
    """The click option of `flag`, which sets `option`: a switch where the flag sets a constant,
    else a value of the option's `Kind` with its default shown (none where it shows as nothing)."""
    help = flag.help or option.help
    if flag.constant is not None:
        return click.option(f"--{flag.name}", is_flag=True, help=help)
    kind = flag.kind or option.kind
    settings: dict[str, object] = {"type": OptionType(kind), "metavar": kind.metavar}
    if flag.default_help is not None:
        help = f"{help.removesuffix('.')} [default: {flag.default_help}]."
    elif option.default is not None and kind.show(option.default):
        settings.update(default=kind.show(option.default), show_default=True)
    return click.option(f"--{flag.name}", help=help, **settings)


def with_flags(options: Iterable[Option]) -> Callable[[Callable], Callable]:
    """A decorator giving a click command the flags of every option of `options`, in order."""

    def decorate(function: Callable) -> Callable:
        for option in reversed(tuple(options)):
            for flag in reversed(option.flags):
                function = click_option(option, flag)(function)
        return function

    return decorate
