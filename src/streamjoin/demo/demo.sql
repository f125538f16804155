-- Lenses: meters send batches of readings; a lateral join yields one row per high reading.
CREATE STREAM batched_readings (k STRING KEY, meter_id INT, readings ARRAY<INT>)
  WITH (kafka_topic='batched_readings', value_format='JSON');
INSERT INTO readings
  SELECT STREAM meter_id, reading FROM batched_readings LATERAL readings AS reading WHERE reading > 90;

-- KSQL: re-key a stream by a column so it can be joined on it.
CREATE STREAM products (sku STRING, product_id STRING, name STRING)
  WITH (kafka_topic='products', value_format='JSON');
CREATE STREAM products_rekeyed WITH (PARTITIONS=2) AS SELECT * FROM products PARTITION BY product_id;

-- KSQL: orders and shipments within two hours; a full outer join with a grace period emits an unmatched
-- order only once its window has closed.
CREATE STREAM orders (orderid INT KEY, itemid STRING) WITH (kafka_topic='orders', value_format='JSON');
CREATE STREAM shipments (orderid INT KEY, warehouse STRING) WITH (kafka_topic='shipments', value_format='JSON');
CREATE STREAM order_shipments AS
  SELECT o.orderid AS orderid, o.itemid AS itemid, s.warehouse AS warehouse
  FROM orders o FULL OUTER JOIN shipments s WITHIN 2 HOURS GRACE PERIOD 0 SECONDS ON s.orderid = o.orderid;
