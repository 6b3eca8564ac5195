"""`@record`: a frozen dataclass that costs a fifth of one to define.

`dataclasses.dataclass(frozen=True)` compiles six methods per class, each from its own
source text (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`,
`__delattr__`), and asks `inspect.signature` for a docstring the class lacks: about half
a millisecond a class here, and `dumpkit analyze` defines over a hundred classes before
it reads a byte of the dump (issue #34, start-up). A record has a real `__init__` function (its
signature and speed matter: records are made per frame), one code per shape of record,
written out in dumpkit/record_shapes.py (tools/gen_record_shapes.py) and renamed for each
(`_init`); the other five are closures over the field names, comparing and hashing the
fields' tuple made by `operator.attrgetter`, which is what the generated code does.
`@record(frozen=False)` is `dataclass(eq=True)` made the same way (assignable, unhashable,
no `__setattr__`/`__delattr__`/`__hash__` of its own) and `init=False` keeps the class's
own `__init__` (a class over `__slots__`).

What a record is, is what `dataclasses.dataclass(init=False, repr=False, eq=False)` would
make of the class: its fields (defaults, `field(default_factory=...)`, inheritance) in
`__dataclass_fields__`, so `dataclasses.fields`, `replace`, `asdict`, `is_dataclass`,
`match` and pickling behave as for any dataclass. Those two attributes are made when first
looked at (`_OnFirstLook`): this module does not import dataclasses, whose import brings
inspect, ast, dis and tokenize (an eighth of `dumpkit analyze`'s start-up), and dumpkit
uses this module's `field`, `fields` and `replace`, which do what the standard library's
do for a record. The fields are collected here (`_fields`), not by the standard library's
class processing: that checked every string annotation against ClassVar, InitVar and
KW_ONLY by regular expression and module lookup, ~0.1 ms a record. The methods keep
`dataclass(frozen=True)`'s semantics (equal only to an instance of exactly the same class;
`FrozenInstanceError` on assignment, also to a field of a subclass): tests/test_records.py
holds every record in dumpkit to them, and test classes to what dataclass makes of the
same class. Not supported, and refused: `ClassVar`, `InitVar` and keyword-only fields, a
field named `self`, a mutable default, and a dataclass base that is not a record; a field
without a default after one with is refused as dataclass does. A class whose annotations
are not in its own `__dict__` (evaluated lazily, as from Python 3.14 without `from
__future__ import annotations`) has its fields collected by the standard library.
For type checkers `record` is `dataclass_transform(frozen_default=True)`."""

from __future__ import annotations

import operator
import sys
from types import CodeType, FunctionType, MemberDescriptorType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Type, TypeVar, overload

from dumpkit.record_shapes import SHAPES as WRITTEN_SHAPES

T = TypeVar("T")

_MARK = "__dumpkit_record__"  # set on every record class: bases are checked against it
_FIELDS = "__record_fields__"  # a record's fields, name -> RecordField, its bases' first


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # no default, no factory: dataclasses.MISSING's part


class RecordField:
    """A record's field, what `dataclasses.Field` says of one, made without importing
    dataclasses: `field(...)` is this class (keyword-only fields are not taken), and
    `fields()` gives a record's."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare", "metadata")

    def __init__(
        self,
        *,
        default: Any = MISSING,
        default_factory: Any = MISSING,
        init: bool = True,
        repr: bool = True,
        hash: Optional[bool] = None,
        compare: bool = True,
        metadata: Any = None,
    ) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name: str = ""
        self.type: Any = None
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.hash, self.compare, self.metadata = init, repr, hash, compare, metadata

    def __repr__(self) -> str:
        return f"RecordField(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def _from_dataclasses(f: Any, missing: Any) -> RecordField:
    """Our RecordField for a `dataclasses.Field` given in a record's body (the standard library
    is imported then: the one who made it imported it)."""
    if getattr(f, "kw_only", False) is True:
        raise TypeError(f"keyword-only field {f.name!r} is not supported")
    default = MISSING if f.default is missing else f.default
    factory = MISSING if f.default_factory is missing else f.default_factory
    return RecordField(
        default=default,
        default_factory=factory,
        init=f.init,
        repr=f.repr,
        hash=f.hash,
        compare=f.compare,
        metadata=f.metadata or None,
    )


class _Never:
    """A type no value is: what a class body's field() can be when dataclasses is not imported."""


