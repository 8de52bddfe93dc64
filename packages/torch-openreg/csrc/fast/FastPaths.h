// FastPaths.h - the one switch over every speed layer in fast/, and the
// layer's installation at the seam of the plain path (aten/SpeedLayer.h,
// Note [Deletable speed layers]).
//
// OPENREG_FAST_PATHS=0 (read once, when the extension loads) leaves only the
// plain reference path: the speed layer is not installed and its kernels
// are not registered. Everything in fast/ must leave results unchanged
// either way; CI runs the operator tests without fast/ built at all.
#pragma once

namespace torch_openreg {

// Whether OPENREG_FAST_PATHS asks for the speed layers (it is not "0").
// Constant for the life of the process; safe during static initialisation,
// unlike the public fastPathsEnabled(), which turns true only once
// FastPaths.cpp has installed the layer.
bool speedLayersRequested();

}  // namespace torch_openreg
