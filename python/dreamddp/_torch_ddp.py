"""The arguments of torch.nn.parallel.DistributedDataParallel's constructor
that DreamDDP takes beside its own, so that a DDP script changes its DDP(...)
line alone; and the data shard of a worker when aggregator ranks share the
job (worker_rank, num_workers).

Each argument of DDP's constructor (PyTorch 1.13 to 2.x) is honoured, taken
as a hint where it changes nothing in dreamddp, or refused with a ValueError
or NotImplementedError that names what replaces it; none is a TypeError.

    device_ids         [local_rank] or [torch.device]: the module's
                       parameters must be on that GPU (as DDP checks); its
                       layers take the device route, and a forward moves
                       the tensors of its inputs there, as DDP does. More
                       than one device, or a CPU module with device_ids,
                       is a ValueError, as under DDP.
    output_device      None or device_ids[0]: outputs stay on the module's
                       device (DDP gathers them elsewhere only for a module
                       on several devices, which dreamddp does not sync).
    dim                accepted: DDP splits inputs along it only across
                       several devices of one process.
    process_group      None or the default (WORLD) group of
                       torch.distributed: dreamddp syncs every worker of the
                       job; a subgroup is refused.
    bucket_cap_mb      ddp's gradient bucket size in MiB after the first
                       bucket (dd_bucket_bytes_set, DREAMDDP_BUCKET_BYTES);
                       None keeps DREAMDDP_BUCKET_BYTES (25M by default, as
                       DDP's 25).
    gradient_as_bucket_view, static_graph, check_reduction: hints, accepted
                       either way: the library already syncs the .grad
                       tensors in place (what gradient_as_bucket_view buys
                       DDP), plans once the graph is profiled, and
                       check_reduction is deprecated in DDP itself.
    init_sync          True (PyTorch >= 2.4): the wrap always gives every
                       worker rank 0's parameters; False is refused.
    mixed_precision, delay_all_reduce_named_params, param_to_hook_all_reduce,
    device_mesh, skip_all_reduce_unused_params: refused when set, each
                       naming what replaces it.
"""

import numbers

import torch

from . import _lib
from . import context as _context
from ._torch_coll import error as _error


def worker_rank():
    """This worker's index among the workers, 0 to num_workers() - 1: the
    data shard to read (DistributedSampler(dataset,
    num_replicas=num_workers(), rank=worker_rank())). Equal to the rank
    unless aggregator ranks (DREAMDDP_NUM_AGGREGATORS) share the job; an
    aggregator rank has no shard, and raises."""
    ctx = _context()
    if ctx.is_aggregator:
        raise _error(
            _lib.ERR_STATE,
            "rank %d is an aggregator (DREAMDDP_NUM_AGGREGATORS): it reads "
            "no data; call dreamddp.serve_if_aggregator() at the top of the "
            "script" % ctx.rank,
            "worker_rank",
        )
    return ctx.worker_ranks.index(ctx.rank)


def num_workers():
    """The number of workers (the ranks that train; aggregator ranks are
    not counted): the number of data shards."""
    return _context().num_workers


def _device_index(d, what):
    """The CUDA ordinal that d names (an int, "cuda:i" or a torch.device),
    or a ValueError naming what."""
    if isinstance(d, bool) or not isinstance(d, (numbers.Integral, str, torch.device)):
        raise ValueError(
            "DreamDDP: %s=%r: expected a GPU index (local_rank), 'cuda:i' or "
            "a torch.device" % (what, d))
    if isinstance(d, numbers.Integral):
        return int(d)
    dev = torch.device(d)
    if dev.type != "cuda":
        raise ValueError(
            "DreamDDP: %s=%r names a %s device: it takes a GPU; a CPU module "
            "takes device_ids=None" % (what, d, dev.type))
    return torch.cuda.current_device() if dev.index is None else dev.index


def check_device(module, device_ids, output_device):
    """The torch.device a forward moves its inputs to (device_ids=[i]), or
    None; the module's parameters must already be there, as DDP checks."""
    devices = {p.device for p in module.parameters()}
    if device_ids is None or (
        isinstance(device_ids, (list, tuple)) and len(device_ids) == 0
    ):
        if output_device is not None:
            raise ValueError(
                "DreamDDP: output_device=%r without device_ids: outputs stay "
                "on the module's device (%s); pass device_ids=[local_rank] "
                "for a module on that GPU, or leave output_device out"
                % (output_device, _names(devices)))
        return None
    if not isinstance(device_ids, (list, tuple)):
        raise ValueError(
            "DreamDDP: device_ids=%r: expected a list of one GPU index, as "
            "DDP's device_ids=[local_rank]" % (device_ids,))
    if len(device_ids) > 1:
        raise ValueError(
            "DreamDDP: device_ids=%r: a process syncs one GPU (one rank per "
            "GPU, as DDP's device_ids can only be None or contain a single "
            "element): device_ids=[local_rank]" % (list(device_ids),))
    index = _device_index(device_ids[0], "device_ids")
    want = torch.device("cuda", index)
    if devices != {want}:
        raise ValueError(
            "DreamDDP: device_ids=[%d], but the module's parameters are on "
            "%s: move the module there first (module.to(%d)), or pass "
            "device_ids=None for a CPU module" % (index, _names(devices), index))
    if output_device is not None and _device_index(output_device, "output_device") != index:
        raise ValueError(
            "DreamDDP: output_device=%r differs from device_ids=[%d]: outputs "
            "stay on the module's device; leave output_device out or pass %d"
            % (output_device, index, index))
    return want


