// The identity of a configuration (config_identity.hpp), the one rule both
// sharing stores apply: its values, equality, first difference, hash,
// fingerprint and the text of a value; and that the host store's segment and
// the fleet's member both answer with it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include <circuitbreaker/circuitbreaker.hpp>
#include <circuitbreaker/fleet/member.hpp>

namespace cb = circuitbreaker;
using cb::Config;

namespace {

int at(const char* name) {
  const cb::FieldInfo* f = cb::find_config_field(name);
  REQUIRE(f != nullptr);
  return static_cast<int>(f - cb::kConfigFields);
}

cb::StoredConfigValues stored_of(const cb::ConfigValues& v) {
  cb::StoredConfigValues s{};
  for (std::size_t i = 0; i < v.size(); ++i) s[i] = v[i];
  return s;
}

// A configuration with some fields changed at random among a few values
// (zeros of both signs, unset optionals), for the agreement checks.
Config random_config(std::mt19937_64& rng) {
  Config c;
  std::uniform_int_distribution<int> pick(0, 3);
  const double zero = pick(rng) % 2 == 0 ? 0.0 : -0.0;
  if (pick(rng) == 0) c.jitter = zero;
  if (pick(rng) == 0) c.ramp_up = pick(rng) == 0 ? zero : 2.5;
  if (pick(rng) == 0) c.recovery_timeout = pick(rng) == 0 ? 0.1 : 30;
  if (pick(rng) == 0) c.half_open_max_wait = pick(rng) == 0 ? zero : 12;
  if (pick(rng) == 0) c.window_size = 50;
  if (pick(rng) == 0) c.window_type = cb::WindowType::Time;
  return c;
}

}  // namespace

TEST_CASE("a configuration's values follow the argument table", "[config-identity]") {
  Config c;
  c.window_size = 50;
  c.window_type = cb::WindowType::Time;
  const cb::ConfigValues v = cb::config_values(c);
  CHECK(v[at("failure_threshold")] == 5);
  CHECK(v[at("window_size")] == 50);
  CHECK(v[at("window_type")] == 1);
  CHECK(std::isnan(v[at("half_open_max_wait")]));  // unset
}

TEST_CASE("the same value: unset equals unset, +0 equals -0", "[config-identity]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(cb::same_config_value(nan, nan));
  CHECK(cb::same_config_value(nan, -nan));
  CHECK(cb::same_config_value(0.0, -0.0));
  CHECK(cb::same_config_value(2.5, 2.5));
  CHECK_FALSE(cb::same_config_value(nan, 0.0));
  CHECK_FALSE(cb::same_config_value(0.0, nan));
  CHECK_FALSE(cb::same_config_value(1.0, 1.0 + 1e-15));
}

TEST_CASE("the first difference names the argument and both values",
          "[config-identity]") {
  Config a;
  Config b;
  CHECK(cb::first_config_difference(cb::config_values(a),
                                    stored_of(cb::config_values(b))) == -1);
  b.ramp_up = 3;
  b.jitter = 0.5;  // jitter comes before ramp_up in the table
  cb::ConfigDifference d =
      cb::config_difference(cb::config_values(a), stored_of(cb::config_values(b)));
  CHECK(d.field == at("jitter"));
  CHECK(d.given == "0");
  CHECK(d.stored == "0.5");

  b = a;
  b.window_size = 100;
  a.window_size = 50;
  d = cb::config_difference(cb::config_values(a), stored_of(cb::config_values(b)));
  CHECK(std::string(cb::kConfigFields[d.field].name) == "window_size");
  CHECK(d.given == "50");
  CHECK(d.stored == "100");

  // Unset against a value, and -0 against +0 (the same).
  b = Config{};
  a = Config{};
  a.half_open_max_wait = 5;
  b.jitter = -0.0;
  d = cb::config_difference(cb::config_values(a), stored_of(cb::config_values(b)));
  CHECK(d.field == at("half_open_max_wait"));
  CHECK(d.given == "5");
  CHECK(d.stored == "NULL");

  // A store that held no number for a field: that field differs, shown as
  // unknown.
  cb::StoredConfigValues s = stored_of(cb::config_values(Config{}));
  s[at("window_type")].reset();
  d = cb::config_difference(cb::config_values(Config{}), s);
  CHECK(d.field == at("window_type"));
  CHECK(d.given == "\"count\"");
  CHECK(d.stored == "unknown");
}

