"""The bean of a CSV row that the analysis passes on as it is: its columns are the row's keys, its
values the row's values, in the file's order."""

__all__ = []


class CsvRowBean:
    def __init__(self, data: dict):
        self._data = data  # a mapping (csv.DictReader's row); anything else fails on use

    @property
    def row(self) -> list:
        return list(self._data.values())

    @property
    def headers(self) -> list:
        return list(self._data.keys())
