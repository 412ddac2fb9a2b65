// The cards npu-smi shows, for a process that does not load torch.
//
// npu-smi (torch_npu/tools/npu_smi.py) is a console command: it must answer
// in a fraction of a second, as the real one does, and harnesses such as
// DeepSpeed's shell out to it. Importing torch_npu to learn the device count
// and chip would cost seconds (torch's import), so this small shared library
// (libvnpu_smi.so, torch-free) answers from the same environment parsing and
// chip profiles the runtime uses, without creating the devices. Only the
// vnpu_smi_* functions are exported (the static runtime's symbols stay
// hidden: --exclude-libs), so loading it beside _C cannot clash.
#include <string>

#include "vnpu/chip_profile.h"
#include "vnpu/environment.h"

namespace {

// The environment names the default chip when VNPU_CHIP is unset or unknown.
const vnpu::ChipProfile* chip() { return vnpu::find_chip_profile(vnpu::environment().chip_name); }

}  // namespace

extern "C" {

// The environment's complaint about a variable that decides the cards
// (VNPU_DEVICE_COUNT, VNPU_CHIP, VNPU_DEVICE_MEMORY_MB); empty when none.
// npu-smi prints it instead of a table of wrong cards.
__attribute__((visibility("default"))) const char* vnpu_smi_card_error() {
  static const std::string error = [] {
    for (const std::string& e : vnpu::environment().errors) {
      for (const char* name : {"VNPU_DEVICE_COUNT", "VNPU_CHIP", "VNPU_DEVICE_MEMORY_MB"}) {
        if (e.rfind(name, 0) == 0) return e;
      }
    }
    return std::string();
  }();
  return error.c_str();
}

// VNPU_DEVICE_COUNT: every card, whatever ASCEND_RT_VISIBLE_DEVICES hides.
__attribute__((visibility("default"))) int vnpu_smi_card_count() { return vnpu::environment().device_count; }

// The chip profile's name ("Ascend910B2"); empty when VNPU_CHIP names none.
__attribute__((visibility("default"))) const char* vnpu_smi_chip_name() {
  const vnpu::ChipProfile* profile = chip();
  return profile == nullptr ? "" : profile->name.c_str();
}

// HBM per card: VNPU_DEVICE_MEMORY_MB, else the chip's.
__attribute__((visibility("default"))) unsigned long long vnpu_smi_memory_bytes() {
  const vnpu::ChipProfile* profile = chip();
  if (profile == nullptr) return 0;
  return vnpu::environment().device_memory_bytes.value_or(profile->total_memory_bytes);
}

__attribute__((visibility("default"))) int vnpu_smi_cube_cores() {
  const vnpu::ChipProfile* profile = chip();
  return profile == nullptr ? 0 : profile->cube_core_num;
}

}  // extern "C"
