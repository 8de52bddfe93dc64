// Recurrent.cpp - registers the fused recurrent cells that nn.LSTM and
// nn.GRU use on accelerators; PyTorch has them for CUDA only.
#include <torch/library.h>

#include "aten/kernels/Recurrent.h"

namespace torch_openreg {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(native::lstmCell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(native::lstmCellBackward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(native::gruCell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(native::gruCellBackward));
}

}  // namespace torch_openreg