def _names(devices):
    return ", ".join(sorted(str(d) for d in devices)) or "no device (no parameters)"


def check_process_group(process_group, ctx):
    """None or torch.distributed's default group over as many ranks as
    dreamddp has workers; a subgroup is refused."""
    if process_group is None:
        return
    import torch.distributed as dist

    default = None
    if dist.is_available() and dist.is_initialized():
        default = dist.distributed_c10d._get_default_group()
    if process_group is dist.group.WORLD or (
        default is not None and process_group is default
    ):
        size = dist.get_world_size()
        if size != ctx.num_workers:
            raise ValueError(
                "DreamDDP: process_group is torch.distributed's default group "
                "of %d ranks, but dreamddp has %d workers: the group of the "
                "sync is dreamddp's own (ddrun -n, DREAMDDP_NUM_AGGREGATORS); "
                "pass process_group=None" % (size, ctx.num_workers))
        return
    raise NotImplementedError(
        "DreamDDP: process_group is a subgroup: dreamddp syncs every worker "
        "of its job; launch one job per group of replicas (ddrun -n N), and "
        "pass process_group=None")


def set_bucket(ctx, bucket_cap_mb):
    """bucket_cap_mb in MiB as the library's bucket bytes, as DDP rounds
    it (int(mb * 1024 * 1024)); None keeps DREAMDDP_BUCKET_BYTES."""
    if bucket_cap_mb is None:
        return
    if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, numbers.Real) \
            or not bucket_cap_mb > 0:
        raise ValueError(
            "DreamDDP: bucket_cap_mb=%r: expected a positive number of MiB "
            "(DDP's default is 25)" % (bucket_cap_mb,))
    ctx.bucket_bytes_set(max(1, int(bucket_cap_mb * 1024 * 1024)))


# Newer DistributedDataParallel arguments: the value that changes nothing,
# and what replaces another.
_REFUSED = {
    "mixed_precision": (
        None, "train under torch.autocast, and pass compression='bf16' or "
        "'fp16' for half-precision syncs"),
    "delay_all_reduce_named_params": (
        None, "dreamddp syncs each layer once its gradients are final; "
        "choose what syncs when with strategy= and layers="),
    "param_to_hook_all_reduce": (
        None, "dreamddp syncs each layer once its gradients are final; "
        "choose what syncs when with strategy= and layers="),
    "device_mesh": (
        None, "dreamddp syncs every worker of its job; launch one job per "
        "group of replicas (ddrun -n N)"),
    "skip_all_reduce_unused_params": (
        False, "pass find_unused_parameters=True: unused parameters take "
        "part with the gradient they hold"),
}


def check_strategy_arg(strategy):
    """DDP(module, [local_rank]) moved as is puts device_ids where DreamDDP
    takes its strategy: said, not a failure deep in the library."""
    if strategy is not None and not isinstance(strategy, str):
        raise ValueError(
            "DreamDDP: strategy=%r: expected a string such as 'ddp' or "
            "'dreamddp:4'; DDP's positional device_ids go by keyword here: "
            "DreamDDP(module, device_ids=[local_rank])" % (strategy,))


def check_hints(static_graph, gradient_as_bucket_view, check_reduction, dim,
                newer):
    """The arguments that change nothing here must be what DDP takes; the
    newer ones (newer: name -> value) are accepted at their neutral value
    and refused otherwise. An unknown name is the TypeError Python raises
    for any function."""
    for name, v in (("static_graph", static_graph),
                    ("gradient_as_bucket_view", gradient_as_bucket_view),
                    ("check_reduction", check_reduction)):
        if not isinstance(v, bool):
            raise ValueError("DreamDDP: %s=%r: expected True or False" % (name, v))
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise ValueError("DreamDDP: dim=%r: expected an integer" % (dim,))
    for name, v in newer.items():
        if name == "init_sync":
            if v is not True:
                raise ValueError(
                    "DreamDDP: init_sync=%r: the wrap always gives every "
                    "worker rank 0's parameters (dd_model_commit); pass "
                    "init_sync=True or leave it out" % (v,))
            continue
        if name not in _REFUSED:
            raise TypeError(
                "DreamDDP() got an unexpected keyword argument '%s'" % name)
        neutral, instead = _REFUSED[name]
        if v is not neutral and v != neutral:
            raise NotImplementedError(
                "DreamDDP: %s=%r is not supported: %s" % (name, v, instead))


def to_device(obj, device):
    """The tensors in a forward's inputs (nested tuples, lists and dicts)
    on device, as DDP's device_ids moves them."""
    if torch.is_tensor(obj):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_device(o, device) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, to_device(v, device)) for k, v in obj.items())
    return obj
