"""MSVC C++ decorated names (``?Flatten@swig@tensorflow@@YAPEAU_object@@PEAU3@_N@Z``), read back
into the declaration WinDbg shows.

The grammar is Microsoft's (undocumented, known from what compilers emit); the text written
for each construct follows LLVM's ``llvm-undname`` spelling, the oracle the tests compare with,
but for one thing: a back-reference to an anonymous namespace is written `anonymous
namespace' as Microsoft's undname and WinDbg write it, not as its raw key (``0xaa65ea30``).
The subset covered is what real MSVC-built modules export and what PDB publics hold:
namespaces and nested names, templates with type, integer, pointer and pack arguments,
operators, constructors/destructors, name and parameter back-references, pointers and
references with their qualifiers, function pointers, arrays, calling conventions, anonymous
namespaces, member-function qualifiers, static data, vftables and RTTI descriptors, string
literals, statics local to functions (extern "C" ones too), and a function's name with the
``$N`` of one of its catch funclets (read as the function). Other text after a complete name
is refused, where llvm-undname ignores it.

Untrusted input: a dump or a PDB decides the name. Nesting is capped (``MAX_DEPTH``), the
text produced is capped (``MAX_OUTPUT``), and anything unexpected raises ``Malformed``,
which ``parse`` turns into None. Back-references can make the output much longer than the
input, hence the output cap.
"""

from __future__ import annotations

import re
from typing import List, NamedTuple, Optional, Tuple

MAX_DEPTH = 96  # nested types, templates, symbols; TensorFlow 2.13 exports reach 21
MAX_OUTPUT = 16384  # characters of any one rendered piece
MAX_INPUT = 4096  # longer decorated names are not read (MSVC itself truncates at 4 KiB)

# A function's name followed by ``$N`` names its Nth catch funclet (the PDB label
# ``__catch$?f@@YAXXZ$0``): it reads as the function, as llvm-undname reads it.
_FUNCLET = re.compile(r"\$[0-9]{1,4}")


class Malformed(Exception):
    """The name does not follow the grammar (or exceeds a cap)."""


# --- fixed vocabularies --------------------------------------------------------------------

_PRIMITIVES = {
    "C": "signed char",
    "D": "char",
    "E": "unsigned char",
    "F": "short",
    "G": "unsigned short",
    "H": "int",
    "I": "unsigned int",
    "J": "long",
    "K": "unsigned long",
    "M": "float",
    "N": "double",
    "O": "long double",
    "X": "void",
}
_PRIMITIVES_EXT = {
    "J": "__int64",
    "K": "unsigned __int64",
    "L": "__int128",
    "M": "unsigned __int128",
    "N": "bool",
    "Q": "char8_t",
    "S": "char16_t",
    "U": "char32_t",
    "W": "wchar_t",
}
_TAGS = {"T": "union", "U": "struct", "V": "class", "W": "enum"}

_CALLING_CONVENTIONS = {
    "A": "__cdecl",
    "B": "__cdecl",
    "C": "__pascal",
    "D": "__pascal",
    "E": "__thiscall",
    "F": "__thiscall",
    "G": "__stdcall",
    "H": "__stdcall",
    "I": "__fastcall",
    "J": "__fastcall",
    "M": "__clrcall",
    "N": "__clrcall",
    "O": "__eabi",
    "Q": "__vectorcall",
    "S": "__swift_1",
    "T": "__swift_2",
    "U": "__swift_3",
    "W": "__swift_4",
}

