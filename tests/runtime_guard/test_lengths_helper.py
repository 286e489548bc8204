"""The compiled length-list check (runtime_guard/_lengths.c) answers exactly as its Python reference.

Differential and property-based: generated lists (valid cumulative ends, and lists with floats,
bools, int subclasses, ints past 64 bits, and entries that fail the test if any of their code
runs) get the same answer from both. Neither may run an entry's code: a tensor entry would be
read back from its device.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_guard import fast_paths
from tests.compiled import compiler_at_hand as _compiler_at_hand
from tests.runtime_guard.hypothesis_profiles import PROFILE, count

try:
    from runtime_guard._lengths import cumulative as native
except ImportError:
    native = None


needs_native = pytest.mark.skipif(native is None, reason="runtime_guard._lengths was not built (no C compiler): the guard uses cumulative_py")


def _run(*args, **kwargs):
    raise AssertionError("an entry's own code ran")


class Poisoned:
    """An entry whose every comparison, conversion or truth test fails the test."""

    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __bool__ = __index__ = __int__ = __float__ = _run
    __hash__ = object.__hash__


class PoisonedInt(int):
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __bool__ = __index__ = _run
    __hash__ = int.__hash__


def test_the_guard_uses_the_compiled_check_where_it_could_be_built():
    if not _compiler_at_hand():
        pytest.skip("no C compiler or Python headers here: the wheel is pure Python")
    assert native is not None, "a C compiler is at hand but runtime_guard._lengths is missing: reinstall (bash .ci/setup) to build it"
    assert fast_paths.cumulative is native


def _ends(lengths: list[int]) -> list[int]:
    return list(itertools.accumulate(lengths))


odd_entries = st.one_of(
    st.integers(-3, 60),
    st.integers(-(2**80), 2**80),
    st.booleans(),
    st.floats(0, 60, allow_nan=False),
    st.builds(Poisoned),
    st.builds(PoisonedInt, st.integers(0, 60)),
)


@st.composite
def length_lists(draw) -> tuple:
    """(lengths, total): valid cumulative ends, some with one entry changed; short and long lists."""
    size = draw(st.integers(0, 6) | st.integers(fast_paths._SHORT - 2, fast_paths._SHORT + 40))
    if draw(st.booleans()):
        big = draw(st.sampled_from((0, 0, 2**62, 2**70)))  # past 64 bits the C check compares as Python ints
        lengths = _ends([big, *draw(st.lists(st.integers(0, 5), min_size=size, max_size=size))])[1:] if big else _ends(draw(st.lists(st.integers(0, 5), min_size=size, max_size=size)))
        if lengths and draw(st.booleans()):
            lengths[draw(st.integers(0, len(lengths) - 1))] = draw(odd_entries)
    else:
        lengths = draw(st.lists(odd_entries, max_size=size))
    total = lengths[-1] if lengths and type(lengths[-1]) is int and draw(st.booleans()) else draw(st.integers(-1, 300))
    if draw(st.integers(0, 9)) == 0:
        lengths = tuple(lengths)
    return lengths, total


@needs_native
@settings(PROFILE, max_examples=PROFILE.max_examples * 4)
@given(length_lists())
def test_the_compiled_check_answers_as_the_python_reference(case):
    lengths, total = case
    expected = fast_paths.cumulative_py(lengths, total)
    assert native(lengths, total) is expected
    count("lengths helper: same answer as cumulative_py", "accepted" if expected else "not accepted")


@needs_native
@pytest.mark.parametrize(
    ("lengths", "total", "expected"),
    [
        ([3, 7, 7, 12], 12, True),
        ([0, 5], 5, True),
        ([5], 6, False),  # ends at the wrong total
        ([5, 4], 4, False),  # decreases
        ([-1, 4], 4, False),  # starts below zero
        ([0, 0], 0, False),  # all zero: EOD padding, the general validator's call
        ([], 0, False),
        ([2**70, 2**71], 2**71, True),
        ([2**71, 2**70], 2**70, False),
        ([-(2**70), 4], 4, False),
        ([True, 2], 2, False),  # a bool is not an exact int
        ([1, 2.0], 2, False),
        ((1, 2), 2, False),  # a tuple: the general validator judges it
        ([1, Poisoned()], 2, False),
        ([1, PoisonedInt(2)], 2, False),
        ([1, 2], 2.0, False),  # a total that is not an int: not sure
    ],
)
def test_the_compiled_check_on_named_cases(lengths, total, expected):
    assert native(lengths, total) is expected
    if type(total) is int:
        assert fast_paths.cumulative_py(lengths, total) is expected


@needs_native
def test_the_compiled_check_rejects_a_wrong_call_with_a_clear_error():
    with pytest.raises(TypeError, match=r"cumulative\(lengths, total\) takes exactly 2 arguments"):
        native([1])


def test_without_the_compiled_helper_the_guard_falls_back_to_the_python_check():
    # What a build without a C compiler gets: the import fails, the Python reference is used.
    code = "import sys; sys.modules['runtime_guard._lengths'] = None; from runtime_guard import fast_paths; print(fast_paths.cumulative is fast_paths.cumulative_py)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
