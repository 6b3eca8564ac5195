"""Bundles (.dkb): a crash dump plus exactly the image pages its analysis read, so that the
report can be reproduced on a machine without the module files. format.py is the
manifest and its checks, writer.py makes a bundle, reader.py opens one as a Target whose
images come from the bundle. The format is docs/bundle-format.md."""
