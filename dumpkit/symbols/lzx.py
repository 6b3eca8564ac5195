"""LZX as cabinets use it (CFFOLDER compression type 3): what `symstore /compress`,
`makecab /D CompressionType=LZX` and Microsoft's symbol server write.

The stream is read as 16-bit little-endian words, bits most significant first. It starts
with the E8 header (1 bit, then a 32-bit translation size when set) and is a sequence of
blocks (verbatim, aligned-offset, uncompressed), each with its own Huffman trees whose
code lengths are coded as deltas against the previous block's. Output comes in frames of
32 KiB, one per cabinet data block; the bit stream is realigned to a word at each frame's
end, matches never cross one, and the window (32 KiB to 2 MiB) carries over between them.

Written from the format's public descriptions; the quirks where Microsoft's documents and
its compressor disagree (the aligned tree comes first, 1 MiB and 2 MiB windows have 42 and
50 position slots, an uncompressed block is padded to an even length) follow the compressor,
as libmspack documents them. Every loop is bounded by the output it must produce.
"""

from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Tuple

__all__ = ["FRAME", "LzxError", "lzx_frames"]

FRAME = 32768
_MIN_MATCH = 2
_CHARS = 256
_PRIMARY_LENGTHS = 7
_SECONDARY_LENGTHS = 249
_PRETREE = 20
_ALIGNED = 8
_SLOTS = {15: 30, 16: 32, 17: 34, 18: 36, 19: 38, 20: 42, 21: 50}  # window bits -> position slots
_E8_FRAMES = 32768  # E8 translation stops after the first 1 GiB of output
_VERBATIM, _ALIGNED_BLOCK, _UNCOMPRESSED = 1, 2, 3


