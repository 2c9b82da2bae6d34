// The Redis client's wire (redis/wire.hpp) and connection over TLS, against
// real redis-servers on 127.0.0.1 that speak TLS only, with certificates
// this file makes with the openssl command (a CA, a server certificate for
// localhost and 127.0.0.1, one for another name, a client certificate, and
// a second CA that nobody trusts). Each refusal is checked by its words.
// The subscription's reads
// (ready(), drain(), next()) get every one of many small messages, which
// TLS packs into few records: the case where decrypted bytes wait in
// OpenSSL while the socket shows nothing. Also run under ThreadSanitizer
// (the fleet sync over TLS).
#include <catch2/catch.hpp>

#if defined(CIRCUITBREAKER_HAVE_HIREDIS) && defined(CIRCUITBREAKER_HAVE_OPENSSL)

#include <poll.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "circuitbreaker/fleet/fleet_handle.hpp"
#include "circuitbreaker/fleet/sync.hpp"
#include "redis_test_support.hpp"

namespace cb = circuitbreaker;

namespace {

// The certificates of this file, made once per run in a directory of their
// own (removed at exit). ok is false when the openssl command is missing.
struct Certs {
  std::string dir, ca, ca_key, server, server_key, other, other_key, client, client_key,
      rogue_ca, rogue, rogue_key;
  bool ok = false;

  Certs() {
    char tmpl[] = "/tmp/cb-wire-certs-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    dir = tmpl;
    const auto p = [&](const char* f) { return dir + "/" + f; };
    ca = p("ca.crt");
    ca_key = p("ca.key");
    server = p("server.crt");
    server_key = p("server.key");
    other = p("other.crt");
    other_key = p("other.key");
    client = p("client.crt");
    client_key = p("client.key");
    rogue_ca = p("rogue-ca.crt");
    rogue = p("rogue.crt");
    rogue_key = p("rogue.key");
    ok = run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=cb-test-ca "
             "-keyout " +
             ca_key + " -out " + ca) &&
         run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=cb-rogue-ca "
             "-keyout " +
             p("rogue-ca.key") + " -out " + rogue_ca) &&
         leaf("server", "DNS:localhost,IP:127.0.0.1", ca, ca_key) &&
         leaf("other", "DNS:other.example.test", ca, ca_key) &&
         leaf("client", "DNS:cb-client", ca, ca_key) &&
         leaf("rogue", "DNS:localhost,IP:127.0.0.1", rogue_ca, p("rogue-ca.key"));
  }
  ~Certs() {
    if (!dir.empty() && !std::getenv("CB_KEEP_CERTS")) run("rm -rf " + dir);
  }

  static bool run(const std::string& cmd) {
    return std::system(("{ " + cmd + "; } >/dev/null 2>&1").c_str()) == 0;
  }
  bool leaf(const std::string& name, const std::string& san, const std::string& by,
            const std::string& by_key) {
    const std::string base = dir + "/" + name;
    return run("printf 'subjectAltName=" + san + "\\n' > " + base + ".ext") &&
           run("openssl req -newkey rsa:2048 -nodes -subj /CN=" + name + " -keyout " +
               base + ".key -out " + base + ".csr") &&
           run("openssl x509 -req -days 2 -in " + base + ".csr -CA " + by + " -CAkey " +
               by_key + " -CAcreateserial -out " + base + ".crt -extfile " + base +
               ".ext");
  }
};

const Certs& certs() {
  static const Certs c;
  return c;
}

