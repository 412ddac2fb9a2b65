"""npu-smi for the virtual NPUs: the devices in real npu-smi's layouts.

    npu-smi info                      the overview table (devices, then processes)
    npu-smi info -l                   the device list ("Total Count : N" first)
    npu-smi info -t board -i N        a card's board information
    npu-smi info -t usages -i N       a card's memory and AI Core usage
    npu-smi info -t memory -i N       a card's memory information

Devices and their chip come from the environment torch_npu reads
(VNPU_DEVICE_COUNT, VNPU_CHIP) and the chip profiles; memory and AI Core
usage from the processes using them (torch_npu/npu/_smi_status.py). As on a
machine, ASCEND_RT_VISIBLE_DEVICES does not hide cards from npu-smi. Each
card has one chip (chip id 0).

The command does not import torch or torch_npu, so it answers at once as the
real one does (harnesses such as DeepSpeed's shell out to it): the
`npu-smi` script runs this file by path, the cards come from
lib/libvnpu_smi.so (the runtime's own environment parsing and chip
profiles, torch-free: runtime/src/smi_info.cpp), and the usage from the
status files. `python -m torch_npu.tools.npu_smi` works too, at the cost of
importing torch_npu.
"""
import argparse
import ctypes
import glob
import json
import os
import sys
import tempfile

VERSION = "24.1.0"  # the npu-smi / driver version vNPU reports
MB = 1024 * 1024


