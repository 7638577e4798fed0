// collx/tune/presets.hpp — model profiles (tune/model.hpp) of machines collx
// has not measured itself, from published numbers. They price the schedules
// collx has (algo/) on those machines, so a choice for them can be
// static_asserted and explained (collx-explain); a profile measured by
// collx-probe replaces them on a real machine. tests/unit/test_tune_presets.cpp
// checks the decisions practitioners report against them.
//
// Sources (cited per constant as [tag]):
//  [nccl-tuning] NVIDIA/nccl src/graph/tuning.cc (master, June 2026):
//      hwLatencies, µs per step: NVLink ring LL 0.6, LL128 1.9, Simple 3.4;
//      PCI ring LL 1.0, LL128 2.5, Simple 5.7; NET ring LL 2.7, LL128 4.0,
//      Simple 14; NVLS on NVLink, Simple 25. Ring LL bandwidth ×0.5 capped at
//      llMaxBws (Ampere 87.7, Hopper 141 GB/s), ring LL128 ×0.92, NVLS
//      nvlsEfficiency 0.85 (Hopper) × (nChannels−1)/nChannels, ×2 for
//      all_reduce ("AllReduce pipelines two operations"); LL128 enabled by
//      default only where the path is NVLink.
//  [nccl-topo] NVIDIA/nccl src/graph/topo.h: GB/s per link as NCCL counts it:
//      SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6, PCI_BW 12.0 (Gen3 x16),
//      NET_BW 12.0 (100 Gbit/s).
//  [h100] NVIDIA H100 datasheet: SXM5 NVLink 4, 18 links, 900 GB/s both
//      directions; HBM3 3.35 TB/s. H200 SXM: NVLink 900 GB/s, HBM3e 4.8 TB/s.
//  [a100] NVIDIA A100 datasheet: SXM4 NVLink 3, 12 links, 600 GB/s both
//      directions, HBM2e 2,039 GB/s; A100 PCIe 80GB: NVLink bridge between two
//      GPUs 600 GB/s, PCIe Gen4 64 GB/s both directions, HBM2e 1,935 GB/s.
//  [pcie] PCI-SIG: 16 GT/s (Gen4), 32 GT/s (Gen5) per lane, 128b/130b.
//  [ib] NVIDIA ConnectX-6 HDR 200 Gb/s, ConnectX-7 NDR 400 Gb/s per port;
//      DGX A100: eight HDR ports, DGX H100: eight NDR ports, one per GPU.
//
// Conventions. A link's α is its LL step latency and each protocol adds its
// difference ([nccl-tuning]'s row of the intra-node link); the bandwidth is
// NCCL's own accounting of the link ([nccl-topo] × links), which is what
// nccl-tests' bus bandwidth reaches, not the datasheet's signalling rate.
// A GPU reduction reads two operands and writes one: γ = HBM bandwidth / 3;
// a staging copy reads and writes: copy = HBM / 2. oversub_step_us does not
// apply to GPU ranks (one rank per GPU) and equals the intra α.
// Not modelled: NCCL's per-call base latency (baseLatencies, 6.6–14 µs,
// equal for the variants compared) and its per-channel caps.
#pragma once

#include <collx/tune/model.hpp>

