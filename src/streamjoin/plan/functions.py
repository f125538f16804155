"""Which function names a query may call: each dialect's names that map onto Spark SQL's (``FUNCTIONS``),
ksqlDB's functions that lowering translates (``TRANSLATED``, with the argument counts they take; ``KSQL_VARIANTS``
for names ksqlDB means otherwise than Spark and Flink), the aggregates, the window functions the planner itself
reads, and Spark SQL's own built-in functions (a name no dialect maps is called by its own name). A call of any
other name is refused when the query is planned, not when Spark starts it; so is a translated function called
with a number of arguments it does not take (``validate.rules``). Result types where a signature fixes them
(``call_type``).
"""
from __future__ import annotations

import functools
import re
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from ..errors import StatementError
from ..sql import ast
from . import expressions as ex
from .types import TIME

# dialect function name -> Spark SQL function name
FUNCTIONS = {
    "LEN": "length", "LENGTH": "length", "CHAR_LENGTH": "char_length", "CHARACTER_LENGTH": "char_length",
    "SUBSTR": "substring", "SUBSTRING": "substring", "CONCAT": "concat", "COALESCE": "coalesce",
    "IFNULL": "coalesce", "NVL": "coalesce", "UCASE": "upper", "UPPER": "upper", "LCASE": "lower",
    "LOWER": "lower", "TRIM": "trim", "LTRIM": "ltrim", "RTRIM": "rtrim", "FLATTEN": "flatten",
    "ABS": "abs", "ROUND": "round", "FLOOR": "floor", "CEIL": "ceil", "CEILING": "ceil", "SQRT": "sqrt",
    "ARRAY_LENGTH": "size", "CARDINALITY": "size", "SIZE": "size", "REPLACE": "replace",
    "MOD": "mod", "POWER": "power", "EXP": "exp", "LN": "ln", "SIGN": "sign", "GREATEST": "greatest",
    "LEAST": "least", "INSTR": "instr", "LPAD": "lpad", "RPAD": "rpad", "REGEXP_REPLACE": "regexp_replace",
    "ARRAY_CONTAINS": "array_contains", "EXPLODE": "explode", "NULLIF": "nullif", "INITCAP": "initcap",
}

# ksqlDB's scalar functions that Spark SQL lacks, or has under the same name with another meaning (a regular
# expression for a literal delimiter, seconds for milliseconds): ``lower.expressions`` translates each (dialect
# name -> (fewest, most arguments))
TRANSLATED = {
    "TIMESTAMPTOSTRING": (2, 3), "STRINGTOTIMESTAMP": (2, 3), "FORMAT_TIMESTAMP": (2, 3), "PARSE_TIMESTAMP": (2, 3),
    "DATETOSTRING": (2, 2), "STRINGTODATE": (2, 2), "FORMAT_DATE": (2, 2), "PARSE_DATE": (2, 2), "FROM_DAYS": (1, 1),
    "UNIX_DATE": (0, 1), "UNIX_TIMESTAMP": (0, 1), "EXTRACTJSONFIELD": (2, 2), "IS_JSON_STRING": (1, 1),
    "JSON_KEYS": (1, 1), "SPLIT": (2, 2), "RANDOM": (0, 0), "TO_JSON_STRING": (1, 1), "ARRAY_CONCAT": (2, 2),
    "GEO_DISTANCE": (4, 5), "URL_ENCODE_PARAM": (1, 1), "URL_DECODE_PARAM": (1, 1), "URL_EXTRACT_FRAGMENT": (1, 1),
    "URL_EXTRACT_HOST": (1, 1), "URL_EXTRACT_PARAMETER": (2, 2), "URL_EXTRACT_PATH": (1, 1), "URL_EXTRACT_PORT": (1, 1),
    "URL_EXTRACT_PROTOCOL": (1, 1), "URL_EXTRACT_QUERY": (1, 1),
    "TIMESTAMPADD": (3, 3), "TIMESTAMPSUB": (3, 3), "DATEADD": (3, 3), "DATESUB": (3, 3), "TIMEADD": (3, 3),
    "TIMESUB": (3, 3), "FORMAT_TIME": (2, 2), "PARSE_TIME": (2, 2),
    "GENERATE_SERIES": (2, 3), "AS_MAP": (2, 2), "ENTRIES": (2, 2),
    "TO_BYTES": (2, 2), "FROM_BYTES": (2, 2), "INT_FROM_BYTES": (1, 2), "BIGINT_FROM_BYTES": (1, 2),
    "ARRAY_REMOVE": (2, 2), "ARRAY_DISTINCT": (1, 1), "ARRAY_EXCEPT": (2, 2), "ARRAY_INTERSECT": (2, 2),
    "ARRAY_UNION": (2, 2),
    "DOUBLE_FROM_BYTES": (1, 2), "FIELD": (1, 255), "REGEXP_SPLIT_TO_ARRAY": (2, 2), "SPLIT_TO_MAP": (3, 3),
    "JSON_RECORDS": (1, 1), "JSON_ITEMS": (1, 1), "JSON_ARRAY_CONTAINS": (2, 2), "JSON_CONCAT": (1, 1 << 30),
    "MAP_UNION": (2, 2),
}
# argument counts of mapped functions that Spark would only refuse when the query starts (fewest, most)
ARITY = {"COALESCE": (1, 1 << 30), "IFNULL": (2, 2), "NVL": (2, 2), "NULLIF": (2, 2)}
# functions whose first argument is a bare time unit (``TIMESTAMPADD(MINUTES, 5, ts)``), and the units they take
# (Java's TimeUnit, as ksqlDB names them: plural or singular) in milliseconds; a NANOSECOND's and a MICROSECOND's
# count is truncated to whole milliseconds, as ``TimeUnit.toMillis`` does
UNIT_ARGUMENT = frozenset({"TIMESTAMPADD", "TIMESTAMPSUB", "DATEADD", "DATESUB", "TIMEADD", "TIMESUB"})
TIME_UNIT_MS = {"NANOSECOND": 1e-6, "MICROSECOND": 1e-3, "MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000,
                "HOUR": 3_600_000, "DAY": 86_400_000}