# ``?X`` operator codes, then ``?_X`` and ``?__X``.
_OPERATORS = {
    "2": "operator new",
    "3": "operator delete",
    "4": "operator=",
    "5": "operator>>",
    "6": "operator<<",
    "7": "operator!",
    "8": "operator==",
    "9": "operator!=",
    "A": "operator[]",
    "C": "operator->",
    "D": "operator*",
    "E": "operator++",
    "F": "operator--",
    "G": "operator-",
    "H": "operator+",
    "I": "operator&",
    "J": "operator->*",
    "K": "operator/",
    "L": "operator%",
    "M": "operator<",
    "N": "operator<=",
    "O": "operator>",
    "P": "operator>=",
    "Q": "operator,",
    "R": "operator()",
    "S": "operator~",
    "T": "operator^",
    "U": "operator|",
    "V": "operator&&",
    "W": "operator||",
    "X": "operator*=",
    "Y": "operator+=",
    "Z": "operator-=",
}
_OPERATORS_U = {
    "0": "operator/=",
    "1": "operator%=",
    "2": "operator>>=",
    "3": "operator<<=",
    "4": "operator&=",
    "5": "operator|=",
    "6": "operator^=",
    "7": "`vftable'",
    "8": "`vbtable'",
    "9": "`vcall'",
    "A": "`typeof'",
    "B": "`local static guard'",
    "C": "`string'",
    "D": "`vbase dtor'",
    "E": "`vector deleting dtor'",
    "F": "`default ctor closure'",
    "G": "`scalar deleting dtor'",
    "H": "`vector ctor iterator'",
    "I": "`vector dtor iterator'",
    "J": "`vector vbase ctor iterator'",
    "K": "`virtual displacement map'",
    "L": "`eh vector ctor iterator'",
    "M": "`eh vector dtor iterator'",
    "N": "`eh vector vbase ctor iterator'",
    "O": "`copy ctor closure'",
    "S": "`local vftable'",
    "T": "`local vftable ctor closure'",
    "U": "operator new[]",
    "V": "operator delete[]",
    "X": "`placement delete closure'",
    "Y": "`placement delete[] closure'",
}
_OPERATORS_UU = {
    "A": "`managed vector ctor iterator'",
    "B": "`managed vector dtor iterator'",
    "C": "`EH vector copy ctor iterator'",
    "D": "`EH vector vbase copy ctor iterator'",
    "G": "`vector copy ctor iterator'",
    "H": "`vector vbase copy constructor iterator'",
    "I": "`managed vector vbase copy constructor iterator'",
    "J": "`local static thread guard'",
    "L": "operator co_await",
    "M": "operator<=>",
}
_RTTI = {
    "0": "`RTTI Type Descriptor'",
    "2": "`RTTI Base Class Array'",
    "3": "`RTTI Class Hierarchy Descriptor'",
    "4": "`RTTI Complete Object Locator'",
}


def _function_class(c: str) -> Tuple[str, str]:
    """Access and storage of a function from its class letter ('' for globals)."""
    if c in "YZ":
        return "", ""
    if not ("A" <= c <= "X"):
        raise Malformed(c)
    group = (ord(c) - ord("A")) // 8  # 0 private, 1 protected, 2 public
    kind = ((ord(c) - ord("A")) % 8) // 2  # 0 member, 1 static, 2 virtual, 3 thunk
    access = ("private", "protected", "public")[group]
    return access, ("", "static", "virtual", "thunk")[kind]


# --- rendered types --------------------------------------------------------------------------


class _Type:
    """A type split around the declarator spot: ``pre`` + name + ``post`` (a plain class with
    slots, not a dataclass: it is built for every type in every name).

    cv-qualifiers are kept apart from the text because MSVC may state them twice (a
    reference to a const pointer names the const on the reference's pointee and again on
    the pointer) and they are written once.
    """

    __slots__ = ("core", "post", "kind", "func", "const", "volatile", "restrict")

    def __init__(
        self,
        core: str,
        post: str = "",
        kind: str = "plain",
        func: Optional["_Func"] = None,
        const: bool = False,
        volatile: bool = False,
        restrict: bool = False,
    ) -> None:
        if len(core) + len(post) > MAX_OUTPUT:
            raise Malformed("too long")
        self.core = core
        self.post = post
        self.kind = kind  # plain | pointer | array | function
        self.func = func
        self.const = const
        self.volatile = volatile
        self.restrict = restrict

    @property
    def pre(self) -> str:
        words = [
            w for w, on in (("const", self.const), ("volatile", self.volatile), ("__restrict", self.restrict)) if on
        ]
        if not words:
            return self.core
        q = " ".join(words)
        if self.kind == "pointer":
            return self.core + q  # ``*const``
        return self.core + " " + q

    def text(self) -> str:
        return self.pre + self.post

    def qualified(self, const: bool, volatile: bool) -> "_Type":
        if not (const or volatile):
            return self
        return _Type(
            self.core, self.post, self.kind, self.func, self.const or const, self.volatile or volatile, self.restrict
        )


class _Func(NamedTuple):
    """A function signature, kept in parts so a pointer can put its calling convention inside."""

    ret: Optional[_Type]
    cc: str
    params: str
    quals: str


def _is_digit(c: str) -> bool:
    return c != "" and c in "0123456789"  # not str.isdigit(): that accepts any Unicode digit


