"""Interval arithmetic on a step's timeline: merging busy periods and splitting
communication into the part hidden behind computation and the part that is not.

All times are ns; an interval is [start_ts, end_ts]. The work is done on
(start, end) pairs; the public functions take and return TimeRange objects.
"""

__all__ = []


class TimeRange:
    """One interval of the timeline."""

    def __init__(self, start_ts: int = 0, end_ts: int = 0):
        self.start_ts = start_ts
        self.end_ts = end_ts

    def __repr__(self):
        return f"{type(self).__name__}({self.start_ts}, {self.end_ts})"


class CommunicationTimeRange(TimeRange):
    """An interval the device spent communicating."""


def _pairs(ranges):
    return [(r.start_ts, r.end_ts) for r in ranges]


def _union(pairs):
    """The union of (start, end) pairs: disjoint pairs in time order (touching pairs join)."""
    joined = []
    for start, end in sorted(pairs):
        if joined and start <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], end)
        else:
            joined.append([start, end])
    return [tuple(pair) for pair in joined]


def _minus(pair, holes):
    """What is left of ``pair`` once the ``holes`` (disjoint, in time order) are cut out of it."""
    start, end = pair
    left = []
    for hole_start, hole_end in holes:
        if hole_end <= start or hole_start >= end:
            continue
        if hole_start > start:
            left.append((start, hole_start))
        start = max(start, hole_end)
    if start < end:
        left.append((start, end))
    return left


def _gaps(disjoint):
    """The holes between consecutive disjoint pairs."""
    return [(disjoint[i][1], disjoint[i + 1][0]) for i in range(len(disjoint) - 1)]


class RangeCaculator:  # sic: torch_npu's spelling
    @staticmethod
    def generate_time_range(start_ts, end_ts, class_range=TimeRange):
        """An interval of the given kind (TimeRange, or a subclass such as CommunicationTimeRange)."""
        return class_range(start_ts, end_ts)

    @staticmethod
    def merge_continuous_intervals(time_range_list: list) -> list:
        """The union of the intervals as disjoint TimeRanges, in time order."""
        return [TimeRange(start, end) for start, end in _union(_pairs(time_range_list))]

    @staticmethod
    def compute_pipeline_overlap(communication_range: list, compute_range: list):
        """(pure communication, free time), both in time order:

        - pure communication: the parts of the communication intervals no computation covers
          (CommunicationTimeRanges);
        - free time: the gaps, between the first and the last busy moment, when the device neither
          computes nor communicates (TimeRanges).
        """
        computing = _union(_pairs(compute_range))
        pure = [piece for pair in sorted(_pairs(communication_range)) for piece in _minus(pair, computing)]
        busy = _union(_pairs(communication_range) + computing)
        return ([CommunicationTimeRange(start, end) for start, end in pure],
                [TimeRange(start, end) for start, end in _gaps(busy)])
