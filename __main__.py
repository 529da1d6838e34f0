"""``latticelab`` / ``python -m latticelab``: the application's commands (app/commands/) and the benchmarks
(bench/cli.py) in one command line. Only this composition root knows both."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from latticelab.app.commands.main import main as run_command_line
    from latticelab.bench.cli import add_bench_command

    return run_command_line(sys.argv[1:] if argv is None else argv, extra_commands=(add_bench_command,))


if __name__ == "__main__":
    raise SystemExit(main())
