"""An event of the device's trace (msprof's msprof_*.json), with the fields the analysis added
while reading it: ``ts_ns``/``end_ns`` (int ns), ``is_ai_core`` and ``unique_id``."""

__all__ = []


class EventBean:
    def __init__(self, data: dict):
        self._data = data

    @property
    def ts(self) -> int:
        return self._data.get("ts_ns", 0)

    @property
    def end_ns(self) -> int:
        return self._data.get("end_ns", 0)

    @property
    def dur(self):
        return self._data.get("dur", 0)

    @property
    def pid(self):
        return self._data.get("pid", "")

    @property
    def tid(self):
        return self._data.get("tid", 0)

    @property
    def name(self) -> str:
        return self._data.get("name", "")

    @property
    def id(self):
        return self._data.get("id")

    @property
    def ph(self):
        return self._data.get("ph")

    @property
    def args(self) -> dict:
        return self._data.get("args", {})

    @property
    def is_ai_core(self) -> bool:
        return self._data.get("is_ai_core", False)

    @property
    def unique_id(self) -> str:
        return self._data.get("unique_id", "")

    @property
    def event(self) -> dict:
        return self._data
