// The Redis side of a fleet-wide breaker: two Lua scripts that Redis runs
// atomically. They are the one home of the fleet's rules (the second
// implementation of the trip rules besides rules.hpp, tested against it with a
// real redis-server in tests/testthat/test-store-redis.R and
// tests/cpp/test_fleet.cpp).
//
// Keys of breaker `name` under `prefix` (redis/keys.hpp's fleet_key(): a
// format version, then a hash tag holding the encoded prefix and name, so
// that Redis Cluster keeps one breaker in one slot; written K below):
//   K = cb1:{prefix:name}  hash: the fleet state (fields below)
//   K:w                    list: the fleet's window, one "t,calls,failures,slow"
//                          entry per report (a count window's oldest entry is
//                          cut down so that it holds window_size calls)
//   K:b                    hash: per process, the serial of the last report
//                          applied (a retried report is not counted twice)
//   K:p:<slot>             a probe lease, holding its caller's token
//   K:h                    the health-check lease (not the scripts': one
//                          SET NX PX by the process that runs this interval's
//                          check, redis/fleet_handle.hpp; removed with the
//                          others by breaker_store_unlink())
// Every key a script touches is declared in its KEYS (redis/keys.hpp's
// fleet_script_keys(): K, K:w, K:b, then K:p:0 ... K:p:<half_open_max_calls
// - 1>), and one call touches the keys of one breaker only when it is given
// one breaker's: they share a hash tag, so a call per breaker is what Redis
// Cluster can run. Every key expires between 7/8 `ttl` and `ttl`
// milliseconds after the last report: a key gets its time to live when it
// is made, and all of a breaker's keys get it again by the first report
// after `ttl` / 8 since they last did (field ex), not by every report (three
// PEXPIREs per breaker per sync were a fifth of a busy sync's Redis time).
//
// Hash fields: g generation, s state (State's codes: 0 closed, 1 open,
// 2 half-open, 3 forced open, 4 disabled), oa opened at (ms of Redis TIME),
// od open duration (ms), o consecutive opens, cf consecutive failures,
// ps probe successes, wc/wf/ws the window's calls, failures and slow calls,
// tc/tf/ts/tr/to the fleet's totals (calls, failures, slow, rejected, times
// opened), cfg the configuration (identity), and the rules: ft
// failure_threshold (0 off), rt recovery_timeout (ms), fr / sr the failure and
// slow rate thresholds (-1 off), mc minimum_calls, wt window type (0 count,
// 1 time), wn count window size, wms time window length (ms), hm
// half_open_max_calls, bm backoff_multiplier, mx max_recovery_timeout (ms);
// ex when the keys last got their time to live (ms of Redis TIME). The
// rules are written when the state is made, for every version's reading;
// this version takes them from the report (its csv), which says the same
// whenever the reporter's cfg is the one kept (cfg covers every setting).
#ifndef CIRCUITBREAKER_FLEET_SCRIPT_HPP
#define CIRCUITBREAKER_FLEET_SCRIPT_HPP

