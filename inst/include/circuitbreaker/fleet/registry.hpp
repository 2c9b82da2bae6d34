// The process's fleet stores: one sync (FleetSync, fleet/sync.hpp) per
// store specification, shared by every breaker of that store in the
// process, made on first use and forgotten when its last breaker is.
// Independent of hiredis: a template over the sync type.
#ifndef CIRCUITBREAKER_FLEET_REGISTRY_HPP
#define CIRCUITBREAKER_FLEET_REGISTRY_HPP

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "keys.hpp"

namespace circuitbreaker {

// `Sync` is made from a FleetSpec; processes that give the same spec
// (FleetSpec::identity()) share one.
template <typename Sync>
class SyncRegistry {
 public:
  // The process's sync for `spec`, made on first use.
  static std::shared_ptr<Sync> for_spec(const FleetSpec& spec) {
    State& r = state();
    std::lock_guard<std::mutex> g(r.mutex);
    std::weak_ptr<Sync>& slot = r.syncs[spec.identity()];
    std::shared_ptr<Sync> s = slot.lock();
    if (!s) {
      s = std::make_shared<Sync>(spec);
      slot = s;
    }
    return s;
  }

  // The process's sync for `spec` if one exists (nullptr otherwise): for
  // showing a store's link without starting one.
  static std::shared_ptr<Sync> find(const FleetSpec& spec) {
    State& r = state();
    std::lock_guard<std::mutex> g(r.mutex);
    const auto it = r.syncs.find(spec.identity());
    return it == r.syncs.end() ? nullptr : it->second.lock();
  }

  // Every sync that is still in use.
  static std::vector<std::shared_ptr<Sync>> all() {
    State& r = state();
    std::vector<std::shared_ptr<Sync>> out;
    std::lock_guard<std::mutex> g(r.mutex);
    for (auto& kv : r.syncs) {
      if (auto s = kv.second.lock()) out.push_back(s);
    }
    return out;
  }

 private:
  struct State {
    std::mutex mutex;
    std::map<std::string, std::weak_ptr<Sync>> syncs;
  };
  static State& state() {
    static State* r = new State;  // never destroyed: threads may outlive exit()
    return *r;
  }
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_FLEET_REGISTRY_HPP
