"""Loading cases in ksqlDB's query-validation-test layout (``conformance.cases``)."""
import json

import pytest

from streamjoin.conformance.cases import CaseFileError, load_cases

RAW = {"tests": [
    {"name": "per format", "format": ["JSON", "AVRO"], "statements": ["CREATE STREAM S (A INT) WITH (value_format='{FORMAT}');"]},
    {"name": "per config", "config": ["true", "false"], "properties": {"ksql.some.flag": "{CONFIG}", "other": 1},
     "statements": ["SELECT 1;"]},
    {"name": "disabled", "enabled": False, "statements": ["SELECT 1;"]},
]}


def test_formats_and_configs_expand_and_disabled_cases_are_left_out(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(RAW))
    cases = {c.name: c for c in load_cases([str(path)])}
    assert sorted(cases) == ["per config - false", "per config - true", "per format - AVRO", "per format - JSON"]
    assert cases["per format - AVRO"].statements == ("CREATE STREAM S (A INT) WITH (value_format='AVRO');",)
    assert cases["per config - false"].properties == {"ksql.some.flag": "false", "other": 1}


COMMENTED = """{"tests": [ // ksqlDB's loader allows comments
  {"name": "a // in a string is text", /* a block
  comment */ "statements": ["SELECT '/* x */' FROM S; -- y"]}
]}"""


def test_comments_are_read_as_ksqldbs_loader_reads_them(tmp_path):
    path = tmp_path / "commented.json"
    path.write_text(COMMENTED)
    [case] = load_cases([str(path)])
    assert case.name == "a // in a string is text"
    assert case.statements == ("SELECT '/* x */' FROM S; -- y",)


def test_a_file_that_is_not_json_is_named_with_where_reading_stopped(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"tests": [\n  {"name": "x",}\n]}')
    with pytest.raises(CaseFileError, match=r"broken.json: not a case file: .* at line 2, column 16"):
        load_cases([str(path)])
