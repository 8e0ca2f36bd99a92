#pragma once
// Errors: every failure the library reports is a fusedmoe::Error (never exit/abort).
// InvalidArgument names the argument, the expected and the actual value.
#include <stdexcept>
#include <string>

namespace fusedmoe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bad argument: shape, dtype, stride, alignment, size or value.
class InvalidArgument : public Error {
 public:
  InvalidArgument(const std::string& argument, const std::string& expected, const std::string& actual)
      : Error("invalid argument '" + argument + "': expected " + expected + ", got " + actual),
        argument_(argument) {}
  const std::string& argument() const { return argument_; }

 private:
  std::string argument_;
};

// A valid request the chosen backend cannot do (see Layer::can_implement).
class NotImplemented : public Error {
 public:
  using Error::Error;
};

}  // namespace fusedmoe
