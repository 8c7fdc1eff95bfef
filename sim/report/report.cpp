#include "sim/report/report.h"

#include <cstdio>
#include <sstream>

#include "sim/core/engine.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string gib(double b) { return fmt("%.2f GiB", b / kGiB); }
std::string human_bytes(double b) {
  if (b >= 1e9) return fmt("%.2f GB", b / 1e9);
  if (b >= 1e6) return fmt("%.2f MB", b / 1e6);
  return fmt("%.0f B", b);
}

// The PP + ZeRO-2/3 conflict in numbers: how much more DP traffic than ZeRO-1 the same split
// sends, how much of it the step waits for, and how busy the scale-out NICs are with it beside
// the pipeline's sends (bytes over the NICs' capacity for the step).
json conflict_json(const Scenario& s, const StepReport& r) {
  const double dp = r.comm_bytes_per_gpu[0];
  const auto& inter = r.internode_bytes_per_gpu;
  const double nic_total = inter[0] + inter[1] + inter[2] + inter[3] + inter[4];
  const double capacity = s.cluster.internode_bandwidth_per_gpu() * r.step_time_s;
  json nic = {{"utilization", capacity > 0 ? nic_total / capacity : 0.0},
              {"share_dp", nic_total > 0 ? inter[0] / nic_total : 0.0},
              {"share_tp", nic_total > 0 ? inter[1] / nic_total : 0.0},
              {"share_pp", nic_total > 0 ? inter[2] / nic_total : 0.0},
              {"share_ep", nic_total > 0 ? inter[3] / nic_total : 0.0},
              {"share_cp", nic_total > 0 ? inter[4] / nic_total : 0.0},
              {"bytes_per_gpu", nic_total}};
  return {{"dp_traffic_multiplier_vs_zero1", r.dp_bytes_zero1 > 0 ? dp / r.dp_bytes_zero1 : 0.0},
          {"dp_bytes_per_gpu_zero1", r.dp_bytes_zero1},
          {"exposed_dp_comm_s", r.breakdown.exposed_by_group[0]},
          {"nic", nic}};
}

json memory_json(const MemoryUsage& u) {
  const auto& m = u.category_max;
  return json{{"params", m[static_cast<int>(MemCategory::Params)]},
              {"grads", m[static_cast<int>(MemCategory::Grads)]},
              {"optimizer_states", m[static_cast<int>(MemCategory::OptimizerStates)]},
              {"activations", m[static_cast<int>(MemCategory::Activations)]},
              {"buffers", m[static_cast<int>(MemCategory::Buffers)]},
              {"peak", u.peak},
              {"reserved_peak", u.reserved_peak},
              {"nvidia_smi_peak", u.nvidia_smi_peak()}};
}

}  // namespace

