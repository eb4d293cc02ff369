"""Every `--help` of the CLI, walked: it ends with examples of its own command, it fits the terminal, and the
same option means the same thing everywhere (one vocabulary: -n/--repeat, -o/--output, -t/--target, --format,
--primary METRIC, --metric PATTERN, --min-effect)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from mobiperf.cli import cli
from mobiperf.commands import register_all

register_all(cli)
COMMANDS = sorted(cli.commands)

# The one meaning of each shared option: (its short and long names, what its help must say).
VOCABULARY = {
    "repeat": (["-n", "--repeat"], "(1..100)"),
    "output": (["-o", "--output"], ""),
    "target": (["-t", "--target"], "local"),
    "fmt": (["--format"], ""),
    "primary": (["--primary"], ""),
    "metrics": (["--metric"], "PATTERN"),
    "min_effect": (["--min-effect"], ""),
}


def help_text(*args: str) -> str:
    r = CliRunner().invoke(cli, [*args, "--help"], terminal_width=120)
    assert r.exit_code == 0, r.output
    return r.output


def test_the_commands_are_the_ones_this_test_knows():
    assert COMMANDS == ["analyze", "compare", "doctor", "export", "index", "ingest", "probe", "query", "record",
                        "replay", "report", "run", "show", "study", "sweep", "targets"]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_ends_with_examples_of_its_own_command(command):
    text = help_text(*([command] if command else []))
    lines = text.rstrip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.strip() == "Examples:")
    examples = [line.strip() for line in lines[start + 1:] if line.strip()]
    assert examples, f"{command}: no example after 'Examples:'"
    prefix = f"mobiperf {command}" if command else "mobiperf "
    for example in examples:
        assert example.startswith(prefix), f"{command}: example {example!r} is not of `{prefix}`"
    assert max(len(line) for line in lines) <= 120


@pytest.mark.parametrize("command", COMMANDS)
def test_shared_options_mean_the_same_everywhere(command):
    cmd = cli.commands[command]
    for param in cmd.params:
        if not isinstance(param, click.Option):
            continue
        for name, (opts, needle) in VOCABULARY.items():
            spelled = set(opts) & set(param.opts)
            if not spelled:
                continue
            assert param.opts == opts, f"{command}: {param.opts} should be spelled {opts}"
            if name == "fmt":  # what the command writes: text/json/csv on the terminal, a file's format for export
                wanted = {"json", "protobuf"} if command == "export" else {"text", "json"}
                assert wanted <= set(param.type.choices), f"{command}: --format lacks {'/'.join(sorted(wanted))}"
            if name == "repeat":
                assert needle in param.help, f"{command}: -n help should give the range {needle}"
            if name == "target":
                assert param.default == "local"
            if name == "metrics":
                assert param.metavar == "PATTERN" and param.multiple, f"{command}: --metric takes a PATTERN"
            if name == "primary":
                assert param.metavar == "METRIC", f"{command}: --primary takes one METRIC"


def test_n_accepts_the_same_range_everywhere_and_auto_where_it_means_something(tmp_path):
    runner = CliRunner()
    for command in ("run", "sweep", "study"):
        r = runner.invoke(cli, [command, "-n", "101", *(["--", "true"] if command == "run" else [])])
        assert r.exit_code == 2 and "whole number in 1..100" in r.output, (command, r.output)
    assert "or auto[:LIMIT]" in runner.invoke(cli, ["run", "-n", "0", "--", "true"]).output
    assert "the limit of auto must be a whole number in 2..100" in runner.invoke(
        cli, ["run", "-n", "auto:1", "--", "true"]).output
    for command in ("sweep", "study"):  # auto means something only where one run repeats
        r = runner.invoke(cli, [command, "-n", "auto"])
        assert r.exit_code == 2 and "whole number in 1..100" in r.output and "auto" not in r.output.split(
            "Error:")[1].replace("-n auto", ""), (command, r.output)


def test_analysis_tables_as_text_fit_120_columns_and_say_what_they_left_out(tmp_path):
    from mobiperf.orchestration import pipeline
    from mobiperf.analyzers import breakdown_tables
    from synthetic import make_synthetic_run
    from mobiperf.reports.text_table import format_table

    run = make_synthetic_run(tmp_path / "syn", n_requests=2000, repetitions=3, layer_tables=True)
    tables = breakdown_tables(pipeline.analyze(run))
    assert len(tables) >= 4
    for title, df in tables.items():
        text = format_table(df, more_hint=" (--format csv prints every row)")
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 120, title
        assert len(lines) <= 2 + 40 + 1
        if df.height > 40:
            assert lines[-1] == f"… {df.height - 40:,} more rows (--format csv prints every row)"
        # every column is there, named (or shortened with …) in the header
        assert len(lines[1].split("  ")) == df.width


HEAVY_MODULES = ("polars", "numpy", "pyarrow", "numba", "scipy", "plotly", "msgspec", "duckdb")


def test_help_loads_no_data_library():
    """`mobiperf --help` (and a subcommand's help) in a fresh interpreter imports none of the data libraries:
    each costs tens to hundreds of ms at every start (issue 28: --help in 0.3 s). The study and sweep epilogs,
    which need their registries, are written only when their own help is shown."""
    import subprocess
    import sys

    probe = ("import sys, contextlib, io\n"
             "from mobiperf.cli import main\n"
             "sys.argv = ['mobiperf', *sys.argv[1:], '--help']\n"
             "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
             "    try:\n        main()\n    except SystemExit:\n        pass\n"
             f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules), len(out.getvalue()))\n")
    for args in ([], ["run"], ["analyze"], ["query"]):
        got = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60)
        loaded, length = got.stdout.rsplit(" ", 1)
        assert loaded == "[]", f"mobiperf {' '.join(args)} --help imported {loaded}"
        assert int(length) > 200, got.stdout  # the help itself was printed
