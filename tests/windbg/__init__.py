"""windbg_scripts/tfstack.py on a pykd stand-in (tests/support/fakes/pykd.py); the real engine is the tests/windbg_real and tests/windbg_host lanes."""
