// One sync of N busy breakers over a Redis Cluster, timed from outside R:
// the store's cluster transport (fleet/transport.hpp, cluster_sync.hpp) on
// a FleetSpec whose seed is argv[1] (host:port), with N breakers (argv[2],
// default 100), each with new counts before every sync (a call and, every
// tenth, a failure); ROUNDS syncs (argv[3], default 50). Prints the median,
// the 90th percentile and the largest sync time in ms, and how many
// masters the breakers span. Built and run by bench/cluster/sync.R:
//   g++ -std=c++17 -O2 -I inst/include -DCIRCUITBREAKER_HAVE_HIREDIS \
//       bench/cluster/sync_round_trip.cpp -lhiredis -pthread
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "circuitbreaker/fleet/sync.hpp"

namespace cb = circuitbreaker;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s host:port [breakers] [rounds]\n", argv[0]);
    return 2;
  }
  cb::FleetSpec spec;
  cb::RedisNodeAddress seed;
  if (cb::parse_node_address(argv[1], seed) != nullptr) return 2;
  spec.endpoint.host = seed.host;
  spec.endpoint.port = seed.port;
  spec.prefix = "bench-rt";
  spec.timeout = 1000 * cb::kNanosPerMs;
  const int n = argc > 2 ? std::atoi(argv[2]) : 100;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 50;
  cb::Config config;
  config.failure_threshold = 1000000;
  std::vector<std::unique_ptr<cb::FleetMember>> members;
  std::vector<cb::FleetMember*> raw;
  for (int i = 0; i < n; ++i) {
    const std::string name = "b" + std::to_string(i);
    members.push_back(std::make_unique<cb::FleetMember>(
        name, cb::fleet_key(spec.prefix, name), config, cb::fleet_clock(spec),
        "bench" + std::to_string(i)));
    raw.push_back(members.back().get());
  }
  auto view = std::make_shared<cb::ClusterView>();
  cb::FleetTransport transport(view);
  cb::FleetLink link(spec, cb::fleet_clock(spec));
  if (!transport.sync(spec, raw, link, true) || !view->cluster()) {
    std::fprintf(stderr, "first sync failed or not a cluster: %s\n", transport.error().c_str());
    return 1;
  }
  std::set<std::string> masters;
  for (const auto& m : members) masters.insert(cb::master_of_key(*view, spec.endpoint, m->key()));
  std::vector<double> ms;
  int failed = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < n; ++i) {
      cb::FleetBreaker& b = members[i]->breaker();
      const cb::Nanos t = cb::fleet_clock(spec);
      const cb::Admission a = b.acquire(t);
      if (a.permitted) {
        b.record(a.permit, (r + i) % 10 == 0 ? cb::Outcome::Failure : cb::Outcome::Success,
                 t);
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = transport.sync(spec, raw, link, true);
    const auto t1 = std::chrono::steady_clock::now();
    failed += ok ? 0 : 1;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("breakers %d over %zu masters (map: %zu), %d syncs (%d failed): "
              "median %.2f ms, p90 %.2f ms, max %.2f ms\n",
              n, masters.size(), view->master_count(), rounds, failed, ms[ms.size() / 2],
              ms[ms.size() * 9 / 10], ms.back());
  return 0;
}
