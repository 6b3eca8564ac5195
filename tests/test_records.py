"""`@record` (dumpkit/records.py) is `dataclass(frozen=True)` made cheaper to define: the
same constructor, equality, hash, repr and frozenness, on test classes made both ways and
on every record class dumpkit defines."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import pkgutil
import subprocess
import sys
from pathlib import Path
from dataclasses import dataclass, field
from typing import ClassVar, List, Optional, Tuple

import pytest

import dumpkit
from dumpkit import records
from dumpkit.records import WRITTEN_SHAPES, record, shape_of

ROOT = Path(__file__).resolve().parent.parent


def _twins():
    """The same classes, as records and as frozen dataclasses (module level, to pickle)."""
    out = {}
    for make in (record, dataclass(frozen=True)):

        class Plain:
            a: int
            b: str = "x"
            c: Tuple[int, ...] = ()
            d: List[int] = field(default_factory=list, hash=False)  # compared, not hashed
            e: Optional[List[int]] = field(default=None, compare=False, repr=False)
            f: int = field(default=7, init=False)

        class Empty:
            pass

        plain, empty = make(Plain), make(Empty)

        class Child(plain):  # type: ignore[misc,valid-type]
            g: float = 1.5

        out[make is record] = (plain, empty, make(Child))
    return out


TWINS = _twins()
RecordPlain, RecordEmpty, RecordChild = TWINS[True]
DataPlain, DataEmpty, DataChild = TWINS[False]
for _cls in (*TWINS[True], *TWINS[False]):
    _cls.__module__ = __name__
    _cls.__qualname__ = _cls.__name__ = ("Record" if _cls in TWINS[True] else "Data") + _cls.__name__
    globals()[_cls.__name__] = _cls


@pytest.mark.parametrize("ours, theirs", list(zip(TWINS[True], TWINS[False])))
def test_constructor_signature_is_the_dataclasss(ours, theirs):
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]
    # __match_args__ exists from 3.10 (pattern matching); on 3.8/3.9 neither has it
    assert getattr(ours, "__match_args__", None) == getattr(theirs, "__match_args__", None)


def _pair(kind: str, *args, **kwargs):
    return TWINS[True][kind](*args, **kwargs), TWINS[False][kind](*args, **kwargs)


PLAIN, EMPTY, CHILD = 0, 1, 2


def test_values_repr_equality_and_hash_are_the_dataclasss():
    ours, theirs = _pair(PLAIN, 1, "y", (2, 3), [4], e=[5])
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert repr(ours).replace("Record", "") == repr(theirs).replace("Data", "")
    assert hash(ours) == hash(theirs)
    same, _ = _pair(PLAIN, 1, "y", (2, 3), [4], e=[99])  # e is not compared
    assert same == ours and hash(same) == hash(ours)
    other, _ = _pair(PLAIN, 2)
    assert other != ours and not (other == ours)
    assert _pair(PLAIN, 1, "y", (2, 3), [0])[0] != ours  # d is compared
    assert ours.d is not _pair(PLAIN, 1)[0].d  # a factory's value per instance
    assert ours.f == theirs.f == 7
    assert RecordEmpty() == RecordEmpty() and hash(RecordEmpty()) == hash(DataEmpty())


def test_an_instance_of_a_subclass_is_not_equal_as_with_dataclasses():
    parent, child = RecordPlain(1), RecordChild(1)
    assert (parent == child) == (DataPlain(1) == DataChild(1)) is False
    assert RecordChild(1, g=2.0) != RecordChild(1)
    assert repr(RecordChild(1)).startswith("RecordChild(a=1, b='x'")


def test_fields_cannot_be_assigned_or_deleted():
    for obj in (RecordPlain(1), RecordChild(1)):
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
            obj.a = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            del obj.b
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.new = 1


def test_replace_and_pickle_work_as_on_dataclasses():
    ours = RecordPlain(1, "y")
    changed = dataclasses.replace(ours, b="z")
    assert (changed.a, changed.b, changed.f) == (1, "z", 7) and ours.b == "y"
    assert pickle.loads(pickle.dumps(ours)) == ours
    with pytest.raises(TypeError):
        RecordPlain()  # a is required


def test_dumpkits_replace_and_fields_are_the_standard_librarys():
    """dumpkit's analysis uses records.replace/fields (no dataclasses import at start-up):
    the same copies, the same refusals, the same field names as dataclasses' own."""
    ours, theirs = _pair(CHILD, 1, "y", (2,), [3], e=[4], g=2.5)
    for mine, std in ((records.replace, dataclasses.replace), (records.fields, dataclasses.fields)):
        if mine is records.fields:
            assert [f.name for f in mine(ours)] == [f.name for f in std(theirs)] == [f.name for f in std(ours)]
            assert [(f.init, f.repr, f.compare, f.hash) for f in mine(RecordChild)] == [
                (f.init, f.repr, f.compare, f.hash) for f in std(DataChild)
            ]
            continue
        assert repr(mine(ours, b="z", g=0.5)).replace("Record", "") == repr(std(theirs, b="z", g=0.5)).replace(
            "Data", ""
        )
        assert mine(ours) == ours and mine(ours) is not ours
        with pytest.raises(ValueError, match="init=False") as refused:
            mine(ours, f=1)
        with pytest.raises(ValueError) as refused_too:
            std(theirs, f=1)
        assert str(refused.value) == str(refused_too.value)
        with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
            mine(ours, nope=1)
    assert records.is_dataclass(ours) and records.is_dataclass(RecordChild) and records.is_dataclass(theirs)
    assert not records.is_dataclass(object()) and not records.is_dataclass(1)
    # a dataclass that is not a record is left to the standard library
    assert records.replace(theirs, b="q").b == "q" and [f.name for f in records.fields(theirs)][:2] == ["a", "b"]