def _dataclasses_field_type() -> Any:
    """`dataclasses.Field` when dataclasses is imported, else a type nothing is."""
    module = sys.modules.get("dataclasses")
    return module.Field if module is not None else _Never


def _build(cls: Type[T], frozen: bool = True, init: bool = True) -> Type[T]:
    for base in cls.__mro__[1:-1]:
        if not base.__dict__.get(_MARK, False) and hasattr(base, "__dataclass_fields__"):
            raise TypeError(f"record {cls.__qualname__}: base {base.__qualname__} is a dataclass, not a record")
    own = cls.__dict__.get("__annotations__")
    if own is None and sys.version_info >= (3, 14):
        _fields_of_dataclass(cls)  # annotations evaluated lazily: the standard library reads them
    else:
        _fields(cls, own or {})
        _view_on_first_look(cls)
    fields = tuple(cls.__dict__[_FIELDS].values())
    methods = _methods(
        cls,
        tuple(f.name for f in fields),
        [f.name for f in fields if f.repr],
        [f.name for f in fields if f.compare],
        [f.name for f in fields if (f.compare if f.hash is None else f.hash)],
        frozen,
    )
    if init:
        methods["__init__"] = made = _init(cls, fields)
        made.__annotations__ = {**{f.name: f.type for f in fields if f.init}, "return": None}
    for name, fn in methods.items():
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, fn)
    if not frozen and "__hash__" not in cls.__dict__:
        cls.__hash__ = None  # type: ignore[assignment]  # as dataclass(eq=True): mutable, so unhashable
    if not cls.__dict__.get("__doc__"):
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields if f.init)})"  # dataclass's
    setattr(cls, _MARK, True)
    return cls


_REFUSED = ("ClassVar", "InitVar", "KW_ONLY")  # annotations a record does not take


def _fields(cls: Type[Any], own: Dict[str, Any]) -> None:
    """Give `cls` its fields (`__record_fields__`) and `__match_args__` as dataclass would:
    its bases' fields, then its own annotations' in order, each default or `field()` taken
    from the class (a `field()` replaced by its default, or removed)."""
    fields: Dict[str, RecordField] = {}
    bases = cls.__mro__[-2:0:-1]  # object has no fields
    for base in bases:
        inherited = base.__dict__.get(_FIELDS)
        if inherited is not None:
            fields.update(inherited)
    theirs = _dataclasses_field_type()  # a test's class may use dataclasses.field()
    own_dict = cls.__dict__
    for name, note in own.items():
        if note.__class__ is not str or "Var" in note or "KW_ONLY" in note:  # the common case, skipped fast
            _refuse_special(cls, name, note)
        # the class's own dict first: getattr of a name the class lacks raises inside
        default = own_dict.get(name, MISSING)
        if default is MISSING and bases:
            default = getattr(cls, name, MISSING)  # a base's default, as dataclass takes it
        if default is MISSING or default.__class__ is MemberDescriptorType:  # a slot is not a default
            f = RecordField()
        elif isinstance(default, (RecordField, theirs)):
            if isinstance(default, theirs):
                try:
                    default = _from_dataclasses(default, sys.modules["dataclasses"].MISSING)
                except TypeError as e:
                    raise TypeError(f"record {cls.__qualname__}: {e}") from None
            f = default
            if f.default is MISSING:
                delattr(cls, name)  # as dataclass leaves the class: a field() replaced by its default, or removed
            else:
                setattr(cls, name, f.default)
        else:
            f = RecordField(default=default)
        if f.default is not MISSING and f.default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: use default_factory")
        f.name, f.type = name, note
        fields[name] = f
    for name, value in cls.__dict__.items():
        if isinstance(value, (RecordField, theirs)) and name not in own:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    setattr(cls, _FIELDS, fields)
    if sys.version_info >= (3, 10) and "__match_args__" not in cls.__dict__:
        cls.__match_args__ = tuple(f.name for f in fields.values() if f.init)  # type: ignore[misc]