# a name whose ksqlDB meaning differs from Spark's and from the other dialects': in a query over inputs all
# declared with ksqlDB's DDL a call of it is planned as a call of its variant (``ksql_variants``), which only
# ``lower.expressions`` knows how to run; no query can name a variant itself
KSQL_VARIANTS = {
    "ROUND": "KSQL_ROUND",  # ties toward positive infinity (Java's Math.round); ROUND(DOUBLE) is a BIGINT
    "TRUNC": "KSQL_TRUNC",  # toward zero, as ROUND's types (Spark's trunc cuts dates)
    "FROM_UNIXTIME": "KSQL_FROM_UNIXTIME",  # milliseconds to a TIMESTAMP (Flink's and Spark's: seconds to text)
    "CONVERT_TZ": "KSQL_CONVERT_TZ",  # a TIMESTAMP from one zone's wall clock to another's (Flink's: text)
    "ARRAY_JOIN": "KSQL_ARRAY_JOIN",  # ',' by default; a NULL element is written "null" (Flink's skips it)
    "TRIM": "KSQL_TRIM",  # every character up to a space at both ends, as Java's String.trim (Spark's: spaces only)
    "STDDEV_SAMP": "KSQL_STDDEV_SAMP",  # an aggregate: ksqlDB's is the sample variance (no square root)
    "CONCAT": "KSQL_CONCAT",  # NULL arguments left out (Flink's and Spark's: NULL)
    "LN": "KSQL_LN",  # Java's Math.log: -Infinity at 0, NaN below (Spark's and Flink's: NULL)
    "LOG": "KSQL_LOG",  # LOG(x) is LN(x); LOG(base, x) NaN for a base <= 0 or 1
    "LPAD": "KSQL_LPAD",  # NULL for a negative length or an empty padding (Spark's: '' and the text itself)
    "RPAD": "KSQL_RPAD",
    "ARRAY_SORT": "KSQL_ARRAY_SORT",  # ARRAY_SORT(a, 'ASC' | 'DESC'), NULLs last either way (Spark's takes a comparator)
    "SLICE": "KSQL_SLICE",  # SLICE(a, from, to): 1-based, both ends kept (Spark's: a start and a length)
    "REGEXP_EXTRACT": "KSQL_REGEXP_EXTRACT",  # (pattern, text[, group]), NULL without a match (Spark's: text first, '')
    "REGEXP_EXTRACT_ALL": "KSQL_REGEXP_EXTRACT_ALL",  # (pattern, text[, group])
    "CHR": "KSQL_CHR",  # a Unicode code point, or its '\\uXXXX' text (Spark's and Flink's: a byte, modulo 256)
    "INSTR": "KSQL_INSTR",  # INSTR(text, part[, position[, occurrence]]), 0 for NULL (Spark's: two arguments)
    "MASK": "KSQL_MASK",  # every other character masked too, '-' by default (Spark's keeps them)
    "ENCODE": "KSQL_ENCODE",  # ENCODE(text, from, to) between hex, utf8, ascii and base64 (Spark's makes BYTES)
    "CONCAT_WS": "KSQL_CONCAT_WS",  # of BYTES too (Spark's: of text)
}
# ksqlDB's aggregates that are another aggregate of their argument, or of a value made from it (``ksql_variants``)
KSQL_AGGREGATE_FORMS = {
    "COUNT_DISTINCT": lambda call: replace(call, name="COUNT", distinct=True),  # exact here; ksqlDB's estimates
    "SUM_LIST": lambda call: replace(call, name="SUM", args=(ast.Call("KSQL_ARRAY_SUM", call.args, pos=call.pos),)),
}
PLANNED_ONLY = frozenset(KSQL_VARIANTS.values()) | {"KSQL_ARRAY_SUM"}  # names planning writes; no query may call them
# ksqlDB's functions taking a lambda (``x => ...``), over an ARRAY's elements or a MAP's entries: TRANSFORM(a, x => ...),
# TRANSFORM(m, (k, v) => new key, (k, v) => new value), FILTER(a, x => ...), FILTER(m, (k, v) => ...),
# REDUCE(a, initial, (state, x) => ...), REDUCE(m, initial, (state, k, v) => ...)
LAMBDA_FUNCTIONS = {"TRANSFORM": (2, 3), "FILTER": (2, 2), "REDUCE": (3, 3)}
TRANSLATED.update(LAMBDA_FUNCTIONS)
TRANSLATED.update({"KSQL_LN": (1, 1), "KSQL_LOG": (1, 2), "KSQL_LPAD": (3, 3), "KSQL_RPAD": (3, 3),
                   "KSQL_ARRAY_SORT": (1, 2), "KSQL_ARRAY_SUM": (1, 1), "KSQL_TRIM": (1, 1),
                   "KSQL_CONCAT": (1, 1 << 30), "KSQL_ROUND": (1, 2), "KSQL_TRUNC": (1, 2),
                   "KSQL_FROM_UNIXTIME": (1, 1), "KSQL_CONVERT_TZ": (3, 3), "KSQL_ARRAY_JOIN": (1, 2),
                   "KSQL_SLICE": (3, 3), "KSQL_REGEXP_EXTRACT": (2, 3), "KSQL_REGEXP_EXTRACT_ALL": (2, 3),
                   "KSQL_CHR": (1, 1), "KSQL_INSTR": (2, 4), "KSQL_MASK": (1, 5), "KSQL_ENCODE": (3, 3),
                   "KSQL_CONCAT_WS": (2, 1 << 30)})