def test_defining_and_using_records_imports_no_dataclasses():
    code = (
        "import sys\n"
        "from dumpkit.records import record, field, fields, replace\n"
        "@record\n"
        "class A:\n"
        "    a: int\n"
        "    b: list = field(default_factory=list, hash=False)\n"
        "x = replace(A(1), a=2)\n"
        "assert x == A(2) and hash(x) == hash(A(2)) and [f.name for f in fields(x)] == ['a', 'b']\n"
        "print('dataclasses' in sys.modules, 'inspect' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_a_dataclass_base_or_an_initvar_is_refused():
    @dataclass
    class Base:
        x: int = 0

    with pytest.raises(TypeError, match="not a record"):

        @record
        class Bad(Base):
            y: int = 0

    with pytest.raises(TypeError, match="InitVar"):

        @record
        class Bad2:
            x: dataclasses.InitVar[int]

    with pytest.raises(TypeError, match="non-default argument 'y' follows default argument"):

        @record
        class Bad3(RecordPlain):  # type: ignore[misc,valid-type]
            y: int

    with pytest.raises(TypeError, match="'self'"):

        @record
        class Bad4:
            self: int


def test_what_dataclass_would_take_otherwise_is_refused_or_refused_alike():
    """A record collects its fields itself: what it does not take is refused by name, and
    what dataclass refuses it refuses with dataclass's exception."""
    with pytest.raises(TypeError, match="ClassVar is not supported"):

        @record
        class Counted:
            count: ClassVar[int] = 0

    with pytest.raises(TypeError, match="ClassVar is not supported"):

        @record
        class Counted2:
            count: "typing.ClassVar[int]" = 0  # noqa: F821

    for make in (record, dataclass(frozen=True)):
        with pytest.raises(ValueError, match="mutable default .* for field xs is not allowed"):

            @make
            class Mutable:
                xs: List[int] = []

        with pytest.raises(TypeError, match="'y' is a field but has no type annotation"):

            @make
            class Unannotated:
                x: int = 0
                y = field(default=1)


def test_fields_are_the_ones_dataclass_collects():
    """Inherited fields first, a field()'s default left on the class as dataclass leaves it,
    a factory's field absent from the class, and the same Field settings."""
    for ours, theirs in zip(TWINS[True], TWINS[False]):
        assert [
            (f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare)
            for f in dataclasses.fields(ours)
        ] == [
            (f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare)
            for f in dataclasses.fields(theirs)
        ]
        for name in ("b", "d", "e", "f", "g"):
            assert (name in vars(ours)) == (name in vars(theirs)), name
            assert getattr(ours, name, None) == getattr(theirs, name, None), name
        assert dataclasses.is_dataclass(ours) and ours.__dataclass_params__.frozen is False


def test_records_of_one_shape_share_code_not_names_defaults_or_factories():
    """`__init__` is compiled once per shape (which fields take an argument, a default, a
    factory) and given each record's names: nothing else is shared."""
    made = []

    @record
    class One:
        a: int
        b: str = "one"
        c: List[int] = field(default_factory=list)
        d: int = field(default=4, init=False)

        def __post_init__(self):
            made.append(self)

    @record
    class Two:
        x: int
        y: str = "two"
        z: List[int] = field(default_factory=lambda: [2])
        w: int = field(default=8, init=False)

        def __post_init__(self):
            made.append(self)

    assert One.__init__.__code__.co_code == Two.__init__.__code__.co_code
    one, two = One(1), Two(x=2)
    assert (one.a, one.b, one.c, one.d) == (1, "one", [], 4)
    assert (two.x, two.y, two.z, two.w) == (2, "two", [2], 8)
    assert One(1).c is not one.c and made == [one, two, made[2]]
    assert str(inspect.signature(One)) == "(a: 'int', b: 'str' = 'one', c: 'List[int]' = <factory>) -> None"
    assert str(inspect.signature(Two)) == "(x: 'int', y: 'str' = 'two', z: 'List[int]' = <factory>) -> None"
    assert Two(3, z=[5]) == Two(3, "two", [5])
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        Two()
    assert (
        One.__init__.__code__.co_filename
        == "<record test_records_of_one_shape_share_code_not_names_defaults_or_factories.<locals>.One>"
    )


def _dumpkit_records():
    found = {}
    for info in pkgutil.walk_packages(dumpkit.__path__, "dumpkit."):
        if info.name.startswith("dumpkit.capture.") and info.name.rsplit(".", 1)[1] in (
            "win32",
            "debugger",
            "live",
            "registry",
        ):
            continue  # Windows only
        if info.name in ("dumpkit.__main__",):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and value.__dict__.get("__dumpkit_record__"):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def _own_init(cls) -> bool:
    """A record(init=False): its class wrote its __init__."""
    return not cls.__init__.__code__.co_filename.startswith("<record ")


def test_every_record_in_dumpkit_has_the_constructor_and_hash_a_dataclass_would_have():
    records = _dumpkit_records()
    assert len(records) > 100  # the model, the view, the unwinder's and the PE reader's records
    mutable = {name for name, cls in records.items() if cls.__hash__ is None}
    # the engine's options and result, the problems collector, a located image and a walked frame
    assert {"dumpkit.engine.Options", "dumpkit.problems.Problems", "dumpkit.unwind.frames.Frame"} <= mutable
    for name, cls in records.items():
        if _own_init(cls):
            continue
        twin = dataclasses.make_dataclass(
            cls.__name__,
            [
                (f.name, f.type, field(default=f.default, default_factory=f.default_factory, init=f.init))
                for f in dataclasses.fields(cls)
            ],
            frozen=name not in mutable,
        )
        assert str(inspect.signature(cls)) == str(inspect.signature(twin)), name
        assert (cls.__hash__ is None) == (twin.__hash__ is None), name
        assert cls.__hash__ is not object.__hash__ and cls.__eq__ is not object.__eq__, name


def test_the_shapes_of_dumpkits_records_are_written_out_so_start_up_compiles_none():
    """dumpkit/record_shapes.py is what tools/gen_record_shapes.py writes today: a record
    whose shape it lacks is compiled at every start (and still works: the test classes here)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_record_shapes.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for name, cls in _dumpkit_records().items():
        if not _own_init(cls):
            assert shape_of(cls) in WRITTEN_SHAPES, name


def _mutable_twins():
    """The same classes as record(frozen=False) and as dataclass(); and as
    record(frozen=False, init=False) and dataclass(init=False) over slots."""
    out = {}
    for make, own in ((record(frozen=False), record(frozen=False, init=False)), (dataclass, dataclass(init=False))):

        class Counter:
            name: str
            seen: List[int] = field(default_factory=list)
            limit: int = 3

        class Slotted:
            __slots__ = ("ip", "size")
            ip: int
            size: Optional[int]

            def __init__(self, ip: int, size: Optional[int] = None):
                self.ip = ip
                self.size = size

        out[make is not dataclass] = (make(Counter), own(Slotted))
    return out


MUTABLE = _mutable_twins()


def test_a_mutable_record_is_a_dataclass_with_eq():
    (ours, ours_slotted), (theirs, theirs_slotted) = MUTABLE[True], MUTABLE[False]
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    a, b = ours("x"), theirs("x")
    a.limit, b.limit = 5, 5  # assignable
    a.seen.append(1)
    b.seen.append(1)
    assert dataclasses.asdict(a) == dataclasses.asdict(b) == {"name": "x", "seen": [1], "limit": 5}
    assert repr(a) == repr(b)
    assert a == ours("x", [1], 5) and a != ours("x")
    assert ours.__hash__ is None and theirs.__hash__ is None
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)
    assert dataclasses.replace(a, name="y").name == "y"
    # init=False keeps the class's own __init__ (its default), and slots are not defaults
    s, t = ours_slotted(1), theirs_slotted(1)
    assert (s.ip, s.size) == (t.ip, t.size) == (1, None)
    assert str(inspect.signature(ours_slotted)) == str(inspect.signature(theirs_slotted))
    assert [f.default for f in dataclasses.fields(ours_slotted)] == [dataclasses.MISSING] * 2
    s.size = 8
    assert s == ours_slotted(1, 8) and s != ours_slotted(2, 8)
    assert repr(s).endswith("Slotted(ip=1, size=8)") and not hasattr(s, "__dict__")
