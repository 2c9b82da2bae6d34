// The Redis side of a fleet-wide breaker: Lua scripts that Redis runs
// atomically (SYNC here; LEASE, a probe's lease, and READ, for people and
// tests, in fleet/script_lease.hpp). They are the one home of the fleet's rules (the
// second implementation of the trip rules besides rules.hpp, tested against it with a
// real redis-server in tests/testthat/test-store-redis.R and
// tests/cpp/test_fleet.cpp).
//
// Keys of breaker `name` under `prefix` (fleet/keys.hpp's fleet_key(): a
// format version, then a hash tag holding the encoded prefix and name, so
// that Redis Cluster keeps one breaker in one slot; written K below):
//   K = cb2:{prefix:name}  hash: v the fleet state, packed (below); cfg the
//                          configuration (identity); w the fleet's window,
//                          packed (below); and per reporter (a breaker
//                          object of a process), p:<its id>, the
//                          serial of its last report applied (a retried
//                          report is not counted twice)
//   K:p:<slot>             a probe lease, holding its caller's token
//   K:h                    the health-check lease (not the scripts': one
//                          SET NX PX by the process that runs this interval's
//                          check, fleet/fleet_handle.hpp; removed with the
//                          others by breaker_store_unlink())
// Every key a script touches is declared in its KEYS (fleet/keys.hpp's
// fleet_script_keys(): K, then K:p:0 ... K:p:<half_open_max_calls - 1>),
// and one call touches the keys of one breaker only when it is given
// one breaker's: they share a hash tag, so a call per breaker is what Redis
// Cluster can run. Every key expires between 7/8 `ttl` and `ttl`
// milliseconds after the last report: a key gets its time to live when it
// is made, and the breaker's keys get it again by the first report after
// `ttl` / 8 since they last did (ex), not by every report.
//
// Why packed: a busy sync's Redis time is the script's, and most of it goes
// to moving values between Redis and Lua (each hash field read or written,
// each redis.call(), each ARGV string turned into a number) rather than to
// the rules. So a breaker's state is one string of fixed-width numbers
// (Lua's struct library, as Redis ships it), read with one HMGET together
// with cfg and w and written with one HSET; a report is one such string
// (fleet/protocol.hpp's FleetReport::append_args()), a reply another. A
// busy report costs Redis two calls (one HMGET, one HSET: its serial is a
// field of the same hash), whatever the window holds. kFleetReadScript
// unpacks a breaker's state for people and tests.
//
// v (kFleetStateFormat, 18 little-endian 64-bit integers): g generation, s
// state (State's codes: 0 closed, 1 open, 2 half-open, 3 forced open, 4
// disabled), oa opened at (ms of Redis TIME), od open duration (ms), o
// consecutive opens, cf consecutive failures, ps probe successes, wc/wf/ws
// the window's calls, failures and slow calls, tc/tf/ts/tr/to the fleet's
// totals (calls, failures, slow, rejected, times opened), ex when the keys
// last got their time to live (ms of Redis TIME; 0 never), hm
// half_open_max_calls (the lease script's slots), xc the calls cut from the
// window's oldest report (below).
//
// w: one entry per report counted (kFleetWindowEntry: Redis TIME in ms,
// calls, failures, slow calls), oldest first. A time window drops the
// entries older than its length. A count window holds window_size calls:
// it drops whole oldest entries while the rest hold enough, and cuts the
// oldest one kept down to what is left of it (xc of its calls cut), which
// then counts its share of failed and slow calls, rounded (reports of many
// calls would otherwise make the window larger than window_size). A count
// window that holds at most window_size calls has nothing to trim.
//
// The rules come with every report (its packed rules: failure_threshold
// (0 off), recovery_timeout (ms), the failure and slow rate thresholds (-1
// off), minimum_calls, the window type (0 count, 1 time), the count
// window's size, the time window's length (ms), half_open_max_calls,
// backoff_multiplier, max_recovery_timeout (ms)); they are the same for
// every report the fleet applies, because cfg, which every applied report
// matches, covers every setting.
#ifndef CIRCUITBREAKER_FLEET_SCRIPT_HPP
#define CIRCUITBREAKER_FLEET_SCRIPT_HPP

