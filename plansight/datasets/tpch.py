"""TPC-H-like sample data, generated in memory with vectorized numpy.

The tables follow the TPC-H specification (clause 4.2.3) closely enough for the 22
queries: the same columns, types and key relationships as ``tpchgen-cli``'s Parquet
(int64 keys, decimal128(15, 2) money, date32 dates; ``pa.string()`` instead of
``string_view``), the same vocabularies (types, containers, brands, segments, priorities,
ship modes, the 92 part-name colours), the same value ranges and date arithmetic, and
comments cut from a text pool grown from the specification's sentence grammar. It is not
byte-identical to ``dbgen``: random streams differ, so query answers differ in value but
not in shape.

Row counts at scale factor SF: supplier 10,000·SF, part 200,000·SF, partsupp 4 per part,
customer 150,000·SF, orders 1,500,000·SF, lineitem 1 to 7 per order (about 6,000,000·SF).

Every table comes from its own random stream keyed by (seed, table), so the output is a pure
function of ``(scale, seed)``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.datasets._strings import fixed_width, random_slices, take_strings

TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders",
               "lineitem")

# ---------------------------------------------------------------------------- vocabularies

REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
NATIONS = (  # (name, regionkey), nationkey is the position
    ("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4),
    ("ETHIOPIA", 0), ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2),
    ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2), ("JORDAN", 4), ("KENYA", 0), ("MOROCCO", 0),
    ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2), ("ROMANIA", 3), ("SAUDI ARABIA", 4),
    ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3), ("UNITED STATES", 1),
)
COLORS = (  # the 92 words of part names
    "almond", "antique", "aquamarine", "azure", "beige", "bisque", "black", "blanched", "blue",
    "blush", "brown", "burlywood", "burnished", "chartreuse", "chiffon", "chocolate", "coral",
    "cornflower", "cornsilk", "cream", "cyan", "dark", "deep", "dim", "dodger", "drab",
    "firebrick", "floral", "forest", "frosted", "gainsboro", "ghost", "goldenrod", "green", "grey",
    "honeydew", "hot", "indian", "ivory", "khaki", "lace", "lavender", "lawn", "lemon", "light",
    "lime", "linen", "magenta", "maroon", "medium", "metallic", "midnight", "mint", "misty",
    "moccasin", "navajo", "navy", "olive", "orange", "orchid", "pale", "papaya", "peach", "peru",
    "pink", "plum", "powder", "puff", "purple", "red", "rose", "rosy", "royal", "saddle", "salmon",
    "sandy", "seashell", "sienna", "sky", "slate", "smoke", "snow", "spring", "steel", "tan",
    "thistle", "tomato", "turquoise", "violet", "wheat", "white", "yellow"
)
TYPE_SIZES = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_FINISHES = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_MATERIALS = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
CONTAINER_SIZES = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_KINDS = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
INSTRUCTIONS = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")

P_TYPES = tuple(" ".join(t) for t in itertools.product(TYPE_SIZES, TYPE_FINISHES, TYPE_MATERIALS))
P_CONTAINERS = tuple(" ".join(c) for c in itertools.product(CONTAINER_SIZES, CONTAINER_KINDS))

# Text grammar of the specification (clause 4.2.2.10): word lists with weights.
_WORDS: dict[str, tuple[tuple[str, int], ...]] = {
    "noun": (
        ("packages", 40), ("requests", 40), ("accounts", 40), ("deposits", 40), ("foxes", 20),
        ("ideas", 20), ("theodolites", 20), ("pinto beans", 20), ("instructions", 20),
        ("dependencies", 10), ("excuses", 10), ("platelets", 10), ("asymptotes", 10),
        ("courts", 5), ("dolphins", 5), ("multipliers", 1), ("sauternes", 1), ("warthogs", 1),
        ("frets", 1), ("dinos", 1), ("attainments", 1), ("somas", 1), ("Tiresias", 1),
        ("patterns", 1), ("forges", 1), ("braids", 1), ("hockey players", 1), ("frays", 1),
        ("warhorses", 1), ("dugouts", 1), ("notornis", 1), ("epitaphs", 1), ("pearls", 1),
        ("tithes", 1), ("waters", 1), ("orbits", 1), ("gifts", 1), ("sheaves", 1),
        ("depths", 1), ("sentiments", 1), ("decoys", 1), ("realms", 1), ("pains", 1),
        ("grouches", 1), ("escapades", 1),
    ),
    "verb": (
        ("sleep", 20), ("wake", 20), ("are", 20), ("cajole", 20), ("haggle", 20), ("nag", 10),
        ("use", 10), ("boost", 10), ("affix", 5), ("detect", 5), ("integrate", 5),
        ("maintain", 1), ("nod", 1), ("was", 1), ("lose", 1), ("sublate", 1), ("solve", 1),
        ("thrash", 1), ("promise", 1), ("engage", 1), ("hinder", 1), ("print", 1),
        ("x-ray", 1), ("breach", 1), ("eat", 1), ("grow", 1), ("impress", 1), ("mold", 1),
        ("poach", 1), ("serve", 1), ("run", 1), ("dazzle", 1), ("snooze", 1), ("doze", 1),
        ("unwind", 1), ("kindle", 1), ("play", 1), ("hang", 1), ("believe", 1), ("doubt", 1),
    ),
    "adjective": (
        ("special", 20), ("pending", 20), ("unusual", 20), ("express", 20), ("furious", 1),
        ("sly", 1), ("careful", 1), ("blithe", 1), ("quick", 1), ("fluffy", 1), ("slow", 1),
        ("quiet", 1), ("ruthless", 1), ("thin", 1), ("close", 1), ("dogged", 1), ("daring", 1),
        ("brave", 1), ("stealthy", 1), ("permanent", 1), ("enticing", 1), ("idle", 1),
        ("busy", 1), ("regular", 50), ("final", 40), ("ironic", 40), ("even", 30), ("bold", 20),
        ("silent", 10),
    ),
    "adverb": (
        ("sometimes", 1), ("always", 1), ("never", 1), ("furiously", 50), ("slyly", 50),
        ("carefully", 50), ("blithely", 40), ("quickly", 30), ("fluffily", 20), ("slowly", 1),
        ("quietly", 1), ("ruthlessly", 1), ("thinly", 1), ("closely", 1), ("doggedly", 1),
        ("daringly", 1), ("bravely", 1), ("stealthily", 1), ("permanently", 1),
        ("enticingly", 1), ("idly", 1), ("busily", 1), ("regularly", 1), ("finally", 1),
        ("ironically", 1), ("evenly", 1), ("boldly", 1), ("silently", 1),
    ),
    "preposition": (
        ("about", 50), ("above", 50), ("according to", 50), ("across", 50), ("after", 50),
        ("against", 40), ("along", 40), ("alongside of", 30), ("among", 30), ("around", 20),
        ("at", 10), ("atop", 1), ("before", 1), ("behind", 1), ("beneath", 1), ("beside", 1),
        ("besides", 1), ("between", 1), ("beyond", 1), ("by", 1), ("despite", 1),
        ("during", 1), ("except", 1), ("for", 1), ("from", 1), ("in place of", 1),
        ("inside", 1), ("instead of", 1), ("into", 1), ("near", 1), ("of", 1), ("on", 1),
        ("outside", 1), ("over", 1), ("past", 1), ("since", 1), ("through", 1),
        ("throughout", 1), ("to", 1), ("toward", 1), ("under", 1), ("until", 1), ("up", 1),
        ("upon", 1), ("without", 1), ("with", 1), ("within", 1),
    ),
    "auxiliary": (
        ("do", 1), ("may", 1), ("might", 1), ("shall", 1), ("will", 1), ("would", 1),
        ("can", 1), ("could", 1), ("should", 1), ("ought to", 1), ("must", 1),
        ("will have to", 1), ("shall have to", 1), ("could have to", 1),
        ("should have to", 1), ("must have to", 1), ("need to", 1), ("try to", 1),
    ),
    "terminator": ((".", 50), (";", 1), (":", 1), ("?", 1), ("!", 1), ("--", 1)),
    "the": (("the", 1),),
}
# A phrase symbol expands to one of several word-class sequences; "adjective," is an
# adjective followed by a comma.
_PHRASES: dict[str, tuple[tuple[tuple[str, ...], int], ...]] = {
    "N": ((("noun",), 10), (("adjective", "noun"), 20),
          (("adjective,", "adjective", "noun"), 10), (("adverb", "adjective", "noun"), 50)),
    "V": ((("verb",), 30), (("auxiliary", "verb"), 1), (("verb", "adverb"), 40),
          (("auxiliary", "verb", "adverb"), 1)),
    "P": ((("preposition", "the", "noun"), 1),),
    "T": ((("terminator",), 1),),
}
_SENTENCES = (("NVT", 3), ("NVPT", 3), ("NVNT", 3), ("NPVNT", 1), ("NPVPT", 1))

# Dates, as days since 1970-01-01.
_START_DATE = int(np.datetime64("1992-01-01", "D").astype(np.int64))
_CURRENT_DATE = int(np.datetime64("1995-06-17", "D").astype(np.int64))
_LAST_ORDER_DATE = int(np.datetime64("1998-08-02", "D").astype(np.int64))  # END_DATE - 151

_ADDRESS_ALPHABET = np.frombuffer(
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ, ", dtype=np.uint8
)


def tpch(scale: float = 0.01, seed: int = 0) -> dict[str, pa.Table]:
    """Generate the eight TPC-H tables at scale factor ``scale``.

    Args:
        scale: TPC-H scale factor; 1 gives about 6 million lineitem rows.
        seed: Seed of every random stream; the same (scale, seed) gives identical tables.

    Returns:
        The tables by name, in the order region, nation, supplier, customer, part,
        partsupp, orders, lineitem.

    Example:
        >>> tables = tpch(0.001)
        >>> tables["orders"].num_rows, tables["nation"].num_rows
        (1500, 25)
        >>> tables["lineitem"].schema.field("l_extendedprice").type
        Decimal128Type(decimal128(15, 2))
    """
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    counts = _row_counts(scale)
    pool = _text_pool(_rng(seed, "text"), _pool_size(scale))
    tables = {
        "region": _region(_rng(seed, "region"), pool),
        "nation": _nation(_rng(seed, "nation"), pool),
        "supplier": _supplier(_rng(seed, "supplier"), pool, counts["supplier"]),
        "customer": _customer(_rng(seed, "customer"), pool, counts["customer"]),
        "part": _part(_rng(seed, "part"), pool, counts["part"]),
        "partsupp": _partsupp(_rng(seed, "partsupp"), pool, counts["part"], counts["supplier"]),
    }
    tables["orders"], tables["lineitem"] = _orders_and_lineitem(
        _rng(seed, "orders"), pool, counts
    )
    return tables


def _row_counts(scale: float) -> dict[str, int]:
    return {
        # partsupp's supplier formula needs at least 4 suppliers to give distinct keys.
        "supplier": max(4, int(10_000 * scale)),
        "part": max(1, int(200_000 * scale)),
        "customer": max(3, int(150_000 * scale)),
        "orders": max(1, int(1_500_000 * scale)),
        "clerks": max(1, int(1_000 * scale)),
    }


def _rng(seed: int, table: str) -> np.random.Generator:
    return np.random.default_rng([seed, TPCH_TABLES.index(table) if table in TPCH_TABLES else 99])


def _pool_size(scale: float) -> int:
    """Bytes of comment text; comments are random slices of it, as in dbgen."""
    return int(min(max(scale * 32, 1.0), 256.0) * (1 << 20))


# ---------------------------------------------------------------------------- columns


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, dtype, nullable=False) for name, dtype in fields])


def _decimal(cents: np.ndarray) -> pa.Array:
    """decimal128(15, 2) from integer hundredths (two's complement, little-endian)."""
    words = np.empty((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = np.asarray(cents, dtype=np.int64) >> 63
    return pa.Array.from_buffers(pa.decimal128(15, 2), len(cents), [None, pa.py_buffer(words)])


def _date(days: np.ndarray) -> pa.Array:
    days = np.ascontiguousarray(days, dtype=np.int32)
    return pa.Array.from_buffers(pa.date32(), len(days), [None, pa.py_buffer(days)])


def _int64(values: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(values, dtype=np.int64))


def _int32(values: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(values, dtype=np.int32))


def _money(rng: np.random.Generator, n: int, low_cents: int, high_cents: int) -> np.ndarray:
    return rng.integers(low_cents, high_cents + 1, size=n)


def _balanced(rng: np.random.Generator, n: int, categories: int) -> np.ndarray:
    """Codes 0..categories-1 in random order, each used n // categories or one more times.

    Used for nation keys instead of independent draws: at small scale factors (100 suppliers)
    independent draws can leave a nation that a query filters on nearly empty.
    """
    return rng.permutation(np.arange(n) % categories)


def _phones(rng: np.random.Generator, nationkeys: np.ndarray) -> pa.Array:
    """``CC-ddd-ddd-dddd`` with country code nationkey + 10 (clause 4.2.2.9)."""
    n = len(nationkeys)
    return fixed_width(
        [(nationkeys + 10, 2), b"-", (rng.integers(100, 1000, n), 3), b"-",
         (rng.integers(100, 1000, n), 3), b"-", (rng.integers(1000, 10000, n), 4)],
        n,
    )


def _addresses(rng: np.random.Generator, n: int) -> pa.ChunkedArray:
    """Random alphanumeric strings of 10 to 40 characters (the spec's v-string)."""
    pool = _ADDRESS_ALPHABET[rng.integers(0, len(_ADDRESS_ALPHABET), size=max(4096, 40 * 64))]
    return random_slices(rng, pool, n, 10, 40)


def _comments(rng: np.random.Generator, pool: np.ndarray, n: int, average: int) -> pa.ChunkedArray:
    """Text of length uniform in [0.4, 1.6] x average, as dbgen's TEXT(average)."""
    return random_slices(rng, pool, n, int(average * 0.4), int(average * 1.6))


def _text_pool(rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` bytes of sentences grown from the specification's grammar.

    All expansions of the grammar (a few hundred word-class sequences with their
    probabilities) are enumerated once; then sentences, and each word in them, are drawn in
    vectorized passes, and Arrow concatenates the chosen words.
    """
    classes = list(_WORDS)
    patterns: list[list[int]] = []
    weights: list[float] = []
    total_sentence_weight = sum(w for _, w in _SENTENCES)
    for symbols, sentence_weight in _SENTENCES:
        options = [_PHRASES[symbol] for symbol in symbols]
        for choice in itertools.product(*options):
            words: list[str] = [cls for sequence, _ in choice for cls in sequence]
            weight = sentence_weight / total_sentence_weight
            for (_, option_weight), symbol in zip(choice, symbols):
                weight *= option_weight / sum(w for _, w in _PHRASES[symbol])
            # Token codes: 2 * class + 1 when the word takes no trailing space (it is followed
            # by the terminator); "adjective," is its own pseudo-class after the real ones.
            codes = []
            for position, cls in enumerate(words):
                if cls == "adjective,":
                    codes.append(2 * len(classes))
                else:
                    glued = position + 1 < len(words) and words[position + 1] == "terminator"
                    codes.append(2 * classes.index(cls) + int(glued))
            patterns.append(codes)
            weights.append(weight)
    width = max(len(p) for p in patterns)
    pattern_matrix = np.full((len(patterns), width), -1, dtype=np.int64)
    for row, codes in enumerate(patterns):
        pattern_matrix[row, : len(codes)] = codes
    pattern_lengths = (pattern_matrix >= 0).sum(axis=1)

    # Token strings: for every class, each word with a trailing space then without.
    token_strings: list[str] = []
    token_base: dict[int, int] = {}
    token_probabilities: dict[int, np.ndarray] = {}
    for index, cls in enumerate(classes + ["adjective,"]):
        entries = _WORDS["adjective" if cls == "adjective," else cls]
        p = np.array([w for _, w in entries], dtype=np.float64)
        p /= p.sum()
        suffixes = (", ",) if cls == "adjective," else (" ", "")
        for glued, suffix in enumerate(suffixes):
            token_base[2 * index + glued] = len(token_strings)
            token_probabilities[2 * index + glued] = p
            token_strings.extend(word + suffix for word, _ in entries)

    average_sentence_bytes = 60
    sentences = size // average_sentence_bytes + 16
    chosen = rng.choice(len(patterns), size=sentences, p=np.array(weights) / sum(weights))
    rows = pattern_matrix[chosen]
    codes = rows[np.arange(width) < pattern_lengths[chosen][:, None]]
    tokens = np.empty(len(codes), dtype=np.int64)
    for code, base in token_base.items():
        where = np.flatnonzero(codes == code)
        p = token_probabilities[code]
        tokens[where] = base + rng.choice(len(p), size=len(where), p=p)
    text = pa.array(token_strings, pa.string()).take(pa.array(tokens))
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32, count=len(text) + 1)
    data = np.frombuffer(text.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    if len(data) < size:  # unlikely: the sentence estimate was short; repeat the text
        data = np.resize(data, size)
    return np.ascontiguousarray(data[:size])


# ---------------------------------------------------------------------------- tables


def _region(rng: np.random.Generator, pool: np.ndarray) -> pa.Table:
    n = len(REGIONS)
    return pa.Table.from_arrays(
        [_int64(np.arange(n)), pa.array(REGIONS, pa.string()), _comments(rng, pool, n, 72)],
        schema=_schema(("r_regionkey", pa.int64()), ("r_name", pa.string()),
                       ("r_comment", pa.string())),
    )


def _nation(rng: np.random.Generator, pool: np.ndarray) -> pa.Table:
    n = len(NATIONS)
    return pa.Table.from_arrays(
        [_int64(np.arange(n)), pa.array([name for name, _ in NATIONS], pa.string()),
         _int64([region for _, region in NATIONS]), _comments(rng, pool, n, 72)],
        schema=_schema(("n_nationkey", pa.int64()), ("n_name", pa.string()),
                       ("n_regionkey", pa.int64()), ("n_comment", pa.string())),
    )


def _supplier(rng: np.random.Generator, pool: np.ndarray, n: int) -> pa.Table:
    keys = np.arange(1, n + 1)
    nationkeys = _balanced(rng, n, len(NATIONS))
    comments = _comments(rng, pool, n, 63)
    # Clause 4.2.3: 5·SF suppliers each get "Customer ...Complaints" and "Customer
    # ...Recommends" in their comment (Q16 filters the complaints out).
    per_kind = max(1, round(n * 5 / 10_000))
    special = rng.choice(n, size=min(n, 2 * per_kind), replace=False)
    kinds = np.where(np.arange(len(special)) < per_kind, "Complaints", "Recommends")
    comment_values = comments.combine_chunks()
    prefix = pc.utf8_slice_codeunits(comment_values.take(pa.array(special)), 0, 20)
    injected = pc.binary_join_element_wise(prefix, pa.array(["Customer "] * len(special)),
                                           pa.array(kinds.tolist()), "")
    mask = np.zeros(n, dtype=bool)
    mask[special] = True
    replacement = np.zeros(n, dtype=np.int64)
    replacement[special] = np.arange(len(special))
    comment_values = pc.if_else(pa.array(mask), injected.take(pa.array(replacement)),
                                comment_values)
    return pa.Table.from_arrays(
        [_int64(keys), fixed_width([b"Supplier#", (keys, 9)], n), _addresses(rng, n),
         _int64(nationkeys), _phones(rng, nationkeys), _decimal(_money(rng, n, -99_999, 999_999)),
         comment_values],
        schema=_schema(("s_suppkey", pa.int64()), ("s_name", pa.string()),
                       ("s_address", pa.string()), ("s_nationkey", pa.int64()),
                       ("s_phone", pa.string()), ("s_acctbal", pa.decimal128(15, 2)),
                       ("s_comment", pa.string())),
    )


def _customer(rng: np.random.Generator, pool: np.ndarray, n: int) -> pa.Table:
    keys = np.arange(1, n + 1)
    nationkeys = _balanced(rng, n, len(NATIONS))
    return pa.Table.from_arrays(
        [_int64(keys), fixed_width([b"Customer#", (keys, 9)], n), _addresses(rng, n),
         _int64(nationkeys), _phones(rng, nationkeys),
         _decimal(_money(rng, n, -99_999, 999_999)),
         take_strings(SEGMENTS, rng.integers(0, len(SEGMENTS), size=n)),
         _comments(rng, pool, n, 73)],
        schema=_schema(("c_custkey", pa.int64()), ("c_name", pa.string()),
                       ("c_address", pa.string()), ("c_nationkey", pa.int64()),
                       ("c_phone", pa.string()), ("c_acctbal", pa.decimal128(15, 2)),
                       ("c_mktsegment", pa.string()), ("c_comment", pa.string())),
    )


def _retail_price_cents(partkeys: np.ndarray) -> np.ndarray:
    """Clause 4.2.3: (90000 + ((key / 10) mod 20001) + 100 * (key mod 1000)) / 100."""
    return 90_000 + (partkeys // 10) % 20_001 + 100 * (partkeys % 1_000)


def _part(rng: np.random.Generator, pool: np.ndarray, n: int) -> pa.Table:
    keys = np.arange(1, n + 1)
    # Five distinct colours: a random first one, then strictly increasing steps mod 92.
    steps = rng.integers(1, 19, size=(n, 5))
    steps[:, 0] = rng.integers(0, len(COLORS), size=n)
    color_codes = np.cumsum(steps, axis=1) % len(COLORS)
    colors = pa.array(COLORS, pa.string())
    words = [colors.take(pa.array(color_codes[:, i])) for i in range(5)]
    names = pc.binary_join_element_wise(*words, " ")
    manufacturer = rng.integers(1, 6, size=n)
    brand = manufacturer * 10 + rng.integers(1, 6, size=n)
    return pa.Table.from_arrays(
        [_int64(keys), names, fixed_width([b"Manufacturer#", (manufacturer, 1)], n),
         fixed_width([b"Brand#", (brand, 2)], n),
         take_strings(P_TYPES, rng.integers(0, len(P_TYPES), size=n)),
         _int32(rng.integers(1, 51, size=n)),
         take_strings(P_CONTAINERS, rng.integers(0, len(P_CONTAINERS), size=n)),
         _decimal(_retail_price_cents(keys)), _comments(rng, pool, n, 14)],
        schema=_schema(("p_partkey", pa.int64()), ("p_name", pa.string()),
                       ("p_mfgr", pa.string()), ("p_brand", pa.string()),
                       ("p_type", pa.string()), ("p_size", pa.int32()),
                       ("p_container", pa.string()), ("p_retailprice", pa.decimal128(15, 2)),
                       ("p_comment", pa.string())),
    )


def _supplier_of(partkeys: np.ndarray, which: np.ndarray, suppliers: int) -> np.ndarray:
    """Clause 4.2.3: the ``which``-th (0..3) supplier of a part."""
    return (partkeys + which * (suppliers // 4 + (partkeys - 1) // suppliers)) % suppliers + 1


def _partsupp(rng: np.random.Generator, pool: np.ndarray, parts: int, suppliers: int) -> pa.Table:
    n = 4 * parts
    partkeys = np.repeat(np.arange(1, parts + 1), 4)
    suppkeys = _supplier_of(partkeys, np.tile(np.arange(4), parts), suppliers)
    return pa.Table.from_arrays(
        [_int64(partkeys), _int64(suppkeys), _int32(rng.integers(1, 10_000, size=n)),
         _decimal(_money(rng, n, 100, 100_000)), _comments(rng, pool, n, 124)],
        schema=_schema(("ps_partkey", pa.int64()), ("ps_suppkey", pa.int64()),
                       ("ps_availqty", pa.int32()), ("ps_supplycost", pa.decimal128(15, 2)),
                       ("ps_comment", pa.string())),
    )


def _orders_and_lineitem(rng: np.random.Generator, pool: np.ndarray,
                         counts: dict[str, int]) -> tuple[pa.Table, pa.Table]:
    orders = counts["orders"]
    customers, parts, suppliers = counts["customer"], counts["part"], counts["supplier"]

    # Orders: sparse keys (8 used of every 32), customers whose key is not a multiple of 3
    # (a third of the customers never order, which Q13 and Q22 rely on).
    index = np.arange(orders)
    orderkeys = (index // 8) * 32 + index % 8 + 1
    ordering = customers - customers // 3
    pick = rng.integers(0, ordering, size=orders)
    custkeys = (pick // 2) * 3 + pick % 2 + 1
    orderdates = rng.integers(_START_DATE, _LAST_ORDER_DATE + 1, size=orders)
    priorities = rng.integers(0, len(PRIORITIES), size=orders)
    clerks = rng.integers(1, counts["clerks"] + 1, size=orders)

    # Lineitems: 1..7 per order; everything below is per line.
    lines_per_order = rng.integers(1, 8, size=orders)
    starts = np.concatenate([[0], np.cumsum(lines_per_order)[:-1]])
    lines = int(lines_per_order.sum())
    owner = np.repeat(index, lines_per_order)
    linenumbers = np.arange(lines) - np.repeat(starts, lines_per_order) + 1
    partkeys = rng.integers(1, parts + 1, size=lines)
    suppkeys = _supplier_of(partkeys, rng.integers(0, 4, size=lines), suppliers)
    quantity = rng.integers(1, 51, size=lines)
    extended_cents = quantity * _retail_price_cents(partkeys)
    discount = rng.integers(0, 11, size=lines)  # hundredths
    tax = rng.integers(0, 9, size=lines)  # hundredths
    shipdates = orderdates[owner] + rng.integers(1, 122, size=lines)
    commitdates = orderdates[owner] + rng.integers(30, 91, size=lines)
    receiptdates = shipdates + rng.integers(1, 31, size=lines)
    received = receiptdates <= _CURRENT_DATE
    returnflag = np.where(received, rng.integers(0, 2, size=lines), 2)  # R, A, N
    shipped = shipdates <= _CURRENT_DATE  # linestatus F, else O

    # Order totals and statuses aggregate their lines.
    charge = np.rint(extended_cents * (100 + tax) * (100 - discount) / 10_000).astype(np.int64)
    totals = np.add.reduceat(charge, starts)
    shipped_lines = np.add.reduceat(shipped.astype(np.int64), starts)
    status = np.where(shipped_lines == lines_per_order, 0,
                      np.where(shipped_lines == 0, 1, 2))  # F, O, P

    orders_table = pa.Table.from_arrays(
        [_int64(orderkeys), _int64(custkeys), take_strings(("F", "O", "P"), status),
         _decimal(totals), _date(orderdates), take_strings(PRIORITIES, priorities),
         fixed_width([b"Clerk#", (clerks, 9)], orders), _int32(np.zeros(orders)),
         _comments(rng, pool, orders, 49)],
        schema=_schema(("o_orderkey", pa.int64()), ("o_custkey", pa.int64()),
                       ("o_orderstatus", pa.string()), ("o_totalprice", pa.decimal128(15, 2)),
                       ("o_orderdate", pa.date32()), ("o_orderpriority", pa.string()),
                       ("o_clerk", pa.string()), ("o_shippriority", pa.int32()),
                       ("o_comment", pa.string())),
    )
    lineitem_table = pa.Table.from_arrays(
        [_int64(orderkeys[owner]), _int64(partkeys), _int64(suppkeys), _int32(linenumbers),
         _decimal(quantity * 100), _decimal(extended_cents), _decimal(discount), _decimal(tax),
         take_strings(("R", "A", "N"), returnflag),
         take_strings(("O", "F"), shipped.astype(np.int64)),
         _date(shipdates), _date(commitdates), _date(receiptdates),
         take_strings(INSTRUCTIONS, rng.integers(0, len(INSTRUCTIONS), size=lines)),
         take_strings(SHIP_MODES, rng.integers(0, len(SHIP_MODES), size=lines)),
         _comments(rng, pool, lines, 27)],
        schema=_schema(("l_orderkey", pa.int64()), ("l_partkey", pa.int64()),
                       ("l_suppkey", pa.int64()), ("l_linenumber", pa.int32()),
                       ("l_quantity", pa.decimal128(15, 2)),
                       ("l_extendedprice", pa.decimal128(15, 2)),
                       ("l_discount", pa.decimal128(15, 2)), ("l_tax", pa.decimal128(15, 2)),
                       ("l_returnflag", pa.string()), ("l_linestatus", pa.string()),
                       ("l_shipdate", pa.date32()), ("l_commitdate", pa.date32()),
                       ("l_receiptdate", pa.date32()), ("l_shipinstruct", pa.string()),
                       ("l_shipmode", pa.string()), ("l_comment", pa.string())),
    )
    return orders_table, lineitem_table
