"""`@record`: a frozen dataclass that costs a fifth of one to define.

`dataclasses.dataclass(frozen=True)` compiles six methods per class, each from its own
source text (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`,
`__delattr__`), and asks `inspect.signature` for a docstring the class lacks: about half
a millisecond a class here, and `dumpkit analyze` defines over a hundred classes before
it reads a byte of the dump (issue #34, start-up). A record has a compiled `__init__` (its
signature and speed matter: records are made per frame), compiled once per shape of record
and renamed for each (`_init`); the other five are closures over the field names, comparing
and hashing the fields' tuple made by `operator.attrgetter`, which is what the generated
code does.

What a record is, is what `dataclasses.dataclass(init=False, repr=False, eq=False)` would
make of the class: its fields (defaults, `field(default_factory=...)`, inheritance) as
`dataclasses.Field`s in `__dataclass_fields__`, so `fields`, `replace`, `asdict`,
`is_dataclass`, `match` and pickling behave as for any dataclass. The fields are collected
here (`_fields`), not by the standard library's class processing: that checked every
string annotation against ClassVar, InitVar and KW_ONLY by regular expression and module
lookup, ~0.1 ms a record and ~10 ms of `dumpkit analyze`'s start-up. The methods keep
`dataclass(frozen=True)`'s semantics (equal only to an instance of exactly the same class;
`FrozenInstanceError` on assignment, also to a field of a subclass): tests/test_records.py
holds every record in dumpkit to them, and test classes to what dataclass makes of the
same class. Not supported, and refused: `ClassVar`, `InitVar` and keyword-only fields, a
field named `self`, a mutable default, and a dataclass base that is not a record; a field
without a default after one with is refused as dataclass does. A class whose annotations
are not in its own `__dict__` (evaluated lazily, as from Python 3.14 without `from
__future__ import annotations`) is left to the standard library's processing.
For type checkers `record` is `dataclass_transform(frozen_default=True)`."""

from __future__ import annotations

import dataclasses
import operator
import sys
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Tuple, Type, TypeVar

T = TypeVar("T")

_MARK = "__dumpkit_record__"  # set on every record class: bases are checked against it


def _build(cls: Type[T]) -> Type[T]:
    for base in cls.__mro__[1:-1]:
        if dataclasses.is_dataclass(base) and not base.__dict__.get(_MARK, False):
            raise TypeError(f"record {cls.__qualname__}: base {base.__qualname__} is a dataclass, not a record")
    if not cls.__dict__.get("__doc__"):
        cls.__doc__ = cls.__name__  # spares dataclass an inspect.signature; replaced below
    own = cls.__dict__.get("__annotations__")
    if own is None and sys.version_info >= (3, 14):
        cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)  # annotations evaluated lazily
    else:
        _fields(cls, own or {})
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    init = _init(cls, fields)
    methods = _methods(
        cls,
        tuple(f.name for f in fields),
        [f.name for f in fields if f.repr],
        [f.name for f in fields if f.compare],
        [f.name for f in fields if (f.compare if f.hash is None else f.hash)],
    )
    methods["__init__"] = init
    for name, fn in methods.items():
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, fn)
    init.__annotations__ = {**{f.name: f.type for f in fields if f.init}, "return": None}
    if cls.__doc__ == cls.__name__:
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields if f.init)})"
    setattr(cls, _MARK, True)
    return cls


# What dataclass(init=False, repr=False, eq=False) sets as a class's parameters: one object,
# made once by the standard library itself, whatever its fields are in this Python version.
_PARAMS = dataclasses.dataclass(
    type("_Params", (), {"__doc__": "-"}), init=False, repr=False, eq=False
).__dataclass_params__  # type: ignore[attr-defined]
_REFUSED = ("ClassVar", "InitVar", "KW_ONLY")  # annotations a record does not take


def _fields(cls: Type[Any], own: Dict[str, Any]) -> None:
    """Give `cls` the `__dataclass_fields__`, `__dataclass_params__` and `__match_args__`
    dataclass would: its bases' fields, then its own annotations' in order, each default
    or `field()` taken from the class (a `field()` replaced by its default, or removed)."""
    fields: Dict[str, dataclasses.Field] = {}
    for base in cls.__mro__[-1:0:-1]:
        inherited = base.__dict__.get("__dataclass_fields__")
        if inherited is not None:
            fields.update(inherited)
    for name, note in own.items():
        text = note if isinstance(note, str) else repr(note)
        head = text.split("[", 1)[0].strip().rsplit(".", 1)[-1]  # "typing.ClassVar[int]": ClassVar
        if head in _REFUSED or isinstance(note, dataclasses.InitVar) or note is getattr(dataclasses, "KW_ONLY", 0):
            raise TypeError(f"record {cls.__qualname__}: {head} is not supported ({name}: {text})")
        default = getattr(cls, name, dataclasses.MISSING)
        f: Any = default if isinstance(default, dataclasses.Field) else dataclasses.field(default=default)
        if getattr(f, "kw_only", False) is True:
            raise TypeError(f"record {cls.__qualname__}: keyword-only field {name!r} is not supported")
        f.name, f.type, f._field_type = name, note, dataclasses._FIELD  # type: ignore[attr-defined]  # what fields() keeps
        if f.default is not dataclasses.MISSING and f.default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
        fields[name] = f
        if isinstance(cls.__dict__.get(name), dataclasses.Field):
            if f.default is dataclasses.MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
    for name, value in cls.__dict__.items():
        if isinstance(value, dataclasses.Field) and name not in own:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    cls.__dataclass_fields__ = fields
    cls.__dataclass_params__ = _PARAMS
    if sys.version_info >= (3, 10) and "__match_args__" not in cls.__dict__:
        cls.__match_args__ = tuple(f.name for f in fields.values() if f.init)  # type: ignore[misc]


