"""sqlite access for export_type "db", under torch_npu's names.

``DbManager`` is a set of functions over a connection and a cursor; ``BasicDb`` holds one database
file's connection; ``TorchDb`` (ascend_pytorch_profiler[_{rank}].db) and ``AnalysisDb`` (analysis.db)
are the process's two, as torch_npu's analysis and tools written against it use them::

    TorchDb().init(path)            # the path is kept until close()
    TorchDb().create_connect_db()   # True once connected
    TorchDb().judge_table_exist("TASK")
    TorchDb().close()

Failures: a connection that cannot be made gives ``EmptyClass`` objects (false, and "" as text) in
place of the connection and cursor, so callers test them; a failed statement is printed as
"SQLite Error: ..." and reported by the return value (``execute_sql`` False, ``fetch_*`` []); the
steps that must not fail silently (creating a table, inserting rows) raise RuntimeError.
vNPU's exporter (analysis/_db_export.py) uses its own ``BasicDb`` per file, not the singletons, so an
export never disturbs a database the program has open.
"""

import os
import sqlite3

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_error_msg, print_warn_msg
from torch_npu.profiler.analysis.prof_common_func._singleton import Singleton

__all__ = []


class EmptyClass:
    """Stands for a connection or cursor that could not be made: false, and "" as text."""

    def __init__(self, info: str = "") -> None:
        self._info = info

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return ""


def _sqlite_error(err):
    print_error_msg("SQLite Error: %s" % " ".join(str(a) for a in err.args))


class DbManager:
    INSERT_SIZE = 10000  # rows per executemany
    FETCH_SIZE = 10000  # rows per fetchmany
    MAX_ROW_COUNT = 100000000  # fetch_all_data stops past this many rows, with a warning

    @classmethod
    def check_db_file(cls, db_path: str) -> None:
        """Refuses a path that is not a regular file, or a file over Constant.MAX_FILE_SIZE."""
        if not os.path.isfile(db_path):
            raise RuntimeError(f"The db path is not a file: {db_path}")
        if os.path.getsize(db_path) > Constant.MAX_FILE_SIZE:
            raise RuntimeError(f"The db file size exceeds the preset value, please check the file: {db_path}")

    @classmethod
    def create_connect_db(cls, db_path: str) -> tuple:
        """(connection, cursor) of the database at ``db_path`` (created when missing), or two EmptyClass."""
        if os.path.exists(db_path):
            cls.check_db_file(db_path)
        try:
            # a long timeout: a database another process writes waits instead of failing "locked"
            conn = sqlite3.connect(db_path, timeout=2147483, check_same_thread=False)
            return conn, conn.cursor()
        except sqlite3.Error as err:
            _sqlite_error(err)
            return EmptyClass("empty conn"), EmptyClass("empty curs")

    @classmethod
    def destroy_db_connect(cls, conn, curs) -> None:
        """Closes the cursor and the connection; nothing when either is missing."""
        if not conn or not curs:
            return
        try:
            curs.close()
            conn.close()
        except sqlite3.Error as err:
            raise RuntimeError(f"Failed to close the db connection: {err}") from err

    @classmethod
    def execute_sql(cls, conn, sql: str, params=()) -> bool:
        """Runs one statement and commits; False (with the error printed) when it fails."""
        return cls._run_and_commit(conn, lambda cursor: cursor.execute(sql, params))

    @classmethod
    def executemany_sql(cls, conn, sql: str, rows) -> bool:
        """Runs one statement for each row and commits; False (with the error printed) when it fails."""
        return cls._run_and_commit(conn, lambda cursor: cursor.executemany(sql, rows))

    @staticmethod
    def _run_and_commit(conn, run) -> bool:
        try:
            run(conn.cursor())
            conn.commit()
            return True
        except sqlite3.Error as err:
            _sqlite_error(err)
            return False

    @classmethod
    def judge_table_exist(cls, curs, table_name: str) -> bool:
        try:
            curs.execute("SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?", (table_name,))
            return bool(curs.fetchone()[0])
        except sqlite3.Error as err:
            raise RuntimeError(f"Failed to look for table {table_name} in the db file: {err}") from err

    @classmethod
    def create_table_with_headers(cls, conn, curs, table_name: str, headers: list) -> None:
        """Creates ``table_name`` with ``headers`` ([(column, type), ...]) unless it exists."""
        if cls.judge_table_exist(curs, table_name):
            return
        columns = ", ".join(f"{name} {kind}" for name, kind in headers)
        if not cls.execute_sql(conn, f"CREATE TABLE IF NOT EXISTS {table_name} ({columns})"):
            raise RuntimeError(f"Failed to create table {table_name} in the profiler db file")

    @classmethod
    def insert_data_into_table(cls, conn, table_name: str, data: list) -> None:
        """Appends the rows of ``data`` (all of one width) to ``table_name``; nothing for no rows."""
        if not data:
            return
        sql = f"INSERT INTO {table_name} VALUES ({', '.join('?' * len(data[0]))})"
        for start in range(0, len(data), cls.INSERT_SIZE):
            if not cls.executemany_sql(conn, sql, data[start:start + cls.INSERT_SIZE]):
                raise RuntimeError(f"Failed to insert data into table {table_name} of the profiler db file")

    @classmethod
    def clear_table_data(cls, conn, curs, table_name: str) -> None:
        """Deletes the rows of ``table_name`` and keeps the table."""
        if not table_name or not cls.judge_table_exist(curs, table_name):
            return
        if not cls.execute_sql(conn, f"DELETE FROM {table_name}"):
            raise RuntimeError(f"Failed to clear data from table {table_name}")

    @classmethod
    def fetch_all_data(cls, curs, sql: str) -> list:
        """The rows ``sql`` selects, FETCH_SIZE at a time (at most about MAX_ROW_COUNT); [] on an error."""
        rows = []
        try:
            curs.execute(sql)
            while True:
                batch = curs.fetchmany(cls.FETCH_SIZE)
                rows.extend(batch)
                if len(rows) > cls.MAX_ROW_COUNT:
                    print_warn_msg("The record counts in table exceed the limit!")
                    break
                if len(batch) < cls.FETCH_SIZE:
                    break
        except sqlite3.Error as err:
            _sqlite_error(err)
            return []
        return rows

    @classmethod
    def fetch_one_data(cls, curs, sql: str):
        """The first row ``sql`` selects (None when there is none); [] on an error."""
        try:
            curs.execute(sql)
            return curs.fetchone()
        except sqlite3.Error as err:
            _sqlite_error(err)
            return []


