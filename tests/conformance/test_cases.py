"""Loading cases in ksqlDB's query-validation-test layout (``conformance.cases``)."""
import json

from streamjoin.conformance.cases import load_cases

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
