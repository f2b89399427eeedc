"""The wide reference table (schemas/wide.sql): a CSV file of it, hostile on purpose.

Orders (8 columns, an INT64 key) is what the loader was tuned on; this table is the one it was
not: a key led by a STRING with a DESC part, every type a CSV carries (NUMERIC with four
decimals and negatives, FLOAT64 and FLOAT32, BOOL in several spellings, DATE, TIMESTAMP with
offsets, BYTES in base64, JSON, ARRAY<STRING> and ARRAY<INT64> as JSON text), strings with
quotes, commas, tabs, quoted newlines and non-ASCII text, and NULLs in every nullable column.
Deterministic for a seed, and vectorised (numpy + pyarrow), so a million rows take seconds.

    python -m benchmarks.wide --rows 100000 --out /tmp/wide   # Accounts.csv, AccountEvents.csv
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

ROOT = Path(__file__).resolve().parent.parent
WIDE_DDL = ROOT / "schemas" / "wide.sql"
TABLE = "Accounts"
CHILD = "AccountEvents"
REGIONS = np.array(["eu-west", "us-east", "apac", "ÖSTERN", "sa", "za-1", "Ω", "me"])
WORDS = np.array(
    [
        "plain",
        'a "quoted" word',
        "comma, inside",
        "tab\there",
        "new\nline",
        "naïve café",
        "日本語",
        "emoji 🙂",
        "back\\slash",
        "",
    ]
)
BOOLS = np.array(["true", "false", "TRUE", "f", "yes", "0", "1", "N"])
KINDS = np.array(["open", "close", "deposit", "withdraw", None], dtype=object)


def _nulls(rng: np.random.Generator, n: int, share: float) -> np.ndarray:
    return rng.random(n) < share


def _masked(values: np.ndarray, mask: np.ndarray) -> pa.Array:
    return pa.array(values, pa.string(), mask=mask)


def accounts(rows: int, seed: int = 7) -> pa.Table:
    """The Accounts rows as CSV text columns (NULL: an empty unquoted field)."""
    rng = np.random.default_rng(seed)
    n = rows
    region = REGIONS[rng.integers(0, len(REGIONS), n)]
    # distinct keys: AccountId unique across the table, shuffled so the file is not in key order
    account = rng.permutation(n).astype(np.int64) * 7 - n
    owner = np.char.add(
        np.char.add(WORDS[rng.integers(0, len(WORDS), n)], " #"), account.astype(str)
    )
    cents = rng.integers(-(10**9), 10**9, n)
    balance = np.char.add(
        np.char.add((cents // 10**4).astype(str), "."),
        np.char.zfill((np.abs(cents) % 10**4).astype(str), 4),
    )
    rate = rng.normal(0, 1e3, n).round(6).astype(str)
    score = rng.random(n).astype(np.float32).astype(str)
    active = BOOLS[rng.integers(0, len(BOOLS), n)]
    days = rng.integers(-10_000, 20_000, n)
    opened = (np.datetime64("1970-01-01") + days.astype("timedelta64[D]")).astype(str)
    secs = rng.integers(0, 2_000_000_000, n)
    stamps = (np.datetime64("1970-01-01T00:00:00") + secs.astype("timedelta64[s]")).astype(str)
    offsets = np.array(["Z", "+02:00", "-05:30", ".123456Z", ".5+01:00"])
    updated = np.char.add(stamps, offsets[rng.integers(0, len(offsets), n)])
    blobs = [rng.bytes(int(k)) for k in rng.integers(0, 48, min(n, 4096))]
    avatar = np.array([base64.b64encode(b).decode() for b in blobs])[np.arange(n) % len(blobs)]
    metas = np.array(
        [
            json.dumps({"tier": t, "tags": ["a", "b"][: t % 3], "note": w}, ensure_ascii=False)
            for t, w in zip(range(64), np.resize(WORDS, 64))
        ]
    )
    meta = metas[rng.integers(0, len(metas), n)]
    tag_lists = np.array(
        [
            json.dumps(list(WORDS[i : i + k]), ensure_ascii=False)
            for i in range(8)
            for k in (0, 1, 3)
        ]
    )
    tags = tag_lists[rng.integers(0, len(tag_lists), n)]
    count_lists = np.array(["[]", "[1]", "[1,2,3]", "[-9223372036854775808,0,null]", "[42]"])
    counts = count_lists[rng.integers(0, len(count_lists), n)]
    return pa.table(
        {
            "Region": pa.array(region, pa.string()),
            "AccountId": pa.array(account.astype(str), pa.string()),
            "Owner": pa.array(owner, pa.string()),
            "Balance": _masked(balance, _nulls(rng, n, 0.05)),
            "Rate": _masked(rate, _nulls(rng, n, 0.05)),
            "Score": _masked(score, _nulls(rng, n, 0.05)),
            "Active": _masked(active, _nulls(rng, n, 0.05)),
            "Opened": _masked(opened, _nulls(rng, n, 0.2)),
            "UpdatedAt": _masked(updated, _nulls(rng, n, 0.05)),
            "Avatar": _masked(avatar, _nulls(rng, n, 0.1)),
            "Meta": _masked(meta, _nulls(rng, n, 0.1)),
            "Tags": _masked(tags, _nulls(rng, n, 0.1)),
            "Counts": _masked(counts, _nulls(rng, n, 0.1)),
        }
    )


def events(parents: pa.Table, per_parent: int = 2, seed: int = 11) -> pa.Table:
    """Child rows of the first parents: ``per_parent`` events each."""
    rng = np.random.default_rng(seed)
    n = parents.num_rows * per_parent
    idx = np.repeat(np.arange(parents.num_rows), per_parent)
    secs = rng.integers(0, 2_000_000_000, n)
    at = (np.datetime64("1970-01-01T00:00:00") + secs.astype("timedelta64[s]")).astype(str)
    return pa.table(
        {
            "Region": parents.column("Region").take(pa.array(idx)),
            "AccountId": parents.column("AccountId").take(pa.array(idx)),
            "EventId": pa.array(np.tile(np.arange(per_parent), parents.num_rows).astype(str)),
            "Kind": pa.array(KINDS[rng.integers(0, len(KINDS), n)], pa.string()),
            "HappenedAt": pa.array(np.char.add(at, "Z"), pa.string()),
        }
    )


def write(table: pa.Table, path: Path) -> Path:
    """CSV with a header; strings quoted where needed, NULL as an empty unquoted field."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(table, path, pacsv.WriteOptions(quoting_style="needed"))
    return path


def wide_file(data_dir: Path, rows: int) -> Path:
    """The Accounts file with ``rows`` rows (cached by size)."""
    path = data_dir / f"wide-{rows}" / f"{TABLE}.csv"
    if not path.exists():
        write(accounts(rows), path)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    parents = accounts(a.rows)
    write(parents, a.out / f"{TABLE}.csv")
    write(events(parents.slice(0, min(a.rows, 1000))), a.out / f"{CHILD}.csv")


if __name__ == "__main__":
    main()