def _refuse_special(cls: Type[Any], name: str, note: Any) -> None:
    """ClassVar, InitVar and KW_ONLY annotations, which a record does not take, refused."""
    text = note if isinstance(note, str) else repr(note)
    head = text.split("[", 1)[0].strip().rsplit(".", 1)[-1]  # "typing.ClassVar[int]": ClassVar
    dc = sys.modules.get("dataclasses")  # an InitVar or KW_ONLY object means it is imported
    special = dc is not None and (isinstance(note, dc.InitVar) or note is getattr(dc, "KW_ONLY", 0))
    if head in _REFUSED or special:
        raise TypeError(f"record {cls.__qualname__}: {head} is not supported ({name}: {text})")


# -- what the standard library sees: a dataclass, made when first looked at -----------------
# `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` read a class's
# `__dataclass_fields__` and `__dataclass_params__`. A record has both as descriptors that
# import dataclasses and make them (`dataclasses.Field`s of the record's fields, and what
# dataclass(init=False, repr=False, eq=False) sets as parameters) on the first look, then
# put them on the class in their place: `import dataclasses` takes inspect, ast, dis and
# tokenize with it (~40 M instructions, an eighth of `dumpkit analyze`'s start-up), and the
# analysis itself uses this module's `fields` and `replace`.


class _OnFirstLook:
    __slots__ = ("owner", "attr")

    def __init__(self, owner: Type[Any], attr: str) -> None:
        self.owner, self.attr = owner, attr

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        fields, params = _dataclass_view(self.owner)
        type.__setattr__(self.owner, "__dataclass_fields__", fields)
        type.__setattr__(self.owner, "__dataclass_params__", params)
        return fields if self.attr == "__dataclass_fields__" else params


def _view_on_first_look(cls: Type[Any]) -> None:
    for attr in ("__dataclass_fields__", "__dataclass_params__"):
        setattr(cls, attr, _OnFirstLook(cls, attr))


_PARAMS: List[Any] = []  # the dataclass parameters a record shows


def _dataclass_view(cls: Type[Any]) -> Tuple[Dict[str, Any], Any]:
    """The `__dataclass_fields__` and `__dataclass_params__` dataclass(init=False,
    repr=False, eq=False) would give `cls`: its fields as `dataclasses.Field`s."""
    import dataclasses

    out: Dict[str, Any] = {}
    for name, f in cls.__dict__[_FIELDS].items():
        made: Any = dataclasses.field(
            default=dataclasses.MISSING if f.default is MISSING else f.default,
            default_factory=dataclasses.MISSING if f.default_factory is MISSING else f.default_factory,
            init=f.init,
            repr=f.repr,
            hash=f.hash,
            compare=f.compare,
            metadata=f.metadata,
        )
        made.name, made.type, made._field_type = name, f.type, dataclasses._FIELD  # type: ignore[attr-defined]  # what fields() keeps
        out[name] = made
    if not _PARAMS:  # one object, made by the standard library whatever its fields are in this version
        made_by_it: Any = dataclasses.dataclass(type("_Params", (), {"__doc__": "-"}), init=False, repr=False, eq=False)
        _PARAMS.append(made_by_it.__dataclass_params__)
    return out, _PARAMS[0]


def _fields_of_dataclass(cls: Type[Any]) -> None:
    """Python 3.14's lazily evaluated annotations: the fields as dataclass collects them."""
    import dataclasses

    dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    missing = dataclasses.MISSING
    mine: Dict[str, RecordField] = {}
    for theirs in dataclasses.fields(cls):
        f = mine[theirs.name] = _from_dataclasses(theirs, missing)
        f.name, f.type = theirs.name, theirs.type
    setattr(cls, _FIELDS, mine)


def _frozen_error() -> Type[Exception]:
    import dataclasses  # only when a record is written to, which is a bug

    return dataclasses.FrozenInstanceError


def _fields_api(class_or_instance: Any) -> Tuple[Any, ...]:
    """`dataclasses.fields` of a record (its `RecordField`s) or of any other dataclass."""
    mine = getattr(class_or_instance, _FIELDS, None)
    if mine is not None:
        return tuple(mine.values())
    import dataclasses

    return dataclasses.fields(class_or_instance)