// A TLS server with `cert`, or nullptr when redis-server (with TLS) or the
// certificates cannot be had. Connected once to be sure it is up.
std::unique_ptr<cbredis::RedisServer> tls_server(const std::string& cert,
                                                 const std::string& key,
                                                 const std::string& auth = "no") {
  if (!certs().ok) return nullptr;
  auto s = std::make_unique<cbredis::RedisServer>(
      cbredis::RedisServer::Tls{cert, key, certs().ca, auth});
  cb::RedisEndpoint e = s->endpoint;
  e.tls.verify = false;  // only "is it up"
  if (auth != "no") {
    e.tls.cert_file = certs().client;
    e.tls.key_file = certs().client_key;
  }
  cb::RedisConnection c;
  for (int i = 0; i < 100; ++i) {
    if (c.connect(e, cb::kNanosPerSecond) && c.command({"PING"})) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return nullptr;
}

// Connects to `e` and sends PING: "PONG", or the error.
std::string ping(const cb::RedisEndpoint& e, cb::Nanos timeout = 500 * cb::kNanosPerMs) {
  cb::RedisConnection c;
  if (!c.connect(e, timeout)) return c.error();
  const cb::RedisReply r = c.command({"PING"});
  return r ? r->text() : c.error();
}

}  // namespace

TEST_CASE("TLS: a verified connection, by address and by name", "[redis-wire]") {
  auto server = tls_server(certs().server, certs().server_key);
  if (!server) return cbredis::skipped();
  cb::RedisEndpoint e = server->endpoint;
  cb::RedisConnection c;
  const bool connected = c.connect(e, cb::kNanosPerSecond);
  INFO(c.error());
  REQUIRE(connected);
  CHECK((c.tls_version() == "TLSv1.3" || c.tls_version() == "TLSv1.2"));
  CHECK(cbredis::reply_text(c.command({"SET", "k", std::string("a\0b", 3)})) == "OK");
  CHECK(cbredis::reply_text(c.command({"GET", "k"})) == std::string("a\0b", 3));
  // A pipeline of many commands, written at once, read in order.
  for (int i = 0; i < 500; ++i) REQUIRE(c.append({"INCR", "n"}));
  REQUIRE(c.flush());
  for (int i = 1; i <= 500; ++i) {
    const cb::RedisReply r = c.read();
    REQUIRE(r);
    REQUIRE(r->integer == i);
  }
  // By name: the certificate's DNS SAN.
  e.host = "localhost";
  CHECK(ping(e) == "PONG");
  // A tunnel: dial 127.0.0.1, verify another name.
  auto other = tls_server(certs().other, certs().other_key);
  REQUIRE(other);
  cb::RedisEndpoint t = other->endpoint;
  t.tls.server_name = "other.example.test";
  CHECK(ping(t) == "PONG");
  // A bundle of several roots: every one is trusted.
  const std::string bundle = certs().dir + "/bundle.pem";
  REQUIRE(Certs::run("cat " + certs().rogue_ca + " " + certs().ca + " > " + bundle));
  e.tls.ca_file = bundle;
  CHECK(ping(e) == "PONG");
}

TEST_CASE("TLS: each refusal says why, within the timeout", "[redis-wire]") {
  auto server = tls_server(certs().server, certs().server_key);
  if (!server) return cbredis::skipped();
  auto rogue = tls_server(certs().rogue, certs().rogue_key);
  auto other = tls_server(certs().other, certs().other_key);
  REQUIRE(rogue);
  REQUIRE(other);

  // Not signed by a trusted CA (the system's roots, or the given CA).
  cb::RedisEndpoint e = rogue->endpoint;
  CHECK_THAT(ping(e), Catch::Contains("unknown CA"));
  e.tls.ca_file.clear();
  CHECK_THAT(ping(e), Catch::Contains("unknown CA"));
  // verify = FALSE connects anyway.
  e.tls.verify = false;
  CHECK(ping(e) == "PONG");

  // The certificate is for another name.
  e = other->endpoint;
  CHECK_THAT(ping(e), Catch::Contains("name mismatch") && Catch::Contains("127.0.0.1"));
  e.tls.server_name = "cache.example.test";
  CHECK_THAT(ping(e), Catch::Contains("name mismatch"));

  // A CA file that cannot be read.
  e = server->endpoint;
  e.tls.ca_file = certs().dir + "/missing.pem";
  CHECK_THAT(ping(e), Catch::Contains("tls$ca_file"));

  // TLS to a plain server: within the timeout.
  cbredis::RedisServer plain;
  cb::RedisConnection probe;
  REQUIRE(plain.connect(probe));
  e = plain.endpoint;
  e.tls.enabled = true;
  e.tls.ca_file = certs().ca;
  CHECK_THAT(ping(e, 300 * cb::kNanosPerMs), Catch::Contains("not a TLS server"));

  // A plain client to a TLS port.
  e = server->endpoint;
  e.tls = cb::RedisTls{};
  CHECK_THAT(ping(e, 300 * cb::kNanosPerMs), Catch::Contains("rediss://"));
}

