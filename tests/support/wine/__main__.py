"""`python -m tests.support.wine`: build (or find) the Wine lanes' environment and print
where it is."""

from tests.support.wine import main

main()
