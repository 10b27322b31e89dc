"""The CLI's command table: a command line registers only its own command's module."""

from __future__ import annotations

import argparse

import pytest

from ipmeta_cli.main import COMMAND_REGISTRARS, parser


def commands_of(root: argparse.ArgumentParser) -> set[str]:
    (subparsers,) = (action for action in root._actions if isinstance(action, argparse._SubParsersAction))
    return set(subparsers.choices)


def test_the_full_parser_has_serve_and_exactly_the_tabled_commands() -> None:
    # Given the parser `ipmeta --help` prints, every module registered
    # Then its commands are serve and the table's, none missing from the table
    assert commands_of(parser()) == {"serve", *COMMAND_REGISTRARS}


@pytest.mark.parametrize("command", sorted(COMMAND_REGISTRARS))
def test_a_command_line_parses_with_only_its_module_registered(command: str) -> None:
    # Given the parser a command line gets: its command's module alone
    registered = commands_of(parser(command))
    # Then the command is there, and no command another function registers
    assert command in registered
    assert {COMMAND_REGISTRARS[each] for each in registered} == {COMMAND_REGISTRARS[command]}
