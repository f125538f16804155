"""A throw-away PostgreSQL server on 127.0.0.1 for tests and benchmarks.

Its binaries come from the PyPI package ``pgserver`` (a test dependency, PostgreSQL 16): ``initdb`` into a
temporary folder with a password for the user ``streamjoin`` (password authentication on TCP, as a deployed
server asks), ``postgres`` on a free port, stopped and removed when the ``with`` block ends.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from .local_broker import _die_with_parent, _free_port

USER = "streamjoin"


@dataclass
class LocalPostgres:
    """How to reach the server, and ``stop()`` / ``start()`` to take it down and bring it back (same data)."""

    host: str
    port: int
    database: str
    user: str
    password: str
    folder: Path = field(repr=False, default=None)  # type: ignore[assignment]
    as_user: dict = field(repr=False, default_factory=dict)
    process: Optional[subprocess.Popen] = field(repr=False, default=None)

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    @property
    def uri(self) -> str:
        """A libpq URI with the credentials, for the tests' own client."""
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    def start(self, timeout: float = 30.0) -> None:
        self.process = subprocess.Popen(
            [_bin("postgres"), "-D", str(self.folder / "data"), "-h", self.host, "-p", str(self.port),
             "-k", str(self.folder), "-c", "fsync=off", "-c", "full_page_writes=off"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent, **self.as_user,
        )
        deadline = time.monotonic() + timeout
        while subprocess.run([_bin("pg_isready"), "-h", self.host, "-p", str(self.port)],
                             stdout=subprocess.DEVNULL).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the local PostgreSQL did not start on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(2)  # SIGINT: PostgreSQL's fast shutdown (SIGTERM waits for clients to leave)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.process = None


def _bin(name: str) -> str:
    spec = importlib.util.find_spec("pgserver")  # located only: the package itself is needed only as root
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("a local PostgreSQL needs the test dependencies: pip install -e '.[test]' (pgserver)")
    return str(Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / name)


def _unprivileged(folder: Path) -> dict:
    """``subprocess`` arguments that run PostgreSQL as an ordinary user: it refuses to run as root. As root,
    the user ``pgserver`` is created (as ``pgserver`` itself does) and given the folder and the binaries."""
    if os.geteuid() != 0:
        return {}
    import pwd
    import stat

    with warnings.catch_warnings():  # its import looks for a runtime folder root has none of
        warnings.simplefilter("ignore")
        from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists("pgserver")
    binaries = Path(_bin("postgres")).parent
    ensure_prefix_permissions(folder)
    ensure_prefix_permissions(binaries)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(binaries, readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(binaries.parent / "lib", readable)
    entry = pwd.getpwnam("pgserver")
    for path in (folder, *folder.iterdir()):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return {"user": entry.pw_uid, "group": entry.pw_gid}


@contextlib.contextmanager
def local_postgres(password: str = "s3cret-pw") -> Iterator[LocalPostgres]:
    """Start a server; yields how to reach it (database ``postgres``). The password file is removed once the
    cluster is initialised."""
    folder = Path(tempfile.mkdtemp(prefix="streamjoin-pg-"))
    (folder / "pw").write_text(password + "\n")
    as_user = _unprivileged(folder)
    subprocess.run([_bin("initdb"), "-D", str(folder / "data"), "-U", USER, "--pwfile", str(folder / "pw"),
                    "-A", "scram-sha-256", "-E", "UTF8", "--no-sync"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **as_user)
    (folder / "pw").unlink()
    server = LocalPostgres("127.0.0.1", _free_port(), "postgres", USER, password, folder, as_user)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
