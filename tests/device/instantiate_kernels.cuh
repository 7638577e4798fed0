// The kernels of the compile-only device check (instantiate_*.cu): every
// algorithm's schedule, every collective it implements, every protocol, in a
// kernel of exec::cuda. The .cu files name the element types and ops.
#pragma once

#include "ring_kernels.cuh"

#include <collx/algo/bruck.hpp>
#include <collx/algo/bruck_a2a.hpp>
#include <collx/algo/direct.hpp>
#include <collx/algo/nvls.hpp>
#include <collx/algo/rabenseifner.hpp>
#include <collx/algo/rhd.hpp>
#include <collx/algo/tree.hpp>
#include <collx/proto/runtime.hpp>

namespace collx::test {

/// Any algorithm's schedule in a kernel (block b: stripe b % S of rank b / S), with the arguments beyond the
/// scalars (all_to_allv layout, send_recv plan, mismatch report) in device memory.
template <class Algo, class Proto, coll C, class T, reduce_op Op>
__global__ void algo_kernel(transport::shm_view view, exec::cuda ex, const T* send, T* recv,
                            std::size_t count, const peer_layout* layout, const p2p_plan* plan,
                            mismatch_report* report, int* status_out) {
  const int S = view.nstripes(), b = static_cast<int>(blockIdx.x), rank = b / S;
  reducer<T, Op> red{static_cast<std::uint32_t>(view.nranks())};
  schedule_args<T> a{send, recv, count, 0, rank, view.nranks(), layout, plan, report};
  const status st = run_stripe<Algo, Proto, C>(ex, view, red, proto::channel_of<Proto>, a, b % S, S);
  if (threadIdx.x == 0) status_out[b] = static_cast<int>(st);
}

/// A schedule over proto::runtime (the protocol chosen per call, as the
/// host dispatch runs it), with the channel of the protocol to run.
template <class Algo, coll C, class T, reduce_op Op>
__global__ void runtime_protocol_kernel(transport::shm_view view, exec::cuda ex, const T* send, T* recv,
                                        std::size_t count, int channel, int* status_out) {
  const int S = view.nstripes(), b = static_cast<int>(blockIdx.x), rank = b / S;
  reducer<T, Op> red{static_cast<std::uint32_t>(view.nranks())};
  using any_protocol = proto::runtime<proto::simple, proto::ll, proto::ll128>;
  schedule_args<T> a{send, recv, count, 0, rank, view.nranks(), nullptr, nullptr, nullptr};
  const status st = run_stripe<Algo, any_protocol, C>(ex, view, red, channel, a, b % S, S);
  if (threadIdx.x == 0) status_out[b] = static_cast<int>(st);
}
template <class T, reduce_op Op>
void instantiate_runtime_protocol() {
  transport::shm_view v{};
  exec::cuda ex{};
  runtime_protocol_kernel<algo::ring, coll::all_reduce, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr);
  runtime_protocol_kernel<algo::tree, coll::all_reduce, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr);
}

template <class Proto, class T, reduce_op Op>
void instantiate_direct() {
  transport::shm_view v{};
  exec::cuda ex{};
  algo_kernel<algo::direct, Proto, coll::all_reduce, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::direct_one_shot, Proto, coll::all_reduce, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::direct_two_shot, Proto, coll::all_reduce, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::direct, Proto, coll::reduce_scatter, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::direct, Proto, coll::all_gather, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::direct, Proto, coll::all_to_all, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::direct, Proto, coll::all_to_allv, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::direct, Proto, coll::send_recv, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::bruck_a2a, Proto, coll::all_to_all, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  algo_kernel<algo::direct, Proto, coll::barrier, T, Op>
      <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
}

template <class Proto, class T, reduce_op Op>
void instantiate_proto() {
  transport::shm_view v{};
  exec::cuda ex{};
  ring_kernel<Proto, coll::all_reduce, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
  ring_kernel<Proto, coll::reduce_scatter, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
  ring_kernel<Proto, coll::reduce, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
  ring_kernel<Proto, coll::all_gather, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
  ring_kernel<Proto, coll::broadcast, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
}

template <class T, reduce_op Op>
void instantiate_all() {
  instantiate_proto<proto::simple, T, Op>();
  instantiate_proto<proto::ll, T, Op>();
  instantiate_proto<proto::ll128, T, Op>();
}

// Only implemented collectives: an algorithm's run<C> refuses the others at
// compile time.
template <class Algo, class Proto, class T, reduce_op Op, coll C>
void instantiate_if_implemented() {
  if constexpr (Algo::implements(C)) {
    transport::shm_view v{};
    exec::cuda ex{};
    algo_kernel<Algo, Proto, C, T, Op>
        <<<1, 1>>>(v, ex, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
  }
}

// Every other algorithm, every collective it implements, under every protocol.
template <class Algo, class Proto, class T, reduce_op Op>
void instantiate_algo() {
  instantiate_if_implemented<Algo, Proto, T, Op, coll::all_reduce>();
  instantiate_if_implemented<Algo, Proto, T, Op, coll::all_gather>();
  instantiate_if_implemented<Algo, Proto, T, Op, coll::reduce_scatter>();
  instantiate_if_implemented<Algo, Proto, T, Op, coll::broadcast>();
  instantiate_if_implemented<Algo, Proto, T, Op, coll::reduce>();
}

template <class Proto, class T, reduce_op Op>
void instantiate_family() {
  instantiate_algo<algo::tree, Proto, T, Op>();
  instantiate_algo<algo::rhd, Proto, T, Op>();
  instantiate_algo<algo::rabenseifner, Proto, T, Op>();
  instantiate_algo<algo::bruck, Proto, T, Op>();
  instantiate_algo<algo::nvls, Proto, T, Op>();
}

template <class T, reduce_op Op>
void instantiate_algos() {
  instantiate_family<proto::simple, T, Op>();
  instantiate_family<proto::ll, T, Op>();
  instantiate_family<proto::ll128, T, Op>();
}

}  // namespace collx::test