TEST_CASE("TLS: mutual authentication", "[redis-wire]") {
  auto server = tls_server(certs().server, certs().server_key, "yes");
  if (!server) return cbredis::skipped();
  cb::RedisEndpoint e = server->endpoint;
  CHECK_THAT(ping(e), Catch::Contains("client certificate"));
  e.tls.cert_file = certs().client;
  e.tls.key_file = certs().client_key;
  CHECK(ping(e) == "PONG");
  // A key that is not the certificate's.
  e.tls.key_file = certs().other_key;
  CHECK_THAT(ping(e), Catch::Contains("does not match"));
}

// Managed services that disable CLUSTER (an ACL, a policy) are single
// endpoints: the refusal is an answer, not a failure.
TEST_CASE("a refused CLUSTER SLOTS means a single endpoint; the store syncs",
          "[redis-wire]") {
  cbredis::RedisServer server;
  cb::RedisConnection admin;
  if (!server.connect(admin)) return cbredis::skipped();
  REQUIRE(cbredis::reply_text(admin.command({"ACL", "SETUSER", "nocluster", "on", ">pw",
                                             "~*", "&*", "+@all", "-cluster"})) == "OK");
  cb::FleetSpec spec;
  spec.endpoint = server.endpoint;
  spec.endpoint.username = "nocluster";
  spec.endpoint.password = "pw";
  spec.endpoint.has_password = true;
  spec.prefix = "nocluster";
  spec.sync_interval = 20 * cb::kNanosPerMs;
  spec.timeout = 500 * cb::kNanosPerMs;
  cb::RedisConnection user;
  REQUIRE(user.connect(spec.endpoint, cb::kNanosPerSecond));
  const cb::RedisReply refused = user.command({"CLUSTER", "SLOTS"});
  REQUIRE(refused);
  CHECK(refused->is_error("NOPERM"));
  cb::Config config;
  config.failure_threshold = 1;
  {
    auto sync = cb::FleetSync::for_spec(spec);
    auto member = sync->join("b", config);
    auto handle = std::make_unique<cb::FleetHandle>(member, sync);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!sync->stats().linked && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(sync->stats().linked);
    CHECK(std::string(sync->topology()) == "single");
    CHECK(sync->stats().tls == "off");
    handle.reset();
  }
}

TEST_CASE("scripts by source: EVALSHA, EVAL after NOSCRIPT, then EVALSHA again",
          "[redis-wire]") {
  auto server = tls_server(certs().server, certs().server_key);
  if (!server) return cbredis::skipped();
  static const char* const kScript = "return {KEYS[1], ARGV[1]}";
  cb::RedisConnection c;
  REQUIRE(c.connect(server->endpoint, cb::kNanosPerSecond));
  REQUIRE(c.load_script(kScript));
  const std::string sha = c.script_sha(kScript);
  CHECK(sha.size() == 40);
  CHECK(c.eval_command(kScript, {"k"}, {"a"})[0] == "EVALSHA");
  cb::RedisReply r = c.eval(kScript, {"k"}, {"a"});
  REQUIRE(r);
  REQUIRE(r->is_array());
  CHECK(r->elements[1].text() == "a");
  // The server forgets its scripts: the next call is answered all the same.
  REQUIRE(cbredis::reply_text(c.command({"SCRIPT", "FLUSH"})) == "OK");
  r = c.eval(kScript, {"k"}, {"b"});
  REQUIRE(r);
  REQUIRE(r->is_array());
  CHECK(r->elements[1].text() == "b");
  // EVAL cached it again: EVALSHA works without a SCRIPT LOAD.
  const cb::RedisReply exists = c.command({"SCRIPT", "EXISTS", sha});
  REQUIRE(exists);
  REQUIRE(exists->is_array());
  CHECK(exists->elements[0].integer == 1);
}

