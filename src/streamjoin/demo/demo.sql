-- Lenses: meters send batches of readings; a lateral join yields one row per high reading.
CREATE STREAM batched_readings (k STRING KEY, meter_id INT, readings ARRAY<INT>)
  WITH (kafka_topic='batched_readings', value_format='JSON');
INSERT INTO readings
  SELECT STREAM meter_id, reading FROM batched_readings LATERAL readings AS reading WHERE reading > 90;

-- KSQL: re-key a stream by a column so it can be joined on it.
CREATE STREAM products (sku STRING, product_id STRING, name STRING)
  WITH (kafka_topic='products', value_format='JSON');
CREATE STREAM products_rekeyed WITH (PARTITIONS=2) AS SELECT * FROM products PARTITION BY product_id;
