// A hiredis reply copied into a RedisValue (reply_value.hpp), so that the
// parsers of structured replies (cluster_reply.hpp) never read hiredis's
// structures. Only with hiredis (CIRCUITBREAKER_HAVE_HIREDIS); empty
// otherwise. Handles hiredis 0.14 (RESP2) and 1.x (RESP3 types, when its
// headers define them).
//
// The copy is bounded: nesting deeper than kMaxReplyDepth, or more than
// kMaxReplyElements elements in all, is refused (a reply is untrusted, and
// no reply this package reads comes near either bound).
#ifndef CIRCUITBREAKER_REDIS_REPLY_VALUE_HIREDIS_HPP
#define CIRCUITBREAKER_REDIS_REPLY_VALUE_HIREDIS_HPP

#ifdef CIRCUITBREAKER_HAVE_HIREDIS

#include <hiredis/hiredis.h>

#include <cstddef>
#include <string>

#include "reply_value.hpp"

namespace circuitbreaker {

inline constexpr int kMaxReplyDepth = 8;
inline constexpr std::size_t kMaxReplyElements = 1u << 20;

namespace reply_value_detail {

inline bool copy(const redisReply* r, RedisValue& out, int depth, std::size_t& budget) {
  if (r == nullptr || depth > kMaxReplyDepth) return false;
  out = RedisValue{};
  const auto text = [&] {
    return r->str == nullptr ? std::string() : std::string(r->str, r->len);
  };
  switch (r->type) {
    case REDIS_REPLY_NIL: out.kind = RedisValue::Kind::kNil; return true;
    case REDIS_REPLY_INTEGER:
      out.kind = RedisValue::Kind::kInteger;
      out.integer = r->integer;
      return true;
    case REDIS_REPLY_STATUS:
      out.kind = RedisValue::Kind::kString;
      out.status = true;
      out.str = text();
      return true;
    case REDIS_REPLY_STRING:
#ifdef REDIS_REPLY_VERB
    case REDIS_REPLY_VERB:
#endif
      out.kind = RedisValue::Kind::kString;
      out.str = text();
      return true;
    case REDIS_REPLY_ERROR:
      out.kind = RedisValue::Kind::kError;
      out.str = text();
      return true;
    case REDIS_REPLY_ARRAY:
#ifdef REDIS_REPLY_SET
    case REDIS_REPLY_SET:
#endif
#ifdef REDIS_REPLY_MAP
    case REDIS_REPLY_MAP:
#endif
    {
      bool is_map = false;
#ifdef REDIS_REPLY_MAP
      is_map = r->type == REDIS_REPLY_MAP;
#endif
      out.kind = is_map ? RedisValue::Kind::kMap : RedisValue::Kind::kArray;
      if (r->elements > budget || (r->elements > 0 && r->element == nullptr))
        return false;
      budget -= r->elements;
      out.elements.resize(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) {
        if (!copy(r->element[i], out.elements[i], depth + 1, budget)) return false;
      }
      return true;
    }
    default:
      out.kind = RedisValue::Kind::kOther;
      out.str = text();
      return true;
  }
}

}  // namespace reply_value_detail

// Copies `reply` into `out`; false (and `out` means nothing) when it is
// null or beyond the bounds above.
inline bool reply_value_from_hiredis(const redisReply* reply, RedisValue& out) {
  std::size_t budget = kMaxReplyElements;
  if (reply_value_detail::copy(reply, out, 0, budget)) return true;
  out = RedisValue{};
  return false;
}

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_HAVE_HIREDIS

#endif  // CIRCUITBREAKER_REDIS_REPLY_VALUE_HIREDIS_HPP
