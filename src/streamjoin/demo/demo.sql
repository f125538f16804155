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

-- KSQL: enrich each order with its customer as of the moment it arrives (a stream-table join); customer
-- changes emit nothing, a deleted customer leaves later orders without a name.
CREATE TABLE customers (custid INT PRIMARY KEY, name STRING) WITH (kafka_topic='customers', value_format='JSON');
CREATE STREAM purchases (purchaseid INT KEY, custid INT, amount INT) WITH (kafka_topic='purchases', value_format='JSON');
CREATE STREAM named_purchases AS
  SELECT p.custid AS custid, p.purchaseid AS purchaseid, c.name AS name, p.amount AS amount
  FROM purchases p LEFT JOIN customers c ON p.custid = c.custid;

-- ksqlDB foreign-key join: every account row follows its customer's changes (a table, keyed by account).
CREATE TABLE accounts (accountid INT PRIMARY KEY, custid INT, balance INT) WITH (kafka_topic='accounts', value_format='JSON');
CREATE TABLE account_owners AS
  SELECT a.accountid AS accountid, c.name AS owner, a.balance AS balance
  FROM accounts a JOIN customers c ON a.custid = c.custid;

-- SQLstream, in its own syntax: native streams and a table (no WITH clause; each is the topic of its
-- name), rows the script inserts itself, and a pump (SQLstream's persistent query) that enriches each
-- event with its animal; event 2's animal is unknown, so its name is null.
CREATE STREAM beast_events (row_id INTEGER NOT NULL, animal_id INTEGER, weight INTEGER) DESCRIPTION 'observed';
CREATE TABLE animal_data (animal_id INTEGER NOT NULL PRIMARY KEY, name VARCHAR(32) NOT NULL);
INSERT INTO animal_data (animal_id, name) VALUES (1, 'Daisy'), (2, 'Toad');
INSERT INTO beast_events (ROWTIME, row_id, animal_id, weight) VALUES (10, 1, 1, 300), (20, 2, 3, 5), (30, 3, 2, 1);
CREATE STREAM weighed (row_id INTEGER, name VARCHAR(32), weight INTEGER);
CREATE PUMP weigh_pump STOPPED AS
  INSERT INTO weighed SELECT STREAM e.row_id, a.name, e.weight FROM beast_events e LEFT JOIN animal_data a USING (animal_id);
ALTER PUMP weigh_pump START;
