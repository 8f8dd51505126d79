"""The table of subcommands: each declares its arguments beside the one function that calls
its stage. Stages and views are imported only when their command runs, so reading this table
(and `tunelab --help`) imports nothing heavy. Parsing, exit codes and errors: `cli.py`.

The commands register in the order a lab uses them: preparing (`prepare`), training and judging
(`train`), handing over (`handover`)."""

from tunelab.commands.table import COMMANDS, Command

# isort: off
from tunelab.commands import prepare, train, handover  # noqa: F401  (they register, in order)
# isort: on

__all__ = ["COMMANDS", "Command"]