json report_json(const Scenario& s, const StepReport& r, bool with_time) {
  json j;
  if (with_time) {
    j["step_time_s"] = r.step_time_s;
    j["tokens_per_s"] = r.tokens_per_s;
    j["tflops_per_gpu"] = r.tflops_per_gpu;
    j["mfu"] = r.mfu;
    j["breakdown_s"] = {{"forward", r.breakdown.forward_s},
                        {"backward", r.breakdown.backward_s},
                        {"optimizer", r.breakdown.optimizer_s},
                        {"exposed_comm", r.breakdown.exposed_comm_s},
                        {"bubble", r.breakdown.bubble_s},
                        {"offload", r.breakdown.offload_s},
                        {"cpu_optimizer_step", r.breakdown.cpu_step_s},
                        {"comm_overhead", r.breakdown.comm_overhead_s},
                        {"other", r.breakdown.other_s},
                        {"exposed_comm_by_group", {{"dp", r.breakdown.exposed_by_group[0]},
                                                   {"tp", r.breakdown.exposed_by_group[1]},
                                                   {"pp", r.breakdown.exposed_by_group[2]},
                                                   {"ep", r.breakdown.exposed_by_group[3]},
                                                   {"cp", r.breakdown.exposed_by_group[4]}}}};
    j["comm_bytes_per_gpu"] = {{"dp", r.comm_bytes_per_gpu[0]},
                               {"tp", r.comm_bytes_per_gpu[1]},
                               {"pp", r.comm_bytes_per_gpu[2]},
                               {"ep", r.comm_bytes_per_gpu[3]},
                               {"cp", r.comm_bytes_per_gpu[4]}};
    j["conflict"] = conflict_json(s, r);
    char fp[24];
    std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(r.fingerprint));
    j["fingerprint"] = fp;
    j["events"] = r.events;
  }
  j["memory_per_gpu_bytes"] = memory_json(r.memory);
  j["memory_per_stage_bytes"] = json::array();
  for (const MemoryUsage& u : r.memory_per_stage) j["memory_per_stage_bytes"].push_back(memory_json(u));
  j["memory_outside_allocator_bytes"] = {{"cuda_context", r.cuda_context_bytes},
                                         {"nccl_buffers", r.nccl_buffer_bytes}};
  j["gpu_memory_bytes"] = s.cluster.gpu.hbm_bytes;
  j["device_peak_bytes"] = r.device_peak;
  j["fits_in_memory"] = r.fits_in_memory;
  j["host_memory_per_node_bytes"] = r.host_memory_per_node;
  j["host_memory_bytes"] = s.cluster.host.dram_bytes;
  j["fits_in_host_memory"] = r.fits_in_host_memory;
  j["nvme_bytes_per_node"] = r.nvme_bytes_per_node;
  j["nvme_bytes"] = s.cluster.host.nvme_bytes;
  j["fits_on_nvme"] = r.fits_on_nvme;
  j["model"] = {{"params", r.params}, {"flops_per_token", model_flops_per_token(s.model)}};
  if (s.model.is_moe()) j["model"]["active_params"] = count_params(s.model).active;
  j["num_gpus"] = s.num_gpus();
  j["scenario"] = s.resolved;
  j["warnings"] = json::array();
  for (const InputWarning& w : s.warnings) {
    j["warnings"].push_back({{"key", w.key_path}, {"message", w.message}});
  }
  return j;
}

