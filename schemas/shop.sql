-- An online shop, the scenario of Google's Spanner load-throughput study.
-- GoogleSQL dialect. Statements end with a semicolon (one in a string or a comment does not end one).
-- Parents come before children: Customers, Orders, OrderItems. Products is independent.

-- Customers covers every scalar type the loader converts, plus an ARRAY and a commit-timestamp column.
CREATE TABLE Customers (
  CustomerId INT64 NOT NULL,
  Name STRING(100) NOT NULL,
  Email STRING(256),
  Balance NUMERIC,
  Active BOOL,
  CreatedAt TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  Tags ARRAY<STRING(32)>,
  Avatar BYTES(MAX),
  Profile JSON,
  Birthday DATE,
  Score FLOAT64,
) PRIMARY KEY (CustomerId);

-- The benchmark reference "8-column orders table".
CREATE TABLE Orders (
  CustomerId INT64 NOT NULL,
  OrderId INT64 NOT NULL,
  OrderDate DATE NOT NULL,
  Status STRING(16) NOT NULL,
  Amount NUMERIC,
  Currency STRING(3),
  Weight FLOAT64,
  PlacedAt TIMESTAMP,
) PRIMARY KEY (CustomerId, OrderId),
  INTERLEAVE IN PARENT Customers ON DELETE CASCADE;

CREATE INDEX OrdersByStatus ON Orders(Status);

-- LineNo is a descending key column: the loader must sort it in reverse.
CREATE TABLE OrderItems (
  CustomerId INT64 NOT NULL,
  OrderId INT64 NOT NULL,
  LineNo INT64 NOT NULL,
  ProductId STRING(36) NOT NULL,
  Quantity INT64 NOT NULL,
  UnitPrice NUMERIC NOT NULL,
  Discount FLOAT64,
  Note STRING(MAX),
) PRIMARY KEY (CustomerId, OrderId, LineNo DESC),
  INTERLEAVE IN PARENT Orders ON DELETE CASCADE;

CREATE TABLE Products (
  ProductId STRING(36) NOT NULL,
  Name STRING(200) NOT NULL,
  Category STRING(50),
  Price NUMERIC NOT NULL,
  Weight FLOAT64,
  InStock BOOL NOT NULL,
  Attributes JSON,
  Sizes ARRAY<STRING(8)>,
) PRIMARY KEY (ProductId);

CREATE INDEX ProductsByCategory ON Products(Category);

CREATE INDEX ProductsByName ON Products(Name) STORING (Price);
