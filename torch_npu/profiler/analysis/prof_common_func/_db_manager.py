"""sqlite for export_type "db", under the names torch_npu's analysis uses.

Three layers:
- ``DbManager``: stateless operations on a (connection, cursor) pair;
- ``BasicDb``: one database file, remembering its path and its pair; its
  methods are DbManager's with that pair filled in;
- ``TorchDb`` (ascend_pytorch_profiler[_{rank}].db) and ``AnalysisDb``
  (analysis.db): the process's two shared BasicDb, as torch_npu's analysis
  and the tools written against it reach them::

    TorchDb().init(path)            # kept until close()
    TorchDb().create_connect_db()   # True once connected
    TorchDb().judge_table_exist("TASK")
    TorchDb().close()

How failures show, as in torch_npu: a database that cannot be opened yields
two ``EmptyClass`` (false, and "" as text) instead of the pair, which callers
test; a statement that fails prints "SQLite Error: ..." and says so through
its result (``execute_sql`` False, the fetches []); creating a table and
inserting rows, which must not fail unnoticed, raise RuntimeError.

vNPU's own exporter (analysis/_db_export.py) opens a BasicDb per file rather
than the shared ones, so an export never closes a database the user's
program holds open.
"""

import os
import sqlite3

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_error_msg, print_warn_msg
from torch_npu.profiler.analysis.prof_common_func._singleton import Singleton

__all__ = []

# sqlite waits this long (seconds, about 24 days: its largest) for a database
# another process writes, instead of failing with "database is locked"
_BUSY_WAIT_S = 2147483


class EmptyClass:
    """What stands for a connection or cursor that could not be made."""

    def __init__(self, info: str = "") -> None:
        self._info = info  # which one it stands for, for a debugger

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return ""


def _report(err: sqlite3.Error):
    print_error_msg("SQLite Error: " + " ".join(map(str, err.args)))


def _placeholders(row) -> str:
    return ", ".join("?" for _ in row)


def _committed(conn, cursor_method: str, sql: str, args) -> bool:
    """Runs the cursor's ``execute`` or ``executemany`` and commits; False
    (printed) when sqlite refuses the statement."""
    try:
        getattr(conn.cursor(), cursor_method)(sql, args)
        conn.commit()
    except sqlite3.Error as err:
        _report(err)
        return False
    return True


def _require(done: bool, failure: str):
    """For the changes that must not fail unnoticed."""
    if not done:
        raise RuntimeError(failure)


def _chunks(curs, size: int):
    """The rows of the query ``curs`` ran, ``size`` at a time; a short chunk is the last."""
    while True:
        chunk = curs.fetchmany(size)
        if chunk:
            yield chunk
        if len(chunk) < size:
            return