namespace circuitbreaker {

// SYNC: one call per sync for the breakers of a process that have
// something to say or to learn (redis/sync.hpp).
// KEYS: each breaker's keys in turn (fleet_script_keys(): 3 +
// half_open_max_calls of them, the number its rules give). ARGV[1] ttl (ms),
// ARGV[2] the events channel, ARGV[3] the number of values per breaker, then
// those values (fleet/protocol.hpp's FleetReport::append_args(), in that
// order). Reply: ten values per breaker (fleet/protocol.hpp's FleetReply).
inline constexpr const char* kFleetSyncScript = R"LUA(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local channel = ARGV[2]
local F = tonumber(ARGV[3])
local out = {}

-- Each breaker's keys, as declared: KEYS from c on, its rules' csv giving
-- the number of lease keys (half_open_max_calls, the ninth value). Keys not
-- named as fleet_script_keys() names them are an error, not a guess.
local groups = {}
local c = 1
for i = 1, math.floor((#ARGV - 3) / F) do
  local r = {}
  for v in string.gmatch(ARGV[3 + i * F], '[^,]+') do r[#r + 1] = tonumber(v) end
  local n = r[9]
  local k = KEYS[c]
  if #r ~= 11 or not n or not k or KEYS[c + 1] ~= k .. ':w' or KEYS[c + 2] ~= k .. ':b' then
    return redis.error_reply('ERR sync: KEYS do not match the reports')
  end
  local lease = {}
  for slot = 0, n - 1 do
    lease[slot] = KEYS[c + 3 + slot]
    if lease[slot] ~= k .. ':p:' .. slot then
      return redis.error_reply('ERR sync: KEYS do not match the reports')
    end
  end
  groups[i] = {k = k, w = KEYS[c + 1], b = KEYS[c + 2], p = lease, n = n,
               R = {ft = r[1], rt = r[2], fr = r[3], sr = r[4], mc = r[5], wt = r[6], wn = r[7],
                    wms = r[8], hm = r[9], bm = r[10], mx = r[11]}}
  c = c + 3 + n
end
if c ~= #KEYS + 1 then return redis.error_reply('ERR sync: KEYS do not match the reports') end

-- A breaker's hash is read with one HMGET of these fields (its state, its
-- configuration, its totals, when its keys last got their time to live),
-- and written back with one HSET: each redis.call() costs microseconds of
-- its own, so the fewer per breaker, the less Redis a busy sync costs.
local FIELDS = {'g', 's', 'oa', 'od', 'o', 'cf', 'ps', 'wc', 'wf', 'ws', 'cfg',
                'tc', 'tf', 'ts', 'tr', 'to', 'ex'}
-- Counts as Redis keeps them (tostring() would write 1e+15).
local function count(x) return string.format('%.0f', x) end

for i, grp in ipairs(groups) do
  local k = grp.k
  local b = 3 + (i - 1) * F
  local a = function(j) return ARGV[b + j] end
  local id, mygen = a(1), tonumber(a(2))
  local calls, fails, slow, succ, rej = tonumber(a(3)), tonumber(a(4)), tonumber(a(5)),
    tonumber(a(6)), tonumber(a(7))
  local tail, lstate, tripped = tonumber(a(8)), tonumber(a(9)), a(10) == '1'
  local lelapsed, lopen, lopens = tonumber(a(11)), tonumber(a(12)), tonumber(a(13))
  local cmd, probes, cfg, jf = tonumber(a(14)), a(15), a(16), tonumber(a(17))
  local rules_csv = a(18)
  local status = 'ok'
  local moved = false

  local h = redis.call('HMGET', k, unpack(FIELDS))
  if not h[1] then
    -- Absent (new, expired, or Redis restarted empty): rebuilt from this
    -- report, so a restart keeps the fleet's state.
    local r = {}
    for v in string.gmatch(rules_csv, '[^,]+') do r[#r + 1] = v end
    local g0 = mygen > 0 and mygen or 1
    local s0, oa0, od0 = lstate, 0, 0
    if s0 == 1 then oa0 = now - lelapsed; od0 = lopen end
    if s0 == 2 then s0 = 1; oa0 = now; od0 = 0 end
    redis.call('HSET', k, 'g', g0, 's', s0, 'oa', oa0, 'od', od0, 'o', lopens, 'cf', 0, 'ps', 0,
      'wc', 0, 'wf', 0, 'ws', 0, 'tc', 0, 'tf', 0, 'ts', 0, 'tr', 0, 'to', 0, 'cfg', cfg,
      'ft', r[1], 'rt', r[2], 'fr', r[3], 'sr', r[4], 'mc', r[5], 'wt', r[6], 'wn', r[7],
      'wms', r[8], 'hm', r[9], 'bm', r[10], 'mx', r[11])
    redis.call('DEL', grp.w)
    h = {g0, s0, oa0, od0, lopens, 0, 0, 0, 0, 0, cfg, 0, 0, 0, 0, 0}  -- ex: nil, set below
    mygen = g0  -- the report that rebuilds the state is current
  end

  if h[11] ~= cfg then
    out[#out + 1] = 'cfg'
    for j = 2, 9 do out[#out + 1] = '0' end
    out[#out + 1] = h[11] or ''
  else
    local g, s, oa, od, o, cf, ps = tonumber(h[1]), tonumber(h[2]), tonumber(h[3]),
      tonumber(h[4]), tonumber(h[5]), tonumber(h[6]), tonumber(h[7])
    local wc, wf, ws = tonumber(h[8]), tonumber(h[9]), tonumber(h[10])
    local tc, tf, ts, tr, to = tonumber(h[12]) or 0, tonumber(h[13]) or 0,
      tonumber(h[14]) or 0, tonumber(h[15]) or 0, tonumber(h[16]) or 0
    local R = grp.R
    local wkey = grp.w
    -- The keys get their time to live again when they last did ttl / 8 ago
    -- or more (or never, or Redis's clock went back); keys made meanwhile
    -- get it as they are made (RPUSH of a new window, a new process's serial).
    local ex = tonumber(h[17])
    local refresh = not ex or now - ex >= ttl / 8 or now < ex

    local function clear_window()
      redis.call('DEL', wkey)
      wc, wf, ws = 0, 0, 0
    end
    local function clear_leases()
      for slot = 0, math.min(R.hm, grp.n) - 1 do redis.call('DEL', grp.p[slot]) end
    end
    local function move(to)
      s = to
      g = g + 1
      ps = 0
      moved = true
    end
    -- recovery_timeout * backoff^(opens - 1), capped, times the jitter
    -- factor (rules.hpp's open_duration_for()).
    local function trip(at, duration)
      move(1)
      o = o + 1
      oa = at
      if duration then
        od = duration
      else
        local d = R.rt
        if d > 0 and R.bm ~= 1 and o > 1 then d = d * R.bm ^ (o - 1) end
        if d > R.mx then d = R.mx end
        od = math.floor(d * jf + 0.5)
      end
      to = to + 1
      clear_leases()
    end
    local function close()
      move(0)
      cf, o = 0, 0
      clear_window()
      clear_leases()
    end

    -- 1. A report is applied once. Its id is "<process>.<serial>": a process
    -- sends its reports of a breaker in order and builds the next only once
    -- the last was applied, so the highest serial applied per process is
    -- enough (a retry after a timeout finds it and adds nothing).
    local fresh = false
    if id ~= '' then
      local proc, serial = string.match(id, '^(.*)%.(%d+)$')
      serial = tonumber(serial)
      if proc and serial then
        local seen = tonumber(redis.call('HGET', grp.b, proc)) or 0
        if serial > seen then
          if redis.call('HSET', grp.b, proc, serial) == 1 and not refresh then
            redis.call('PEXPIRE', grp.b, ttl)
          end
          fresh = true
        end
      end
    end

    -- 2. Manual control, fleet-wide, whatever the generation.
    if fresh and cmd == 1 and s ~= 3 then move(3); clear_leases() end
    if fresh and cmd == 2 and s ~= 4 then move(4); clear_leases() end
    if fresh and cmd == 3 then move(0); cf, o = 0, 0; clear_window(); clear_leases() end
    if fresh and cmd == 4 and s == 1 and mygen == g then close() end

    -- A probe's outcome in the half-open period: a failure re-opens (for
    -- the open period the prober asked, when it gave one), a success
    -- counts towards closing; 'i' (ignored, released) says nothing.
    local function probe_outcome(res, pod)
      if res == 'f' then
        trip(now, tonumber(pod) >= 0 and tonumber(pod) or nil)
      elseif res == 's' then
        ps = ps + 1
        if ps >= R.hm then close() end
      end
    end

    -- 3. Probe results: a lease counts once (compare and delete), and only
    -- in the half-open period it was taken in.
    for slot, token, pg, res, pod in string.gmatch(probes, '(%d+):(%x+):(%d+):(%a):(%-?%d+);') do
      local lk = grp.p[tonumber(slot)]
      if lk and redis.call('GET', lk) == token then
        redis.call('DEL', lk)
        if tonumber(pg) == g and s == 2 then probe_outcome(res, pod) end
      end
    end

    -- 3b. Probes a process sent on its local rules while it could not
    -- reach Redis ("L<generation>/s|f/open_ms;"), counted once with their
    -- report (not a second count of section 3's: those carry a lease, a
    -- slot and a token, and match only its pattern). One counts as a probe
    -- of the half-open period that follows the open period it was sent at
    -- the end of: the fleet still open in generation <generation> (it turns
    -- half-open now: that process saw the period end, on its copy of the
    -- fleet's times), or half-open from it (generation + 1). Else the fleet
    -- moved on, and the probe says nothing about its state.
    for lg, res, pod in string.gmatch(probes, 'L(%d+)/(%a)/(%-?%d+);') do
      lg = tonumber(lg)
      if fresh and ((s == 1 and g == lg) or (s == 2 and g == lg + 1)) then
        if s == 1 then move(2) end
        probe_outcome(res, pod)
      end
    end

    -- 4. Counts. The totals take every report; the rules' counts only a
    -- report of the current generation in CLOSED (the generation fence).
    if fresh then
      tc, tf, ts, tr = tc + calls, tf + fails, ts + slow, tr + rej
      if mygen == g and s == 0 and calls > 0 then
        if succ > 0 then cf = tail else cf = cf + fails end
        if redis.call('RPUSH', wkey, now .. ',' .. calls .. ',' .. fails .. ',' .. slow) == 1 and
            not refresh then
          redis.call('PEXPIRE', wkey, ttl)
        end
        wc, wf, ws = wc + calls, wf + fails, ws + slow
      end
    end
    -- Trim the window: a count window keeps the newest reports that hold
    -- window_size calls; a time window the reports of its length. A count
    -- window that holds at most window_size calls has nothing to trim.
    if s == 0 and (R.wt == 1 or wc > R.wn) then
      while wc > 0 do
        local first = redis.call('LINDEX', wkey, 0)
        if not first then wc, wf, ws = 0, 0, 0; break end
        local ft, fc, ff, fs = string.match(first, '(%-?%d+),(%d+),(%d+),(%d+)')
        ft, fc, ff, fs = tonumber(ft), tonumber(fc), tonumber(ff), tonumber(fs)
        local drop
        if R.wt == 1 then drop = ft <= now - R.wms else drop = wc - fc >= R.wn end
        if not drop then break end
        redis.call('LPOP', wkey)
        wc, wf, ws = wc - fc, wf - ff, ws - fs
      end
      -- A count window holds window_size calls: the oldest report kept is cut
      -- down to what is left of it, keeping its shares of failed and slow
      -- calls (reports of many calls would otherwise make the window
      -- larger than window_size).
      if R.wt ~= 1 and wc > R.wn then
        local first = redis.call('LINDEX', wkey, 0)
        local ft, fc, ff, fs = string.match(first, '(%-?%d+),(%d+),(%d+),(%d+)')
        fc, ff, fs = tonumber(fc), tonumber(ff), tonumber(fs)
        local keep = fc - (wc - R.wn)
        local kf = math.floor(ff * keep / fc + 0.5)
        local ks = math.floor(fs * keep / fc + 0.5)
        redis.call('LSET', wkey, 0, ft .. ',' .. keep .. ',' .. kf .. ',' .. ks)
        wc, wf, ws = wc - fc + keep, wf - ff + kf, ws - fs + ks
      end
    end

    -- 5. A local trip (this process opened on its own counts): it opens the
    -- fleet if the fleet has not moved since this process last looked; when
    -- the fleet is open already, the later open-until wins. opened_at comes
    -- from the trip itself (now - elapsed), never from an observer.
    if tripped and lstate == 1 then
      if s == 0 and mygen == g then
        trip(now - lelapsed, lopen)
      elseif s == 1 and now - lelapsed + lopen > oa + od then
        od = now - lelapsed + lopen - oa
      end
    end

    -- 6. The fleet's trip rules, on the fleet's counts (rules.hpp's
    -- should_trip()).
    if s == 0 then
      local open = R.ft > 0 and cf >= R.ft
      if not open and (R.fr >= 0 or R.sr >= 0) and wc > 0 and wc >= R.mc then
        open = (R.fr >= 0 and wf / wc >= R.fr) or (R.sr >= 0 and ws / wc >= R.sr)
      end
      if open then trip(now, nil) end
    end

    redis.call('HSET', k, 'g', g, 's', s, 'oa', oa, 'od', od, 'o', o, 'cf', cf, 'ps', ps,
      'wc', wc, 'wf', wf, 'ws', ws, 'tc', count(tc), 'tf', count(tf), 'ts', count(ts),
      'tr', count(tr), 'to', count(to), 'ex', refresh and now or ex)
    if refresh then
      redis.call('PEXPIRE', k, ttl)
      redis.call('PEXPIRE', wkey, ttl)
      redis.call('PEXPIRE', grp.b, ttl)
    end
    if moved then redis.call('PUBLISH', channel, k) end

    out[#out + 1] = status
    out[#out + 1] = tostring(g)
    out[#out + 1] = tostring(s)
    out[#out + 1] = tostring(s == 1 and (now - oa) or 0)
    out[#out + 1] = tostring(od)
    out[#out + 1] = tostring(o)
    out[#out + 1] = tostring(cf)
    out[#out + 1] = count(tc)
    out[#out + 1] = count(tf)
    out[#out + 1] = ''
  end
end
return out
)LUA";

// LEASE: a fleet-wide probe. KEYS[1] the breaker's hash key, then its lease
// keys K:p:0 ... (fleet_lease_keys()). ARGV[1] the caller's token, ARGV[2]
// the lease (ms), ARGV[3] the events channel.
// Moves an open fleet whose open period is over to half-open. Reply:
// {'probe', g, slot} when a lease was taken; {'full', g, ms until the
// earliest lease expires}; {'state', g, s, open elapsed ms, open ms, opens,
// failures} when the fleet is not half-open; {'absent'} when the breaker has
// no fleet state (the next sync rebuilds it).
inline constexpr const char* kFleetLeaseScript = R"LUA(
local k = KEYS[1]
for slot = 0, #KEYS - 2 do
  if KEYS[2 + slot] ~= k .. ':p:' .. slot then
    return redis.error_reply('ERR lease: KEYS must be the breaker and its lease keys')
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', k, 'g', 's', 'oa', 'od', 'o', 'cf', 'ps', 'hm')
if not h[1] then return {'absent'} end
local g, s, oa, od, o, cf, ps, hm = tonumber(h[1]), tonumber(h[2]), tonumber(h[3]),
  tonumber(h[4]), tonumber(h[5]), tonumber(h[6]), tonumber(h[7]), tonumber(h[8])
if s == 1 and now - oa > od then
  s = 2
  g = g + 1
  ps = 0
  redis.call('HSET', k, 's', 2, 'g', g, 'ps', 0)
  redis.call('PUBLISH', ARGV[3], k)
end
if s ~= 2 then
  return {'state', tostring(g), tostring(s), tostring(s == 1 and now - oa or 0), tostring(od),
          tostring(o), tostring(cf)}
end
-- A caller whose configuration is not the fleet's declares fewer lease
-- keys than the fleet has slots: it gets no lease (its breaker is refused
-- by the next sync anyway).
if #KEYS - 1 < hm then return {'full', tostring(g), '-1'} end
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
  return {'probe', tostring(g), tostring(free)}
end
return {'full', tostring(g), tostring(wait or -1)}
)LUA";

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_SCRIPT_HPP
