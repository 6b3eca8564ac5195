"""The defaults every front door shares, named once: how far the crashing thread is walked
and what counts as an oversized stack frame (options of analyze and stack, the engine's
Options, the walker). Plain numbers, so the command line can use them without importing
the engine."""

# Frames walked on the crashing thread at most: a stack overflow's recursion can hold 10^6
# frames and more (the 1.4M-frame sample), and a walk must stop somewhere on a damaged one.
MAX_FRAMES = 2_000_000

# A frame this large or larger is named as oversized (the stack's guard region is 4-12 KiB;
# a frame of 64 KiB is a buffer that belongs on the heap).
OVERSIZED_FRAME = 64 * 1024