class DbManager:
    INSERT_SIZE = 10000  # rows per executemany
    FETCH_SIZE = 10000  # rows per fetchmany
    MAX_ROW_COUNT = 100000000  # fetch_all_data stops (with a warning) once it holds more

    # -- connections ---------------------------------------------------------------------------------------------

    @classmethod
    def check_db_file(cls, db_path: str) -> None:
        """Raises RuntimeError unless ``db_path`` is a regular file of at most Constant.MAX_FILE_SIZE bytes."""
        if not os.path.isfile(db_path):
            raise RuntimeError(f"The db path is not a file: {db_path}")
        if os.path.getsize(db_path) > Constant.MAX_FILE_SIZE:
            raise RuntimeError(f"The db file size exceeds the preset value, please check the file: {db_path}")

    @classmethod
    def create_connect_db(cls, db_path: str) -> tuple:
        """(connection, cursor) of ``db_path``, a new database when there is
        none; two EmptyClass when sqlite cannot open it."""
        if os.path.exists(db_path):
            cls.check_db_file(db_path)
        try:
            # not bound to one thread: the analysis hands databases between its workers
            conn = sqlite3.connect(db_path, timeout=_BUSY_WAIT_S, check_same_thread=False)
            curs = conn.cursor()
        except sqlite3.Error as err:
            _report(err)
            return EmptyClass("empty conn"), EmptyClass("empty curs")
        return conn, curs

    @classmethod
    def destroy_db_connect(cls, conn, curs) -> None:
        """Closes both; does nothing unless both are there."""
        if not (conn and curs):
            return
        try:
            curs.close()
            conn.close()
        except sqlite3.Error as err:
            raise RuntimeError(f"Failed to close the db connection: {err}") from err

    # -- reading ---------------------------------------------------------------------------------------------------

    @classmethod
    def judge_table_exist(cls, curs, table_name: str) -> bool:
        query = "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?"
        try:
            curs.execute(query, (table_name,))
            (count,) = curs.fetchone()
        except sqlite3.Error as err:
            raise RuntimeError(f"Failed to look for table {table_name} in the db file: {err}") from err
        return count > 0

    @classmethod
    def fetch_all_data(cls, curs, sql: str) -> list:
        """What ``sql`` selects, read FETCH_SIZE rows at a time: a table too
        big for memory is cut, with a warning, once more than MAX_ROW_COUNT
        rows are in. [] when sqlite refuses the query."""
        result = []
        try:
            curs.execute(sql)
            for chunk in _chunks(curs, cls.FETCH_SIZE):
                result += chunk
                if len(result) > cls.MAX_ROW_COUNT:
                    print_warn_msg("The record counts in table exceed the limit!")
                    break
        except sqlite3.Error as err:
            _report(err)
            return []
        return result

    @classmethod
    def fetch_one_data(cls, curs, sql: str):
        """The first row ``sql`` selects, None when it selects none; [] when sqlite refuses the query."""
        try:
            curs.execute(sql)
            return curs.fetchone()
        except sqlite3.Error as err:
            _report(err)
            return []

    # -- changing --------------------------------------------------------------------------------------------------

    @classmethod
    def execute_sql(cls, conn, sql: str, params=()) -> bool:
        """Runs ``sql`` once and commits. False, printed, when sqlite refuses it."""
        return _committed(conn, "execute", sql, params)

    @classmethod
    def executemany_sql(cls, conn, sql: str, rows) -> bool:
        """Runs ``sql`` for each of ``rows`` and commits. False, printed, when sqlite refuses it."""
        return _committed(conn, "executemany", sql, rows)

    @classmethod
    def create_table_with_headers(cls, conn, curs, table_name: str, headers: list) -> None:
        """Makes ``table_name`` with the columns ``headers``, (name, type)
        pairs, unless a table of that name is there already."""
        if cls.judge_table_exist(curs, table_name):
            return
        columns = ", ".join(f"{name} {sql_type}" for name, sql_type in headers)
        _require(cls.execute_sql(conn, f"CREATE TABLE IF NOT EXISTS {table_name} ({columns})"),
                 f"Failed to create table {table_name} in the profiler db file")

    @classmethod
    def insert_data_into_table(cls, conn, table_name: str, data: list) -> None:
        """Adds ``data``, rows of one width, to ``table_name``, INSERT_SIZE rows
        a statement; no rows, no statement."""
        if not data:
            return
        statement = f"INSERT INTO {table_name} VALUES ({_placeholders(data[0])})"
        for first in range(0, len(data), cls.INSERT_SIZE):
            _require(cls.executemany_sql(conn, statement, data[first:first + cls.INSERT_SIZE]),
                     f"Failed to insert data into table {table_name} of the profiler db file")

    @classmethod
    def clear_table_data(cls, conn, curs, table_name: str) -> None:
        """Empties ``table_name``, which stays; nothing when there is no such table."""
        if not table_name or not cls.judge_table_exist(curs, table_name):
            return
        _require(cls.execute_sql(conn, f"DELETE FROM {table_name}"), f"Failed to clear data from table {table_name}")

    # -- queries -------------------------------------------------------------------------------------------------

def _with_handles(operation: str, *handles: str):
    """A BasicDb method: DbManager's ``operation`` with this database's
    ``handles`` ("conn", "curs") as its first arguments."""
    def method(self, *args):
        return getattr(DbManager, operation)(*(getattr(self, h) for h in handles), *args)
    method.__name__ = operation
    method.__doc__ = f"DbManager.{operation} on this database."
    return method


class BasicDb:
    """One database file: its path, set by the first ``init``, and once
    connected its connection and cursor."""

    def __init__(self) -> None:
        self.db_path = None
        self.conn = None
        self.curs = None

    def init(self, db_path: str) -> None:
        if self.db_path is None:
            self.db_path = db_path

    def get_db_path(self) -> str:
        return self.db_path

    def create_connect_db(self) -> bool:
        """Connects, unless connected already; whether it is connected."""
        if not self.conn or not self.curs:
            self.conn, self.curs = DbManager.create_connect_db(self.db_path)
        return bool(self.conn) and bool(self.curs)

    def close(self) -> None:
        """Disconnects and forgets the path, so that the next ``init`` sets one."""
        DbManager.destroy_db_connect(self.conn, self.curs)
        self.db_path, self.conn, self.curs = None, None, None

    judge_table_exist = _with_handles("judge_table_exist", "curs")
    create_table_with_headers = _with_handles("create_table_with_headers", "conn", "curs")
    insert_data_into_table = _with_handles("insert_data_into_table", "conn")
    clear_table_data = _with_handles("clear_table_data", "conn", "curs")
    fetch_all_data = _with_handles("fetch_all_data", "curs")
    fetch_one_data = _with_handles("fetch_one_data", "curs")


@Singleton
class TorchDb(BasicDb):
    """The process's ascend_pytorch_profiler[_{rank}].db."""


@Singleton
class AnalysisDb(BasicDb):
    """The process's analysis.db."""