# One compiled __init__ per shape of record (which fields take an argument, which a
# factory, ...), given each record's names with code.replace: compiling was half the cost
# of defining a record, and the 115 records `dumpkit analyze` defines have 22 shapes (an
# argument with a default and one without are one kind: the defaults are the function's).
_SHAPES: Dict[Tuple[str, bool], CodeType] = {}
_PLACEHOLDER = "\0"  # field i's name is the constant "\0i" in a shape's code


def _init(cls: Type[Any], fields: Tuple[dataclasses.Field, ...]) -> Callable[..., None]:
    """The record's __init__: each field set in order (an argument, else its factory's or
    its default value), then __post_init__ when the class has one."""
    names = [f.name for f in fields]
    space: Dict[str, Any] = {"_set": object.__setattr__, "_NO_ARG": _NO_ARG}
    kinds: List[str] = []  # per field: a(rgument), f(actory argument), F(actory), D(efault), -
    defaults: List[Any] = []
    for i, f in enumerate(fields):
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_default:
            space[f"_d_{i}"] = f.default
        if has_factory:
            space[f"_f_{i}"] = f.default_factory
        if f.init:
            kinds.append("f" if has_factory and not has_default else "a")
            if has_default or has_factory:
                defaults.append(f.default if has_default else _NO_ARG)
            elif defaults:
                raise TypeError(f"record {cls.__qualname__}: non-default argument {f.name!r} follows default argument")
        else:
            kinds.append("F" if has_factory else "D" if has_default else "-")
    if "self" in names:
        raise TypeError(f"record {cls.__qualname__}: a field named 'self' is not supported")
    shape = ("".join(kinds), hasattr(cls, "__post_init__"))
    code = _SHAPES.get(shape)
    if code is None:
        code = _SHAPES[shape] = _shape_code(*shape)
    consts = tuple(
        names[int(c[1:])] if isinstance(c, str) and c.startswith(_PLACEHOLDER) else c for c in code.co_consts
    )
    varnames = ("self", *(n for n, k in zip(names, kinds) if k in "af"))
    code = code.replace(co_consts=consts, co_varnames=varnames, co_filename=f"<record {cls.__qualname__}>")
    return FunctionType(code, space, "__init__", tuple(defaults) or None)


def _shape_code(kinds: str, post_init: bool) -> CodeType:
    params: List[str] = []
    body: List[str] = []
    for i, kind in enumerate(kinds):
        name = repr(f"{_PLACEHOLDER}{i}")
        if kind in "af":
            params.append(f"a{i}")
            if kind == "f":
                body.append(f"  if a{i} is _NO_ARG: a{i} = _f_{i}()")
            body.append(f"  _set(self, {name}, a{i})")
        elif kind == "F":
            body.append(f"  _set(self, {name}, _f_{i}())")
        elif kind == "D":
            body.append(f"  _set(self, {name}, _d_{i})")
    if post_init:
        body.append("  self.__post_init__()")
    space: Dict[str, Any] = {}
    exec(compile("\n".join([f"def __init__(self, {', '.join(params)}):", *(body or ["  pass"])]), "", "exec"), space)
    return space["__init__"].__code__


def _methods(cls: Type[Any], names: Tuple[str, ...], shown: List[str], compared: List[str], hashed: List[str]):
    """The methods other than __init__, as closures over the field names: no compile.
    attrgetter of several names gives their tuple in C, what the generated code of the
    standard library compares and hashes."""
    shown_of = _getter(shown)
    compared_of = _getter(compared)
    hashed_of = _getter(hashed)
    frozen = dataclasses.FrozenInstanceError

    def __repr__(self) -> str:
        values = shown_of(self)
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={v!r}' for n, v in zip(shown, values))})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared_of(self) == compared_of(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(hashed_of(self))

    def __setattr__(self, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise frozen(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if type(self) is cls or name in names:
            raise frozen(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return {
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
    }


def _getter(names: List[str]) -> Callable[[object], Tuple[Any, ...]]:
    """The named attributes' values as a tuple, whatever their number."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return operator.attrgetter(*names)


class _NoArg:
    def __repr__(self) -> str:
        return "<factory>"  # what inspect.signature shows for a dataclass


_NO_ARG = _NoArg()

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform

    @dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
    def record(cls: Type[T]) -> Type[T]: ...

else:
    record: Callable[[Type[T]], Type[T]] = _build
