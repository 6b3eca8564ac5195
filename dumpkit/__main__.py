from dumpkit.frontdoor import main

main()