# ksqlDB's masking functions (``Masker``): the text, for all but MASK a number of characters, then either no mask
# characters (its defaults: 'X', 'x', 'n', '-') or all four (upper case, lower case, digit, other; NULL: left as is)
MASKS = ("MASK_KEEP_LEFT", "MASK_KEEP_RIGHT", "MASK_LEFT", "MASK_RIGHT")
TRANSLATED.update(dict.fromkeys(MASKS, (2, 6)))
ENDS_ONLY = frozenset({"KSQL_MASK", *MASKS})  # take their fewest or their most arguments, no count between

# planned, not called: time windows and their bounds, PROCTIME(), AS_VALUE, and ksqlDB's table functions (lowered as
# one row per position of their arrays, ``lower.lowering``)
TABLE_FUNCTIONS = ("EXPLODE", "CUBE_EXPLODE")  # ksqlDB's: rows out of an array
PLANNED = {"TUMBLE", "HOP", "SESSION", "CUMULATE", "PROCTIME", "AS_VALUE", *TABLE_FUNCTIONS} | {
    f"{kind}_{part}" for kind in ("TUMBLE", "HOP", "SESSION") for part in ("START", "END", "ROWTIME", "PROCTIME")}

# Spark SQL's built-in functions: ``SHOW SYSTEM FUNCTIONS`` of Spark 4.3.0 (the pinned pyspark), operators left out
SPARK_FUNCTIONS = frozenset("""
    abs acos acosh add_months aes_decrypt aes_encrypt aggregate and any any_value approx_count_distinct
    approx_percentile approx_top_k approx_top_k_accumulate approx_top_k_combine approx_top_k_estimate array
    array_agg array_append array_compact array_contains array_distinct array_except array_insert array_intersect
    array_join array_max array_min array_position array_prepend array_remove array_repeat array_size array_sort
    array_union arrays_overlap arrays_zip ascii asin asinh assert_true atan atan2 atanh avg base64 between bigint
    bin binary bit_and bit_count bit_get bit_length bit_or bit_xor bitmap_and_agg bitmap_bit_position
    bitmap_bucket_number bitmap_construct_agg bitmap_count bitmap_or_agg bool_and bool_or boolean bround btrim
    cardinality case cast cbrt ceil ceiling char char_length character_length chr coalesce collate collation
    collations collect_list collect_set collect_union concat concat_ws contains conv convert_timezone corr cos cosh
    cot count count_if count_min_sketch counter_diff covar_pop covar_samp crc32 csc cume_dist curdate
    current_catalog current_database current_date current_path current_schema current_time current_timestamp
    current_timezone current_user date date_add date_diff date_format date_from_unix_date date_part date_sub
    date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek dayofyear decimal decode degrees
    dense_rank div double e element_at elt encode endswith equal_null every exists exp explode explode_outer expm1
    extract factorial filter find_in_set first first_value flatten float floor forall format_number format_string
    from_avro from_base32 from_csv from_json from_protobuf from_unixtime from_utc_timestamp from_xml get
    get_json_object getbit greatest grouping grouping_id hash hex histogram_numeric hll_sketch_agg
    hll_sketch_estimate hll_union hll_union_agg hmac hour hypot if ifnull ilike in initcap inline inline_outer
    input_file_block_length input_file_block_start input_file_name instr int is_valid_utf8 is_valid_variant
    is_variant_null isnan isnotnull isnull jaro_winkler_similarity java_method json_array_length json_object_keys
    json_tuple kll_merge_agg_bigint kll_merge_agg_double kll_merge_agg_float kll_sketch_agg_bigint
    kll_sketch_agg_double kll_sketch_agg_float kll_sketch_get_n_bigint kll_sketch_get_n_double
    kll_sketch_get_n_float kll_sketch_get_quantile_bigint kll_sketch_get_quantile_double
    kll_sketch_get_quantile_float kll_sketch_get_rank_bigint kll_sketch_get_rank_double kll_sketch_get_rank_float
    kll_sketch_merge_bigint kll_sketch_merge_double kll_sketch_merge_float kll_sketch_to_string_bigint
    kll_sketch_to_string_double kll_sketch_to_string_float kurtosis lag last last_day last_value lcase lead least
    left len length levenshtein like listagg ln localtime localtimestamp locate log log10 log1p log2 lower lpad
    ltrim luhn_check make_date make_dt_interval make_interval make_time make_timestamp make_timestamp_ltz
    make_timestamp_ntz make_valid_utf8 make_ym_interval map map_concat map_contains_key map_entries map_filter
    map_from_arrays map_from_entries map_keys map_values map_zip_with mask max max_by md5 mean measure median min
    min_by minute mod mode monotonically_increasing_id month monthname months_between named_struct nanvl negative
    next_day not now nth_value ntile nullif nullifzero nvl nvl2 octet_length or overlay parse_json parse_url
    percent_rank percentile percentile_approx percentile_cont percentile_disc pi pmod posexplode posexplode_outer
    position positive pow power printf python_worker_logs quarter quote radians raise_error rand randn random
    randstr range rank reduce reflect regexp regexp_count regexp_extract regexp_extract_all regexp_instr regexp_like
    regexp_replace regexp_substr regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy
    regr_syy repeat replace reverse right rint rlike round row_number rpad rtrim schema_of_avro schema_of_csv
    schema_of_json schema_of_variant schema_of_variant_agg schema_of_xml sec second sentences sequence session_user
    session_window sha sha1 sha2 shiftleft shiftright shiftrightunsigned shuffle sign signum sin sinh size skewness
    slice smallint some sort_array soundex space spark_partition_id split split_part sql_keywords sqrt st_asbinary
    st_geogfromwkb st_geomfromwkb st_setsrid st_srid stack startswith std stddev stddev_pop stddev_samp str_to_map
    string string_agg struct substr substring substring_index sum tan tanh theta_difference theta_intersection
    theta_intersection_agg theta_sketch_agg theta_sketch_estimate theta_union theta_union_agg time time_bucket
    time_diff time_from_micros time_from_millis time_from_seconds time_to_micros time_to_millis time_to_seconds
    time_trunc timestamp timestamp_micros timestamp_millis timestamp_nanos timestamp_seconds tinyint to_avro
    to_base32 to_binary to_char to_csv to_date to_json to_number to_protobuf to_time to_timestamp to_timestamp_ltz
    to_timestamp_ntz to_unix_timestamp to_utc_timestamp to_varchar to_variant_object to_xml transform transform_keys
    transform_values translate trim trunc try_add try_aes_decrypt try_avg try_divide try_element_at
    try_make_interval try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz try_mod try_multiply
    try_parse_json try_parse_url try_reflect try_subtract try_sum try_to_binary try_to_date try_to_number
    try_to_time try_to_timestamp try_url_decode try_validate_utf8 try_variant_array_append try_variant_get
    try_variant_insert try_variant_set tuple_difference_double tuple_difference_integer
    tuple_difference_theta_double tuple_difference_theta_integer tuple_intersection_agg_double
    tuple_intersection_agg_integer tuple_intersection_double tuple_intersection_integer
    tuple_intersection_theta_double tuple_intersection_theta_integer tuple_sketch_agg_double
    tuple_sketch_agg_integer tuple_sketch_estimate_double tuple_sketch_estimate_integer tuple_sketch_summary_double
    tuple_sketch_summary_integer tuple_sketch_theta_double tuple_sketch_theta_integer tuple_union_agg_double
    tuple_union_agg_integer tuple_union_double tuple_union_integer tuple_union_theta_double
    tuple_union_theta_integer typeof ucase unbase64 unhex uniform unix_date unix_micros unix_millis unix_nanos
    unix_seconds unix_timestamp upper url_decode url_encode user uuid validate_utf8 var_pop var_samp variance
    variant_array_append variant_delete variant_explode variant_explode_outer variant_get variant_insert variant_set
    variant_strip_nulls vector_avg vector_cosine_similarity vector_inner_product vector_l2_distance vector_norm
    vector_normalize vector_sum version weekday weekofyear when width_bucket window window_time xpath xpath_boolean
    xpath_double xpath_float xpath_int xpath_long xpath_number xpath_short xpath_string xxhash64 year zeroifnull
    zip_with
""".split())


