"""Which MLflow store `track` writes to, and the client for it.

`--mlflow` takes any tracking URI MLflow accepts (`http://host:5000`, `sqlite:///x.db`,
`postgresql://...`, `databricks`), or a local path: a file ending in `.db`, `.sqlite` or
`.sqlite3` is a SQLite store, anything else a folder in MLflow's file store. Without it,
MLFLOW_TRACKING_URI when set, else `sqlite:///LAB/mlflow.db`: since MLflow 3.7 SQLite is
MLflow's own default, and MLflow 3.13 on refuses the file store unless MLFLOW_ALLOW_FILE_STORE
is set; tunelab sets it only for a folder the user named. A local SQLite store keeps its
artifacts in `mlartifacts/` beside the database (MLflow server's default name), not in the
folder the command happens to run from.

mlflow is imported here, only when `track` runs: `tunelab --help` stays light.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from tunelab.core.env import process_alive
from tunelab.core.errors import TunelabError

INSTALL = "pip install 'tunelab[mlflow]'"
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
DATABASES = ("sqlite", "postgresql", "mysql", "mssql")
DEFAULT_DB = "mlflow.db"
ARTIFACTS = "mlartifacts"


class TrackError(TunelabError):
    """MLflow cannot be used as asked: not installed, or a tracking URI it refuses."""


@dataclass(frozen=True)
class Target:
    uri: str
    """The tracking URI handed to MLflow."""
    kind: str
    """`sqlite`, `file` (a folder), `database` (another SQLAlchemy URI) or `remote`."""
    artifacts: str | None
    """Where a new experiment keeps its artifacts (None: the store's own default)."""
    given: str
    """Where the URI came from: `--mlflow`, `MLFLOW_TRACKING_URI` or `the default`."""


def resolve(lab: Path, given: str | None) -> Target:
    """The store `track` writes to (see the module docstring)."""
    source = "--mlflow"
    if not given:
        given, source = os.environ.get("MLFLOW_TRACKING_URI") or None, "MLFLOW_TRACKING_URI"
    if not given:
        db = Path(lab).resolve() / DEFAULT_DB
        _writable(db, "the default")
        return Target(_sqlite(db), "sqlite", (db.parent / ARTIFACTS).as_uri(), "the default")
    if given in ("databricks", "databricks-uc", "uc"):  # MLflow's own words, not folders
        return Target(given, "remote", None, source)
    scheme = urlparse(given).scheme.lower()
    if len(scheme) > 1:  # a URI (a one-letter scheme is a Windows drive)
        dialect = scheme.split("+")[0]
        if dialect == "sqlite":
            _, _, path = given.partition(":///")
            local = Path(path).resolve().parent / ARTIFACTS if path else None  # not in memory
            return Target(given, "sqlite", local and local.as_uri(), source)
        if dialect in DATABASES:
            return Target(given, "database", None, source)
        return Target(given, "file" if scheme == "file" else "remote", None, source)
    path = Path(given).expanduser().resolve()
    if path.suffix.lower() in SQLITE_SUFFIXES:
        _writable(path, source)
        return Target(_sqlite(path), "sqlite", (path.parent / ARTIFACTS).as_uri(), source)
    _file_store(path, source)
    return Target(path.as_uri(), "file", None, source)


def _file_store(path: Path, source: str) -> None:
    """Refuse a folder that holds other things than an MLflow file store (its `.trash/`, an
    experiment's `meta.yaml`): a mistyped `--mlflow docs` or `--mlflow .` had scattered
    MLflow's tree among the user's files."""
    if not path.is_dir() or not any(path.iterdir()):
        return
    if (path / ".trash").is_dir() or any(path.glob("*/meta.yaml")):
        return
    raise TrackError(
        f"{path} ({source}) holds other files and is not an MLflow file store (no .trash/, no "
        "experiment's meta.yaml): give a new or empty folder, or a database such as "
        "--mlflow mlflow.db"
    )


def _writable(db: Path, source: str) -> None:
    """Refuse, before MLflow opens it, a local SQLite store this user may not write: MLflow met
    a read-only lab's database as an internal error after a 76-line traceback, and a folder it
    could not create one in after 100 s of retries. SQLite writes its journal beside the file."""
    folder_ok = os.access(db.parent, os.W_OK | os.X_OK) if db.parent.exists() else True
    if (db.exists() and not os.access(db, os.W_OK)) or not folder_ok:
        where = db if db.exists() and not os.access(db, os.W_OK) else db.parent
        raise TrackError(
            f"{where}: this user may not write there, so MLflow cannot keep its store "
            f"{db.name} ({source}); give --mlflow a store elsewhere, e.g. "
            "--mlflow sqlite:////tmp/mlflow.db"
        )


def _sqlite(path: Path) -> str:
    return f"sqlite:///{path}"


def client(target: Target):
    """An MlflowClient for `target`, checked with one read: a missing package or a URI that
    MLflow refuses is a TrackError naming it, before anything is written."""
    # offline: MLflow's usage telemetry fetches its config from the internet and writes an
    # installation id into ~/.config/mlflow, from the moment it is imported (a user's own
    # setting of it stands)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise TrackError(
            f"`tunelab track` needs MLflow's client, which is not installed: {INSTALL}"
        ) from None
    for name in ("mlflow", "alembic"):  # their INFO lines (database set-up) are not ours
        logging.getLogger(name).setLevel(logging.WARNING)
    if target.kind == "file":
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # the user named a folder
    if target.kind in ("sqlite", "database"):
        _require_sqlalchemy(target)
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")  # a wrong host fails fast
    try:
        if target.kind == "sqlite":
            _created_whole(target, MlflowClient)
        mlflow = MlflowClient(tracking_uri=target.uri)
        mlflow.search_experiments(max_results=1)
    except Exception as err:  # the user's URI: whatever MLflow says about it, said as theirs
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        local = _local_sqlite(target)
        half = (
            f" If {local} was left by a `track` stopped while MLflow was creating it (MLflow "
            "says a table already exists), it holds nothing yet: delete it and track again."
            if local and "already exists" in first
            else ""
        )
        raise TrackError(
            f"MLflow cannot use the tracking URI {target.uri!r} (from {target.given}): "
            f"{first[:300]}. Give `--mlflow` a URI MLflow accepts (http://host:5000, "
            "sqlite:///path/mlflow.db, a folder), or leave it out for sqlite:///LAB/mlflow.db."
            + half
        ) from None
    return mlflow


