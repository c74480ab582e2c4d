#!/bin/sh
# The PyTorch front end's compression: DreamDDP(compression="powersgd:4")
# passes each parameter's shape as a matrix (a Linear weight out x in), so
# that the wide linear layer travels as its factors, and the replicas stay
# bitwise equal after every averaging, under ddp and dreamddp:2. Skips
# where the interpreter has no torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"

run "powersgd:4 under ddp, shapes from the front end" 2 powersgd ddp 6
run "powersgd:4 under dreamddp:2 on 3 ranks" 3 powersgd dreamddp:2 8
finish
