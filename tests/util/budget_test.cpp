#include "util/budget.h"

#include <catch2/catch.hpp>
#include <optional>

namespace odmoe {

TEST_CASE("budget: shares are granted whole or refused, and given back", "[util]") {
  Budget b(10);
  std::optional<Budget::Share> a = b.Take(6);
  REQUIRE(a);
  CHECK(b.in_use() == 6);
  CHECK_FALSE(b.Take(5));  // only 4 left: refused, nothing taken
  CHECK(b.in_use() == 6);
  {
    std::optional<Budget::Share> c = b.Take(4);
    REQUIRE(c);
    CHECK(b.in_use() == 10);
    CHECK_FALSE(b.Take(1));
  }
  CHECK(b.in_use() == 6);
  {
    Budget::Share moved = std::move(*a);
    a.reset();  // the moved-from share gives nothing back
    CHECK(b.in_use() == 6);
  }
  CHECK(b.in_use() == 0);
  CHECK_FALSE(b.Take(11));  // more than the capacity: never
}

}  // namespace odmoe
