#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/run_checks.hpp is internal: include <cocod.hpp>"
#endif
// The checks of an algorithm's Model and Comm where a user names the algorithm: each mistake
// gets one message that says what is wrong and how to fix it.
#include "cocod/comm/communicator.hpp"
#include "cocod/model/concepts.hpp"

namespace cocod::detail {

template <class Model, class Comm>
struct RunChecks {
  static_assert(check_model<Model>(), "see the cocod::Model message above");
  static_assert(comm::Communicator<Comm>,
                "cocod: Comm must satisfy cocod::comm::Communicator (rank, size, broadcast, "
                "all_reduce, all_reduce_async for float and double)");
  static_assert(requires(Comm& c, span_of_t<Model> s) {
    c.broadcast(s, 0);
    c.all_reduce(s);
    c.all_reduce_async(s);
  }, "cocod: Comm cannot move buffers of this model's backend (device parameters need a communicator with "
     "device_span overloads, such as comm::Threads with <cocod/backend/cuda.hpp>)");
};

}  // namespace cocod::detail
