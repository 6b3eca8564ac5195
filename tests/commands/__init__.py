"""The commands (dumpkit/commands, cli.py) as a user runs them."""
