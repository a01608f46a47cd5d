#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/rendezvous/detail/table.hpp is internal: include <cocod/rendezvous/store_server.hpp>"
#endif
// The values a store server holds: keys and values, the bytes they take against a quota, and a
// version that counts every change. Not synchronized: its owner's lock guards it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cocod::rendezvous::tcp {

class Table {
 public:
  using Values = std::map<std::string, std::vector<char>>;

  explicit Table(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  [[nodiscard]] const Values& values() const noexcept { return values_; }
  /// The value of `key`, or null.
  [[nodiscard]] const std::vector<char>* find(const std::string& key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] bool contains(const std::string& key) const { return values_.count(key) > 0; }
  /// Whether `key` may hold a value of `bytes` within the quota (its current value given back).
  [[nodiscard]] bool fits(const std::string& key, std::size_t bytes) const {
    const auto* old = find(key);
    const std::size_t held = old ? key.size() + old->size() : 0;
    return bytes_ - held + key.size() + bytes <= max_bytes_;
  }
  /// Sets a value, counting the bytes held (the quota is the caller's to check: fits()).
  void set(const std::string& key, std::vector<char> value) {
    auto [it, added] = values_.try_emplace(key);
    bytes_ -= added ? 0 : key.size() + it->second.size();
    bytes_ += key.size() + value.size();
    it->second = std::move(value);
    ++version_;
  }
  /// Every key that begins with `prefix`, with its value.
  [[nodiscard]] Values with_prefix(const std::string& prefix) const {
    Values out;
    for (auto it = values_.lower_bound(prefix); it != values_.end() && starts(it->first, prefix); ++it) out.insert(*it);
    return out;
  }
  /// Forgets every key that begins with `prefix`; how many it forgot.
  std::size_t erase_prefix(const std::string& prefix) {
    std::size_t erased = 0;
    for (auto it = values_.lower_bound(prefix); it != values_.end() && starts(it->first, prefix); ++erased) {
      bytes_ -= it->first.size() + it->second.size();
      it = values_.erase(it);
    }
    return erased;
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] std::size_t max_bytes() const noexcept { return max_bytes_; }
  [[nodiscard]] std::uint64_t version() const noexcept { return version_; }

 private:
  static bool starts(const std::string& key, const std::string& prefix) { return key.compare(0, prefix.size(), prefix) == 0; }

  Values values_;
  std::size_t bytes_ = 0;
  std::uint64_t version_ = 0;
  std::size_t max_bytes_;
};

}  // namespace cocod::rendezvous::tcp