# result types (Spark DDL) of calls that have one whatever their arguments, in ksqlDB's and Flink's signatures
RESULT_TYPES = {
    **dict.fromkeys(("LEN", "LENGTH", "CHAR_LENGTH", "CHARACTER_LENGTH", "ARRAY_LENGTH", "CARDINALITY", "SIZE", "INSTR"),
                    "int"),
    **dict.fromkeys(("SUBSTR", "SUBSTRING", "CONCAT", "UCASE", "UPPER", "LCASE", "LOWER", "TRIM", "LTRIM", "RTRIM",
                     "REPLACE", "LPAD", "RPAD", "REGEXP_REPLACE", "INITCAP"), "string"),
    **dict.fromkeys(("SQRT", "EXP", "LN", "POWER", "KSQL_LN", "KSQL_LOG"), "double"),
    "ARRAY_CONTAINS": "boolean", "UNIX_TIMESTAMP": "bigint",
    **dict.fromkeys(("TIMESTAMPTOSTRING", "FORMAT_TIMESTAMP", "DATETOSTRING", "FORMAT_DATE", "EXTRACTJSONFIELD",
                     "CONCAT_WS", "KSQL_ARRAY_JOIN", "UUID", "KSQL_CONCAT", "KSQL_TRIM", "KSQL_CONCAT_WS",
                     "KSQL_REGEXP_EXTRACT", "KSQL_CHR", "KSQL_MASK", "KSQL_ENCODE", *MASKS), "string"),
    "KSQL_REGEXP_EXTRACT_ALL": "array<string>", "KSQL_INSTR": "int",
    "STRINGTOTIMESTAMP": "bigint", "STRINGTODATE": "int", "FIELD": "int", "UNIX_DATE": "int", "JSON_ARRAY_LENGTH": "int",
    "PARSE_TIMESTAMP": "timestamp", "KSQL_FROM_UNIXTIME": "timestamp", "KSQL_CONVERT_TZ": "timestamp",
    "PARSE_DATE": "date", "FROM_DAYS": "date", "IS_JSON_STRING": "boolean", "JSON_KEYS": "array<string>",
    "SPLIT": "array<string>", "REGEXP_SPLIT_TO_ARRAY": "array<string>", "SPLIT_TO_MAP": "map<string,string>",
    "JSON_RECORDS": "map<string,string>", "JSON_ITEMS": "array<string>", "JSON_ARRAY_CONTAINS": "boolean",
    "JSON_CONCAT": "string",
    "RANDOM": "double", "GEO_DISTANCE": "double", "URL_EXTRACT_PORT": "int",
    **dict.fromkeys(("TO_JSON_STRING", "URL_ENCODE_PARAM", "URL_DECODE_PARAM", "URL_EXTRACT_FRAGMENT", "URL_EXTRACT_HOST",
                     "URL_EXTRACT_PARAMETER", "URL_EXTRACT_PATH", "URL_EXTRACT_PROTOCOL", "URL_EXTRACT_QUERY"), "string"),
    "DATEADD": "date", "DATESUB": "date", "TIMEADD": TIME, "TIMESUB": TIME, "FORMAT_TIME": "string", "PARSE_TIME": TIME,
    "TO_BYTES": "binary", "FROM_BYTES": "string", "INT_FROM_BYTES": "int",
    "BIGINT_FROM_BYTES": "bigint", "DOUBLE_FROM_BYTES": "double",
}
# calls whose result has their first argument's type
SAME_AS_ARGUMENT = frozenset({"AS_VALUE", "ABS", "FLOOR", "CEIL", "CEILING", "COALESCE", "IFNULL", "NVL", "NULLIF", "GREATEST",
                              "LEAST", "ARRAY_CONCAT", "MAP_UNION", "ARRAY_DISTINCT", "ARRAY_EXCEPT", "ARRAY_INTERSECT",
                              "ARRAY_UNION", "ARRAY_REMOVE", "ARRAY_SORT", "KSQL_ARRAY_SORT", "KSQL_LPAD", "KSQL_RPAD",
                              "KSQL_SLICE"})


