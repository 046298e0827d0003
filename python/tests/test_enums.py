"""ccl's Python enums and constants against include/ccl.h, parsed here, so
the two cannot drift apart; and the loaded library against the header's
version."""

import pathlib
import re

import pytest

import ccl
from ccl import _types

HEADER = pathlib.Path(__file__).resolve().parents[2] / "include" / "ccl.h"


def _header():
    if not HEADER.exists():
        pytest.skip(f"{HEADER} not found (an installed package without the source tree)")
    text = HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _c_enum(name):
    """{C name: value} of `typedef enum { ... } name;`, counting up from the
    last explicit value as C does."""
    m = re.search(r"typedef\s+enum\s*\{([^}]*)\}\s*" + name + r"\s*;", _header())
    assert m, f"typedef enum {name} not in {HEADER}"
    out, nxt = {}, 0
    for item in filter(None, (s.strip() for s in m.group(1).split(","))):
        ident, _, value = (p.strip() for p in item.partition("="))
        nxt = int(value, 0) if value else nxt
        out[ident] = nxt
        nxt += 1
    return out


def _define(name):
    m = re.search(r"#define\s+" + name + r"\s+\(?(-?\w+)\)?", _header())
    assert m, f"#define {name} not in {HEADER}"
    return int(m.group(1), 0)


# Counters and range markers, not values a caller passes.
_NOT_VALUES = {"CCL_NUM_RESULTS", "CCL_NUM_DTYPES", "CCL_NUM_OPS", "CCL_MAX_REDOP"}


@pytest.mark.parametrize("c_name,py_enum", [
    ("ccl_result_t", ccl.Result),
    ("ccl_datatype_t", ccl.DataType),
    ("ccl_redop_t", ccl.RedOp),
])
def test_enum_matches_header(c_name, py_enum):
    want = {k[len("CCL_"):]: v for k, v in _c_enum(c_name).items() if k not in _NOT_VALUES}
    got = {m.name: m.value for m in py_enum}
    assert got == want


def test_counts_match_header():
    c = {**_c_enum("ccl_result_t"), **_c_enum("ccl_datatype_t"), **_c_enum("ccl_redop_t")}
    assert len(ccl.Result) == c["CCL_NUM_RESULTS"]
    assert len(ccl.DataType) == c["CCL_NUM_DTYPES"]
    assert len(ccl.RedOp) == c["CCL_NUM_OPS"]


def test_constants_match_header():
    assert ccl.UNIQUE_ID_BYTES == _define("CCL_UNIQUE_ID_BYTES")
    assert ccl.SPLIT_NOCOLOR == _define("CCL_SPLIT_NOCOLOR")


def test_every_dtype_has_a_name():
    assert set(_types.DTYPE_BY_NAME.values()) == set(ccl.DataType)


def test_library_version_is_the_headers():
    code = _define("CCL_MAJOR") * 10000 + _define("CCL_MINOR") * 100 + _define("CCL_PATCH")
    assert ccl.get_version() == code


def test_error_strings_cover_every_code():
    # The library knows every code the package does.
    for code in ccl.Result:
        text = ccl._lib.lib.ccl_get_error_string(code)
        assert text and b"unknown" not in text.lower(), (code, text)
