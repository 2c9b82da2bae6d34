// The fleet's scripts besides SYNC (fleet/script.hpp, which says what the
// keys and the packed formats are): LEASE, the fleet-wide lease of a
// half-open probe, and READ, a breaker's fleet state as text. Included at
// the end of script.hpp, whose format macros they use.
#ifndef CIRCUITBREAKER_FLEET_SCRIPT_LEASE_HPP
#define CIRCUITBREAKER_FLEET_SCRIPT_LEASE_HPP

#include "script.hpp"

namespace circuitbreaker {

// LEASE: a fleet-wide probe. KEYS[1] the breaker's hash key, then its lease
// keys K:p:0 ... (fleet_lease_keys()). ARGV[1] the caller's token, ARGV[2]
// the lease (ms), ARGV[3] the events channel.
// Moves an open fleet whose open period is over to half-open. Reply:
// {'probe', g, slot} when a lease was taken; {'full', g, ms until the
// earliest lease expires}; {'state', g, s, open elapsed ms, open ms, opens,
// failures} when the fleet is not half-open; {'absent'} when the breaker has
// no fleet state (the next sync rebuilds it).
inline constexpr const char* kFleetLeaseScript = CIRCUITBREAKER_FLEET_LUA_FORMATS R"LUA(
local k = KEYS[1]
for slot = 0, #KEYS - 2 do
  if KEYS[2 + slot] ~= k .. ':p:' .. slot then
    return redis.error_reply('ERR lease: KEYS must be the breaker and its lease keys')
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local packed = redis.call('HGET', k, 'v')
if not packed or #packed ~= VB then return {'absent'} end
local v = {struct.unpack(VF, packed)}
local g, s, oa, od, o, cf, ps, hm = v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[17]
if s == 1 and now - oa > od then
  s = 2
  g = g + 1
  ps = 0
  v[1], v[2], v[7] = g, s, ps
  redis.call('HSET', k, 'v', struct.pack(VF, unpack(v, 1, 18)))
  redis.call('PUBLISH', ARGV[3], k)
end
if s ~= 2 then
  return {'state', string.format('%.0f', g), tostring(s), string.format('%.0f', s == 1 and now - oa or 0),
          string.format('%.0f', od), string.format('%.0f', o), string.format('%.0f', cf)}
end
-- A caller whose configuration is not the fleet's declares fewer lease
-- keys than the fleet has slots: it gets no lease (its breaker is refused
-- by the next sync anyway).
if #KEYS - 1 < hm then return {'full', string.format('%.0f', g), '-1'} end
local live, free, wait = 0, nil, nil
for slot = 0, hm - 1 do
  local pt = redis.call('PTTL', KEYS[2 + slot])
  if pt == -2 then
    if not free then free = slot end
  else
    live = live + 1
    if pt >= 0 and (not wait or pt < wait) then wait = pt end
  end
end
if free and live + ps < hm then
  redis.call('SET', KEYS[2 + free], ARGV[1], 'PX', tonumber(ARGV[2]))
  return {'probe', string.format('%.0f', g), tostring(free)}
end
return {'full', string.format('%.0f', g), tostring(wait or -1)}
)LUA";

// READ: a breaker's fleet state as people read it (and tests: the scripts
// are its only writers). KEYS[1] the breaker's hash key; ARGV[1], when
// given, one field's name. Reply: that field's value, or every field and
// its value (v's, then cfg and n, the window's entries), as text; nil when
// the breaker has no state of this format.
inline constexpr const char* kFleetReadScript = CIRCUITBREAKER_FLEET_LUA_FORMATS R"LUA(
local h = redis.call('HMGET', KEYS[1], 'v', 'cfg', 'w')
if not h[1] or #h[1] ~= VB then return nil end
local names = {'g', 's', 'oa', 'od', 'o', 'cf', 'ps', 'wc', 'wf', 'ws', 'tc', 'tf', 'ts', 'tr',
               'to', 'ex', 'hm', 'xc'}
local v = {struct.unpack(VF, h[1])}
local out = {}
for i, name in ipairs(names) do
  out[#out + 1] = name
  out[#out + 1] = string.format('%.0f', v[i])
end
out[#out + 1] = 'cfg'
out[#out + 1] = h[2] or ''
out[#out + 1] = 'n'
out[#out + 1] = tostring(math.floor(#(h[3] or '') / WB))
if ARGV[1] then
  for i = 1, #out, 2 do
    if out[i] == ARGV[1] then return out[i + 1] end
  end
  return nil
end
return out
)LUA";

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_SCRIPT_LEASE_HPP