def call_type(name: str, argument_types: list[str]) -> str:
    """The Spark type of a scalar call where its signature fixes it; "" where it does not."""
    if name == "SPLIT" and argument_types[:1] == ["binary"]:  # ksqlDB's SPLIT of BYTES at BYTES
        return "array<binary>"
    typed = [t for t in argument_types if t not in ("", "void")]  # a NULL literal has no type of its own
    if name in ("KSQL_CONCAT", "KSQL_CONCAT_WS") and typed and all(t == "binary" for t in typed):  # of BYTES: BYTES
        return "binary"
    if name in RESULT_TYPES:
        return RESULT_TYPES[name]
    if name in ("TIMESTAMPADD", "TIMESTAMPSUB"):  # the type of the time it shifts (the unit is no typed argument)
        return argument_types[-1] if argument_types else ""
    if name in ("KSQL_ROUND", "KSQL_TRUNC") and argument_types:  # ksqlDB's Round and Trunc: a whole number is a BIGINT
        first, places = argument_types[0], len(argument_types) > 1
        if first in ("tinyint", "smallint", "int", "bigint", "double", "float"):
            return "double" if places else "bigint"
        if first.startswith("decimal(") and not places:  # a whole DECIMAL of the digits before the point
            precision, scale = (int(p) for p in first[len("decimal("):-1].split(","))
            return f"decimal({max(1, precision - scale)},0)"
        return first
    if name in ("GREATEST", "LEAST") and typed:  # numbers widened to one type (ksqlDB's signatures, Spark's rule)
        from .ksql_coercion import NUMBERS, base_type, wider_number

        if all(base_type(t) in NUMBERS for t in typed):
            return functools.reduce(wider_number, typed)
    if name in SAME_AS_ARGUMENT and argument_types:
        return argument_types[0]
    if name == "GENERATE_SERIES" and argument_types:
        return f"array<{'bigint' if 'bigint' in argument_types[:2] else argument_types[0]}>" if argument_types[0] else ""
    if name == "AS_MAP" and len(argument_types) == 2 and all(t.startswith("array<") for t in argument_types):
        return f"map<{argument_types[0][len('array<'):-1]},{argument_types[1][len('array<'):-1]}>"
    if name == "ENTRIES" and argument_types and argument_types[0].startswith("map<"):
        from .types import split_type_args

        key, value = split_type_args(argument_types[0][len("map<"):-1])
        return f"array<struct<`K`:{key},`V`:{value}>>"
    if name in ("ARRAY_MAX", "ARRAY_MIN", "KSQL_ARRAY_SUM") and argument_types and argument_types[0].startswith("array<"):
        return argument_types[0][len("array<"):-1]
    if name in LAMBDA_FUNCTIONS and len(argument_types) >= 2:
        collection = argument_types[0]
        if name == "FILTER":
            return collection
        if name == "REDUCE":  # the state's: its initial value's type, else what the lambda makes of it
            return argument_types[1] or argument_types[-1]
        if collection.startswith("array<") and argument_types[1]:
            return f"array<{argument_types[1]}>"
        if collection.startswith("map<") and all(argument_types[1:3]) and len(argument_types) == 3:
            return f"map<{argument_types[1]},{argument_types[2]}>"
    return ""


