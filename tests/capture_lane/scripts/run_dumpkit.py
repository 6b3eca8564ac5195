"""`python -m dumpkit` from a checkout that is not installed: the capture lane's Windows
interpreters run this with the checkout's folder as the first argument."""

import sys

sys.path.insert(0, sys.argv.pop(1))
from dumpkit.frontdoor import main

sys.argv[0] = "dumpkit"
main()
