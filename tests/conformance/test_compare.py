"""Value comparison of the conformance runner (``conformance.compare.same_value``)."""
import pytest

from streamjoin.conformance.compare import same_value

ROWS = [
    (2.718281828459045, 2.7182818284590455, True),  # Math.exp(1) by the JVM's intrinsic and by StrictMath
    (548.3161232732465, 548.3161232732464, True),
    (2.718281828459045, 2.71828182845904, False),
    (0.1, 0.10000000000000014, False),  # ten units in the last place
    (1, 1.0, True),
    (12345678987654321, 1.2345678987654322e16, False),  # a BIGINT is exact
    ("1.50", 1.5, True),  # a DECIMAL written as text
    ({"A": 0.5, "b": [1.0, 2.0]}, {"a": 0.5, "B": [1.0, 2.0000000000000004]}, True),
    ({"A": 1}, {"A": 1, "B": None}, False),
    ({"A": [1.0]}, {"A": [1.0, 2.0]}, False),
    ("NaN", "NaN", True),
    ("-Infinity", None, False),
    ({"FOO": "a", "foo": "b"}, {"foo": "b", "FOO": "a"}, True),  # both spellings: each field by its own name
    ({"FOO": "a", "foo": "b"}, {"FOO": "b", "foo": "a"}, False),
    ({"FOO": "a", "foo": "b"}, {"FOO": "a", "Foo": "b"}, False),
]


@pytest.mark.parametrize("expected, actual, same", ROWS)
def test_same_value(expected, actual, same):
    assert same_value(expected, actual) is same


@pytest.mark.parametrize("expected, written, same", [
    ('"-10"', b'"-10"', True),  # a DELIMITED value quoted by ksqlDB's CSV writer, given as its text
    ('"-10"', b"-10", False),
    ("-10", b'"-10"', True),  # ... or as the JSON string it also is
    ("10", b"10", True),
])
def test_a_value_given_as_text_matches_the_records_text(expected, written, same):
    from streamjoin.conformance.compare import actual_record, compare

    result = compare([{"topic": "t", "value": expected}], [actual_record("t", None, written, 0)], ordering="total",
                     mode="changelog")
    assert (result is None) is same
