"""How streamjoin reads JSON values with Spark: one set of options for every reader."""

# TIMESTAMP values as '1970-01-01 00:01:00.000', '1970-01-01T00:01:00Z' and shorter forms
JSON_READ_OPTIONS = {"timestampFormat": "yyyy-MM-dd[[ ]['T']HH:mm[:ss][.SSS][XXX]]", "mode": "PERMISSIVE"}
