"""Kafka client properties (security settings above all) reach every client the engine makes, from the three
places a deployment gives them (a properties file, a Flink table's 'properties.*' options, SET 'kafka.*'), as
librdkafka takes them; their secrets are shown nowhere. On a real broker (Tansu, started by the test): a
broker that requires a login refuses a wrong one, and the engine says so before any query starts.

Tansu 0.6 (the test broker) checks SCRAM logins, but in memory it holds no user and takes none while it requires
logins, and it has no TLS listener: a login that succeeds and TLS cannot be tried here."""
from __future__ import annotations

import json
import os

import pytest

from streamjoin import Topics
from streamjoin.connectors.kafka_client import client_properties, masked_text, read_properties_file
from streamjoin.connectors.kafka_source import CLIENT_OPTION, KafkaTopicReader
from streamjoin.connectors.local_broker import local_broker
from streamjoin.errors import StreamjoinError
from streamjoin.runtime.engine import Engine

SECRET = "s3cr3t-that-must-not-show"
PLAIN_LOGIN = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{SECRET}";'
SCRAM_LOGIN = ('org.apache.kafka.common.security.scram.ScramLoginModule required\n  username="bob"\n'
               '  password="p\\"w";')

# (given, as librdkafka takes them)
TRANSLATED = [
    ({"sasl.jaas.config": PLAIN_LOGIN, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
     {"sasl.username": "alice", "sasl.password": SECRET, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}),
    ({"sasl.jaas.config": SCRAM_LOGIN}, {"sasl.username": "bob", "sasl.password": 'p"w'}),
    ({"ssl.endpoint.identification.algorithm": "", "ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12"},
     {"ssl.endpoint.identification.algorithm": "none", "ssl.keystore.location": "/k.p12"}),
    ({"group.id": "flink-group", "bootstrap.servers": "elsewhere:9092", "enable.auto.commit": "true", "client.id": "c"},
     {"client.id": "c"}),  # streamjoin's own: offsets live in the checkpoint, the broker is the script's
]

# (given, what the refusal says)
REFUSED = [
    ({"ssl.truststore.location": "/t.jks"}, "give the CA certificates as a PEM file in 'ssl.ca.location'"),
    ({"ssl.keystore.type": "JKS"}, "only a PKCS12 keystore"),
    ({"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
     "not Krb5LoginModule"),
    ({"sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";'},
     "names no password"),
]


@pytest.mark.parametrize("given,expected", TRANSLATED)
def test_client_properties_as_librdkafka_takes_them(given, expected):
    assert client_properties(given) == expected


@pytest.mark.parametrize("given,fragment", REFUSED)
def test_client_properties_librdkafka_cannot_take_are_refused(given, fragment):
    with pytest.raises(ValueError, match=fragment):
        client_properties(given)


def test_a_properties_file_as_kafkas_tools_read_it(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("# a comment\n! another\nsecurity.protocol=SASL_SSL\n  sasl.mechanism : SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                    '    username="alice" password="a\\\\b";\nssl.ca.location /etc/ca.pem\n\n')
    assert read_properties_file(str(path)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "ssl.ca.location": "/etc/ca.pem",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                            'password="a\\b";'}


def test_secret_options_are_masked_in_statement_texts():
    text = ("CREATE TABLE t (a INT) WITH ('connector' = 'kafka', 'properties.sasl.jaas.config' = "
            f"'{PLAIN_LOGIN}', 'password'='it''s', 'topic' = 't'); SET 'kafka.ssl.key.password' = 'x';")
    assert masked_text(text) == ("CREATE TABLE t (a INT) WITH ('connector' = 'kafka', 'properties.sasl.jaas.config' = "
                                 "'***', 'password'='***', 'topic' = 't'); SET 'kafka.ssl.key.password' = '***';")


def test_the_source_reader_takes_its_client_properties_from_its_options():
    """The reader's Python workers make clients of their own: they take the client properties from the source's
    options, which lowering sets from the engine's (the end-to-end test below runs that path on a broker)."""
    from streamjoin.connectors import kafka_client

    options = {"bootstrap": "reader-test:9092", "topics": "a",
               CLIENT_OPTION.lower(): json.dumps({"security.protocol": "SASL_SSL", "sasl.password": SECRET})}
    KafkaTopicReader(options)
    config = kafka_client._configured("reader-test:9092", {"log_level": 3}, {})
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.password"] == SECRET


SCRIPT = """
CREATE TABLE o (id STRING, k STRING, t TIMESTAMP(3), WATERMARK FOR t AS t)
  WITH ('connector' = 'kafka', 'topic' = 'o', 'format' = 'json', 'properties.group.id' = 'flink-group',
        'properties.security.protocol' = 'PLAINTEXT');
CREATE TABLE s (id STRING, k STRING, t TIMESTAMP(3), WATERMARK FOR t AS t)
  WITH ('connector' = 'kafka', 'topic' = 's', 'format' = 'json');
SET 'kafka.sasl.mechanism' = 'PLAIN';
SET 'kafka.ssl.key.password' = '{secret}';
INSERT INTO joined SELECT o.id, s.id AS sid FROM o JOIN s ON o.k = s.k AND s.t BETWEEN o.t AND o.t + INTERVAL '5' SECOND;
"""


def test_client_properties_from_every_place_reach_a_running_join_and_no_secret_shows(spark, tmp_path):
    """A PLAINTEXT broker takes the login properties and ignores them: the join runs end to end with them in every
    client (the engine's, the sink's, the source's workers'), and the secret appears in no progress, plan, EXPLAIN,
    log or checkpoint file."""
    script = SCRIPT.format(secret=SECRET)
    with local_broker() as bootstrap:
        with Topics(bootstrap) as topics:
            topics.produce([{"topic": "o", "value": {"id": f"o{i}", "k": f"k{i % 3}", "t": f"2024-01-01 00:00:0{i}.000"},
                             "timestamp": i} for i in range(5)]
                           + [{"topic": "s", "value": {"id": f"s{i}", "k": f"k{i % 3}", "t": f"2024-01-01 00:00:0{i}.500"},
                               "timestamp": i} for i in range(5)])
        engine = Engine(spark, home=str(tmp_path / "home"), bootstrap_servers=bootstrap,
                        kafka_properties={"sasl.jaas.config": PLAIN_LOGIN}, query_name_prefix="security_")
        try:
            (query,) = engine.execute(script)
            engine.process_all_available()
            shown = [json.dumps(query.spark_query.lastProgress, default=str), query.spark_query._jsq.explainInternal(True),
                     engine.explain(script.strip().splitlines()[-1]), json.dumps(query.metrics(), default=str)]
        finally:
            engine.stop()
        with Topics(bootstrap) as topics:
            joined = sorted((r["value"]["id"], r["value"]["sid"]) for r in topics.read("joined"))
    assert joined == [("o0", "s0"), ("o0", "s3"), ("o1", "s1"), ("o1", "s4"), ("o2", "s2"), ("o3", "s3"), ("o4", "s4")]
    assert "kafka.ssl.key.password = ***" in shown[2]
    assert not [text for text in shown if SECRET in text]
    files = [os.path.join(folder, name) for folder, _, names in os.walk(tmp_path / "home") for name in names]
    assert files and not [f for f in files if SECRET.encode() in open(f, "rb").read()]


def test_a_refused_login_stops_the_script_before_any_query_starts(spark, tmp_path):
    deployment = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                  "sasl.jaas.config": SCRAM_LOGIN.replace('p\\"w', SECRET)}
    with local_broker(authentication=True) as bootstrap:
        engine = Engine(spark, home=str(tmp_path / "home"), bootstrap_servers=bootstrap, kafka_properties=deployment,
                        query_name_prefix="refused_")
        active = len(spark.streams.active)
        with pytest.raises(StreamjoinError) as caught:
            engine.execute("CREATE STREAM c (id INT KEY, n INT) WITH (kafka_topic='c', value_format='JSON');\n"
                           "CREATE STREAM big AS SELECT id, n FROM c WHERE n > 1;")
        engine.stop()
    message = str(caught.value)
    assert f"the Kafka broker at {bootstrap} refused the connection" in message and "SCRAM" in message
    assert SECRET not in message
    assert len(spark.streams.active) == active and not engine.queries