namespace collx::tune {

/// 8× H100 or H200 SXM on NVSwitch with multicast (NVLS), one node. Peer
/// loads and stores (nvls's copies without the switch, single copy) move at
/// the NVLink rate; traffic through a multicast address (multimem
/// load-reduce and store: transport/multimem.hpp, cuda/multicast.hpp) at
/// NCCL's NVLS efficiency of it, 0.85 × 370.8 = 315.2 GB/s per direction
/// [nccl-tuning]. nvls's staged all_reduce then moves (1 + 1/8)·B through
/// the switch, a busbw of 1.75 / 1.125 × 315.2 = 490 GB/s for that phase,
/// where NCCL's formula gives 2 × 0.85 × 7/8 × 370.8 = 551.6 for its
/// pipelined NVLS; collx's schedule also copies B into and out of the
/// multicast-bound buffer, before and after the switch's phase, not
/// overlapped with it (algo/nvls.hpp). A barrier is half of NVLS's 25 µs
/// (two barriers per call).
inline constexpr profile h100_nvswitch{
    .intra = {link_kind::nvlink, 0.6, 18 * 20.6},  // [nccl-tuning] LL; [nccl-topo] × 18 links [h100]
    .inter = {link_kind::ib, 2.7, 4 * 12.0},       // one NDR port per GPU [ib], [nccl-tuning] NET LL
    .ranks_per_node = 8,                           //
    .proto = {{2.8, 1.0}, {0.0, 141.0 / 370.8}, {1.3, 0.92}},  // Simple 3.4, LL ≤ llMaxBw, LL128 1.9 ×0.92
    .barrier_us = 12.5,
    .peer_gbps = 18 * 20.6,
    .copy_gbps = 3350.0 / 2,    // [h100] HBM3 (H200: 4800)
    .reduce_gbps = 3350.0 / 3,  //
    .oversub_step_us = 0.6,
    .multicast_gbps = 0.85 * 18 * 20.6,  // [nccl-tuning] nvlsEfficiency (Hopper)
};

/// 8× A100 SXM4 on NVSwitch, one node: no multicast (nvlsEfficiency is 0 for
/// Ampere [nccl-tuning]), so nvls's emulated copies load peers over NVLink
/// at the link's bandwidth.
inline constexpr profile a100_nvswitch{
    .intra = {link_kind::nvlink, 0.6, 12 * 20.0},  // [nccl-tuning] LL; [nccl-topo] × 12 links [a100]
    .inter = {link_kind::ib, 2.7, 2 * 12.0},       // one HDR port per GPU [ib]
    .ranks_per_node = 8,                           //
    .proto = {{2.8, 1.0}, {0.0, 87.7 / 240.0}, {1.3, 0.92}},  // LL ≤ llMaxBw Ampere 87.7
    .barrier_us = 3.4,                                        // a step of Simple: flags through NVLink
    .peer_gbps = 12 * 20.0,
    .copy_gbps = 2039.0 / 2,    // [a100] HBM2e
    .reduce_gbps = 2039.0 / 3,  //
    .oversub_step_us = 0.6,
};

/// 8 GPUs (A100 PCIe class) on PCIe Gen4 x16, no NVLink. LL128 is off: NCCL
/// enables it only on NVLink paths [nccl-tuning] (efficiency 0 = unusable).
inline constexpr profile pcie_gen4_8gpu{
    .intra = {link_kind::pcie, 1.0,
              2 * 12.0},                      // [nccl-tuning] PCI LL; [nccl-topo] PCI_BW × 2 for Gen4 [pcie]
    .inter = {link_kind::ib, 2.7, 2 * 12.0},  //
    .ranks_per_node = 8,                      //
    .proto = {{4.7, 1.0}, {0.0, 0.5}, {1.5, 0.0}},  // Simple 5.7, LL ×0.5, LL128 off
    .barrier_us = 5.7,                              // a Simple step over PCIe
    .peer_gbps = 2 * 12.0,                          // peer-to-peer loads over PCIe
    .copy_gbps = 1935.0 / 2,                        // [a100] A100 PCIe HBM2e
    .reduce_gbps = 1935.0 / 3,
    .oversub_step_us = 1.0,
};

/// 8 GPUs (H100 PCIe class) on PCIe Gen5 x16: twice Gen4's bandwidth [pcie],
/// NCCL's PCI latencies (it has no Gen5 row).
inline constexpr profile pcie_gen5_8gpu = [] {
  profile m = pcie_gen4_8gpu;
  m.intra.gbps = m.peer_gbps = 4 * 12.0;
  m.inter.gbps = 4 * 12.0;
  m.copy_gbps = 2000.0 / 2, m.reduce_gbps = 2000.0 / 3;  // H100 PCIe HBM2e 2 TB/s
  return m;
}();

/// 4× A100 PCIe joined in pairs by NVLink bridges [a100]: the model's two
/// levels are the bridged pair (ranks_per_node 2, NVLink) and PCIe Gen4
/// between the pairs (one host, no network). LL128 is priced on both
/// levels, though NCCL would disable it where a ring crosses PCIe.
inline constexpr profile a100_nvlink_bridge_4gpu{
    .intra = {link_kind::nvlink, 0.6, 12 * 20.0},  // a bridge carries 12 NVLink 3 links [a100]
    .inter = {link_kind::pcie, 1.0, 2 * 12.0},     // Gen4 x16 [pcie], [nccl-tuning] PCI LL
    .ranks_per_node = 2,
    .proto = {{2.8, 1.0}, {0.0, 87.7 / 240.0}, {1.3, 0.92}},
    .barrier_us = 3.4,
    .peer_gbps = 12 * 20.0,
    .copy_gbps = 1935.0 / 2,
    .reduce_gbps = 1935.0 / 3,
    .oversub_step_us = 0.6,
};

/// Nodes of 8× H100 (h100_nvswitch) on InfiniBand NDR, one 400 Gb/s port
/// per GPU [ib]: 48 GB/s per rank ([nccl-topo] NET_BW 12 per 100 Gbit/s).
/// Peer memory (nvls) reaches one node only, so it is unavailable across.
inline constexpr profile h100_ib_ndr = h100_nvswitch;

/// Nodes of 8× A100 (a100_nvswitch) on InfiniBand HDR, one 200 Gb/s port per GPU.
inline constexpr profile a100_ib_hdr = a100_nvswitch;

/// Nodes of 8× H100 on RoCE at 400 Gb/s per GPU. NCCL prices every network
/// with one NET row [nccl-tuning]; lacking a published RoCE-specific latency
/// this preset uses it too, so it differs from h100_ib_ndr in the link kind only.
inline constexpr profile h100_roce = [] {
  profile m = h100_nvswitch;
  m.inter.kind = link_kind::roce;
  return m;
}();

/// CPU ranks on nodes joined by TCP: shared memory inside a node (shm_host),
/// the socket transport across. The inter link is what one rank per network
/// namespace measured over veth on the 2-core machine of shm_host
/// (bench/results/net_allreduce_veth.md: 8-byte all_reduce 30-111 us, i.e.
/// about 2 steps of ~30 us; 0.69-1.09 GB/s busbw from 128 KiB). Used by the
/// hierarchical communicator's choice (collx/hier.hpp) unless a profile says
/// otherwise.
inline constexpr profile cpu_nodes_tcp = [] {
  profile m = shm_host;
  m.inter = {link_kind::tcp, 30.0, 0.9};
  return m;
}();

/// A preset by name (collx-explain, COLLX_TUNE_FILE=preset:NAME).
struct named_preset {
  const char* name;
  const profile* value;
  const char* what;
};
inline constexpr named_preset presets[] = {
    {"shm_host", &shm_host, "CPU ranks over shared memory, measured on a 2-core AMD EPYC"},
    {"h100_nvswitch", &h100_nvswitch, "8x H100/H200 SXM, NVSwitch with multicast"},
    {"a100_nvswitch", &a100_nvswitch, "8x A100 SXM4, NVSwitch"},
    {"pcie_gen4_8gpu", &pcie_gen4_8gpu, "8 GPUs on PCIe Gen4 x16"},
    {"pcie_gen5_8gpu", &pcie_gen5_8gpu, "8 GPUs on PCIe Gen5 x16"},
    {"a100_nvlink_bridge_4gpu", &a100_nvlink_bridge_4gpu, "4x A100 PCIe, NVLink bridges in pairs"},
    {"h100_ib_ndr", &h100_ib_ndr, "nodes of 8x H100, InfiniBand NDR 400 Gb/s per GPU"},
    {"a100_ib_hdr", &a100_ib_hdr, "nodes of 8x A100, InfiniBand HDR 200 Gb/s per GPU"},
    {"h100_roce", &h100_roce, "nodes of 8x H100, RoCE 400 Gb/s per GPU"},
    {"cpu_nodes_tcp", &cpu_nodes_tcp, "CPU ranks: shared memory in a node, TCP across (measured over veth)"},
};

/// The preset named `n`, or nullptr.
constexpr const profile* find_preset(const char* n) {
  for (const named_preset& p : presets) {
    const char *a = p.name, *b = n;
    while (*a != '\0' && *a == *b) ++a, ++b;
    if (*a == *b) return p.value;
  }
  return nullptr;
}

}  // namespace collx::tune
