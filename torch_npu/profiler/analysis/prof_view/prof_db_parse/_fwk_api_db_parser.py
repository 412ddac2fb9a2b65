"""PYTORCH_API and its companion tables (STRING_IDS, CONNECTION_IDS, PYTORCH_CALLCHAINS,
ENUM_API_TYPE) of ascend_pytorch_profiler.db, from the framework's api rows (DbPreParser's
result). Each torch op gets the correlation ids of the CANN launches it caused: directly (same
thread, inside the op), or through the task queue (the op enqueued an item, and the launch ran
inside that item's dequeue)."""

import bisect
from collections import defaultdict

from torch_npu.profiler.analysis.prof_common_func._constant import ApiType, Constant, DbConstant, TableColumnsManager, TorchOpDataOri
from torch_npu.profiler.analysis.prof_common_func._db_manager import TorchDb
from torch_npu.profiler.analysis.prof_common_func._id_manager import CallChainIdManager, ConnectionIdManager, Str2IdManager
from torch_npu.profiler.analysis.prof_parse._fwk_file_parser import ID_MANAGERS
from torch_npu.profiler.analysis.prof_view._base_parser import BaseParser

__all__ = []

# Rows of CANN_API used here: [startNs, endNs, globalTid, connectionId]
_LAUNCH_SQL = f"SELECT startNs, endNs, globalTid, connectionId FROM {DbConstant.TABLE_CANN_API} WHERE type = {ApiType.NODE}"
_LAUNCH_COUNT_SQL = f"SELECT count(*) FROM {DbConstant.TABLE_CANN_API}"
_TX_SQL = (f"SELECT c.startNs, c.endNs, c.globalTid, c.connectionId FROM {DbConstant.TABLE_CANN_API} c "
           f"JOIN {DbConstant.TABLE_STRING_IDS} s ON c.name = s.id WHERE s.value = 'launch_tx'")
_GROUPS = (Constant.TORCH_OP_DATA, Constant.ENQUEUE_DATA, Constant.DEQUEUE_DATA, Constant.PYTHON_TRACE_DATA,
           Constant.MSTX_OP_DATA)


class _ThreadSpans:
    """The spans (rows starting [start, end, globalTid, ...]) of each thread, to find the innermost
    one holding a time."""

    def __init__(self, rows):
        self._by_tid = defaultdict(list)
        for row in sorted(rows, key=lambda row: row[0]):
            self._by_tid[row[2]].append(row)
        self._starts = {tid: [row[0] for row in spans] for tid, spans in self._by_tid.items()}

    def innermost(self, tid, time_ns):
        spans = self._by_tid.get(tid, [])
        index = bisect.bisect_right(self._starts.get(tid, []), time_ns) - 1
        while index >= 0:  # the latest-started span still running at time_ns
            if spans[index][1] >= time_ns:
                return spans[index]
            index -= 1
        return None


