"""Programs that ship with openreg-distributed, run with `python -m` or
`torchrun -m` (train_ddp: a DDP training run over occl)."""