TEST_CASE("config_hash is the one it was, and agrees with equality",
          "[config-identity]") {
  // The hash a host segment keeps: existing segments must still match.
  // (Changed with health_interval and the bulkhead's two arguments, segment
  // layout 3.)
  CHECK(cb::config_hash(Config{}) == 0xbab1da4b6b4b797aULL);
  Config c;
  c.window_size = 50;
  c.window_type = cb::WindowType::Time;
  c.jitter = 0.25;
  c.half_open_max_wait = -0.0;
  CHECK(cb::config_hash(c) == 0x99017a9f3dd0424dULL);
  CHECK(cb::config_hash(c) == cb::config_hash(cb::config_values(c)));

  std::mt19937_64 rng(20);
  for (int i = 0; i < 500; ++i) {
    const Config x = random_config(rng);
    const Config y = random_config(rng);
    const bool same = cb::first_config_difference(cb::config_values(x),
                                                  stored_of(cb::config_values(y))) == -1;
    CHECK(same == (cb::config_hash(x) == cb::config_hash(y)));
    CHECK(same == (cb::config_fingerprint(x) == cb::config_fingerprint(y)));
  }
}

TEST_CASE("a fingerprint keeps its wire format; -0 is written 0", "[config-identity]") {
  // What the fleet's script compares as a string and existing keys hold
  // (three fields longer since health_interval and the bulkhead's
  // max_concurrent and max_wait).
  CHECK(cb::config_fingerprint(Config{}) ==
        "5,30,nan,0,nan,nan,nan,nan,1,nan,1,nan,0,0,5,nan,0");
  Config c;
  c.window_size = 50;
  c.window_type = cb::WindowType::Time;
  c.jitter = 0.25;
  c.half_open_max_wait = -0.0;
  CHECK(cb::config_fingerprint(c) ==
        "5,30,nan,1,50,nan,nan,nan,1,0,1,nan,0.25,0,5,nan,0");
  c.recovery_timeout = 0.1;  // exact: %.17g
  const std::string fp = cb::config_fingerprint(c);
  CHECK(fp.find("0.10000000000000001") != std::string::npos);

  // Read back: the same values.
  const cb::StoredConfigValues back = cb::read_config_fingerprint(fp);
  CHECK(cb::first_config_difference(cb::config_values(c), back) == -1);
}

TEST_CASE("a fingerprint read from a store is untrusted", "[config-identity]") {
  Config c;
  c.recovery_timeout = 0.1;
  c.window_type = cb::WindowType::Time;
  const std::string fp = cb::config_fingerprint(c);
  const auto text = [](const std::string& f, int field) {
    return cb::config_value_text(cb::kConfigFields[field],
                                 cb::read_config_fingerprint(f)[field]);
  };
  CHECK(text(fp, at("recovery_timeout")) == "0.1");
  CHECK(text(fp, at("failure_threshold")) == "5");
  CHECK(text(fp, at("window_type")) == "\"time\"");
  CHECK(text(fp, at("window_size")) == "NULL");
  CHECK(text(fp, at("ramp_up")) == "0");
  // Short, garbled or oversized: unknown, and a difference.
  CHECK(text("5,", at("recovery_timeout")) == "unknown");
  CHECK(text("5,", at("ramp_up")) == "unknown");
  CHECK(text("x,y", 0) == "unknown");
  CHECK(text("5x,y", 0) == "unknown");
  CHECK(text("", 0) == "unknown");
  CHECK(text(std::string(100, '9'), 0) == "unknown");
  CHECK(text("7,,", 0) == "7");
  CHECK(text("7,,", 1) == "unknown");
  CHECK(cb::first_config_difference(cb::config_values(Config{}),
                                    cb::read_config_fingerprint("5,30")) == 2);
  // Text after the last field is ignored: no field can be named.
  CHECK(cb::first_config_difference(
            cb::config_values(Config{}),
            cb::read_config_fingerprint(cb::config_fingerprint(Config{}) + ",9")) == -1);
}

TEST_CASE("both stores name a difference by the one rule", "[config-identity]") {
  Config mine;
  mine.window_size = 50;
  Config theirs;
  theirs.window_size = 100;
  theirs.ramp_up = 2;

  // The fleet: the member reads the fleet's fingerprint.
  cb::FleetMember m("api", "{p:api}", mine, 0, "proc");
  int field = -2;
  std::string given, stored;
  CHECK_FALSE(m.config_conflict(&field, &given, &stored));
  const cb::FleetReport sent = m.build(1);
  cb::FleetReply r;
  REQUIRE(r.parse_packed("cfg," + cb::config_fingerprint(theirs)));
  m.apply(r, 2, sent);
  REQUIRE(m.config_conflict(&field, &given, &stored));
  const cb::ConfigDifference d = cb::config_difference(
      cb::config_values(mine), stored_of(cb::config_values(theirs)));
  CHECK(field == d.field);
  CHECK(field == at("window_size"));
  CHECK(given == d.given);
  CHECK(stored == d.stored);
  CHECK(stored == "100");
}