TEST_CASE("TLS: a subscription gets every one of many small messages", "[redis-wire]") {
  auto server = tls_server(certs().server, certs().server_key);
  if (!server) return cbredis::skipped();
  cb::RedisConnection sub, pub;
  REQUIRE(sub.connect(server->endpoint, cb::kNanosPerSecond));
  REQUIRE(pub.connect(server->endpoint, cb::kNanosPerSecond));
  const cb::RedisReply ok = sub.command({"SUBSCRIBE", "events"});
  REQUIRE(ok);
  REQUIRE(ok->is_array());
  constexpr int kMessages = 3000;
  for (int i = 0; i < kMessages; ++i) REQUIRE(pub.append({"PUBLISH", "events", "m"}));
  REQUIRE(pub.flush());
  int got = 0, polls = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got < kMessages && std::chrono::steady_clock::now() < until) {
    // As the sync thread does: what TLS holds first, then poll().
    if (!sub.ready()) {
      pollfd p{sub.fd(), POLLIN, 0};
      ++polls;
      if (::poll(&p, 1, 100) <= 0) continue;
    }
    REQUIRE(sub.drain());
    for (cb::RedisReply r = sub.next(); r; r = sub.next()) {
      if (r->is_array() && r->elements.size() == 3 && r->elements[0].text() == "message")
        ++got;
    }
  }
  CHECK(got == kMessages);
  INFO("polls: " << polls);
  for (int i = 0; i < kMessages; ++i) pub.read();  // the PUBLISH replies
}

TEST_CASE("TLS: a fleet store syncs, trips across stores and comes back after a restart",
          "[redis-wire]") {
  auto server = tls_server(certs().server, certs().server_key);
  if (!server) return cbredis::skipped();
  cb::FleetSpec spec;
  spec.endpoint = server->endpoint;
  spec.prefix = "tls";
  spec.sync_interval = 20 * cb::kNanosPerMs;
  spec.timeout = 200 * cb::kNanosPerMs;
  cb::FleetSpec spec2 = spec;
  spec2.sync_interval = 25 * cb::kNanosPerMs;  // another store: a second process
  cb::Config config;
  config.failure_threshold = 1;
  config.recovery_timeout = 60;
  auto wait_for = [](auto done, double seconds) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    while (!done() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  };
  {
    auto one = cb::FleetSync::for_spec(spec), two = cb::FleetSync::for_spec(spec2);
    auto m1 = one->join("b", config), m2 = two->join("b", config);
    auto h1 = std::make_unique<cb::FleetHandle>(m1, one);
    auto h2 = std::make_unique<cb::FleetHandle>(m2, two);
    REQUIRE(wait_for([&] { return one->stats().linked && two->stats().linked; }, 5));
    CHECK_THAT(one->stats().tls, Catch::StartsWith("TLSv1."));
    const cb::Admission a = h1->acquire(one->now(), cb::kNanosPerSecond);
    REQUIRE(a.permitted);
    h1->record(a.permit, cb::Outcome::Failure, one->now(), -1);
    CHECK(wait_for(
        [&] { return m2->breaker().snapshot(two->now()).state == cb::State::Open; }, 5));
    // Killed and started again empty on the same port: the store is back.
    REQUIRE(server->restart());
    const std::uint64_t from = one->stats().syncs;
    CHECK(wait_for([&] { return one->stats().linked && one->stats().syncs > from + 2; },
                   10));
    h1.reset();
    h2.reset();
  }
}

#endif