def _is_dataclass(obj: Any) -> bool:
    """`dataclasses.is_dataclass`: a record or any other dataclass, or an instance of one."""
    return getattr(obj, _FIELDS, None) is not None or hasattr(obj, "__dataclass_fields__")


_PLANS: Dict[type, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {}  # class -> (init fields, the others)


def _replace(obj: Any, /, **changes: Any) -> Any:
    """`dataclasses.replace` of a record (a copy with `changes`, made by its `__init__`),
    or of any other dataclass."""
    cls = obj.__class__
    plan = _PLANS.get(cls)
    if plan is None:
        mine = getattr(cls, _FIELDS, None)
        if mine is None:
            import dataclasses

            return dataclasses.replace(obj, **changes)
        plan = _PLANS[cls] = (
            tuple(n for n, f in mine.items() if f.init),
            tuple(n for n, f in mine.items() if not f.init),
        )
    taken, untaken = plan
    for name in untaken:
        if name in changes:
            raise ValueError(f"field {name} is declared with init=False, it cannot be specified with replace()")
    for name in taken:
        if name not in changes:
            changes[name] = getattr(obj, name)
    return cls(**changes)


# One __init__ code per shape of record (which fields take an argument, which a factory,
# ...), given each record's names with code.replace: compiling was half the cost of defining
# a record, and the ~120 records `dumpkit analyze` defines have ~25 shapes (an argument with
# a default and one without are one kind: the defaults are the function's). The shapes
# dumpkit's records have are written out in dumpkit/record_shapes.py
# (tools/gen_record_shapes.py), so the import system's bytecode cache holds their code and
# nothing is compiled at start-up (compile() costs ~0.3 ms a shape); another shape is
# compiled here on first use.
_SHAPES: Dict[Tuple[str, bool], Tuple[CodeType, Tuple[Tuple[int, int], ...]]] = {}
_PLACEHOLDER = "\0"  # field i's name is the constant "\0i" in a shape's code
_CO_QUALNAME = sys.version_info >= (3, 11)


def _kind(f: RecordField) -> str:
    """A field's part of a shape: a(rgument), f(actory argument), F(actory), D(efault), -."""
    has_default = f.default is not MISSING
    has_factory = f.default_factory is not MISSING
    if f.init:
        return "f" if has_factory and not has_default else "a"
    return "F" if has_factory else "D" if has_default else "-"


def shape_of(cls: Type[Any]) -> Tuple[str, bool]:
    """The shape of a record class's `__init__`: its fields' kinds, and whether it ends by
    calling `__post_init__`."""
    return "".join(_kind(f) for f in cls.__dict__[_FIELDS].values()), hasattr(cls, "__post_init__")


def _init(cls: Type[Any], fields: Tuple[RecordField, ...]) -> Callable[..., None]:
    """The record's __init__: each field set in order (an argument, else its factory's or
    its default value), then __post_init__ when the class has one. One pass over the
    fields (this runs for every record at start-up)."""
    space: Dict[str, Any] = {"_set": object.__setattr__, "_NO_ARG": _NO_ARG}
    names: List[str] = []
    kinds: List[str] = []
    varnames: List[str] = ["self"]
    defaults: List[Any] = []
    for i, f in enumerate(fields):
        name, default, factory = f.name, f.default, f.default_factory
        has_default, has_factory = default is not MISSING, factory is not MISSING
        if has_default:
            space[f"_d_{i}"] = default
        if has_factory:
            space[f"_f_{i}"] = factory
        names.append(name)
        kinds.append(_kind(f))
        if f.init:
            varnames.append(name)
            if has_default or has_factory:
                defaults.append(default if has_default else _NO_ARG)
            elif defaults:
                raise TypeError(f"record {cls.__qualname__}: non-default argument {name!r} follows default argument")
    if "self" in names:
        raise TypeError(f"record {cls.__qualname__}: a field named 'self' is not supported")
    shape = ("".join(kinds), hasattr(cls, "__post_init__"))
    known = _SHAPES.get(shape)
    if known is None:
        written = WRITTEN_SHAPES.get(shape)
        code = written.__code__ if written is not None else _shape_code(*shape)
        # where the code's constants name a field: (position, field index)
        slots = tuple(
            (at, int(c[1:])) for at, c in enumerate(code.co_consts) if isinstance(c, str) and c.startswith(_PLACEHOLDER)
        )
        known = _SHAPES[shape] = (code, slots)
    code, slots = known
    consts = list(code.co_consts)
    for at, i in slots:
        consts[at] = names[i]
    renamed: Dict[str, Any] = {
        "co_name": "__init__",
        "co_filename": f"<record {cls.__qualname__}>",
        "co_firstlineno": 1,
    }
    if _CO_QUALNAME:
        renamed["co_qualname"] = "__init__"
    code = code.replace(co_consts=tuple(consts), co_varnames=tuple(varnames), **renamed)
    return FunctionType(code, space, "__init__", tuple(defaults) or None)


def shape_source(kinds: str, post_init: bool, name: str = "__init__") -> str:
    """The text of a shape's function: what dumpkit/record_shapes.py holds for it."""
    params: List[str] = []
    body: List[str] = []
    for i, kind in enumerate(kinds):
        field_name = f'"\\x00{i}"'  # _PLACEHOLDER + i, written as ruff format writes it
        if kind in "af":
            params.append(f"a{i}")
            if kind == "f":
                body.append(f"    if a{i} is _NO_ARG:\n        a{i} = _f_{i}()")
            body.append(f"    _set(self, {field_name}, a{i})")
        elif kind == "F":
            body.append(f"    _set(self, {field_name}, _f_{i}())")
        elif kind == "D":
            body.append(f"    _set(self, {field_name}, _d_{i})")
    if post_init:
        body.append("    self.__post_init__()")
    return "\n".join([f"def {name}({', '.join(['self', *params])}):", *(body or ["    pass"])]) + "\n"


def _shape_code(kinds: str, post_init: bool) -> CodeType:
    space: Dict[str, Any] = {}
    exec(compile(shape_source(kinds, post_init), "", "exec"), space)
    return space["__init__"].__code__


def _methods(
    cls: Type[Any], names: Tuple[str, ...], shown: List[str], compared: List[str], hashed: List[str], frozen: bool
) -> Dict[str, Callable[..., Any]]:
    """The methods other than __init__, as closures over the field names: no compile.
    attrgetter of several names gives their tuple in C, what the generated code of the
    standard library compares and hashes. A mutable record has no __hash__, __setattr__ or
    __delattr__ of its own, as dataclass(eq=True) makes none."""
    shown_of = _getter(shown)
    compared_of = _getter(compared)

    def __repr__(self) -> str:
        values = shown_of(self)
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={v!r}' for n, v in zip(shown, values))})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared_of(self) == compared_of(other)
        return NotImplemented

    if not frozen:
        return {"__repr__": __repr__, "__eq__": __eq__}
    hashed_of = _getter(hashed)

    def __hash__(self) -> int:
        return hash(hashed_of(self))

    def __setattr__(self, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error()(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if type(self) is cls or name in names:
            raise _frozen_error()(f"cannot delete field {name!r}")
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


def _record(cls: Optional[Type[T]] = None, *, frozen: bool = True, init: bool = True) -> Any:
    """`@record`, or `@record(frozen=False)` (dataclass(eq=True)'s semantics: assignable,
    unhashable), or `@record(init=False)` (the class's own `__init__` kept)."""
    if cls is None:
        return lambda c: _build(c, frozen, init)
    return _build(cls, frozen, init)


if TYPE_CHECKING:
    # Type checkers see the standard library's: a record is a dataclass to them.
    from dataclasses import Field as _DataclassField, field as field, fields as fields, is_dataclass as is_dataclass
    from dataclasses import replace as replace

    from typing_extensions import dataclass_transform

    @overload
    def record(cls: Type[T]) -> Type[T]: ...

    @overload
    def record(*, frozen: bool = True, init: bool = True) -> Callable[[Type[T]], Type[T]]: ...

    @dataclass_transform(frozen_default=True, field_specifiers=(field, _DataclassField))
    def record(cls: Optional[Type[T]] = None, *, frozen: bool = True, init: bool = True) -> Any: ...

else:
    record, field, fields, replace, is_dataclass = _record, RecordField, _fields_api, _replace, _is_dataclass
