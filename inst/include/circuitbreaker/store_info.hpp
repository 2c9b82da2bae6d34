// What a shared store tells about one of its breakers (a host segment's
// header, a fleet breaker's link), as named fields in the order users see
// them: AnyBreaker::store_info() fills one. Each field's name is written
// once, by the store that has it; a binding converts the fields to its
// language's values (a missing number is R's NA) without knowing any store.
#ifndef CIRCUITBREAKER_STORE_INFO_HPP
#define CIRCUITBREAKER_STORE_INFO_HPP

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace circuitbreaker {

class StoreInfo {
 public:
  struct Field {
    enum class Kind { kNumber, kText, kFlag };
    std::string name;
    Kind kind = Kind::kNumber;
    std::optional<double> number;  // kNumber: nullopt when not known
    std::string text;              // kText
    bool flag = false;             // kFlag
  };

  StoreInfo& number(std::string name, std::optional<double> v) {
    Field f;
    f.name = std::move(name);
    f.number = v;
    fields_.push_back(std::move(f));
    return *this;
  }
  StoreInfo& text(std::string name, std::string v) {
    Field f;
    f.name = std::move(name);
    f.kind = Field::Kind::kText;
    f.text = std::move(v);
    fields_.push_back(std::move(f));
    return *this;
  }
  StoreInfo& flag(std::string name, bool v) {
    Field f;
    f.name = std::move(name);
    f.kind = Field::Kind::kFlag;
    f.flag = v;
    fields_.push_back(std::move(f));
    return *this;
  }

  // No field: the store has nothing to tell (the process store).
  bool empty() const noexcept { return fields_.empty(); }
  const std::vector<Field>& fields() const noexcept { return fields_; }

 private:
  std::vector<Field> fields_;
};

}  // namespace circuitbreaker

#endif  // CIRCUITBREAKER_STORE_INFO_HPP