std::string report_text(const Scenario& s, const StepReport& r, bool with_time) {
  std::ostringstream o;
  const auto& p = s.parallel;
  o << "zerosim: " << s.model.name << " (" << fmt("%.2f", r.params / 1e9) << " B params"
    << (s.model.is_moe() ? ", " + fmt("%.2f", count_params(s.model).active / 1e9) + " B active" : "")
    << ") on "
    << s.cluster.nodes << " x " << s.cluster.preset << " (" << s.num_gpus() << " GPUs)\n";
  o << "  parallel: tp " << p.tp << ", pp " << p.pp << ", dp " << p.dp
    << (s.model.is_moe() ? ", ep " + std::to_string(p.ep) : "")
    << (p.cp > 1 ? ", cp " + std::to_string(p.cp) : "") << ", ZeRO-"
    << s.zero.stage << (s.zero.overlap_comm ? " (overlap_comm)" : "") << "; micro-batch "
    << s.training.micro_batch_size << " x " << s.training.gradient_accumulation_steps
    << " accumulation steps, global batch " << s.training.global_batch_size << " x "
    << s.model.seq_length << " tokens, " << to_string(s.training.precision) << "\n";
  if (with_time) {
    const auto& b = r.breakdown;
    o << "  step time       " << fmt("%.4f s", r.step_time_s) << "\n";
    o << "    forward       " << fmt("%.4f s", b.forward_s) << "\n";
    o << "    backward      " << fmt("%.4f s", b.backward_s) << "\n";
    o << "    optimizer     " << fmt("%.4f s", b.optimizer_s) << "\n";
    o << "    exposed comm  " << fmt("%.4f s", b.exposed_comm_s) << "  (dp "
      << fmt("%.4f", b.exposed_by_group[0]) << ", tp " << fmt("%.4f", b.exposed_by_group[1])
      << ", pp " << fmt("%.4f", b.exposed_by_group[2])
      << (s.model.is_moe() ? ", ep " + fmt("%.4f", b.exposed_by_group[3]) : "")
      << (s.parallel.cp > 1 ? ", cp " + fmt("%.4f", b.exposed_by_group[4]) : "") << ")\n";
    o << "    bubble        " << fmt("%.4f s", b.bubble_s) << "\n";
    if (b.comm_overhead_s > 0) {
      o << "    comm overhead " << fmt("%.4f s", b.comm_overhead_s)
        << "  (the framework's work for its collectives: tensor slices and copies, quantization)\n";
    }
    if (b.other_s > 0) {
      o << "    other         " << fmt("%.4f s", b.other_s) << "  (waits no dependency explains)\n";
    }
    if (s.zero.offload_optimizer != OffloadDevice::None ||
        s.zero.offload_param != OffloadDevice::None || b.offload_s > 0) {
      o << "    offload       " << fmt("%.4f s", b.offload_s) << "  (waits for host work; CPU step "
        << fmt("%.4f s", b.cpu_step_s) << ")\n";
    }
    o << "  throughput      " << fmt("%.0f tokens/s", r.tokens_per_s) << ", "
      << fmt("%.1f TFLOP/s per GPU", r.tflops_per_gpu) << ", MFU " << fmt("%.1f %%", 100 * r.mfu)
      << "\n";
    o << "  sent per GPU    dp " << human_bytes(r.comm_bytes_per_gpu[0]) << ", tp "
      << human_bytes(r.comm_bytes_per_gpu[1]) << ", pp " << human_bytes(r.comm_bytes_per_gpu[2])
      << (s.model.is_moe() ? ", ep " + human_bytes(r.comm_bytes_per_gpu[3]) : "")
      << (s.parallel.cp > 1 ? ", cp " + human_bytes(r.comm_bytes_per_gpu[4]) : "") << "\n";
    const json c = conflict_json(s, r);
    o << "  conflict        DP traffic x" << fmt("%.2f", c["dp_traffic_multiplier_vs_zero1"].get<double>())
      << " of ZeRO-1, exposed DP " << fmt("%.3f s", c["exposed_dp_comm_s"].get<double>())
      << "; NICs " << fmt("%.0f %% busy", 100 * c["nic"]["utilization"].get<double>()) << " (dp "
      << fmt("%.0f %%", 100 * c["nic"]["share_dp"].get<double>()) << ", pp "
      << fmt("%.0f %%", 100 * c["nic"]["share_pp"].get<double>()) << ", tp "
      << fmt("%.0f %%", 100 * c["nic"]["share_tp"].get<double>())
      << (s.model.is_moe() ? ", ep " + fmt("%.0f %%", 100 * c["nic"]["share_ep"].get<double>()) : "")
      << (s.parallel.cp > 1 ? ", cp " + fmt("%.0f %%", 100 * c["nic"]["share_cp"].get<double>()) : "")
      << ")\n";
  }
  const auto& m = r.memory.category_max;
  o << "  memory per GPU  params " << gib(m[0]) << ", grads " << gib(m[1]) << ", optimizer "
    << gib(m[2]) << ", activations " << gib(m[3]) << ", buffers " << gib(m[4]) << "\n";
  o << "  peak            " << gib(r.memory.peak) << " allocated, " << gib(r.memory.reserved_peak)
    << " reserved by the caching allocator, " << gib(r.memory.nvidia_smi_peak()) << " with CUDA context "
    << gib(r.cuda_context_bytes) << " and NCCL " << gib(r.nccl_buffer_bytes) << " (nvidia-smi), of "
    << gib(s.cluster.gpu.hbm_bytes) << (r.fits_in_memory ? "  -> fits" : "  -> DOES NOT FIT")
    << "\n";
  if (r.host_memory_per_node > 0 || r.nvme_bytes_per_node > 0) {
    o << "  host per node   " << gib(r.host_memory_per_node) << " of "
      << gib(s.cluster.host.dram_bytes)
      << (r.fits_in_host_memory ? "  -> fits" : "  -> DOES NOT FIT") << "; NVMe "
      << gib(r.nvme_bytes_per_node) << " of " << gib(s.cluster.host.nvme_bytes)
      << (r.fits_on_nvme ? "  -> fits" : "  -> DOES NOT FIT") << "\n";
  }
  if (!s.warnings.empty()) {
    o << "  warnings        " << s.warnings.size() << " input"
      << (s.warnings.size() == 1 ? " was" : "s were")
      << " not taken as written (also in --json: warnings)\n";
    for (const InputWarning& w : s.warnings) o << "    " << w.key_path << ": " << w.message << "\n";
  }
  return o.str();
}

}  // namespace zerosim
