// An extension module of the kind a downstream project writes to reach a block format outside the
// presets from Python: UE6M2-FP4 (E2M1 elements in blocks of 16, UE6M2 scales; tests/support).
// It compiles one table of operations (host/format_ops.hpp) and hands it to the package:
//
//     import blockscale, blockscale_test_ue6m2
//     blockscale.register_block_formats(blockscale_test_ue6m2)   # -> ("ue6m2_fp4",)
//
// after which every function of the package takes format="ue6m2_fp4"
// (python/tests/test_extension_formats.py). The module needs no nanobind type of its own: the
// package's _core converts the arguments and calls through the table.
#include <nanobind/nanobind.h>

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

nanobind::capsule capsule_of(const blockscale::block_format_ops_list& l) {
  return nanobind::capsule(&l, "blockscale.block_format_ops");
}

} // namespace

NB_MODULE(blockscale_test_ue6m2, m) {
  m.def("block_format_ops", [] { return capsule_of(list); });
  m.def("clashing_ops", [] { return capsule_of(clashing_list); });
  m.def("stale_ops", [] { return capsule_of(stale_list); });
  m.def("twice_ops", [] { return capsule_of(twice_list); });
  m.def("unnamed_capsule", [] { return nanobind::capsule(&list); });
}
