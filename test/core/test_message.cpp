// One-line error text and durations in words (core/message.hpp).
#include <gtest/gtest.h>

#include <cmath>

#include "scaledl/core/message.hpp"

using namespace scaledl;

TEST(Message, OneLineEscapesControlCharacters) {
  EXPECT_EQ(first_line("a\nb"), "a");
  EXPECT_EQ(one_line("a\nb\tc\x01"), "a\\nb\\tc\\x01");
}

TEST(Message, DurationsInWords) {
  EXPECT_EQ(human_duration(0), "0.0 s");
  EXPECT_EQ(human_duration(42.46), "42.5 s");
  EXPECT_EQ(human_duration(59.96), "1 min 0 s");  // not "60.0 s"
  EXPECT_EQ(human_duration(725), "12 min 5 s");
  EXPECT_EQ(human_duration(3600), "1 h 0 min");
  EXPECT_EQ(human_duration(3 * 3600 + 12 * 60 + 20), "3 h 12 min");
  EXPECT_EQ(human_duration(47 * 3600 + 59 * 60), "47 h 59 min");
  EXPECT_EQ(human_duration(4.2 * 86400), "4.2 days");
  EXPECT_EQ(human_duration(-1), "-");
  EXPECT_EQ(human_duration(NAN), "-");
  EXPECT_EQ(human_duration(INFINITY), "-");
}
