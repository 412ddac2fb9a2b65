"""Column names of the CSV files msprof exports and the analysis reads or writes."""

__all__ = []


class CsvHeaders:
    # op_summary_*.csv (msprof)
    OP_NAME = "Op Name"
    OP_TYPE = "OP Type"
    TASK_TYPE = "Task Type"
    TASK_START_TIME = "Task Start Time(us)"
    TASK_DURATION = "Task Duration(us)"
    TASK_WAIT_TIME = "Task Wait Time(us)"
    BLOCK_DIM = "Block Dim"
    INPUT_SHAPES = "Input Shapes"
    INPUT_DATA_TYPES = "Input Data Types"
    INPUT_FORMATS = "Input Formats"
    OUTPUT_SHAPES = "Output Shapes"
    OUTPUT_DATA_TYPES = "Output Data Types"
    OUTPUT_FORMATS = "Output Formats"

    # memory_record.csv (the analysis)
    MEMORY_RECORD = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                     "Total Active(MB)", "Stream Ptr", "Device Type"]
    # operator_memory.csv (the analysis)
    OPERATOR_MEMORY = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                       "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                       "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                       "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type"]
