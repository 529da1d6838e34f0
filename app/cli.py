"""The command line's earlier home, kept so that scripts calling ``latticelab.app.cli.main`` still work; the
commands live in app/commands/ (the entry: app/commands/main.py)."""
from latticelab.app.commands.main import build_parser, main

__all__ = ["build_parser", "main"]
