"""streamjoin: the join queries of KSQL, Lenses SQL, SQLstream and Flink SQL on Spark Structured Streaming."""
from __future__ import annotations

__version__ = "0.1.0"


def __getattr__(name):  # keep `import streamjoin` light: Spark is imported only when used
    if name == "Engine":
        from .runtime.engine import Engine

        return Engine
    if name == "build_session":
        from .runtime.session import build_session

        return build_session
    if name == "Topics":
        from .topics import Topics

        return Topics
    raise AttributeError(name)


__all__ = ["Engine", "Topics", "build_session", "__version__"]
