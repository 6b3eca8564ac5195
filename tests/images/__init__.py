"""dumpkit/images: finding, loading and caching the binaries a dump names, and what a report says when they are missing."""
