// An extension module of the kind a downstream project writes to reach a block format outside the
// presets from Python: UE6M2-FP4 (E2M1 elements in blocks of 16, UE6M2 scales; tests/support).
// It compiles one table of operations (host/format_ops.hpp) and hands it to the package:
//
//     import blockscale, blockscale_test_ue6m2
//     blockscale.register_block_formats(blockscale_test_ue6m2)   # -> ("ue6m2_fp4",)
//
// after which every function of the package takes format="ue6m2_fp4"
// (python/tests/test_extension_formats.py). The package's _core converts the arguments and calls
// through the table, so the module needs no binding library: it is written against the CPython C
// API alone (a nanobind or pybind11 module that returns the same capsule works the same way).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <blockscale/host/format_ops.hpp>

#include "ue6m2.hpp"

namespace {

const blockscale::block_format_ops tables[] = {
    blockscale::make_block_format_ops<ue6m2_fp4>("ue6m2_fp4")};
const blockscale::block_format_ops_list list = blockscale::make_block_format_ops_list(tables);

// Lists the package must refuse: a name a preset has, and tables from other headers.
const blockscale::block_format_ops clashing[] = {
    blockscale::make_block_format_ops<ue6m2_fp4>("nvfp4")};
const blockscale::block_format_ops_list clashing_list =
    blockscale::make_block_format_ops_list(clashing);
const blockscale::block_format_ops_list stale_list = {list.abi + 1, list.table_size, list.count,
                                                      list.tables};
// And one that names a format twice.
const blockscale::block_format_ops twice[] = {
    blockscale::make_block_format_ops<ue6m2_fp4>("ue6m2_twice"),
    blockscale::make_block_format_ops<ue6m2_fp4>("ue6m2_twice")};
const blockscale::block_format_ops_list twice_list = blockscale::make_block_format_ops_list(twice);

PyObject* capsule_of(const blockscale::block_format_ops_list& l, const char* name) {
  return PyCapsule_New(const_cast<blockscale::block_format_ops_list*>(&l), name, nullptr);
}

PyObject* block_format_ops(PyObject*, PyObject*) {
  return capsule_of(list, "blockscale.block_format_ops");
}
PyObject* clashing_ops(PyObject*, PyObject*) {
  return capsule_of(clashing_list, "blockscale.block_format_ops");
}
PyObject* stale_ops(PyObject*, PyObject*) {
  return capsule_of(stale_list, "blockscale.block_format_ops");
}
PyObject* twice_ops(PyObject*, PyObject*) {
  return capsule_of(twice_list, "blockscale.block_format_ops");
}
PyObject* unnamed_capsule(PyObject*, PyObject*) {
  return capsule_of(list, nullptr);
}

PyMethodDef methods[] = {
    {"block_format_ops", block_format_ops, METH_NOARGS, "the UE6M2-FP4 table, for the package"},
    {"clashing_ops", clashing_ops, METH_NOARGS, "a table named as a preset"},
    {"stale_ops", stale_ops, METH_NOARGS, "a list from other headers"},
    {"twice_ops", twice_ops, METH_NOARGS, "a list that names a format twice"},
    {"unnamed_capsule", unnamed_capsule, METH_NOARGS, "the table in a capsule without a name"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "blockscale_test_ue6m2",
                      "UE6M2-FP4 for the blockscale package", -1, methods};

} // namespace

PyMODINIT_FUNC PyInit_blockscale_test_ue6m2() {
  return PyModule_Create(&module);
}