namespace circuitbreaker {

// The packed formats (Lua struct's format strings; '<' little-endian, i8 a
// signed 64-bit integer, d a double). fleet/protocol.hpp writes the report
// and reads nothing packed; the scripts below read and write the rest.
// v: g s oa od o cf ps wc wf ws tc tf ts tr to ex hm xc.
#define CIRCUITBREAKER_FLEET_STATE "<i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8i8"
// w's entries: t calls failures slow.
#define CIRCUITBREAKER_FLEET_WINDOW_ENTRY "<i8i8i8i8"
// A reply: "k", then g s open-elapsed od o cf tc tf.
#define CIRCUITBREAKER_FLEET_REPLY "<c1i8i8i8i8i8i8i8i8"
// A report: serial, known generation, calls, failures, slow, successes,
// rejected, the local run of failures, local state, tripped (0/1), open
// elapsed (ms), open duration (ms), consecutive opens, command, jitter
// factor; then the rules: failure_threshold, recovery_timeout (ms),
// failure rate, slow rate, minimum_calls, window type, window size, window
// length (ms), half_open_max_calls, backoff_multiplier,
// max_recovery_timeout (ms).
#define CIRCUITBREAKER_FLEET_REPORT \
  "<i8i8i8i8i8i8i8i8i8i8i8i8i8i8d"  \
  "di8dddi8i8i8i8di8"
inline constexpr int kFleetStateBytes = 18 * 8;
inline constexpr int kFleetWindowEntryBytes = 4 * 8;
inline constexpr int kFleetReportBytes = 26 * 8;
inline constexpr int kFleetReplyBytes = 1 + 8 * 8;
// Where half_open_max_calls is in a report (1-based, as Lua counts).
inline constexpr int kFleetReportLeaseSlotsAt = 23 * 8 + 1;
// The scripts below spell these sizes out (VB, WB, RB, and 185 in SYNC's
// check of the keys): a change of a format changes both.
static_assert(kFleetStateBytes == 144 && kFleetWindowEntryBytes == 32 &&
                  kFleetReportBytes == 208 && kFleetReportLeaseSlotsAt == 185,
              "the scripts' sizes");

#define CIRCUITBREAKER_FLEET_LUA_FORMATS           \
  "local VF = '" CIRCUITBREAKER_FLEET_STATE        \
  "'\n"                                            \
  "local WF = '" CIRCUITBREAKER_FLEET_WINDOW_ENTRY \
  "'\n"                                            \
  "local RF = '" CIRCUITBREAKER_FLEET_REPORT       \
  "'\n"                                            \
  "local YF = '" CIRCUITBREAKER_FLEET_REPLY        \
  "'\n"                                            \
  "local VB, WB, RB = 144, 32, 208\n"

// SYNC: one call per sync for the breakers of a process that have
// something to say or to learn (fleet/sync.hpp).
// KEYS: each breaker's keys in turn (fleet_script_keys(): 1 +
// half_open_max_calls of them, the number its rules give). ARGV[1] ttl (ms),
// ARGV[2] the events channel, ARGV[3] the number of values per breaker (4),
// then those values (fleet/protocol.hpp's FleetReport::append_args(), in
// that order: the reporter's id (its member's: "" for a report without
// counts), the packed report, its settled probes, cfg). Reply: one string per breaker
// (fleet/protocol.hpp's FleetReply): "k" and eight packed numbers (g, s,
// open elapsed, od, o, cf, tc, tf; CIRCUITBREAKER_FLEET_REPLY), or "cfg,<the
// fleet's cfg>" when the breaker's configuration is not the fleet's.
inline constexpr const char* kFleetSyncScript = CIRCUITBREAKER_FLEET_LUA_FORMATS R"LUA(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local channel = ARGV[2]
local F = tonumber(ARGV[3])
local nb = math.floor((#ARGV - 3) / F)
local out = {}

-- Each breaker's keys, as declared: KEYS from c on, its report giving the
-- number of lease keys (half_open_max_calls). Keys not named as
-- fleet_script_keys() names them, or a report of another size, are an
-- error before anything is written, not a guess.
local bad = 'ERR sync: KEYS do not match the reports'
if F ~= 4 or nb * F ~= #ARGV - 3 then return redis.error_reply(bad) end
local first = {}
local c = 1
for i = 1, nb do
  local pk = ARGV[3 + (i - 1) * F + 2]
  if #pk ~= RB then return redis.error_reply(bad) end
  local n = struct.unpack('<i8', pk, 185)  -- kFleetReportLeaseSlotsAt
  local k = KEYS[c]
  if n < 1 or n > 64 or not k then return redis.error_reply(bad) end
  for slot = 0, n - 1 do
    if KEYS[c + 1 + slot] ~= k .. ':p:' .. slot then return redis.error_reply(bad) end
  end
  first[i] = c
  c = c + 1 + n
end
if c ~= #KEYS + 1 then return redis.error_reply(bad) end

-- One breaker's values while its report is applied: the script's locals,
-- so that the helpers below are made once per call, not once per breaker
-- (making closures is a good part of a busy report's time in Lua).
local c, k
local serial, mygen, calls, fails, slow, succ, rej, tail, lstate, tripped, lelapsed, lopen
local lopens, cmd, jf, ft, rt, fr, sr, mc, wt, wn, wms, hm, bm, mx
-- (kept_hm: v's hm, for the lease script; this report's rules give it.)
local g, s, oa, od, o, cf, ps, wc, wf, ws, tc, tf, ts, tr, to, ex, kept_hm, xc, w
local moved

local function clear_window()
  w = ''
  wc, wf, ws, xc = 0, 0, 0, 0
end
local function clear_leases()
  for slot = 0, hm - 1 do redis.call('DEL', KEYS[c + 1 + slot]) end
end
local function move(to_state)
  s = to_state
  g = g + 1
  ps = 0
  moved = true
end
-- recovery_timeout * backoff^(opens - 1), capped, times the jitter factor
-- (rules.hpp's open_duration_for()).
local function trip(at, duration)
  move(1)
  o = o + 1
  oa = at
  if duration then
    od = duration
  else
    local d = rt
    if d > 0 and bm ~= 1 and o > 1 then d = d * bm ^ (o - 1) end
    if d > mx then d = mx end
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
-- A probe's outcome in the half-open period: a failure re-opens (for the
-- open period the prober asked, when it gave one), a success counts towards
-- closing; 'i' (ignored, released) says nothing.
local function probe_outcome(res, pod)
  if res == 'f' then
    trip(now, tonumber(pod) >= 0 and tonumber(pod) or nil)
  elseif res == 's' then
    ps = ps + 1
    if ps >= hm then close() end
  end
end

for i = 1, nb do
  c = first[i]
  k = KEYS[c]
  local b = 3 + (i - 1) * F
  local proc, probes, cfg = ARGV[b + 1], ARGV[b + 3], ARGV[b + 4]
  serial, mygen, calls, fails, slow, succ, rej, tail, lstate, tripped, lelapsed, lopen,
    lopens, cmd, jf, ft, rt, fr, sr, mc, wt, wn, wms, hm, bm, mx = struct.unpack(RF, ARGV[b + 2])
  moved = false

  -- The field of the reporter's serial (each breaker object of each
  -- process has its own id).
  local mark = proc ~= '' and serial > 0 and 'p:' .. proc
  local h = redis.call('HMGET', k, 'v', 'cfg', 'w', mark or 'p:')
  local made = false
  w = h[3] or ''
  if h[1] and #h[1] == VB then
    g, s, oa, od, o, cf, ps, wc, wf, ws, tc, tf, ts, tr, to, ex, kept_hm, xc = struct.unpack(VF, h[1])
    -- A window not made of whole entries is not this script's: empty.
    if #w % WB ~= 0 then w = ''; wc, wf, ws, xc = 0, 0, 0, 0 end
  else
    -- Absent (new, expired, or Redis restarted empty), or not this
    -- format's: rebuilt from this report, so a restart keeps the fleet's
    -- state.
    g = mygen > 0 and mygen or 1
    s, oa, od = lstate, 0, 0
    if s == 1 then oa = now - lelapsed; od = lopen end
    if s == 2 then s = 1; oa = now; od = 0 end
    o, cf, ps, wc, wf, ws, tc, tf, ts, tr, to, ex, xc = lopens, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    w = ''
    h[2] = cfg
    made = true
    mygen = g  -- the report that rebuilds the state is current
  end

  if h[2] ~= cfg then
    out[i] = 'cfg,' .. (h[2] or '')
  else
    local w0 = w
    -- The keys get their time to live again when they last did ttl / 8 ago
    -- or more (or never, or Redis's clock went back).
    local refresh = ex == 0 or now - ex >= ttl / 8 or now < ex

    -- 1. A report is applied once. Its id is the process's id and a
    -- serial: a process sends its reports of a breaker in order and builds
    -- the next only once the last was applied, so the highest serial
    -- applied per process is enough (a retry after a timeout finds it and
    -- adds nothing).
    local fresh = mark and serial > (tonumber(h[4]) or 0)

    -- 2. Manual control, fleet-wide, whatever the generation.
    if fresh and cmd ~= 0 then
      if cmd == 1 and s ~= 3 then move(3); clear_leases() end
      if cmd == 2 and s ~= 4 then move(4); clear_leases() end
      if cmd == 3 then move(0); cf, o = 0, 0; clear_window(); clear_leases() end
      if cmd == 4 and s == 1 and mygen == g then close() end
    end

    if probes ~= '' then
      -- 3. Probe results: a lease counts once (compare and delete), and
      -- only in the half-open period it was taken in.
      for slot, token, pg, res, pod in string.gmatch(probes, '(%d+):(%x+):(%d+):(%a):(%-?%d+);') do
        slot = tonumber(slot)
        local lk = slot < hm and KEYS[c + 1 + slot]
        if lk and redis.call('GET', lk) == token then
          redis.call('DEL', lk)
          if tonumber(pg) == g and s == 2 then probe_outcome(res, pod) end
        end
      end

      -- 3b. Probes a process sent on its local rules while it could not
      -- reach Redis ("L<generation>/s|f/open_ms;"), counted once with their
      -- report (not a second count of section 3's: those carry a lease, a
      -- slot and a token, and match only its pattern). One counts as a
      -- probe of the half-open period that follows the open period it was
      -- sent at the end of: the fleet still open in generation
      -- <generation> (it turns half-open now: that process saw the period
      -- end, on its copy of the fleet's times), or half-open from it
      -- (generation + 1). Else the fleet moved on, and the probe says
      -- nothing about its state.
      for lg, res, pod in string.gmatch(probes, 'L(%d+)/(%a)/(%-?%d+);') do
        lg = tonumber(lg)
        if fresh and ((s == 1 and g == lg) or (s == 2 and g == lg + 1)) then
          if s == 1 then move(2) end
          probe_outcome(res, pod)
        end
      end
    end
    -- 4. Counts. The totals take every report; the rules' counts only a
    -- report of the current generation in CLOSED (the generation fence).
    -- The window only when a rate rule reads it: without one it would cost
    -- every busy report the most of its time, for nothing.
    local windowed = fr >= 0 or sr >= 0
    if fresh then
      tc, tf, ts, tr = tc + calls, tf + fails, ts + slow, tr + rej
      if mygen == g and s == 0 and calls > 0 then
        if succ > 0 then cf = tail else cf = cf + fails end
        if windowed then
          -- A report joins the newest entry while that holds fewer than
          -- 1/32 of a count window's calls, or began less than 1/32 of a
          -- time window ago (not the oldest entry, whose share may be cut):
          -- so a window has about 32 entries however small the reports,
          -- and costs each report the same.
          local n, joined = #w, false
          if n >= 2 * WB then
            local lt, lc, lf, ls = struct.unpack(WF, w, n - WB + 1)
            if (wt == 1 and now - lt < wms / 32) or (wt ~= 1 and lc < wn / 32) then
              w = string.sub(w, 1, n - WB) .. struct.pack(WF, lt, lc + calls, lf + fails, ls + slow)
              joined = true
            end
          end
          if not joined then w = w .. struct.pack(WF, now, calls, fails, slow) end
          wc, wf, ws = wc + calls, wf + fails, ws + slow
        end
      end
    end
    -- Trim the window: a time window drops the entries older than its
    -- length; a count window keeps the newest that hold window_size calls,
    -- the oldest kept cut down to what is left of it (xc of its calls cut,
    -- its failed and slow calls in proportion, rounded).
    if s == 0 and windowed and (wt == 1 or wc > wn) then
      local pos, len = 1, #w
      while wc > 0 do
        if pos + WB - 1 > len then wc, wf, ws, xc = 0, 0, 0, 0; break end
        local et, ec, ef, es = struct.unpack(WF, w, pos)
        if ec < 1 or xc >= ec then ec, ef, es, xc = 1, 0, 0, 0 end  -- not the script's
        local left = ec - xc
        local kf, ks = ef, es
        if xc > 0 then
          kf, ks = math.floor(ef * left / ec + 0.5), math.floor(es * left / ec + 0.5)
        end
        local over = wc - wn
        if wt == 1 then
          if et > now - wms then break end
        elseif over <= 0 then
          break
        elseif over < left then
          left = left - over
          local nf, ns = math.floor(ef * left / ec + 0.5), math.floor(es * left / ec + 0.5)
          wc, wf, ws = wc - over, wf - kf + nf, ws - ks + ns
          xc = xc + over
          break
        end
        pos = pos + WB
        wc, wf, ws, xc = wc - left, wf - kf, ws - ks, 0
      end
      if pos > 1 then w = string.sub(w, pos) end
      if wc <= 0 then clear_window() end
    end

    -- 5. A local trip (this process opened on its own counts): it opens the
    -- fleet if the fleet has not moved since this process last looked; when
    -- the fleet is open already, the later open-until wins. opened_at comes
    -- from the trip itself (now - elapsed), never from an observer.
    if tripped == 1 and lstate == 1 then
      if s == 0 and mygen == g then
        trip(now - lelapsed, lopen)
      elseif s == 1 and now - lelapsed + lopen > oa + od then
        od = now - lelapsed + lopen - oa
      end
    end

    -- 6. The fleet's trip rules, on the fleet's counts (rules.hpp's
    -- should_trip()).
    if s == 0 then
      local open = ft > 0 and cf >= ft
      if not open and (fr >= 0 or sr >= 0) and wc > 0 and wc >= mc then
        open = (fr >= 0 and wf / wc >= fr) or (sr >= 0 and ws / wc >= sr)
      end
      if open then trip(now, nil) end
    end

    local v = struct.pack(VF, g, s, oa, od, o, cf, ps, wc, wf, ws, tc, tf, ts, tr, to,
      refresh and now or ex, hm, xc)
    -- One HSET of what changed: the state, and the configuration, the
    -- window and this process's serial when they did.
    if made then
      redis.call('HSET', k, 'v', v, 'cfg', cfg, 'w', w)
      if fresh then redis.call('HSET', k, mark, serial) end
    elseif fresh and w ~= w0 then
      redis.call('HSET', k, 'v', v, 'w', w, mark, serial)
    elseif fresh then
      redis.call('HSET', k, 'v', v, mark, serial)
    elseif w ~= w0 then
      redis.call('HSET', k, 'v', v, 'w', w)
    else
      redis.call('HSET', k, 'v', v)
    end
    if refresh then redis.call('PEXPIRE', k, ttl) end
    if moved then redis.call('PUBLISH', channel, k) end

    out[i] = struct.pack(YF, 'k', g, s, s == 1 and (now - oa) or 0, od, o, cf, tc, tf)
  end
end
return out
)LUA";

}  // namespace circuitbreaker

// The two other scripts, LEASE and READ, on the same formats.
#include "script_lease.hpp"

#endif  // CIRCUITBREAKER_FLEET_SCRIPT_HPP
