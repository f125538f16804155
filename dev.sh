#!/usr/bin/env bash
# One entry point for a fresh clone: creates .venv, installs streamjoin and its pinned dependencies,
# then runs the demo (`./dev.sh demo`) or the whole test suite (`./dev.sh test [pytest args]`).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  echo "streamjoin needs Java 17+ for Spark and none was found." >&2
  echo "Install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless) or set JAVA_HOME." >&2
  exit 3
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
  touch "$stamp"
fi
export SPARK_LOCAL_IP=127.0.0.1

cmd=${1:-help}; shift || true
case "$cmd" in
  demo) exec .venv/bin/streamjoin demo "$@" ;;
  test) exec .venv/bin/python -m pytest "$@" ;;
  *) echo "usage: ./dev.sh demo | ./dev.sh test [pytest args]" >&2; exit 2 ;;
esac
