"""Cuts a buffer of fixed-size binary records into beans."""

__all__ = []


class BinaryDecoder:
    @staticmethod
    def decode(all_bytes: bytes, class_bean: type, struct_size: int) -> list:
        """``class_bean(record)`` for each ``struct_size``-byte record of ``all_bytes``, in order.
        A short tail (a record cut off mid-write) is dropped."""
        if struct_size <= 0:
            raise ValueError(f"struct_size must be positive, got {struct_size}")
        usable = len(all_bytes) - len(all_bytes) % struct_size
        view = memoryview(all_bytes)
        return [class_bean(bytes(view[offset:offset + struct_size]))
                for offset in range(0, usable, struct_size)]
