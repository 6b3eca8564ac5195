"""What each command does, without an argument parser: one module per command body
(analyze, explain, stack, info, bundle, triage, capture, wer), over the helpers every
command shares (exits, inputs, output). typer's declarations in cli.py and the fast path
in frontdoor.py only parse and call these, so a command behaves the same whichever parsed
its arguments.

Nothing here imports typer (~60 ms) or the engine at import time: `dumpkit explain` and
a plain `dumpkit analyze` import only the modules of their own command."""
