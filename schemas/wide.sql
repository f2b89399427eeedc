-- The "wide" reference table of the benchmark (benchmarks/wide.py): every GoogleSQL type a CSV
-- carries, a key led by a STRING column with a DESC part, three secondary indexes (one with
-- STORING, one NULL_FILTERED) and an interleaved child. Speed claims are reported for it beside
-- the Orders table of schemas/shop.sql.
CREATE TABLE Accounts (
  Region STRING(8) NOT NULL,
  AccountId INT64 NOT NULL,
  Owner STRING(MAX) NOT NULL,
  Balance NUMERIC,
  Rate FLOAT64,
  Score FLOAT32,
  Active BOOL,
  Opened DATE,
  UpdatedAt TIMESTAMP,
  Avatar BYTES(MAX),
  Meta JSON,
  Tags ARRAY<STRING(MAX)>,
  Counts ARRAY<INT64>,
) PRIMARY KEY (Region, AccountId DESC);

CREATE INDEX AccountsByOwner ON Accounts(Owner) STORING (Balance, Active);

CREATE NULL_FILTERED INDEX AccountsByOpened ON Accounts(Opened);

CREATE INDEX AccountsByActiveRate ON Accounts(Active, Rate DESC);

CREATE TABLE AccountEvents (
  Region STRING(8) NOT NULL,
  AccountId INT64 NOT NULL,
  EventId INT64 NOT NULL,
  Kind STRING(32),
  HappenedAt TIMESTAMP,
) PRIMARY KEY (Region, AccountId DESC, EventId),
  INTERLEAVE IN PARENT Accounts ON DELETE CASCADE;