class BasicDb:
    """One database file: its path (set once by ``init``) and, once connected, its connection."""

    def __init__(self) -> None:
        self.db_path = None
        self.conn = None
        self.curs = None

    def init(self, db_path: str) -> None:
        if self.db_path is None:
            self.db_path = db_path

    def create_connect_db(self) -> bool:
        if not (self.conn and self.curs):
            self.conn, self.curs = DbManager.create_connect_db(self.db_path)
        return bool(self.conn and self.curs)

    def get_db_path(self) -> str:
        return self.db_path

    def close(self) -> None:
        """Closes the connection and forgets the path (the next ``init`` sets a new one)."""
        DbManager.destroy_db_connect(self.conn, self.curs)
        self.db_path = self.conn = self.curs = None

    def judge_table_exist(self, table_name: str) -> bool:
        return DbManager.judge_table_exist(self.curs, table_name)

    def create_table_with_headers(self, table_name: str, headers: list) -> None:
        DbManager.create_table_with_headers(self.conn, self.curs, table_name, headers)

    def insert_data_into_table(self, table_name: str, data: list) -> None:
        DbManager.insert_data_into_table(self.conn, table_name, data)

    def clear_table_data(self, table_name: str) -> None:
        DbManager.clear_table_data(self.conn, self.curs, table_name)

    def fetch_all_data(self, sql: str) -> list:
        return DbManager.fetch_all_data(self.curs, sql)

    def fetch_one_data(self, sql: str):
        return DbManager.fetch_one_data(self.curs, sql)


@Singleton
class TorchDb(BasicDb):
    """The process's ascend_pytorch_profiler[_{rank}].db."""


@Singleton
class AnalysisDb(BasicDb):
    """The process's analysis.db."""
