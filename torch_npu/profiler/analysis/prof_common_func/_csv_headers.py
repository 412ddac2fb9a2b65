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
    # the op_summary columns kernel_details.csv shows at Level0 (msprof's names), the tensor
    # columns it adds when msprof recorded shapes, and the Level0 columns under the names
    # kernel_details.csv gives them
    OP_SUMMARY_SHOW_HEADERS = [OP_NAME, OP_TYPE, TASK_TYPE, TASK_START_TIME, TASK_DURATION,
                               TASK_WAIT_TIME, BLOCK_DIM]
    OP_SUMMARY_SHAPE_HEADERS = [INPUT_SHAPES, INPUT_DATA_TYPES, INPUT_FORMATS, OUTPUT_SHAPES,
                                OUTPUT_DATA_TYPES, OUTPUT_FORMATS]
    OP_SUMMARY_KERNEL_BASE_HEADERS = ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                                      "Wait Time(us)", "Block Dim"]

    # memory_record.csv (the analysis)
    MEMORY_RECORD = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                     "Total Active(MB)", "Stream Ptr", "Device Type"]
    # operator_memory.csv (the analysis)
    OPERATOR_MEMORY = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                       "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                       "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                       "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type"]