def lambda_variable_types(name: str, argument_types: list[str]) -> tuple[str, ...]:
    """The types of the variables a lambda argument of a call of ``name`` (``LAMBDA_FUNCTIONS``) is given: an
    ARRAY's element, or a MAP's key and value, after REDUCE's state (of its initial value's type); () when the first
    argument is no ARRAY or MAP."""
    from .types import split_type_args

    collection = argument_types[0] if argument_types else ""
    if not (collection.startswith("array<") or collection.startswith("map<")):
        return ()
    items = tuple(split_type_args(collection[collection.index("<") + 1:-1]))
    return (argument_types[1], *items) if name == "REDUCE" else items


def aggregate_type(name: str, argument_type: str, style: str) -> str:
    """The type of an aggregate's result: COUNT is BIGINT; SUM keeps its argument's type (a DECIMAL widened to
    38 digits); AVG is DOUBLE in ksqlDB, Lenses and SQLstream and keeps an integral argument's type in Flink
    (Calcite: the mean truncated toward zero); MIN, MAX, LATEST/EARLIEST_BY_OFFSET keep it; COLLECT_LIST/SET
    collect it into an array. "" where the argument's type is not known."""
    if name == "COUNT":
        return "bigint"
    if name == "AVG":
        return argument_type if style == "flink" and argument_type in ex.INTEGRAL else "double"
    if name in ("STDDEV_SAMPLE", "KSQL_STDDEV_SAMP", "CORRELATION"):
        return "double"
    if name == "HISTOGRAM":
        return f"map<{argument_type},bigint>" if argument_type else ""
    if not argument_type:
        return ""
    if name == "SUM" and argument_type.startswith("decimal("):
        return f"decimal(38,{argument_type[:-1].split(',')[1]})"
    if name == "SUM" and argument_type == "float":
        return "double"
    if name in ("COLLECT_LIST", "COLLECT_SET", *ex.TOP_K):
        return f"array<{argument_type}>"
    return argument_type


