// Metadata values are strings written by other tools; parse them strictly, never leniently
// (strtod would accept " 1.7", "0x1p3", "inf" and depend on the locale).
#include "io/metadata.hpp"

#include <charconv>
#include <cmath>
#include <system_error>

namespace fusedmoe::detail {

bool parse_bool_value(const std::string& s, bool* out) {
  if (s == "true") *out = true;
  else if (s == "false") *out = false;
  else return false;
  return true;
}

namespace {
bool is_digit(char c) { return c >= '0' && c <= '9'; }
size_t digits(const std::string& s, size_t i) {
  while (i < s.size() && is_digit(s[i])) ++i;
  return i;
}
}  // namespace

bool parse_decimal_value(const std::string& s, float* out) {
  // Grammar check first; from_chars then does the correctly rounded conversion.
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  const size_t int_end = digits(s, i);
  bool any = int_end > i;
  i = int_end;
  if (i < s.size() && s[i] == '.') {
    const size_t frac_end = digits(s, i + 1);
    any = any || frac_end > i + 1;
    i = frac_end;
  }
  if (!any) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    const size_t exp_end = digits(s, j);
    if (exp_end == j) return false;
    i = exp_end;
  }
  if (i != s.size()) return false;
  const char* first = s.data() + (s[0] == '+' ? 1 : 0);  // from_chars refuses a leading '+'
  double d = 0;
  const auto r = std::from_chars(first, s.data() + s.size(), d);
  // Out-of-range (e.g. 1e999) is refused; the whole string must be consumed.
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return false;
  const float f = static_cast<float>(d);
  if (!std::isfinite(f)) return false;
  *out = f;
  return true;
}

std::string format_decimal(float v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string bad_value(const std::string& key, const std::string& value, const std::string& expected) {
  return "metadata key '" + key + "': invalid value '" + value + "' (expected " + expected + ")";
}

}  // namespace fusedmoe::detail