def _local_sqlite(target: Target) -> Path | None:
    """The file of a SQLite store on this machine (`sqlite:///PATH`), or None."""
    prefix = "sqlite:///"
    if target.kind != "sqlite" or not target.uri.startswith(prefix):
        return None
    path = target.uri.removeprefix(prefix)
    return Path(path) if path and path != ":memory:" else None


def _created_whole(target: Target, client_class) -> None:
    """A SQLite store that does not exist yet is made whole beside its place, then linked
    into it: MLflow builds its tables one migration at a time, and a `track` stopped in the
    middle had left a database every later `track` refused ("table scorers already exists").
    A killed `track`'s staged copy (its process gone) is removed first: it stayed for ever.
    Not renamed: a rename would replace a store another `track` into the same URI made
    meanwhile and is writing into, and lose what it wrote."""
    path = _local_sqlite(target)
    if path is None or path.exists():
        return
    for left in path.parent.glob(f".{path.name}.*.tmp*"):  # a killed track's, and its journal
        pid = left.name.removeprefix(f".{path.name}.").split(".")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            left.unlink(missing_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staged.unlink(missing_ok=True)
    try:
        client_class(tracking_uri=_sqlite(staged)).search_experiments(max_results=1)
        _link_new(staged, path)
    finally:
        staged.unlink(missing_ok=True)


def _link_new(staged: Path, path: Path) -> None:
    """`staged` as `path` unless a store appeared there meanwhile: then that one is used."""
    try:
        os.link(staged, path)
    except FileExistsError:
        pass  # another `track` made it whole first
    except OSError:  # a file system without hard links: the narrow window stays
        if not path.exists():
            os.replace(staged, path)


def _require_sqlalchemy(target: Target) -> None:
    import importlib.util

    if not all(importlib.util.find_spec(name) for name in ("sqlalchemy", "alembic")):
        raise TrackError(
            f"the tracking URI {target.uri!r} is a database, which MLflow reaches through "
            f"SQLAlchemy and alembic, not installed here: {INSTALL} (or give --mlflow a folder "
            "or a tracking server's http:// URI)"
        )