def is_function(name: str, ksql_inputs: bool = False) -> bool:
    """Whether a call of ``name`` (upper-cased as parsed) is a function a query may call (``ksql_inputs``: one
    whose inputs were all declared with ksqlDB's DDL, where ksqlDB's own meanings apply)."""
    if name in PLANNED_ONLY:
        return False
    known = (name in FUNCTIONS or name in TRANSLATED or name in PLANNED or name in ex.AGGREGATES
             or name.lower() in SPARK_FUNCTIONS)
    return known or (ksql_inputs and (name in KSQL_VARIANTS or name in KSQL_AGGREGATE_FORMS))


def arity_problem(call) -> str | None:
    """What is wrong with the number of arguments of a call of a translated function (or one of ``ARITY``), in
    ksqlDB's words (its types as ksqlDB names them), or None."""
    fewest, most = TRANSLATED.get(call.name) or ARITY.get(call.name, (0, 1 << 30))
    unit_missing = call.name in UNIT_ARGUMENT and not (call.args and isinstance(call.args[0], ast.TimeUnit))
    between = call.name in ENDS_ONLY and fewest < len(call.args) < most
    if fewest <= len(call.args) <= most and not unit_missing and not between:
        return None
    from .types import ksql_type_name

    types = ", ".join(ksql_type_name(ex.static_type(a)) or "NULL" for a in call.args)
    return f"Function '{ksql_name(call.name)}' does not accept parameters ({types})."


def ksql_name(name: str) -> str:
    """The function a user called, for a call planned as one of ``KSQL_VARIANTS`` (``KSQL_ROUND``: ``ROUND``)."""
    return next((k for k, v in KSQL_VARIANTS.items() if v == name), name)


def ksql_written(call: ast.Call) -> tuple[str, tuple]:
    """The name and arguments of a call as the user wrote it, for one planning made another (``KSQL_VARIANTS``,
    ``KSQL_AGGREGATE_FORMS``): ``SUM(KSQL_ARRAY_SUM(a))`` was ``SUM_LIST(a)``."""
    argument = call.args[0] if len(call.args) == 1 else None
    if call.name == "SUM" and isinstance(argument, ast.Call) and argument.name == "KSQL_ARRAY_SUM":
        return "SUM_LIST", argument.args
    if call.name == "COUNT" and call.distinct:
        return "COUNT_DISTINCT", call.args
    return ksql_name(call.name), call.args


def unit_argument(call: ast.Call) -> ast.Call:
    """A call of a function taking a bare time unit first (``UNIT_ARGUMENT``) with that argument as a ``TimeUnit``
    (singular) when it names one of the units it takes, not a column; any other first argument stays, and is
    refused with the call's types (``arity_problem``)."""
    first = call.args[0] if call.args else None
    if not isinstance(first, ast.Column) or first.qualifier is not None or first.name.quoted:
        return call
    unit = first.name.text.upper()
    unit = unit[:-1] if unit.endswith("S") else unit
    if unit not in TIME_UNIT_MS:
        return call
    return replace(call, args=(ast.TimeUnit(unit, pos=first.pos), *call.args[1:]))


def ksql_variants(e):
    """``e`` with every call of a name ksqlDB means otherwise (``KSQL_VARIANTS``) made a call of its variant, and
    every call of one of its aggregates that another aggregate computes (``KSQL_AGGREGATE_FORMS``) made that."""
    def variant(node):
        if not isinstance(node, ast.Call):
            return None
        if node.name in KSQL_AGGREGATE_FORMS and len(node.args) == 1:
            return ksql_variants(KSQL_AGGREGATE_FORMS[node.name](node))
        if node.name in KSQL_VARIANTS:
            return replace(node, name=KSQL_VARIANTS[node.name], args=tuple(ksql_variants(a) for a in node.args))
        return None

    return ex.transform(e, variant)


COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")


