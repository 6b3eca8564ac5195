from dumpkit.cli import main

main()
