"""Bad input: every mistake a user can make raises a specific PlansightError subclass with a
message that says what is wrong and where, and the session stays usable afterwards."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps
from plansight.errors import (
    ExecutionError,
    NotSupportedError,
    PlanError,
    PlansightError,
    SqlSyntaxError,
)


@pytest.fixture
def session():
    s = ps.Session(target_partitions=1)
    s.register("t", pa.table({"id": [1, 2, 3], "name": ["a", "b", None],
                              "price": pa.array([1.5, 2.5, None])}))
    yield s
    # the session stays usable after whatever the test did
    assert s.sql("SELECT count(*) AS n, sum(id) AS s FROM t").to_arrow().to_pylist() == \
        [{"n": 3, "s": 6}]


def _error(session, sql: str, cls: type[PlansightError], run: bool = False) -> PlansightError:
    with pytest.raises(cls) as info:
        query = session.sql(sql)
        if run:
            query.to_arrow()
    assert type(info.value) is cls, f"{type(info.value).__name__}: {info.value}"
    return info.value


# ----------------------------------------------------------------------------- syntax

def test_syntax_error_has_line_column_and_caret(session):
    error = _error(session, "SELECT id,\n  FROM t WHERE", SqlSyntaxError)
    assert (error.line, error.column) == (2, 14)
    text = str(error)
    assert "line 2, column 14" in text
    lines = text.splitlines()
    assert lines[-2].strip() == "FROM t WHERE"
    assert lines[-1].strip() == "^"
    assert lines[-1].index("^") == lines[-2].index("WHERE") + len("WHERE") - 1


@pytest.mark.parametrize("sql,line,column", [
    ("SELEC 1", 1, 7),
    ("SELECT (1 + 2 FROM t", 1, 18),
    ("SELECT *\nFROM t\nWHERE id = = 1", 3, 12),
])
def test_syntax_error_positions(session, sql, line, column):
    error = _error(session, sql, SqlSyntaxError)
    assert (error.line, error.column) == (line, column)
    assert "^" in str(error)
    assert sql.splitlines()[line - 1].strip() in str(error)


# ----------------------------------------------------------------------------- names

def test_unknown_table_suggests_a_name(session):
    error = _error(session, "SELECT * FROM tt", PlanError)
    assert "'tt'" in str(error) and "Did you mean 't'?" in str(error)


def test_unknown_column_suggests_a_name_and_says_where(session):
    error = _error(session, "SELECT nme FROM t", PlanError)
    text = str(error)
    assert "'nme'" in text and "does not exist" in text
    assert "Did you mean 'name'" in text
    assert "line 1, column 8" in text
    assert text.splitlines()[-2:] == ["  SELECT nme FROM t", "         ^"]  # under the name


def test_unknown_qualified_column(session):
    error = _error(session, "SELECT t.prices FROM t", PlanError)
    assert "t.prices" in str(error) and "t.price" in str(error)


def test_unknown_function_suggests_a_name(session):
    error = _error(session, "SELECT lowr(name) FROM t", PlanError)
    assert "lowr" in str(error) and "'lower'" in str(error)


def test_ambiguous_column_says_how_to_qualify(session):
    error = _error(session, "SELECT id FROM t a, t b", PlanError)
    assert "ambiguous" in str(error) and "a.id" in str(error)


def test_ambiguous_column_with_an_unnamed_subquery(session):
    error = _error(session, "SELECT id FROM (SELECT id FROM t), t AS u", PlanError)
    assert "subquery without an alias" in str(error) and "u.id" in str(error)
    assert "?" not in str(error)


def test_non_grouped_column(session):
    error = _error(session, "SELECT id, count(*) FROM t", PlanError)
    assert "GROUP BY" in str(error) and "'id'" in str(error)


# ----------------------------------------------------------------------------- types

@pytest.mark.parametrize("sql,fragment", [
    ("SELECT id + name FROM t", "VARCHAR"),
    ("SELECT * FROM t WHERE id = DATE '2024-01-01'", "DATE"),
    ("SELECT * FROM t WHERE id", "BOOLEAN"),
    ("SELECT sum(name) FROM t", "sum"),
    ("SELECT id FROM t UNION SELECT DATE '2024-01-01'", "DATE"),
])
def test_type_mismatch(session, sql, fragment):
    error = _error(session, sql, PlanError)
    assert fragment.lower() in str(error).lower()


# ----------------------------------------------------------------------------- execution

@pytest.mark.parametrize("sql,fragment", [
    ("SELECT id // 0 FROM t", "division by zero"),
    ("SELECT id % 0 FROM t", "division by zero"),
    ("SELECT 9223372036854775807 + id FROM t", "overflow"),
    ("SELECT CAST(name AS INTEGER) FROM t", "'a'"),
    # a SUM past 38 digits: Arrow's 128-bit decimal sum neither wraps nor passes them silently
    ("SELECT sum(x) FROM (VALUES (CAST('99999999999999999999999999999999999999' AS "
     "DECIMAL(38, 0))), (CAST('99999999999999999999999999999999999999' AS DECIMAL(38, 0)))) "
     "v(x)", "overflow"),
    ("SELECT id, (SELECT name FROM t) FROM t", "more than one row"),
    ("SELECT id, (SELECT b.name FROM t AS b, t AS c WHERE b.id = t.id) FROM t",
     "more than one row"),
    (("SELECT s.id, sum(x) FROM (SELECT id, CAST('90000000000000000000000000000000000000' AS "
      "DECIMAL(38, 0)) - id AS x FROM t) s CROSS JOIN t AS u GROUP BY s.id"), "overflow"),
])
def test_execution_errors(session, sql, fragment):
    error = _error(session, sql, ExecutionError, run=True)
    assert fragment.lower() in str(error).lower()


# ----------------------------------------------------------------------------- files

def test_missing_parquet_file_names_the_path(session, tmp_path):
    path = tmp_path / "missing.parquet"
    with pytest.raises(PlanError, match="missing.parquet"):
        session.register_parquet("p", str(path))
        session.sql("SELECT * FROM p").to_arrow()


def test_corrupt_parquet_file_names_the_path(session, tmp_path):
    path = tmp_path / "corrupt.parquet"
    path.write_bytes(b"PAR1 this is not a parquet file")
    with pytest.raises(PlanError, match="corrupt.parquet"):
        session.register_parquet("p", str(path))
        session.sql("SELECT * FROM p").to_arrow()


def test_truncated_parquet_file_names_the_path(session, tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"x": list(range(1000))}), good)
    data = good.read_bytes()
    path = tmp_path / "truncated.parquet"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(PlanError, match="truncated.parquet"):
        session.register_parquet("p", str(path))
        session.sql("SELECT * FROM p").to_arrow()


def test_missing_csv_file_names_the_path(session, tmp_path):
    with pytest.raises(PlanError, match="nothere.csv"):
        session.register_csv("c", str(tmp_path / "nothere.csv"))
        session.sql("SELECT * FROM c").to_arrow()


def test_corrupt_csv_file_names_the_path(session, tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(PlanError, match="ragged.csv") as info:
        session.register_csv("c", str(path))
        session.sql("SELECT * FROM c").to_arrow()
    assert "3 columns" in str(info.value) or "columns" in str(info.value)


def test_csv_bad_value_after_type_inference_names_the_path(session, tmp_path):
    """The first block infers BIGINT; a bad value in a later block fails while running."""
    path = tmp_path / "late.csv"
    rows = "".join(f"{i},{i}\n" for i in range(600_000))
    path.write_text("a,b\n" + rows + "oops,1\n")
    session.register_csv("c", str(path))
    with pytest.raises(PlanError, match="late.csv") as info:
        session.sql("SELECT sum(a) FROM c").to_arrow()
    assert "oops" in str(info.value)


# ----------------------------------------------------------------------------- options

def test_unknown_option_suggests_a_name(session):
    with pytest.raises(PlanError, match="Did you mean 'batch_size'"):
        session.set_option("batchsize", 5)
    with pytest.raises(PlanError, match="Did you mean 'batch_size'"):
        session.sql("SET batchsize = 5")


@pytest.mark.parametrize("name,value,fragment", [
    ("batch_size", -1, "positive integer"),
    ("batch_size", "many", "positive integer"),
    ("target_partitions", 0, "positive integer"),
    ("default_null_order", "sideways", "nulls_first"),
    ("integer_division", "maybe", "true or false"),
    ("memory_limit", "lots", "memory"),
])
def test_bad_option_value(session, name, value, fragment):
    with pytest.raises(PlanError) as info:
        session.set_option(name, value)
    assert fragment.lower() in str(info.value).lower()
    assert session.get_option(name) != value


def test_bad_option_value_in_set_statement(session):
    with pytest.raises(PlanError, match="default_null_order"):
        session.sql("SET default_null_order = 'sideways'")
    assert session.get_option("default_null_order") == "nulls_last"


# ----------------------------------------------------------------------------- gaps

@pytest.mark.parametrize("sql,feature", [
    ("SELECT array_agg(id ORDER BY id) FROM t", "ORDER BY"),
    ("SELECT id, count(*) FROM t GROUP BY GROUPING SETS (ROLLUP (id), ())", "ROLLUP"),
    ("UPDATE t SET id = 4", "UPDATE"),
])
def test_not_supported_names_the_feature(session, sql, feature):
    error = _error(session, sql, NotSupportedError)
    assert feature.lower() in str(error).lower()


@pytest.mark.parametrize("sql,fragment", [
    ("SELECT grouping(id) FROM t", "GROUP BY"),
    ("SELECT id, grouping(name) FROM t GROUP BY ROLLUP (id)", "GROUP BY expressions"),
    ("SELECT id FROM t WHERE grouping(id) = 0", "not allowed"),
])
def test_grouping_outside_its_place_is_a_plan_error(session, sql, fragment):
    assert fragment.lower() in str(_error(session, sql, PlanError)).lower()


def test_many_errors_in_a_row_leave_the_session_usable(session):
    bad = ["SELEC 1", "SELECT nme FROM t", "SELECT id + name FROM t"]
    for sql in bad:
        with pytest.raises(PlansightError):
            session.sql(sql)
    with pytest.raises(ExecutionError):
        session.sql("SELECT id // 0 FROM t").to_arrow()
    assert session.sql("SELECT name FROM t WHERE id = 2").to_arrow().to_pylist() == \
        [{"name": "b"}]


def test_case_evaluates_a_branch_only_on_its_rows():
    s = ps.Session(target_partitions=1)
    s.register("z", pa.table({"n": [6, 7, 8], "d": [0, 7, 2]}))
    got = s.sql("SELECT CASE WHEN d <> 0 THEN n // d ELSE -1 END AS q FROM z").to_arrow()
    assert got.column("q").to_pylist() == [-1, 1, 4]


def test_per_query_options_leave_the_session_unchanged():
    import pyarrow as pa

    import plansight as ps

    s = ps.Session(target_partitions=2)
    s.register("t", pa.table({"x": [3, 1, 2]}))
    q = s.sql("SELECT sum(x) AS n FROM t", options={"target_partitions": 1, "batch_size": 1,
                                                       "window_executor": "sorted"})
    assert (q.config.target_partitions, q.config.batch_size, q.config.window_executor) == \
        (1, 1, "sorted")
    assert (s.get_option("target_partitions"), s.get_option("batch_size"),
            s.get_option("window_executor")) == (2, 8192, "auto")
    assert q.to_arrow().to_pylist() == [{"n": 6}]


def test_engine_knobs_are_options_with_clear_errors():
    import pytest

    import plansight as ps
    from plansight.errors import PlanError

    s = ps.Session()
    s.sql("SET window_executor = 'partition'")
    s.sql("SET hash_join_single_partition_threshold_rows = 0")
    assert (s.get_option("window_executor"),
            s.get_option("hash_join_single_partition_threshold_rows")) == ("partition", 0)
    with pytest.raises(PlanError, match="window_executor.*auto, hash, sorted, partition"):
        s.set_option("window_executor", "fastest")
    with pytest.raises(PlanError, match="Did you mean .spill_merge_fan_in"):
        s.sql("SET spill_merge_fanin = 4")
    with pytest.raises(PlanError, match="unknown option"):
        s.sql("SELECT 1", options={"no_such_option": 1})


def test_plan_vocabulary_refuses_unknown_names_with_the_choices():
    import pyarrow as pa
    import pytest

    from plansight.engine.physical.joins.output import join_schema
    from plansight.engine.physical.vocabulary import AggregateMode, JoinType
    from plansight.errors import PlanError

    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(PlanError, match="invalid JoinType 'semi_left'.*left_semi"):
        join_schema(schema, schema, "semi_left")
    with pytest.raises(PlanError, match="invalid AggregateMode 'partial'.*Partial"):
        AggregateMode.of("partial")
    assert JoinType.of("right_anti").emits_right_only and JoinType.LEFT == "left"
    assert f"{JoinType.FULL}" == str(JoinType.FULL) == "full"
