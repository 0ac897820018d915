-- The order system's ledger: SQLite and PostgreSQL alike. Times are epoch
-- milliseconds. Applied on every start; every statement is idempotent.

CREATE TABLE IF NOT EXISTS orders (
  order_id     TEXT PRIMARY KEY,
  customer_id  TEXT NOT NULL,
  items        TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  currency     TEXT NOT NULL,
  status       TEXT NOT NULL,
  payment_id   TEXT NOT NULL DEFAULT '',
  reason       TEXT NOT NULL DEFAULT '',
  workflow_id  TEXT NOT NULL DEFAULT '',
  created_at   BIGINT NOT NULL,
  updated_at   BIGINT NOT NULL
);

-- One row per charge. UNIQUE(idempotency_key) is the last line of defence
-- (seed 001 §4): a step that runs again after Redis lost its record cannot
-- add a second row. The fence is the (epoch, attempt, rev) of the attempt
-- that wrote the row: an older one may not overwrite it.
CREATE TABLE IF NOT EXISTS payments (
  payment_id        TEXT PRIMARY KEY,
  idempotency_key   TEXT NOT NULL UNIQUE,
  order_id          TEXT NOT NULL,
  amount_cents      BIGINT NOT NULL,
  currency          TEXT NOT NULL,
  gateway_charge_id TEXT NOT NULL,
  status            TEXT NOT NULL,
  fence_epoch       BIGINT NOT NULL DEFAULT 0,
  fence_attempt     BIGINT NOT NULL,
  fence_rev         BIGINT NOT NULL,
  created_at        BIGINT NOT NULL,
  updated_at        BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS payments_order ON payments (order_id);

-- Every call the (non-idempotent) gateway simulator took: no unique key,
-- on purpose. The count survives worker restarts. outcome is charged,
-- charged-then-timeout, charged-then-crash, declined, unavailable or
-- timeout-before-charge.
CREATE TABLE IF NOT EXISTS gateway_calls (
  call_id       TEXT PRIMARY KEY,
  operation_key TEXT NOT NULL,
  order_id      TEXT NOT NULL,
  amount_cents  BIGINT NOT NULL,
  currency      TEXT NOT NULL,
  outcome       TEXT NOT NULL,
  charge_id     TEXT NOT NULL DEFAULT '',
  called_at     BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS gateway_calls_key ON gateway_calls (operation_key);
CREATE INDEX IF NOT EXISTS gateway_calls_order ON gateway_calls (order_id);

-- Refunds the gateway simulator made: one per charge (UNIQUE charge_id),
-- so refunding twice gives the money back once. Money taken from an order
-- is its charged gateway_calls less these.
CREATE TABLE IF NOT EXISTS gateway_refunds (
  refund_id     TEXT PRIMARY KEY,
  charge_id     TEXT NOT NULL UNIQUE,
  operation_key TEXT NOT NULL,
  order_id      TEXT NOT NULL,
  amount_cents  BIGINT NOT NULL,
  currency      TEXT NOT NULL,
  refunded_at   BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS gateway_refunds_order ON gateway_refunds (order_id);

-- Stock per SKU. A SKU the ledger has not seen starts with DefaultStock.
CREATE TABLE IF NOT EXISTS inventory (
  sku       TEXT PRIMARY KEY,
  available BIGINT NOT NULL
);

-- One reservation per order: reserving twice takes the stock once, and
-- releasing gives it back only from status reserved.
CREATE TABLE IF NOT EXISTS inventory_reservations (
  order_id    TEXT PRIMARY KEY,
  items       TEXT NOT NULL,
  status      TEXT NOT NULL,
  reserved_at BIGINT NOT NULL,
  released_at BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS shipments (
  shipment_id TEXT PRIMARY KEY,
  order_id    TEXT NOT NULL UNIQUE,
  created_at  BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS confirmations (
  order_id   TEXT PRIMARY KEY,
  payment_id TEXT NOT NULL,
  sent_at    BIGINT NOT NULL
);

-- Events a payment provider delivered (seed 001 §5): one row per sender
-- and event ID (an event ID is the sender's: two senders may use one),
-- and signalled_at once the order's workflow has it. A ledger made with
-- PRIMARY KEY (event_id) is moved to this key when it is opened (Open).
CREATE TABLE IF NOT EXISTS webhook_events (
  sender       TEXT NOT NULL,
  event_id     TEXT NOT NULL,
  order_id     TEXT NOT NULL,
  kind         TEXT NOT NULL,
  payload      TEXT NOT NULL,
  received_at  BIGINT NOT NULL,
  signalled_at BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (sender, event_id)
);
CREATE INDEX IF NOT EXISTS webhook_events_order ON webhook_events (order_id);

-- The order API's accounts, and their API keys (AccountByAPIKey). A key is
-- kept only as the SHA-256 of its bytes: it is 32 random bytes (IssueAPIKey),
-- too much entropy to guess back from its digest, so a read of this table
-- gives no key away. An account may hold several keys at once (rotation: the
-- new key works before the old one is revoked); revoked_at > 0 ends a key.
CREATE TABLE IF NOT EXISTS accounts (
  account_id TEXT PRIMARY KEY,
  created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
  key_hash   TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts (account_id),
  created_at BIGINT NOT NULL,
  revoked_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS api_keys_account ON api_keys (account_id);

-- The account that placed each order through the order API, by the
-- order's workflow ID: the API records it before it starts the workflow,
-- and reads an order (GET /orders/{id}, GET /payments) for that account
-- alone. One workflow ID is one account's: it derives from the digest of
-- the order's idempotency scope, which names the account. An order placed
-- otherwise (the CLI, a worker of an earlier version) has no row here, and
-- no account reads it through the API.
CREATE TABLE IF NOT EXISTS order_accounts (
  workflow_id TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL,
  created_at  BIGINT NOT NULL
);
