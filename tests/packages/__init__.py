"""dumpkit/packages: versions from the installed packages that own the modules."""
