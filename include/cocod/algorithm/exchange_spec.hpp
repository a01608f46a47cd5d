#pragma once
// How an algorithm sizes an exchange (Operations::prepare): its name, its model part, and the
// strategies it takes (plain or compressed, whole or in pieces).
#include <cstddef>
#include <string>

#include "cocod/family/compress.hpp"

namespace cocod {

/// How Operations::prepare sizes an exchange. A misuse is a std::logic_error naming the exchange
/// and the field.
struct ExchangeSpec {
  std::string name = "exchange";  ///< its section in a checkpoint ("exchange.<name>"): one per exchange
  std::size_t size = 0;           ///< parameters in its model part (with pieces: the largest piece)
  Compress compress = {};         ///< what it sends: the model part itself (none), or its deviation, compressed
  std::size_t model = 0;          ///< the model's parameter count, which its pieces' offsets index (0: size);
                                  ///< a compressed exchange keeps a residual per parameter of it
  std::size_t pieces = 1;         ///< > 1: it exchanges one of `pieces` fragments at a time (Exchange::use)
  bool in_flight_between_rounds = false;  ///< its collective may be in flight when a round ends
  bool scratch = false;   ///< its model part is no run state between rounds (a checkpoint saves none of it)
};

}  // namespace cocod
