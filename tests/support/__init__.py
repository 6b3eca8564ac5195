"""What the tests build their inputs from, in one place: synthetic minidumps (synth_dump),
PE images (synth_pe), stacks and code for the walker (asm), stand-ins for a Target and for
pykd (fakes/), the sample and real dumps and the CLI as a user runs it (samples), the CLI
run under a memory limit and measured (measured), bundles and the reports compared across
them (bundles), and the opt-in hook of the Wine lanes (lanes). Fixtures and pytest hooks
stay in the conftest.py files."""