def _devices():
    """[(index, chip name, memory capacity bytes, ai cores)] of every card."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    info = ctypes.CDLL(os.path.join(package, "lib", "libvnpu_smi.so"))
    info.vnpu_smi_card_error.restype = info.vnpu_smi_chip_name.restype = ctypes.c_char_p
    info.vnpu_smi_memory_bytes.restype = ctypes.c_ulonglong
    error = info.vnpu_smi_card_error().decode()
    if error:
        raise SystemExit(f"Error: {error}.")
    chip = info.vnpu_smi_chip_name().decode()
    return [(d, chip, info.vnpu_smi_memory_bytes(), info.vnpu_smi_cube_cores())
            for d in range(info.vnpu_smi_card_count())]


def status_dir():
    """Where live processes publish their usage (torch_npu/npu/_smi_status.py writes there)."""
    return os.path.join(tempfile.gettempdir(), f"vnpu-smi-{os.getuid()}")


def _live_status():
    """{device: [(pid, name, memory bytes, aicore %)]} from live processes."""
    usage = {}
    for path in sorted(glob.glob(os.path.join(status_dir(), "*.json"))):
        pid = os.path.basename(path)[:-len(".json")]
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            try:
                os.remove(path)  # a process that died without cleaning up (killed)
            except OSError:
                pass
            continue
        except (OSError, ValueError):
            continue
        try:
            with open(path) as f:
                status = json.load(f)
        except (OSError, ValueError):
            continue  # being replaced
        for device, d in status.get("devices", {}).items():
            usage.setdefault(int(device), []).append(
                (int(status["pid"]), status.get("name", "?"), int(d["memory_bytes"]), int(d["aicore_percent"])))
    return usage


def _short_name(chip):
    return chip[len("Ascend"):] if chip.startswith("Ascend") else chip


def _bus_id(index):
    return f"0000:{0xC1 + index:02X}:00.0"


def _overview(devices, usage):
    width = 96
    rule = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+"
    double = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 52 + "+"
    lines = ["+" + "-" * width + "+",
             f"| {'npu-smi ' + VERSION:<33}{'Version: ' + VERSION:<62}|",
             rule,
             f"| {'NPU   Name':<26}| {'Health':<14}| {'Power(W)    Temp(C)           Hugepages-Usage(page)':<51}|",
             f"| {'Chip':<26}| {'Bus-Id':<14}| {'AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)':<51}|",
             double]
    for index, chip, capacity, _ in devices:
        procs = usage.get(index, [])
        used = sum(p[2] for p in procs) // MB
        aicore = min(100, sum(p[3] for p in procs))
        total = capacity // MB
        lines.append(f"| {f'{index:<6}{_short_name(chip)}':<26}| {'OK':<14}| "
                     f"{f'{0.0:<12.1f}{0:<18}{0:<4} / {0:<8}':<51}|")
        lines.append(f"| {'0':<26}| {_bus_id(index):<14}| {f'{aicore:<12}{0:<4} / {0:<11}{used:<4} / {total:<8}':<51}|")
        lines.append(double)
    lines.append(rule.replace("-" * 52 + "+", "-" * 26 + "+" + "-" * 25 + "+"))
    lines.append(f"| {'NPU     Chip':<26}| {'Process id':<14}| {'Process name':<25}| {'Process memory(MB)':<24}|")
    lines.append(double.replace("=" * 52 + "+", "=" * 26 + "+" + "=" * 25 + "+"))
    for index, _, _, _ in devices:
        procs = usage.get(index, [])
        if not procs:
            lines.append(f"| {'No running processes found in NPU ' + str(index):<95}|")
        for pid, name, memory, _ in procs:
            lines.append(f"| {f'{index:<8}0':<26}| {pid:<14}| {name[:24]:<25}| {memory // MB:<24}|")
        lines.append(double.replace("=" * 52 + "+", "=" * 26 + "+" + "=" * 25 + "+"))
    return "\n".join(lines)


def _fields(pairs):
    return "\n".join(f"\t{key:<31}: {value}" for key, value in pairs)


def _device_list(devices):
    parts = [_fields([("Total Count", len(devices))])]
    for index, _, _, _ in devices:
        parts.append(_fields([("NPU ID", index), ("Chip Count", 1)]))
    return "\n\n".join(parts)


def _board(index, chip):
    return _fields([("NPU ID", index), ("Product Name", f"vNPU {_short_name(chip)} (virtual)"), ("Model", "NA"),
                    ("Manufacturer", "vNPU"), ("Serial Number", f"VNPU{index:012d}"),
                    ("Software Version", VERSION), ("Firmware Version", VERSION), ("Compatibility", "OK"),
                    ("Board ID", "0x02"), ("PCB ID", "NA"), ("BOM ID", "1"), ("PCIe Bus Info", _bus_id(index)),
                    ("Slot ID", index), ("Class ID", "NA"), ("PCI Vendor ID", "0x19E5"), ("PCI Device ID", "0xD802"),
                    ("Subsystem Vendor ID", "0x0200"), ("Subsystem Device ID", "0x3400"), ("Chip Count", 1)])


def _usages(index, capacity, procs):
    used = sum(p[2] for p in procs)
    aicore = min(100, sum(p[3] for p in procs))
    rate = round(100 * used / capacity) if capacity else 0
    return _fields([("Memory Capacity(MB)", 0), ("Memory Usage Rate(%)", 0), ("Hugepages Total(page)", 0),
                    ("Hugepages Usage Rate(%)", 0), ("HBM Capacity(MB)", capacity // MB), ("HBM Usage Rate(%)", rate),
                    ("Aicore Usage Rate(%)", aicore), ("Aivector Usage Rate(%)", aicore),
                    ("Aicpu Usage Rate(%)", 0), ("Ctrlcpu Usage Rate(%)", 0), ("HBM Bandwidth Usage Rate(%)", 0)])


def _memory(index, capacity, procs):
    return _fields([("DDR Capacity(MB)", 0), ("DDR Clock Speed(MHz)", 0), ("DDR Usage Rate(%)", 0),
                    ("HBM Capacity(MB)", capacity // MB), ("HBM Clock Speed(MHz)", 1600),
                    ("HBM Usage(MB)", sum(p[2] for p in procs) // MB), ("HBM Temperature(C)", 0)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="npu-smi", description="npu-smi of vNPU's virtual NPUs")
    parser.add_argument("-v", "--version", action="store_true", help="print the version")
    sub = parser.add_subparsers(dest="command")
    info = sub.add_parser("info", help="show devices")
    info.add_argument("-l", dest="list", action="store_true", help="list the devices")
    info.add_argument("-t", dest="type", choices=["board", "usages", "memory"], help="information type")
    info.add_argument("-i", dest="card", type=int, help="card id")
    info.add_argument("-c", dest="chip", type=int, default=0, help="chip id (0)")
    args = parser.parse_args(argv)
    if args.version:
        print(f"npu-smi version: {VERSION}")
        return 0
    if args.command != "info":
        parser.print_help()
        return 1
    devices = _devices()
    if args.list:
        print(_device_list(devices))
        return 0
    if args.type is None:
        print(_overview(devices, _live_status()))
        return 0
    if args.card is None:
        print(f"Error: npu-smi info -t {args.type} needs a card id: -i <card id> (0-{len(devices) - 1}).",
              file=sys.stderr)
        return 1
    if not 0 <= args.card < len(devices) or args.chip != 0:
        print(f"Error: the card id {args.card} / chip id {args.chip} is invalid: this machine has cards "
              f"0-{len(devices) - 1} with chip 0 each (VNPU_DEVICE_COUNT={len(devices)}).", file=sys.stderr)
        return 1
    index, chip, capacity, _ = devices[args.card]
    procs = _live_status().get(index, [])
    if args.type == "board":
        print(_board(index, chip))
    elif args.type == "usages":
        print(_usages(index, capacity, procs))
    else:
        print(_memory(index, capacity, procs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