def ksql_coercions(e):
    """``e`` with its IN lists and ARRAY and MAP constructors marked ``ksql``: their values are brought to one type
    as ksqlDB's ``CoercionUtil`` does (``plan.ksql_coercion``), not by Spark's rules; its LIKEs and CASTs (ksqlDB's
    escapes, its text of a TIME, its text read as BYTES); and its calls of ksqlDB's scalar functions (arguments
    converted to the signature's parameters: ``ksql_signatures.converted``)."""
    from . import ksql_signatures

    def mark(node):
        if isinstance(node, (ast.InList, ast.ArrayLiteral, ast.MapLiteral, ast.Like, ast.Cast)) and not node.ksql:
            return ksql_coercions(replace(node, ksql=True))
        if isinstance(node, ast.Call) and not node.ksql and ksql_signatures.is_scalar(ksql_name(node.name)):
            return ksql_coercions(replace(node, ksql=True))
        return None

    return ex.transform(e, mark)


def ksql_comparisons(e, condition: bool = False):
    """``e`` with ksqlDB's comparisons (``null_is_false``): a comparison or BETWEEN with a NULL operand is FALSE,
    not NULL (the code ksqlDB generates tests its operands for null first: ``SqlToJavaVisitor.nullCheckPrefix``;
    a BETWEEN is two such comparisons), so ``NOT (A = B)`` holds and ``A = B`` is written as false when A is NULL.
    In a WHERE or HAVING (``condition``), a comparison that only keeps or drops rows (the whole condition, or one
    inside its ANDs and ORs) does the same whether NULL or FALSE, and is left as it is."""
    def strict(node):
        if isinstance(node, ast.BinaryOp) and node.op in COMPARISONS:
            return replace(node, left=ksql_comparisons(node.left), right=ksql_comparisons(node.right), null_is_false=True)
        if isinstance(node, ast.Between):
            return replace(node, operand=ksql_comparisons(node.operand), low=ksql_comparisons(node.low),
                           high=ksql_comparisons(node.high), null_is_false=True)
        return None

    if not condition:
        return ex.transform(e, strict)
    if isinstance(e, ast.BinaryOp) and e.op in ("AND", "OR"):
        return replace(e, left=ksql_comparisons(e.left, True), right=ksql_comparisons(e.right, True))
    if isinstance(e, ast.BinaryOp) and e.op in COMPARISONS:
        return replace(e, left=ksql_comparisons(e.left), right=ksql_comparisons(e.right))
    if isinstance(e, ast.Between) and not e.negated:  # NOT BETWEEN: the NOT of a FALSE holds
        return replace(e, operand=ksql_comparisons(e.operand), low=ksql_comparisons(e.low), high=ksql_comparisons(e.high))
    return ksql_comparisons(e)


PSEUDO_TIMES = ("ROWTIME", "WINDOWSTART", "WINDOWEND")
_PARTIAL_TIME = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2})(?::(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?)?)?)?)?"
                           r"(Z|[+-]\d{2}:?\d{2})?$")


def ksql_magic_timestamps(e):
    """``e`` (a ksqlDB WHERE) with each string literal compared with ROWTIME, WINDOWSTART or WINDOWEND (or bounding
    them in a BETWEEN) replaced by the epoch milliseconds it names, as ksqlDB's ``StatementRewriteForMagicPseudoTimestamp``
    does: a date-time as ISO-8601 writes it, as far as it goes (``'2018'``, ``'2018-01-01T00:00:00.001'``), the rest
    its least value, with an offset (``Z``, ``+0445``) or in UTC."""
    def pseudo(node) -> bool:
        return isinstance(node, ast.Column) and node.name.text.upper() in PSEUDO_TIMES

    def millis(node):
        if not (isinstance(node, ast.Literal) and node.kind == "string"):
            return node
        match = _PARTIAL_TIME.match(node.value.strip())
        if match is None:
            raise StatementError(f"Failed to parse timestamp '{node.value}': use yyyy-MM-dd'T'HH:mm:ss.SSS, or a "
                                 "leading part of it, with an optional offset", rule="timestamp-literal", pos=node.pos)
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        offset = timedelta(0)
        if zone and zone != "Z":
            digits = zone[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:])) * (1 if zone[0] == "+" else -1)
        at = datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0), int(second or 0),
                      int((fraction or "0").ljust(3, "0")) * 1000, tzinfo=timezone(offset))
        return ast.Literal((at - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1), "integer", node.pos)

    def rewrite(node):
        if isinstance(node, ast.BinaryOp) and node.op in COMPARISONS and (pseudo(node.left) or pseudo(node.right)):
            return replace(node, left=millis(node.left), right=millis(node.right))
        if isinstance(node, ast.Between) and pseudo(node.operand):
            return replace(node, low=millis(node.low), high=millis(node.high))
        return None

    return e and ex.transform(e, rewrite)
