// Which Redis Cluster slot a key belongs to: the rule every cluster node
// applies (Redis Cluster specification, "Keys distribution model"), so that
// a client sends a command to the node that owns its keys.
//
//   slot = CRC16(hashed part of the key) mod 16384
//
// CRC16 is the CCITT variant that Redis calls XMODEM: polynomial 0x1021,
// initial value 0, no reflection, no final xor (CRC16("123456789") = 0x31C3).
// The hashed part is the key's hash tag when it has one: the bytes between
// the first '{' and the first '}' after it, if there is at least one byte
// between them; otherwise the whole key. So "{user}.a" and "{user}.b" share
// a slot, "foo{}{bar}" hashes whole (the first tag is empty) and
// "foo{{bar}}zap" hashes "{bar".
//
// Pure and independent of hiredis; no allocation.
#ifndef CIRCUITBREAKER_REDIS_KEY_SLOT_HPP
#define CIRCUITBREAKER_REDIS_KEY_SLOT_HPP

#include <array>
#include <cstdint>
#include <string_view>

namespace circuitbreaker {

// The number of hash slots of a Redis Cluster (fixed by the protocol).
inline constexpr std::uint16_t kClusterSlots = 16384;

namespace key_slot_detail {

// The CRC of every byte value, computed once at compile time (MSB first).
constexpr std::array<std::uint16_t, 256> crc16_table() {
  std::array<std::uint16_t, 256> table{};
  for (unsigned byte = 0; byte < 256; ++byte) {
    unsigned crc = byte << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000u) ? ((crc << 1) ^ 0x1021u) : (crc << 1);
    }
    table[byte] = static_cast<std::uint16_t>(crc & 0xFFFFu);
  }
  return table;
}

inline constexpr std::array<std::uint16_t, 256> kCrc16Table = crc16_table();

}  // namespace key_slot_detail

// CRC16-CCITT (XMODEM) of `data`, as Redis computes it.
inline std::uint16_t crc16_xmodem(std::string_view data) noexcept {
  unsigned crc = 0;
  for (const char ch : data) {
    const unsigned byte = static_cast<unsigned char>(ch);
    crc = ((crc << 8) ^ key_slot_detail::kCrc16Table[((crc >> 8) ^ byte) & 0xFFu]) &
          0xFFFFu;
  }
  return static_cast<std::uint16_t>(crc);
}

// The part of `key` that decides its slot: the hash tag, or the whole key.
// A view into `key`.
inline std::string_view cluster_hash_part(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const std::size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

// The slot of `key`, in [0, kClusterSlots).
inline std::uint16_t cluster_key_slot(std::string_view key) noexcept {
  return static_cast<std::uint16_t>(crc16_xmodem(cluster_hash_part(key)) &
                                    (kClusterSlots - 1));
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_REDIS_KEY_SLOT_HPP
