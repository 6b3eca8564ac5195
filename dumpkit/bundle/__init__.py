"""Writing bundles (.dkb): a crash dump plus exactly the image pages its analysis read, so
that the report can be reproduced on a machine without the module files. writer.py runs
the analyses and writes a bundle, slim.py chooses the dump bytes a bundle that keeps only
the memory read needs, redact.py masks user names. Opening a bundle is a source
(dumpkit/sources/bundle.py, with the format in sources/bundle_format.py), below the
analyses: this package runs them. The format is docs/bundle-format.md."""
