// Must not compile: the codec's coder has no decode.
#include <cocod.hpp>

#include <cstddef>
#include <span>

struct Halves {
  static constexpr const char* name = "halves";
  static std::size_t encoded_bytes(std::size_t n, std::size_t) { return 2 * n; }
  template <class T>
  struct Coder {
    explicit Coder(std::size_t) {}
    void encode(std::span<T> x, std::span<std::byte>) { for (T& v : x) v = T(0); }
#ifdef COCOD_FAILTEST_OK
    void decode(std::span<const std::byte>, std::span<T> out, bool) { for (T& v : out) v = T(0); }
#endif
  };
};

int main() {
  const cocod::Compress c{.format = cocod::Compression::of<Halves>()};
  return c.active() ? 0 : 1;
}
