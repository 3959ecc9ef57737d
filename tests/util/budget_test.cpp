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

namespace odmoe {

TEST_CASE("budget: a share grows as its need becomes known, and is released", "[util]") {
  Budget b(100);
  Budget::Share body = b.Empty();
  CHECK(body.amount() == 0);
  CHECK(body.GrowTo(40));
  CHECK(body.GrowTo(30));  // already holds more
  CHECK(b.in_use() == 40);
  std::optional<Budget::Share> other = b.Take(50);
  REQUIRE(other);
  CHECK_FALSE(body.GrowTo(60));  // 10 left: refused, nothing more taken
  CHECK(body.amount() == 40);
  CHECK(b.in_use() == 90);
  CHECK(body.GrowTo(50));
  Budget::Share moved;
  moved = std::move(body);  // the moved-from share holds nothing
  CHECK(body.amount() == 0);
  CHECK(moved.amount() == 50);
  moved.Release();
  CHECK(b.in_use() == 50);
  Budget::Share none;  // of no budget: cannot grow
  CHECK_FALSE(none.GrowTo(1));
}

}  // namespace odmoe
