#pragma once
// Strict parsing and canonical printing of metadata values (all strings in safetensors).
#include <string>

namespace fusedmoe::detail {

// Exactly "true" or "false".
bool parse_bool_value(const std::string& s, bool* out);
// A decimal number: [+-]digits[.digits][(e|E)[+-]digits] (or .digits), finite as a float.
// No whitespace, hex, inf or nan.
bool parse_decimal_value(const std::string& s, float* out);
// The shortest decimal that parses back to the same float ("1.702", "7").
std::string format_decimal(float v);
// "metadata key 'k': invalid value 'v' (expected ...)".
std::string bad_value(const std::string& key, const std::string& value, const std::string& expected);

}  // namespace fusedmoe::detail