class FwkApiDbParser(BaseParser):
    def __init__(self, name: str, param_dict: dict):
        super().__init__(name, param_dict)
        self._fwk_apis = []
        self._str_ids, self._connection_ids, self._callchain_ids = \
            Str2IdManager(), ConnectionIdManager(), CallChainIdManager()

    def run(self, deps_data: dict):
        try:
            if not TorchDb().create_connect_db():
                self.logger.error("Failed to connect to the pytorch profiler db.")
                return Constant.FAIL, None
            self.get_api_data_for_db(deps_data.get(Constant.DB_PRE_PARSER) or {})
            self.save_api_data_to_db()
        except Exception as err:
            self.logger.error("Failed to write the framework apis to the db: %s", err)
            return Constant.FAIL, None
        return Constant.SUCCESS, None

    # --- linking ops to launches ------------------------------------------------------------------
    @staticmethod
    def _link(op_rows, launches):
        """Gives each launch's correlation id to the innermost op of its thread around it."""
        spans = _ThreadSpans(op_rows)
        for launch in launches:
            op = spans.innermost(launch[2], launch[0])
            if op is not None:
                op[TorchOpDataOri.CONNECTION_ID].append(launch[3])

    def get_torch_op_connection_ids_with_task_queue(self, task_enqueues, task_dequeues, torch_op_apis,
                                                    torch_op_len, node_launch_apis):
        """Links through the queue: a launch inside a dequeue goes to the op that enqueued the item
        (same connection id), the enqueue lying inside the op on the op's thread."""
        if not task_enqueues or not task_dequeues:
            return  # nothing went through the queue
        ops = _ThreadSpans(torch_op_apis[:torch_op_len])
        dequeues = _ThreadSpans(task_dequeues)
        owner = {}  # connection id of a queue item -> the op that enqueued it
        for enqueue in task_enqueues:
            op = ops.innermost(enqueue[2], enqueue[0])
            if op is not None:
                for corr_id in self._connection_ids.get_connection_ids_from_id(enqueue[3]):
                    owner[corr_id] = op
        for launch in node_launch_apis:
            dequeue = dequeues.innermost(launch[2], launch[0])
            if dequeue is None:
                continue
            for corr_id in self._connection_ids.get_connection_ids_from_id(dequeue[3]):
                op = owner.get(corr_id)
                if op is not None:
                    op[TorchOpDataOri.CONNECTION_ID].append(launch[3])
                    break

    def get_torch_op_connection_ids_with_cann_api(self, task_enqueues, task_dequeues, torch_op_apis):
        if not torch_op_apis:
            return
        db = TorchDb()
        count = db.fetch_one_data(_LAUNCH_COUNT_SQL)
        if not count or not count[0]:
            return
        launches = db.fetch_all_data(_LAUNCH_SQL) or []
        if task_enqueues and task_dequeues:
            self.get_torch_op_connection_ids_with_task_queue(task_enqueues, task_dequeues, torch_op_apis,
                                                             len(torch_op_apis), launches)
        else:
            self._link(torch_op_apis, launches)

    def get_mstx_mark_op_connection_ids_with_cann_api(self, task_enqueues, task_dequeues, mstx_mark_apis):
        if not mstx_mark_apis:
            return
        tx_apis = TorchDb().fetch_all_data(_TX_SQL)
        if not tx_apis:
            raise RuntimeWarning("Failed to get msprof_tx apis")
        if task_enqueues and task_dequeues:
            self.get_torch_op_connection_ids_with_task_queue(task_enqueues, task_dequeues, mstx_mark_apis,
                                                             len(mstx_mark_apis), tx_apis)
        else:
            self._link(mstx_mark_apis, tx_apis)

    def get_api_data_for_db(self, fwk_api_data: dict):
        """Links the ops to their launches, then keeps every row with its connection ids numbered."""
        self._fwk_apis = []
        if not fwk_api_data:
            return
        managers = fwk_api_data.get(ID_MANAGERS)
        if managers:
            self._str_ids, self._connection_ids, self._callchain_ids = managers
        enqueues = fwk_api_data.get(Constant.ENQUEUE_DATA, [])
        dequeues = fwk_api_data.get(Constant.DEQUEUE_DATA, [])
        torch_ops = fwk_api_data.get(Constant.TORCH_OP_DATA, [])
        mstx_ops = fwk_api_data.get(Constant.MSTX_OP_DATA, [])
        self.get_torch_op_connection_ids_with_cann_api(enqueues, dequeues, torch_ops)
        try:
            self.get_mstx_mark_op_connection_ids_with_cann_api(enqueues, dequeues, mstx_ops)
        except RuntimeWarning as warning:
            self.logger.warning("%s", warning)
        for rows in (torch_ops, mstx_ops):
            for row in rows:
                ids = row[TorchOpDataOri.CONNECTION_ID]
                row[TorchOpDataOri.CONNECTION_ID] = self._connection_ids.get_id_from_connection_ids(ids) \
                    if ids else DbConstant.DB_INVALID_VALUE
        for group in _GROUPS:
            self._fwk_apis.extend(fwk_api_data.get(group, []))

    # --- writing ----------------------------------------------------------------------------------
    @staticmethod
    def _write(table: str, rows: list):
        if not rows:
            return
        db = TorchDb()
        if not db.judge_table_exist(table):
            db.create_table_with_headers(table, TableColumnsManager.TableColumns[table])
        db.insert_data_into_table(table, rows)

    def save_api_data_to_db(self):
        self.save_fwk_api()
        self.save_string_ids()
        self.sava_connection_ids()  # sic: the name torch_npu's callers use
        self.save_callchain_ids()
        self.save_enum_api_types_to_db()

    def save_fwk_api(self):
        rows = [[str(row[0]), str(row[1])] + [DbConstant.DB_INVALID_VALUE if value is None else value
                                              for value in row[2:]] for row in self._fwk_apis]
        self._write(DbConstant.TABLE_PYTORCH_API, rows)

    def save_string_ids(self):
        self._write(DbConstant.TABLE_STRING_IDS, self._str_ids.get_all_string_2_id_data())

    def sava_connection_ids(self):
        rows = [[list_id, corr_id] for list_id, ids in self._connection_ids.get_all_connection_ids().items()
                for corr_id in ids]
        self._write(DbConstant.TABLE_CONNECTION_IDS, rows)

    def save_callchain_ids(self):
        rows = [[chain_id, self._str_ids.get_id_from_str(frame), depth]
                for chain_id, frames in self._callchain_ids.get_all_callchain_id().items()
                for depth, frame in enumerate(frames)]
        self._write(DbConstant.TABLE_PYTORCH_CALLCHAINS, rows)

    def save_enum_api_types_to_db(self):
        db = TorchDb()
        if db.judge_table_exist(DbConstant.TABLE_ENUM_API_TYPE):
            return
        self._write(DbConstant.TABLE_ENUM_API_TYPE, [[kind, name] for kind, name in ApiType.NAMES.items()])
