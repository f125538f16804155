"""Start-up of the Python processes Spark launches: import PySpark from the installed package, not the zip.

Spark puts ``<pyspark>/python/lib/pyspark.zip`` first on every Python worker's path. The zip holds only
source files, so a process that is not forked from Spark's worker daemon — the driver-side runner of a
Python streaming source, started once per query, and the one that initialises each
``transformWithStateInPandas`` operator — compiles all of PySpark again: about 0.7 s each here.
``runtime.session`` puts this folder on ``PYTHONPATH``, so Python imports this module at start-up; it
drops that zip from ``sys.path`` when it lies inside an installed PySpark package (the very same files,
already compiled), then runs any other ``sitecustomize`` the interpreter would have run.
"""
import importlib.machinery
import importlib.util
import os
import sys


def _drop_pyspark_zips() -> None:
    marker = os.sep + os.path.join("pyspark", "python", "lib") + os.sep
    for entry in list(sys.path):
        if entry.endswith(".zip") and marker in entry:
            installed = entry[: entry.index(marker)]
            if os.path.isfile(os.path.join(installed, "pyspark", "__init__.py")):
                sys.path.remove(entry)


def _run_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_drop_pyspark_zips()
_run_next_sitecustomize()
