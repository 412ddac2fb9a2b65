"""What the installed CANN's profiling tools can export.

Real torch_npu asks ``msprof --help`` whether the CANN package can export
its profiling database (``export_type="db"``) and whether the text export
writes the database too. vNPU's analysis is its own (torch_npu/profiler/
analysis): it writes the database for export_type "db" (_db_export.py), and
the text export writes the text files only, as with a CANN package that
exports db on request, whatever msprof is on the PATH.
"""

__all__ = []


class CannPackageManager:
    SUPPORT_EXPORT_DB = True
    SUPPORT_DEFAULT_EXPORT_DB = False

    @classmethod
    def is_support_export_db(cls) -> bool:
        """Whether export_type "db" can be written: yes, by vNPU's analysis."""
        return cls.SUPPORT_EXPORT_DB

    @classmethod
    def is_support_default_export_db(cls) -> bool:
        """Whether the text export also writes the database: not on vNPU."""
        return cls.SUPPORT_DEFAULT_EXPORT_DB
