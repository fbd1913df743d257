"""plansight.datasets.tpch: determinism, schemas, row counts, value domains."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from plansight.datasets import TPCH_TABLES, tpch
from plansight.datasets.tpch import P_CONTAINERS, P_TYPES, SHIP_MODES

MONEY = pa.decimal128(15, 2)
# The schema of tpchgen-cli's Parquet, with string in place of string_view.
EXPECTED_SCHEMAS = {
    "region": [("r_regionkey", pa.int64()), ("r_name", pa.string()), ("r_comment", pa.string())],
    "nation": [("n_nationkey", pa.int64()), ("n_name", pa.string()),
               ("n_regionkey", pa.int64()), ("n_comment", pa.string())],
    "supplier": [("s_suppkey", pa.int64()), ("s_name", pa.string()), ("s_address", pa.string()),
                 ("s_nationkey", pa.int64()), ("s_phone", pa.string()), ("s_acctbal", MONEY),
                 ("s_comment", pa.string())],
    "customer": [("c_custkey", pa.int64()), ("c_name", pa.string()), ("c_address", pa.string()),
                 ("c_nationkey", pa.int64()), ("c_phone", pa.string()), ("c_acctbal", MONEY),
                 ("c_mktsegment", pa.string()), ("c_comment", pa.string())],
    "part": [("p_partkey", pa.int64()), ("p_name", pa.string()), ("p_mfgr", pa.string()),
             ("p_brand", pa.string()), ("p_type", pa.string()), ("p_size", pa.int32()),
             ("p_container", pa.string()), ("p_retailprice", MONEY), ("p_comment", pa.string())],
    "partsupp": [("ps_partkey", pa.int64()), ("ps_suppkey", pa.int64()),
                 ("ps_availqty", pa.int32()), ("ps_supplycost", MONEY),
                 ("ps_comment", pa.string())],
    "orders": [("o_orderkey", pa.int64()), ("o_custkey", pa.int64()),
               ("o_orderstatus", pa.string()), ("o_totalprice", MONEY),
               ("o_orderdate", pa.date32()), ("o_orderpriority", pa.string()),
               ("o_clerk", pa.string()), ("o_shippriority", pa.int32()),
               ("o_comment", pa.string())],
    "lineitem": [("l_orderkey", pa.int64()), ("l_partkey", pa.int64()),
                 ("l_suppkey", pa.int64()), ("l_linenumber", pa.int32()),
                 ("l_quantity", MONEY), ("l_extendedprice", MONEY), ("l_discount", MONEY),
                 ("l_tax", MONEY), ("l_returnflag", pa.string()), ("l_linestatus", pa.string()),
                 ("l_shipdate", pa.date32()), ("l_commitdate", pa.date32()),
                 ("l_receiptdate", pa.date32()), ("l_shipinstruct", pa.string()),
                 ("l_shipmode", pa.string()), ("l_comment", pa.string())],
}


@pytest.fixture(scope="module")
def sf001() -> dict[str, pa.Table]:
    return tpch(0.01)


def test_same_seed_gives_identical_tables(sf001):
    again = tpch(0.01, seed=0)
    assert list(again) == list(sf001) == list(TPCH_TABLES)
    for name in TPCH_TABLES:
        assert again[name].equals(sf001[name]), name


def test_other_seed_gives_other_data(sf001):
    other = tpch(0.01, seed=1)
    assert not other["lineitem"].equals(sf001["lineitem"])
    assert other["region"].column("r_name").equals(sf001["region"].column("r_name"))


@pytest.mark.parametrize("name", TPCH_TABLES)
def test_schema_matches_tpchgen(sf001, name):
    schema = sf001[name].schema
    assert [(f.name, f.type) for f in schema] == EXPECTED_SCHEMAS[name]
    assert not any(f.nullable for f in schema)
    assert sf001[name].validate(full=True) is None
    assert all(sf001[name].column(i).null_count == 0 for i in range(len(schema)))


def test_row_counts_scale():
    small, large = tpch(0.01), tpch(0.02)
    fixed = {"region": 5, "nation": 25}
    per_sf = {"supplier": 10_000, "customer": 150_000, "part": 200_000, "partsupp": 800_000,
              "orders": 1_500_000}
    for table, rows in fixed.items():
        assert small[table].num_rows == large[table].num_rows == rows
    for table, rows in per_sf.items():
        assert small[table].num_rows == rows // 100
        assert large[table].num_rows == rows // 50
    for tables, scale in ((small, 0.01), (large, 0.02)):
        lines = tables["lineitem"].num_rows
        assert 5_700_000 * scale < lines < 6_300_000 * scale  # 1..7 lines per order, mean 4


def test_keys_and_relationships(sf001):
    orders, lineitem = sf001["orders"], sf001["lineitem"]
    partsupp, customer = sf001["partsupp"], sf001["customer"]
    # Every lineitem's (part, supplier) is a partsupp row; partsupp's key is unique.
    assert partsupp.group_by(["ps_partkey", "ps_suppkey"]).aggregate([]).num_rows \
        == partsupp.num_rows
    pairs = lineitem.select(["l_partkey", "l_suppkey"]).rename_columns(
        ["ps_partkey", "ps_suppkey"])
    joined = pairs.join(partsupp, ["ps_partkey", "ps_suppkey"], join_type="left anti")
    assert joined.num_rows == 0
    # Orders reference customers whose key is not a multiple of 3.
    custkeys = orders.column("o_custkey")
    assert pc.max(custkeys).as_py() <= customer.num_rows
    assert not (custkeys.to_numpy() % 3 == 0).any()
    # Sparse order keys: 8 used out of every 32.
    keys = orders.column("o_orderkey").to_numpy()
    assert set(((keys - 1) % 32).tolist()) == set(range(8))
    assert set(pc.unique(lineitem.column("l_orderkey")).to_pylist()) == set(keys.tolist())


def test_value_domains(sf001):
    lineitem, orders, part = sf001["lineitem"], sf001["orders"], sf001["part"]
    customer = sf001["customer"]
    dates = orders.column("o_orderdate")
    assert str(pc.min(dates)) >= "1992-01-01" and str(pc.max(dates)) <= "1998-08-02"
    assert set(pc.unique(lineitem.column("l_shipmode")).to_pylist()) == set(SHIP_MODES)
    assert set(pc.unique(part.column("p_type")).to_pylist()) <= set(P_TYPES)
    assert set(pc.unique(part.column("p_container")).to_pylist()) <= set(P_CONTAINERS)
    assert set(pc.unique(orders.column("o_orderstatus")).to_pylist()) == {"F", "O", "P"}
    flags = lineitem.group_by(["l_returnflag", "l_linestatus"]).aggregate([]).to_pylist()
    assert {(r["l_returnflag"], r["l_linestatus"]) for r in flags} == {
        ("A", "F"), ("N", "F"), ("N", "O"), ("R", "F")}
    codes = pc.utf8_slice_codeunits(customer.column("c_phone"), 0, 2).to_pylist()
    assert {int(code) for code in codes} == set(range(10, 35))
    assert pc.all(pc.match_like(customer.column("c_phone"), "__-___-___-____")).as_py()
    # Comments carry the words the queries look for.
    assert pc.any(pc.match_like(orders.column("o_comment"), "%special%requests%")).as_py()
    assert pc.any(pc.match_like(sf001["supplier"].column("s_comment"),
                                "%Customer%Complaints%")).as_py()
    assert pc.any(pc.match_like(part.column("p_name"), "forest%")).as_py()
    # Money: l_extendedprice = l_quantity * p_retailprice; discount and tax in range.
    assert pc.min(lineitem.column("l_discount")).as_py() >= 0
    assert pc.max(lineitem.column("l_discount")).as_py() == Decimal("0.10")
    assert pc.max(lineitem.column("l_tax")).as_py() == Decimal("0.08")
    price = part.column("p_retailprice").to_pylist()
    sample = lineitem.slice(0, 1000).to_pylist()
    assert all(r["l_extendedprice"] == r["l_quantity"] * price[r["l_partkey"] - 1]
               for r in sample)
    assert pc.min(customer.column("c_acctbal")).as_py() < 0


def test_rejects_bad_scale():
    with pytest.raises(ValueError):
        tpch(0)
