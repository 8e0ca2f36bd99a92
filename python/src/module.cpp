// fusedmoe._core: the nanobind module. Library errors become Python exceptions with the same
// messages: fusedmoe::InvalidArgument -> InvalidArgument (a ValueError), fusedmoe::NotImplemented
// -> Unsupported (a NotImplementedError), any other fusedmoe::Error -> FusedMoEError (RuntimeError).
#include <Python.h>

#include <nanobind/stl/string.h>

#include "bindings.hpp"

#ifdef FUSEDMOE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace nb = nanobind;

namespace {

PyObject* g_error = nullptr;
PyObject* g_invalid = nullptr;
PyObject* g_unsupported = nullptr;

PyObject* new_exception(const char* name, const char* doc, PyObject* bases) {
  PyObject* t = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (!t) throw nb::python_error();
  return t;
}

void raise(PyObject* type, const char* message, const char* argument) {
  PyObject* exc = PyObject_CallFunction(type, "s", message);
  if (!exc) return;  // the constructor's own error is set
  if (argument) {
    PyObject* arg = PyUnicode_FromString(argument);
    if (arg) {
      PyObject_SetAttrString(exc, "argument", arg);
      Py_DECREF(arg);
    }
  }
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
}

// fusedmoe::backend_available(CUDA) says whether the backend is built in; "usable on this
// machine" also needs a device (a CUDA build on a machine without a GPU has none).
bool cuda_device_present() {
#ifdef FUSEDMOE_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess) return count > 0;
  cudaGetLastError();  // no driver / no device: leave no error behind for a later launch check
#endif
  return false;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "fusedmoe C++ core (nanobind). Use the fusedmoe package, not this module.";

  g_error = new_exception("fusedmoe.FusedMoEError", "An error reported by the fusedmoe library.", PyExc_RuntimeError);
  PyObject* inv_bases = PyTuple_Pack(2, g_error, PyExc_ValueError);
  g_invalid = new_exception("fusedmoe.InvalidArgument",
                            "A bad argument (shape, dtype, stride, device, size or value). The message names the "
                            "argument, the expected and the actual value; `.argument` holds the argument's name.",
                            inv_bases);
  Py_DECREF(inv_bases);
  PyObject* ni_bases = PyTuple_Pack(2, g_error, PyExc_NotImplementedError);
  g_unsupported = new_exception("fusedmoe.Unsupported",
                                "A valid request this build or backend cannot do (the C++ fusedmoe::NotImplemented, "
                                "e.g. Layer::can_implement's reason).",
                                ni_bases);
  Py_DECREF(ni_bases);
  m.attr("FusedMoEError") = nb::handle(g_error);
  m.attr("InvalidArgument") = nb::handle(g_invalid);
  m.attr("Unsupported") = nb::handle(g_unsupported);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const fusedmoe::InvalidArgument& e) {
      raise(g_invalid, e.what(), e.argument().c_str());
    } catch (const fusedmoe::NotImplemented& e) {
      raise(g_unsupported, e.what(), nullptr);
    } catch (const fusedmoe::Error& e) {
      raise(g_error, e.what(), nullptr);
    }
  });

#ifdef FUSEDMOE_WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def("backend_available", [](const std::string& name) {
    if (name == "cpu") return fusedmoe::backend_available(fusedmoe::Backend::CPU);
    if (name == "cuda") return fusedmoe::backend_available(fusedmoe::Backend::CUDA) && cuda_device_present();
    if (name == "auto") return true;
    throw fusedmoe::InvalidArgument("backend", "auto, cpu or cuda", "'" + name + "'");
  }, nb::arg("name"), "Whether the backend is built in and usable on this machine.");

  fmpy::bind_layer(m);
  fmpy::bind_ops(m);
}