def _extra_bits(slot: int) -> int:
    return 0 if slot < 4 else min(17, slot // 2 - 1)


_EXTRA = [_extra_bits(s) for s in range(50)]
_BASE = [0]
for _s in range(49):
    _BASE.append(_BASE[-1] + (1 << _EXTRA[_s]))


class LzxError(ValueError):
    """LZX data that cannot be decoded: the message is one line saying where and why."""


class _Bits:
    """The LZX bit stream: fed one cabinet data block at a time, read MSB-first from
    16-bit little-endian words. Bytes already consumed are dropped when more are fed."""

    _PAD = bytes(16)  # peeks past the fed data read zeros; `overrun` says when they were used

    def __init__(self) -> None:
        self.data = self._PAD
        self.pos = 0  # bit position in `data`
        self.end = 0  # bits fed

    def feed(self, chunk: bytes) -> None:
        drop = (self.pos >> 4) << 1  # whole words already read
        self.data = self.data[drop : self.end >> 3] + chunk + self._PAD
        self.pos -= drop * 8
        self.end = self.end - drop * 8 + len(chunk) * 8

    def peek(self, n: int) -> int:
        """The next n (<= 17) bits, not consumed."""
        d = self.data
        i = (self.pos >> 4) << 1
        v = d[i + 1] << 40 | d[i] << 32 | d[i + 3] << 24 | d[i + 2] << 16 | d[i + 5] << 8 | d[i + 4]
        return (v >> (48 - (self.pos & 15) - n)) & ((1 << n) - 1)

    def read(self, n: int) -> int:
        v = self.peek(n) if n else 0
        self.pos += n
        return v

    def align_word(self) -> None:
        self.pos = (self.pos + 15) & ~15

    def take_bytes(self, n: int) -> bytes:
        """n bytes from a byte-aligned position (an uncompressed block)."""
        at = self.pos >> 3
        if at + n > self.end >> 3:
            raise LzxError("the data ends inside an uncompressed block")
        self.pos += n * 8
        return self.data[at : at + n]

    @property
    def overrun(self) -> bool:
        return self.pos > self.end


class _Tree:
    """A canonical Huffman code as a lookup table over its longest code's bits."""

    def __init__(self, lengths: List[int], what: str):
        self.bits = max(lengths)
        if self.bits == 0:
            self.table: List[int] = []
            return
        room = 1 << self.bits
        if sum(room >> n for n in lengths if n) != room:
            raise LzxError(f"the {what}'s code lengths do not make a complete code")
        table = [0] * room
        code = 0
        for n in range(1, self.bits + 1):
            span = room >> n
            for sym, m in enumerate(lengths):
                if m == n:
                    table[code : code + span] = [sym << 5 | n] * span
                    code += span
        self.table = table

    @property
    def empty(self) -> bool:
        return not self.table

    def decode(self, bits: _Bits) -> int:
        entry = self.table[bits.peek(self.bits)]
        bits.pos += entry & 31
        return entry >> 5


def _read_lengths(bits: _Bits, lengths: List[int], first: int, last: int) -> None:
    """Code lengths first..last-1, as deltas (mod 17) against the previous block's,
    coded with a pretree of 20 symbols read first. A run may write past `last` (the
    compressor's runs do); writes past the table are dropped."""
    pretree = _Tree([bits.read(4) for _ in range(_PRETREE)], "pretree")
    if pretree.empty:
        raise LzxError("a pretree has no codes")
    x = first
    while x < last:
        code = pretree.decode(bits)
        if code == 17:
            run, value = bits.read(4) + 4, 0
        elif code == 18:
            run, value = bits.read(5) + 20, 0
        elif code == 19:  # a run of one length, the delta taken against the run's first entry
            run = bits.read(1) + 4
            delta = pretree.decode(bits)
            if delta > 16:
                raise LzxError("a repeated code length is itself a run")
            value = (lengths[x] - delta) % 17
        else:
            run, value = 1, (lengths[x] - code) % 17
        for _ in range(run):
            if x < len(lengths):
                lengths[x] = value
            x += 1
        if bits.overrun:
            raise LzxError("the data ends inside a block's code lengths")


def _translate_e8(frame: bytearray, start: int, e8_size: int) -> None:
    """Undo the compressor's E8 preprocessing: the 32-bit operand after each 0xE8 byte
    (x86 CALL) that it turned from relative to absolute is made relative again."""
    limit = len(frame) - 10
    i = 0
    while i < limit:
        j = frame.find(0xE8, i, limit)
        if j < 0:
            break
        here = start + j
        target = int.from_bytes(frame[j + 1 : j + 5], "little", signed=True)
        if -here <= target < e8_size:
            rel = target - here if target >= 0 else target + e8_size
            frame[j + 1 : j + 5] = (rel & 0xFFFFFFFF).to_bytes(4, "little")
        i = j + 5


def lzx_frames(blocks: Iterable[Tuple[bytes, int]], window_bits: int) -> Iterator[bytes]:
    """The output frames of one cabinet folder's LZX stream, given its data blocks as
    (compressed bytes, uncompressed size) in order; LzxError on data that does not decode."""
    if window_bits not in _SLOTS:
        raise LzxError(f"window of 2^{window_bits} bytes is not one LZX has (2^15 to 2^21)")
    window = 1 << window_bits
    main_lengths = [0] * (_CHARS + 8 * _SLOTS[window_bits])
    length_lengths = [0] * _SECONDARY_LENGTHS
    main = length = aligned = _Tree([0], "main tree")
    r0 = r1 = r2 = 1
    bits = _Bits()
    source = iter(blocks)
    pending: Optional[Tuple[bytes, int]] = next(source, None)
    if pending is not None:
        bits.feed(pending[0])
    hist = bytearray()  # the window's worth of output before the current frame, then the frame
    produced = 0  # output bytes before `hist`
    e8_size = -1
    e8_started = False
    block_type = 0
    block_left = 0
    block_odd = False
    index = 0
    while pending is not None:
        frame_size = pending[1]
        if not 0 < frame_size <= FRAME:
            raise LzxError(f"data block {index} says it holds {frame_size} bytes (a frame is 1 to {FRAME})")
        pending = next(source, None)  # one block ahead: a frame's bits may run into the next block
        if pending is not None:
            bits.feed(pending[0])
        if e8_size < 0:  # the stream's header: is E8 translation on, and over how many bytes
            e8_size = 0
            if bits.read(1):
                e8_size = bits.read(16) << 16 | bits.read(16)
                e8_size -= (e8_size & 0x80000000) << 1  # a signed 32-bit value
        frame_start = len(hist)
        frame_end = frame_start + frame_size
        while len(hist) < frame_end:
            if block_left == 0:
                block_type = bits.read(3)
                block_left = bits.read(16) << 8 | bits.read(8)
                if block_type == _ALIGNED_BLOCK:
                    aligned = _Tree([bits.read(3) for _ in range(_ALIGNED)], "aligned-offset tree")
                if block_type in (_VERBATIM, _ALIGNED_BLOCK):
                    _read_lengths(bits, main_lengths, 0, _CHARS)
                    _read_lengths(bits, main_lengths, _CHARS, len(main_lengths))
                    main = _Tree(main_lengths, "main tree")
                    if main.empty:
                        raise LzxError(f"block in frame {index} has an empty main tree")
                    e8_started = e8_started or main_lengths[0xE8] != 0
                    _read_lengths(bits, length_lengths, 0, _SECONDARY_LENGTHS)
                    length = _Tree(length_lengths, "length tree")
                elif block_type == _UNCOMPRESSED:
                    e8_started = True
                    bits.pos += 16 if bits.pos & 15 == 0 else 0  # 1 to 16 bits of padding, never 0
                    bits.align_word()
                    raw = bits.take_bytes(12)
                    r0, r1, r2 = (int.from_bytes(raw[k : k + 4], "little") for k in (0, 4, 8))
                    block_odd = bool(block_left & 1)
                else:
                    raise LzxError(f"block of unknown type {block_type} in frame {index}")
                if block_left == 0:
                    raise LzxError(f"empty block in frame {index}")
                if bits.overrun:
                    raise LzxError(f"the data ends inside a block header in frame {index}")
            run = min(block_left, frame_end - len(hist))
            if block_type == _UNCOMPRESSED:
                hist += bits.take_bytes(run)
                block_left -= run
                if block_left == 0 and block_odd:
                    bits.pos += 8  # an odd-sized uncompressed block is padded to a word
                continue
            stop = len(hist) + run
            is_aligned = block_type == _ALIGNED_BLOCK
            while len(hist) < stop:
                if bits.pos > bits.end:
                    raise LzxError(f"the data ends inside frame {index}")
                sym = main.decode(bits)
                if sym < _CHARS:
                    hist.append(sym)
                    continue
                sym -= _CHARS
                size = sym & 7
                if size == _PRIMARY_LENGTHS:
                    if length.empty:
                        raise LzxError(f"a match in frame {index} needs the length tree, which is empty")
                    size += length.decode(bits)
                size += _MIN_MATCH
                slot = sym >> 3
                if slot == 0:
                    offset = r0
                elif slot == 1:
                    offset, r1, r0 = r1, r0, r1
                elif slot == 2:
                    offset, r2, r0 = r2, r0, r2
                else:
                    extra = _EXTRA[slot]
                    offset = _BASE[slot] - 2
                    if is_aligned and extra >= 3:
                        offset += (bits.read(extra - 3) << 3) + aligned.decode(bits)
                    else:
                        offset += bits.read(extra)
                    r0, r1, r2 = offset, r0, r1
                if len(hist) + size > stop:
                    raise LzxError(f"a match runs past the end of its block or frame in frame {index}")
                src = len(hist) - offset
                if offset <= 0 or src < 0 or offset > window:
                    raise LzxError(f"a match in frame {index} reaches before the start of the data")
                if offset >= size:
                    hist += hist[src : src + size]
                else:  # overlapping: the match repeats its last `offset` bytes
                    piece = hist[src:]
                    hist += (piece * (size // offset + 1))[:size]
            block_left -= run
        if block_type != _UNCOMPRESSED:
            bits.align_word()
        if bits.overrun:
            raise LzxError(f"the data ends inside frame {index}")
        frame = hist[frame_start:frame_end]
        if e8_started and e8_size and index < _E8_FRAMES and frame_size > 10:
            _translate_e8(frame, produced + frame_start, e8_size)
        yield bytes(frame)
        index += 1
        if len(hist) > 2 * window:  # keep one window of history; trimmed in bulk, not per frame
            cut = len(hist) - window
            del hist[:cut]
            produced += cut
