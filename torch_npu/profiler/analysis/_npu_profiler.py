"""The analysis' entry point: ``NpuProfiler.analyse(path, analysis_type, output_path)``.

``path`` is one ``*_ascend_pt`` folder or a folder of them. The analysis
types are torch_npu's (Constant): TENSORBOARD_TRACE_HANDLER builds each
folder's ASCEND_PROFILER_OUTPUT/, EXPORT_CHROME_TRACE copies its trace to
``output_path``. export_stacks and export_memory_timeline need the events of
the live profile, which vNPU's profile exports itself (profiler.py).

A TENSORBOARD_TRACE_HANDLER analysis, as torch_npu's:
- empties the folder's ASCEND_PROFILER_OUTPUT/ (the files are those of the
  export types asked for now);
- runs msprof's export on the CANN raw-data folder, if there is one
  (_cann_export.py: its summaries, kept with data_simplification=False);
- writes the text files for export_type "text" (analysis/__init__.py) and the
  databases for "db" (_db_export.py), both for ["text", "db"]. The chrome
  trace and stacks exports ignore "db", with torch_npu's warning.
"""

import gzip
import json
import os
import shutil

from torch_npu.profiler import analysis
from torch_npu.profiler.analysis.prof_common_func._cann_package_manager import CannPackageManager
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_warn_msg
from torch_npu.profiler.analysis.prof_common_func._path_manager import ProfilerPathManager

__all__ = []


class NpuProfiler:
    @classmethod
    def analyse(cls, input_path, analysis_type=Constant.TENSORBOARD_TRACE_HANDLER, output_path=None, **kwargs):
        """Analyses the profile folders at ``input_path``; returns the folders done."""
        input_path = ProfilerPathManager.get_realpath(input_path)
        if not os.path.exists(input_path):
            raise RuntimeError(f"The path does not exist: {input_path}")
        done = []
        for folder in ProfilerPathManager.get_profiler_path_list(input_path):
            if not os.path.isfile(os.path.join(folder, analysis.RAW_TRACE)):
                print_warn_msg(f"{folder} has no raw trace ({analysis.RAW_TRACE}); it is not analysed.")
                continue
            export_type = cls._check_export_type(folder, analysis_type, kwargs.get("export_type"))
            if analysis_type == Constant.TENSORBOARD_TRACE_HANDLER:
                done.append(cls._analyse_folder(folder, export_type))
            elif analysis_type == Constant.EXPORT_CHROME_TRACE:
                cls._copy_trace(folder, output_path)
                done.append(folder)
            else:
                raise ValueError(f"Analysis type {analysis_type!r} needs the live profile: call it on the profile "
                                 f"(prof.export_stacks(), prof.export_memory_timeline()).")
        return done

    @staticmethod
    def _analyse_folder(folder, export_type):
        """Builds one folder's ASCEND_PROFILER_OUTPUT/ in the export types asked for; returns it."""
        # The exporters (sqlite3 and the CANN layout) are imported by the first
        # analysis, not with torch_npu: every process imports this module.
        from torch_npu.profiler.analysis import _cann_export, _db_export

        out = ProfilerPathManager.get_output_path(folder)
        shutil.rmtree(out, ignore_errors=True)
        profile = analysis.Profile(folder)
        experimental = profile.info.get(Constant.CONFIG, {}).get(Constant.EXPERIMENTAL_CONFIG) or {}
        _cann_export.export(folder, data_simplification=experimental.get(Constant.DATA_SIMPLIFICATION, True)
                            is not False)
        os.makedirs(out, exist_ok=True)
        if Constant.Text in export_type:
            analysis.write_outputs(folder, profile)
        if Constant.Db in export_type:
            _db_export.export(folder, profile)
        return out

    @staticmethod
    def _requested_export_type(folder):
        info_file = ProfilerPathManager.get_info_file_path(folder)
        info = {}
        if info_file:
            with open(info_file) as f:
                info = json.load(f)
        return (info.get(Constant.CONFIG, {}).get(Constant.EXPERIMENTAL_CONFIG) or {}).get(
            Constant.EXPORT_TYPE, [Constant.Text])

    @classmethod
    def _check_export_type(cls, folder, analysis_type, requested=None):
        """The export types of a folder's analysis (``requested`` else its profile's); raises for
        "db" where the CANN package could not write it."""
        if requested is None:
            requested = cls._requested_export_type(folder)
        export_type = [requested] if isinstance(requested, str) else list(requested)
        if Constant.Db not in export_type:
            return export_type
        if analysis_type in (Constant.EXPORT_CHROME_TRACE, Constant.EXPORT_STACK):
            print_warn_msg("The setting of type in experimental_config as db will be ignored while set "
                           "export_chrome_trace or export_stacks")
            return [Constant.Text]
        if not CannPackageManager.is_support_export_db():
            raise RuntimeError("Current CANN package version does not support export db. "
                               "If you want to export db, you can install supported CANN package version.")
        return export_type

    @staticmethod
    def _copy_trace(folder, output_path):
        if not output_path:
            raise ValueError("export_chrome_trace needs the path of the file to write")
        output_path = ProfilerPathManager.get_realpath(output_path)
        os.makedirs(os.path.dirname(output_path), exist_ok=True)
        raw = os.path.join(folder, analysis.RAW_TRACE)
        tmp = f"{output_path}.{os.getpid()}.tmp"
        if output_path.endswith(".gz"):
            with open(raw, "rb") as src, gzip.open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
        else:
            shutil.copyfile(raw, tmp)
        os.replace(tmp, output_path)