def _space(text: str) -> str:
    """A space is needed before the next word when the text ends in a word or a '>'."""
    if text and (text[-1].isalnum() or text[-1] == ">"):
        return text + " "
    return text


class _Backrefs:
    """One back-reference context: MSVC opens a fresh one for each template argument list."""

    __slots__ = ("names", "params")

    def __init__(self) -> None:
        self.names: List[Tuple[str, str]] = []  # (key, text), at most 10
        self.params: List[str] = []  # rendered parameter types, at most 10

    def remember_name(self, key: str, text: str) -> None:
        if len(self.names) < 10 and all(k != key for k, _ in self.names):
            self.names.append((key, text))


class _Symbol(NamedTuple):
    """What a decorated name declares: the qualified name, and the whole declaration."""

    qualified: str
    full: str


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.depth = 0
        self.refs = _Backrefs()
        self.function_end = -1  # where the last function encoding read ended

    # --- cursor -----------------------------------------------------------------------------

    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.s[j] if j < len(self.s) else ""

    def take(self) -> str:
        if self.i >= len(self.s):
            raise Malformed("truncated")
        c = self.s[self.i]
        self.i += 1
        return c

    def eat(self, prefix: str) -> bool:
        if self.s.startswith(prefix, self.i):
            self.i += len(prefix)
            return True
        return False

    def expect(self, prefix: str) -> None:
        if not self.eat(prefix):
            raise Malformed("expected " + prefix)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Malformed("too deep")

    def leave(self) -> None:
        self.depth -= 1

    # --- numbers and identifiers -----------------------------------------------------------

    def number(self) -> Tuple[int, bool]:
        """An encoded number: '0'-'9' are 1-10, else hex digits A-P ended by '@'; '?' negates."""
        negative = self.eat("?")
        c = self.take()
        if _is_digit(c):
            return int(c) + 1, negative
        value = 0
        digits = 0
        while c != "@":
            if not ("A" <= c <= "P") or digits >= 16:
                raise Malformed("number")
            value = value * 16 + ord(c) - ord("A")
            digits += 1
            c = self.take()
        return value, negative

    def int32(self) -> int:
        """A number the compiler wrote as an unsigned 32-bit pattern (vtordisp offsets)."""
        value, negative = self.number()
        value &= 0xFFFFFFFF
        value = value - (1 << 32) if value >= 1 << 31 else value
        return -value if negative else value

    def signed_number(self) -> str:
        value, negative = self.number()
        return ("-" if negative else "") + str(value)

    def identifier(self) -> str:
        end = self.s.find("@", self.i)
        if end <= self.i:
            raise Malformed("identifier")
        word = self.s[self.i : end]
        self.i = end + 1
        return word

    def through_at(self, back: int) -> str:
        """The text from ``back`` characters before the cursor through the next '@', consumed."""
        end = self.s.find("@", self.i)
        if end < 0:
            raise Malformed("unterminated")
        text = self.s[self.i - back : end + 1]
        self.i = end + 1
        return text

    def backref_name(self) -> str:
        n = int(self.take())
        if n >= len(self.refs.names):
            raise Malformed("name backref")
        return self.refs.names[n][1]

    # --- names ---------------------------------------------------------------------------------

    def template_name(self, remember: bool) -> str:
        """``?$name@args@`` (the ``?$`` already read): args get a context of their own."""
        self.enter()
        outer = self.refs
        self.refs = _Backrefs()
        try:
            if self.peek() == "?":
                self.take()
                name = self.operator_name()
            else:
                name = self.identifier()
                self.refs.remember_name(name, name)
            args = self.template_args()
        finally:
            self.refs = outer
        self.leave()
        text = name + "<" + args + ">"
        if len(text) > MAX_OUTPUT:
            raise Malformed("too long")
        if remember:
            self.refs.remember_name(text, text)
        return text

    def template_args(self) -> str:
        out: List[str] = []
        size = 0
        while not self.eat("@"):
            arg = self.template_arg()
            if arg is not None:
                out.append(arg)
                size += len(arg) + 2
            if size > MAX_OUTPUT:
                raise Malformed("too long")
        return ", ".join(out)

    def template_arg(self) -> Optional[str]:
        c = self.peek()
        if c == "?" and _is_digit(self.peek(1)):
            self.take()
            value, negative = self.number()
            return "`template-parameter" + ("-" if negative else "") + str(value) + "'"
        if c != "$" or self.s.startswith("$$C", self.i) or self.s.startswith("$$Q", self.i):
            return self.type().text()
        if self.eat("$$V") or self.eat("$$Z") or self.eat("$$$V") or self.eat("$S"):
            return None  # empty pack, pack separator
        if self.eat("$$Y"):  # alias template
            return self.qualified_type_name()
        if self.eat("$0"):
            return self.signed_number()
        if self.eat("$1"):
            return ("&" if self.peek() == "?" else "") + self.symbol_name_only()
        if self.eat("$H") or self.eat("$I") or self.eat("$J"):
            return self.member_pointer_arg(self.s[self.i - 1])
        if self.eat("$E"):
            return self.symbol_name_only()
        if self.eat("$F") or self.eat("$G"):
            values = [self.signed_number() for _ in range(2 if self.s[self.i - 1] == "F" else 3)]
            return "{" + ", ".join(values) + "}"
        if self.eat("$M"):
            self.enter()
            self.type()  # the type of an ``auto`` parameter is not shown
            arg = self.template_arg()
            self.leave()
            return arg
        return self.type().text()

    def member_pointer_arg(self, kind: str) -> str:
        # $H/$I/$J: pointer to member function with 1/2/3 adjustments
        name = "&" + self.symbol_name_only() if self.peek() == "?" else ""
        adjustments = [self.signed_number() for _ in range(ord(kind) - ord("G"))]
        if name:
            return "{" + ", ".join([name] + adjustments) + "}"
        return "{" + ", ".join(adjustments) + "}"

    def symbol_name_only(self) -> str:
        """A nested symbol inside a template argument: its full text."""
        self.enter()
        sym = self.symbol()
        self.leave()
        return sym.full

    def operator_name(self) -> str:
        """The name after a leading ``?`` in a function name: ctor, dtor, operator, special."""
        c = self.take()
        if c == "0":
            return "\x00ctor"
        if c == "1":
            return "\x00dtor"
        if c == "B":
            return "\x00conv"
        if c == "_":
            d = self.take()
            if d == "_":
                e = self.take()
                if e == "K":
                    return 'operator ""' + self.identifier()
                if e in _OPERATORS_UU:
                    return _OPERATORS_UU[e]
                raise Malformed("operator __" + e)
            if d == "R":
                raise Malformed("rtti here")
            if d in _OPERATORS_U:
                return _OPERATORS_U[d]
            raise Malformed("operator _" + d)
        if c in _OPERATORS:
            return _OPERATORS[c]
        raise Malformed("operator " + c)

    def scope_piece(self) -> str:
        c = self.peek()
        if _is_digit(c):
            return self.backref_name()
        if self.eat("?$"):
            return self.template_name(remember=True)
        if self.eat("?A"):
            text = "`anonymous namespace'"
            self.refs.remember_name(self.through_at(2), text)  # keyed by ``?A0x...@``
            return text
        if c == "?" and (_is_digit(self.peek(1)) or "A" <= self.peek(1) <= "P"):
            return self.local_scope()
        if c == "?":
            raise Malformed("scope")
        name = self.identifier()
        self.refs.remember_name(name, name)
        return name

    def local_scope(self) -> str:
        """``?N?symbol`` : a name local to function ``symbol`` (the ``N``th scope in it)."""
        self.expect("?")
        value, _ = self.number()
        self.expect("?")
        self.enter()
        sym = self.symbol()  # shares the enclosing back-references
        self.leave()
        return "`" + sym.full + "'::`" + str(value) + "'"

    def scopes(self) -> List[str]:
        """Scope pieces up to the closing '@', innermost first as mangled."""
        out: List[str] = []
        while not self.eat("@"):
            out.append(self.scope_piece())
            if len(out) > 64:
                raise Malformed("too many scopes")
        return out

    def qualified_type_name(self) -> str:
        """The name of a class/struct/union/enum: unqualified piece then scopes."""
        c = self.peek()
        if _is_digit(c):
            first = self.backref_name()
        elif self.eat("?$"):
            first = self.template_name(remember=True)
        else:
            first = self.identifier()
            self.refs.remember_name(first, first)
        parts = self.scopes()
        return _join_scopes(first, parts)

    # --- types -----------------------------------------------------------------------------------

    def type(self, result: bool = False) -> _Type:
        self.enter()
        t = self._type(result)
        self.leave()
        return t

    def _type(self, result: bool) -> _Type:
        const = volatile = False
        if result and self.eat("?"):
            const, volatile = self.cv(self.take())
        elif self.eat("$$C"):
            const, volatile = self.cv(self.take())
        c = self.take()
        if c in _TAGS:
            if c == "W" and self.take() not in "01234567":
                raise Malformed("enum")
            t = _Type(_TAGS[c] + " " + self.qualified_type_name())
        elif c in _PRIMITIVES:
            t = _Type(_PRIMITIVES[c])
        elif c in "PQRS":
            t = self.pointer("*", c)
        elif c == "A" or c == "B":
            t = self.pointer("&", "P" if c == "A" else "R")
        elif c == "_":
            d = self.take()
            if d == "T":
                t = _Type("decltype(auto)")
            elif d == "P":
                t = _Type("auto")
            elif d in _PRIMITIVES_EXT:
                t = _Type(_PRIMITIVES_EXT[d])
            else:
                raise Malformed("type _" + d)
        elif c == "Y":
            t = self.array()
        elif c == "$":
            t = self.dollar_type()
        elif c == "?" and not result:
            # template parameter reference ``?N`` used as a type
            value, negative = self.number()
            t = _Type("`template-parameter" + ("-" if negative else "") + str(value) + "'")
        else:
            raise Malformed("type " + c)
        return t.qualified(const, volatile)

    def dollar_type(self) -> _Type:
        """Types spelled ``$$x``: rvalue references, nullptr_t, function types, array types."""
        self.expect("$")
        c = self.take()
        if c == "Q" or c == "R":
            return self.pointer("&&", "P" if c == "Q" else "R")
        if c == "T":
            return _Type("std::nullptr_t")
        if c == "A":
            if self.eat("6"):
                return self.function_type(this_quals=False)
            if self.eat("8@@"):
                return self.function_type(this_quals=True)
            raise Malformed("function type")
        if c == "B":
            return self.type()
        raise Malformed("type $$" + c)

    def cv(self, c: str) -> Tuple[bool, bool]:
        if c not in "ABCD":
            raise Malformed("cv " + c)
        n = ord(c) - ord("A")
        return bool(n & 1), bool(n & 2)

    def pointer_ext(self) -> Tuple[bool, bool]:
        """Pointer extension letters: __ptr64 (not shown), __restrict, __unaligned."""
        unaligned = restrict = False
        for _ in range(3):
            if self.eat("E"):
                continue
            if self.eat("I"):
                restrict = True
            elif self.eat("F"):
                unaligned = True
            else:
                break
        return unaligned, restrict

    def pointer(self, sym: str, code: str) -> _Type:
        ptr_const = code in "QS"
        ptr_volatile = code in "RS"
        if self.eat("6"):
            func = self.function_type(this_quals=False)
            return _pointer_to(func, sym, "", ptr_const, ptr_volatile, False, False)
        if self.eat("8"):
            cls = self.qualified_type_name()
            func = self.function_type(this_quals=True)
            return _pointer_to(func, sym, cls + "::", ptr_const, ptr_volatile, False, False)
        unaligned, restrict = self.pointer_ext()
        q = self.take()
        member = ""
        if q in "QRSTUVWX":  # pointer to data member: cv then class
            n = ord(q) - ord("Q")
            const, volatile = bool(n & 1), bool(n & 2)
            member = self.qualified_type_name() + "::"
        else:
            const, volatile = self.cv(q)
        pointee = self.array() if self.eat("Y") else self.type()
        pointee = pointee.qualified(const, volatile)
        return _pointer_to(pointee, sym, member, ptr_const, ptr_volatile, unaligned, restrict)

    def array(self) -> _Type:
        count, negative = self.number()
        if negative or count == 0 or count > 32:
            raise Malformed("array rank")
        dims = "".join("[" + str(self.number()[0] or "") + "]" for _ in range(count))
        const = volatile = False
        if self.eat("$$C"):
            const, volatile = self.cv(self.take())
        elem = self.type()
        if const or volatile:
            elem = elem.qualified(const, volatile)
        return _Type(elem.pre, dims + elem.post, "array")

    def function_type(self, this_quals: bool) -> _Type:
        quals = ""
        if this_quals:
            quals = self.this_qualifiers()
        cc = _CALLING_CONVENTIONS.get(self.take())
        if cc is None:
            raise Malformed("calling convention")
        ret = None if self.eat("@") else self.type(result=True)
        params = self.params()
        quals += self.throw_spec()
        f = _Func(ret, cc, params, quals)
        pre = (ret.pre + " " if ret is not None else "") + cc
        return _Type(pre, params + quals + (ret.post if ret is not None else ""), "function", f)

    def this_qualifiers(self) -> str:
        unaligned, restrict = self.pointer_ext()
        ref = ""
        if self.eat("G"):
            ref = " &"
        elif self.eat("H"):
            ref = " &&"
        const, volatile = self.cv(self.take())
        words = []
        if const:
            words.append("const")
        if volatile:
            words.append("volatile")
        if unaligned:
            words.append("__unaligned")
        if restrict:
            words.append("__restrict")
        return "".join(" " + w for w in words) + ref

    def throw_spec(self) -> str:
        if self.eat("_E"):
            return " noexcept"
        self.expect("Z")
        return ""

    def params(self) -> str:
        if self.eat("X"):
            return "(void)"
        out: List[str] = []
        size = 0
        while True:
            if self.eat("@"):
                break
            if self.eat("Z"):
                out.append("...")
                break
            c = self.peek()
            if _is_digit(c):
                self.take()
                n = int(c)
                if n >= len(self.refs.params):
                    raise Malformed("param backref")
                out.append(self.refs.params[n])
            else:
                start = self.i
                text = self.type().text()
                if self.i - start > 1 and len(self.refs.params) < 10:
                    self.refs.params.append(text)
                out.append(text)
            size += len(out[-1]) + 2
            if size > MAX_OUTPUT:
                raise Malformed("too long")
        return "(" + ", ".join(out) + ")"

    # --- symbols ---------------------------------------------------------------------------------

    def symbol(self) -> _Symbol:
        """``?`` name encoding; the leading '?' not yet read."""
        self.expect("?")
        if self.eat("?@"):
            text = self.through_at(3)  # an MD5-hashed name (over 4 KiB decorated): kept whole
            return _Symbol(text, text)
        if self.eat("?_R"):
            return self.rtti()
        if self.eat("?_C@_"):
            text = self.string_literal()
            return _Symbol(text, text)
        if self.eat("?__E") or self.eat("?__F"):
            return self.init_fini_stub(self.s[self.i - 1] == "E")
        if self.eat("?$"):
            first = self.template_name(remember=False)
        elif self.eat("?"):
            first = self.operator_name()
        elif _is_digit(self.peek()):
            first = self.backref_name()
        else:
            first = self.identifier()
            self.refs.remember_name(first, first)
        scopes = self.scopes()
        first = _structor(first, scopes)
        return self.encoding(first, scopes, conversion=first.startswith("\x00conv"))

    def init_fini_stub(self, init: bool) -> _Symbol:
        """The compiler's function that constructs (or, at exit, destroys) a static object."""
        label = "`dynamic initializer for '" if init else "`dynamic atexit destructor for '"
        if self.eat("?"):  # a static data member, mangled as a whole variable
            self.enter()
            var = self.symbol()
            self.leave()
            self.expect("@")
            target = var.qualified
        else:
            if _is_digit(self.peek()):
                first = self.backref_name()
            else:
                first = self.identifier()
                self.refs.remember_name(first, first)
            target = _join_scopes(first, self.scopes())
        return self.encoding(label + target + "''", [], conversion=False)

    def string_literal(self) -> str:
        """``??_C@_<width><length><crc>@<bytes>@``: MSVC keeps the first bytes of a long literal,
        so the text ends in ``...`` when it is not all there."""
        width = {"0": 1, "1": 2}.get(self.take())
        if width is None:
            raise Malformed("string width")
        length, _ = self.number()  # in bytes, terminator included
        self.number()  # CRC, written like a number
        data = bytearray()
        while not self.eat("@"):
            c = self.take()
            if c != "?":
                data.append(ord(c))
            elif self.eat("$"):
                hi, lo = self.take(), self.take()
                if not ("A" <= hi <= "P" and "A" <= lo <= "P"):
                    raise Malformed("string byte")
                data.append((ord(hi) - 65) * 16 + ord(lo) - 65)
            else:
                d = self.take()
                if _is_digit(d):
                    data.append(ord(",/\\:. \n\t'-"[int(d)]))
                elif "a" <= d <= "z":
                    data.append(0xE1 + ord(d) - ord("a"))
                elif "A" <= d <= "Z":
                    data.append(0xC1 + ord(d) - ord("A"))
                else:
                    raise Malformed("string escape")
            if len(data) > 128:  # 32 characters of 4 bytes
                raise Malformed("string too long")
        if width == 2:
            if len(data) % 2 or length % 2 or length < 2 or len(data) > length:
                raise Malformed("wide string")
            units = [data[k] << 8 | data[k + 1] for k in range(0, len(data), 2)]
            # MSVC encodes a wide literal whole up to 32 units, and may leave its terminator
            # out (L"python" is 14 bytes with 12 encoded): the declared length tells.
            complete = length <= 64
            if complete and len(units) == length // 2:
                units.pop()  # the terminator's slot
            prefix = "L"
        else:
            if length == 0:
                raise Malformed("empty string")
            size = _char_size(bytes(data), length)
            units = [int.from_bytes(data[k : k + size], "little") for k in range(0, len(data) - size + 1, size)]
            complete = length <= len(data)
            if complete and units:
                units.pop()  # the terminator
            prefix = {1: "", 2: "u", 4: "U"}[size]
        body = "".join(_char_literal(u) for u in units)
        return prefix + '"' + body + '"' + ("" if complete else "...")

    def rtti(self) -> _Symbol:
        c = self.take()
        if c == "0":
            t = self.type(result=True)
            self.expect("@8")
            text = _space(t.pre) + "`RTTI Type Descriptor'" + t.post
            return _Symbol(text, text)
        if c == "1":
            nums = [self.signed_number() for _ in range(4)]
            label = "`RTTI Base Class Descriptor at (" + ", ".join(nums) + ")'"
        elif c in "234":
            label = _RTTI[c]
        else:
            raise Malformed("rtti")
        name = _join_scopes(label, self.scopes())
        if c == "4":  # the locator is data, encoded like a vftable
            self.expect("6")
            const, _ = self.cv_ext()
            self.expect("@")
            return _Symbol(name, ("const " if const else "") + name)
        self.expect("8")
        return _Symbol(name, name)

    def encoding(self, first: str, scopes: List[str], conversion: bool) -> _Symbol:
        extern_c = self.eat("$$J0")
        c = self.take()
        if c == "9" and not extern_c:
            # an extern "C" function named only as the scope of its static locals: no
            # signature follows
            name = _join_scopes(first, scopes)
            self.function_end = self.i
            return _Symbol(name, 'extern "C" ' + name)
        if _is_digit(c) and not extern_c:
            return self.data(first, scopes, c)
        adjustor = ""
        if c == "$":
            # a virtual function reached through a vtordisp thunk: $0-$5, or $R0-$R5 (ex)
            ex = self.eat("R")
            d = self.take()
            if d not in "012345":
                raise Malformed("vtordisp")
            access, kind = ("private", "protected", "public")[int(d) // 2], "thunk"
            nums = [str(self.int32()) for _ in range(4 if ex else 2)]
            adjustor = "`vtordisp" + ("ex{" if ex else "{") + ", ".join(nums) + "}'"
        else:
            access, kind = _function_class(c)
        if kind == "thunk" and not adjustor:
            # a virtual function reached through a this-adjusting thunk
            adjustor = "`adjustor{" + self.signed_number() + "}'"
        member = bool(access) and kind != "static"
        quals = self.this_qualifiers() if member else ""
        cc = _CALLING_CONVENTIONS.get(self.take())
        if cc is None:
            raise Malformed("calling convention")
        ret = None if self.eat("@") else self.type(result=True)
        if conversion:
            if ret is None:
                raise Malformed("conversion without type")
            # ``operator T``; a template one is written ``operator<args> T``
            first = first.replace("\x00conv", "operator", 1) + " " + ret.text()
        params = self.params()
        quals += self.throw_spec()
        name = _join_scopes(first, scopes)
        head = "[thunk]: " if adjustor else ""
        if access:
            head += access + ": "
        if kind:
            head += ("virtual" if adjustor else kind) + " "
        if extern_c:
            head += 'extern "C" '
        full = head + (ret.pre + " " if ret is not None else "") + cc + " " + name + adjustor + params + quals
        if ret is not None:
            full += ret.post
        if len(full) > MAX_OUTPUT:
            raise Malformed("too long")
        self.function_end = self.i
        return _Symbol(name, full)

    def data(self, first: str, scopes: List[str], c: str) -> _Symbol:
        name = _join_scopes(first, scopes)
        if c == "5" and first.endswith("guard'"):
            # local static guard, numbered when a function has several
            guard = name + ("{" + self.signed_number() + "}" if self.i < len(self.s) else "")
            return _Symbol(guard, guard)
        if c in "012345":
            t = self.type()
            const, volatile = self.cv_ext()
            if t.kind != "pointer":  # for a pointer MSVC repeats the pointee's cv here
                t = t.qualified(const, volatile)
            head = {"0": "private: static ", "1": "protected: static ", "2": "public: static "}.get(c, "")
            return _Symbol(name, head + _space(t.pre) + name + t.post)
        if c in "67":  # vftable / vbtable
            const, _ = self.cv_ext()
            target = ""
            if not self.eat("@"):
                fors = []
                while not self.eat("@"):
                    fors.append("{for `" + self.qualified_type_name() + "'}")
                    if len(fors) > 16:
                        raise Malformed("vftable")
                target = "".join(fors)
            return _Symbol(name + target, ("const " if const else "") + name + target)
        raise Malformed("data " + c)

    def cv_ext(self) -> Tuple[bool, bool]:
        self.pointer_ext()
        return self.cv(self.take())


def _pointer_to(
    pointee: _Type, sym: str, member: str, const: bool, volatile: bool, unaligned: bool, restrict: bool
) -> _Type:
    """``sym`` is ``*``, ``&`` or ``&&``; functions and arrays put the pointer in parentheses."""
    if pointee.kind == "function" and pointee.func is not None:
        f = pointee.func
        ret_pre = f.ret.pre + " " if f.ret is not None else ""
        core = ret_pre + "(" + f.cc + " " + member + sym
        post = ")" + f.params + f.quals + (f.ret.post if f.ret is not None else "")
    elif pointee.kind == "array":
        core = _space(pointee.pre) + "(" + member + sym
        post = ")" + pointee.post
    else:
        core = _space(pointee.pre) + ("__unaligned " if unaligned else "") + member + sym
        post = pointee.post
    return _Type(core, post, "pointer", None, const, volatile, restrict)


_ESCAPES = {
    0: "\\0",
    7: "\\a",
    8: "\\b",
    9: "\\t",
    10: "\\n",
    11: "\\v",
    12: "\\f",
    13: "\\r",
    34: '\\"',
    39: "\\'",
    92: "\\\\",
}


def _char_literal(u: int) -> str:
    if u in _ESCAPES:
        return _ESCAPES[u]
    if 32 <= u < 127:
        return chr(u)
    digits = format(u, "X")
    return "\\x" + "0" * (len(digits) % 2) + digits  # whole bytes: \x0A, \x0100


def _char_size(data: bytes, length: int) -> int:
    """How wide the characters of a ``_0`` literal are: char16_t and char32_t literals are
    encoded there too, as little-endian bytes, with nothing saying so. The declared length
    and the zero bytes tell, as llvm-undname guesses it."""
    if length % 2:
        return 1
    if length < 32:  # all of it encoded: look at the terminator
        zeros = len(data) - len(data.rstrip(b"\0"))
        return 4 if zeros >= 4 and length % 4 == 0 else 2 if zeros >= 2 else 1
    zeros = data.count(0)  # cut short: count the zero bytes inside
    if zeros >= 2 * len(data) // 3 and length % 4 == 0:
        return 4
    return 2 if zeros >= len(data) // 3 else 1


def _join_scopes(first: str, scopes: List[str]) -> str:
    return "::".join(list(reversed(scopes)) + [first])


def _structor(first: str, scopes: List[str]) -> str:
    """Constructors and destructors take the name of their class (template arguments included)."""
    for marker, prefix in (("\x00ctor", ""), ("\x00dtor", "~")):
        if first.startswith(marker):
            if not scopes:
                raise Malformed("structor without class")
            return prefix + scopes[0] + first[len(marker) :]
    return first


def parse(name: str) -> Optional[Tuple[str, str]]:
    """(qualified name, whole declaration) of an MSVC decorated name, or None if it is not one
    this module can read. Never raises."""
    if not name.startswith("?") or len(name) > MAX_INPUT:
        return None
    p = _Parser(name)
    try:
        sym = p.symbol()
    except (Malformed, IndexError, ValueError, RecursionError):
        return None
    if p.i != len(name) and not (p.function_end == p.i and _FUNCLET.fullmatch(name, p.i)):
        return None  # trailing bytes
    if "\x00" in sym.full or "\x00" in sym.qualified:
        return None  # a marker (ctor/dtor/conversion) left where it cannot be
    return sym.qualified, sym.full
