#pragma once
// The compressed exchange's settings: what a model-averaging algorithm sends (docs/algorithm.md,
// compressed exchange with error feedback).
#include <cstddef>

#include "cocod/comm/communicator.hpp"
#include "cocod/compress/format.hpp"
#include "cocod/errors.hpp"

namespace cocod {

/// The encoding of what Local-SGD, CoCoD-SGD and Overlap-Local-SGD send. With any format but
/// none every worker sends its weighted deviation from the outer model with error feedback,
/// and every worker decodes the same bytes: the consensus stays the same bits on all of them.
///
/// | field  | meaning                                                        | default |
/// |--------|----------------------------------------------------------------|---------|
/// | format | none (the model itself), bf16, fp16, int8 or a codec's own     | none    |
/// | block  | elements per fp32 scale (fp16, int8; >= 1)                     | 256     |
struct Compress {
  Compression format = Compression::none;
  std::size_t block = 256;

  /// The name in messages and checkpoints.
  static constexpr const char* name = "Compress";
  /// Throws std::invalid_argument naming the field that breaks its rule.
  void validate() const {
    if (block == 0) invalid_setting("cocod::Compress", "block", "must be >= 1", block);
  }
  /// Throws std::invalid_argument when a communicator of type Comm cannot run it: compression
  /// needs byte collectives.
  template <class Comm>
  void check_communicator() const {
    if (active() && !comm::ByteCollectives<Comm>)
      invalid_setting("cocod::Compress", "format",
                      "needs a communicator with byte collectives in host memory (all_to_all_async, all_gather_async: "
                      "comm::Local, Threads, Mpi and Gloo have them, and Throttled and Grouped of one that has them)",
                      compress::name(format));
  }
  [[nodiscard]] bool active() const noexcept { return format.active(); }
  /// The fields a resumed run must share with the saved one (the codec by its id).
  template <class Archive>
  void serialize(Archive& a) {
    compress::Id id = compress::id_of(format);
    a("format", id);
    if (id != compress::id_of(format))  // (a saved value read back: a built-in codec's, else unchanged)
      for (const Compression c : compress::builtin)
        if (compress::id_of(c) == id) format = c;
    a("block", block);
  }
};

/// "none", "bf16", "fp16", "int8".
[[nodiscard]] inline const char* to_string(Compression c) noexcept { return compress::name(c); }

}  // namespace cocod
