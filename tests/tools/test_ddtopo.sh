#!/bin/sh
# ddtopo on the fixture machines against golden output (text and --json),
# local rank r of the DGX-like node taking the NIC nearest GPU r, exit codes,
# --config, and this machine's choice. Regenerate the goldens with
# DDTEST_UPDATE_GOLDEN=1 after an intended change, and read the diff.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
DDTOPO=$top_builddir/tools/ddtopo
FIX=$top_srcdir/tests/fixtures/topo
GOLD=$top_srcdir/tests/golden/ddtopo
unset DREAMDDP_NET_IFNAME DREAMDDP_NUM_STREAMS DREAMDDP_SYSFS_ROOT DREAMDDP_TOPO_FILE \
    DREAMDDP_TOPO_DUMP_FILE CUDA_VISIBLE_DEVICES DREAMDDP_LOG_LEVEL

if ! "$DDTOPO" --topo "$FIX/laptop/topo.xml" --json | grep -q '"hwloc": true'; then
    echo "SKIP: ddtopo built without hwloc; the goldens hold hwloc locality"
    exit 77
fi

# Paths that depend on where the tree and the install are.
normalize() {
    sed -e "s#$FIX#@FIXTURES@#g" \
        -e 's#[^ "]*/\(dd_backend_[a-z]*\.so\)#@PKGLIBDIR@/\1#g' \
        -e 's#in [^ "]*/dreamddp)#in @PKGLIBDIR@)#g' \
        -e 's#in [^ "]*/dreamddp"#in @PKGLIBDIR@"#g'
}

# nic1g100g, gpunode and farnic are hwloc XML alone (offline, no speeds):
# their NICs' speeds are estimated from the PCI ids and links.
for m in dgx cpu2s laptop thismachine nic1g100g gpunode farnic; do
    sysfs=""; [ -d "$FIX/$m/sys" ] && sysfs=$FIX/$m
    for fmt in txt json; do
        flag=""; [ $fmt = json ] && flag=--json
        env ${sysfs:+DREAMDDP_SYSFS_ROOT=$sysfs} "$DDTOPO" --topo "$FIX/$m/topo.xml" $flag \
            >"$TMP/out" 2>"$TMP/err" || fail "ddtopo $flag on $m exited $?"
        normalize <"$TMP/out" >"$TMP/$m.$fmt"
        if [ -n "${DDTEST_UPDATE_GOLDEN:-}" ]; then
            cp "$TMP/$m.$fmt" "$GOLD/$m.$fmt"
        fi
        if diff -u "$GOLD/$m.$fmt" "$TMP/$m.$fmt" >"$TMP/diff"; then
            pass "golden $m.$fmt"
        else
            fail "ddtopo $flag on $m differs from $GOLD/$m.$fmt"
            cat "$TMP/diff"
        fi
    done
    python3 -m json.tool "$TMP/$m.json" >/dev/null || fail "$m.json is not JSON"
done

# Offline, the 100 GbE add-in card wins over the onboard 1 GbE port named
# first, on the GPU node the NIC of no known family by its PCIe link, and a
# faster NIC on the other socket over a slower one beside the GPU.
"$DDTOPO" --topo "$FIX/nic1g100g/topo.xml" >"$TMP/est"
expect_grep "$TMP/est" "chosen: enp65s0f0: first of 2 usable by kind, speed and nearness: Ethernet 100 Gb/s estimated from ConnectX-5 (15b3:1017) on PCIe x16 Gen3" "the 100 GbE ConnectX is chosen over the 1 GbE port, and says why"
expect_grep "$TMP/est" "eno1: Ethernet, 1 Gb/s (estimated from I210 (8086:1533) on PCIe x1 Gen2)" "the onboard port's speed is estimated"
"$DDTOPO" --topo "$FIX/gpunode/topo.xml" >"$TMP/est"
expect_grep "$TMP/est" "chosen: ens5: first of 2 usable by kind, speed and nearness: Ethernet 200 Gb/s estimated from PCIe x16 Gen4, same PCI switch as GPU 0" "a NIC of no known family is estimated from its link"
"$DDTOPO" --topo "$FIX/farnic/topo.xml" >"$TMP/est"
expect_grep "$TMP/est" "chosen: ens9f0: first of 2 usable by kind, speed and nearness: Ethernet 100 Gb/s estimated from ConnectX-6 Dx (15b3:101d) on PCIe x16 Gen4" "the faster NIC on the other socket is chosen"
expect_grep "$TMP/est" "not chosen: slower than ens9f0 (25000 < 100000 Mb/s)" "the NIC beside the GPU is slower"

r=0
while [ $r -lt 8 ]; do
    DREAMDDP_SYSFS_ROOT=$FIX/dgx "$DDTOPO" --topo "$FIX/dgx/topo.xml" --json \
        --local-rank $r --local-size 8 >"$TMP/r$r.json"
    expect_grep "$TMP/r$r.json" "\"chosen\": {\"name\": \"ib$r\"" \
        "dgx local rank $r chooses ib$r"
    expect_grep "$TMP/r$r.json" "same PCI switch as GPU $r" \
        "dgx local rank $r: ib$r shares GPU $r's PCI switch"
    r=$((r + 1))
done

DREAMDDP_SYSFS_ROOT=$FIX/cpu2s DREAMDDP_NET_IFNAME==nosuchif0 "$DDTOPO" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && pass "impossible DREAMDDP_NET_IFNAME exits 1" || fail "exit $rc"
expect_grep "$TMP/err" "DREAMDDP_NET_IFNAME='=nosuchif0' matches no interface; this host has eno1, ens3f0, lo" \
    "the error names the value and the interfaces"
DREAMDDP_SYSFS_ROOT=$FIX/cpu2s DREAMDDP_NET_IFNAME=eno "$DDTOPO" --json >"$TMP/out"
expect_grep "$TMP/out" '"chosen": {"name": "eno1"' "DREAMDDP_NET_IFNAME=eno chooses eno1"
DREAMDDP_SYSFS_ROOT=$FIX/cpu2s DREAMDDP_NUM_STREAMS=5 "$DDTOPO" --json >"$TMP/out"
expect_grep "$TMP/out" '"streams": 5,' "DREAMDDP_NUM_STREAMS overrides"
expect_grep "$TMP/out" '"stream_use": {"gloo_contexts": 5, "gloo_slice_min_bytes": 1048576, "ucx_endpoints_per_peer": 5, "nccl_env": {"NCCL_SOCKET_NTHREADS": 5, "NCCL_NSOCKS_PERTHREAD": 1}}' \
    "ddtopo shows what each backend makes of 5 streams"
DREAMDDP_SYSFS_ROOT=$FIX/cpu2s DREAMDDP_NUM_STREAMS=1 "$DDTOPO" >"$TMP/out"
expect_grep "$TMP/out" "  nccl: NCCL's own socket threads (1 stream)" "one stream leaves NCCL's variables alone"
DREAMDDP_NUM_STREAMS=0 "$DDTOPO" >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] && pass "bad DREAMDDP_NUM_STREAMS exits 1" || fail "bad DREAMDDP_NUM_STREAMS"
expect_grep "$TMP/err" "DREAMDDP_NUM_STREAMS='0'" "the error names DREAMDDP_NUM_STREAMS"

"$DDTOPO" --help >"$TMP/out"; [ $? -eq 0 ] && pass "--help exits 0" || fail "--help"
expect_grep "$TMP/out" "usage: ddtopo" "--help prints usage"
"$DDTOPO" --bogus >/dev/null 2>&1; [ $? -eq 2 ] && pass "bad option exits 2" || fail "bad option"
"$DDTOPO" --markdown >/dev/null 2>&1; [ $? -eq 2 ] && pass "--markdown alone exits 2" || fail "--markdown"
"$DDTOPO" --topo /nonexistent.xml >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] && pass "missing --topo file exits 1" || fail "missing --topo"
expect_grep "$TMP/err" "/nonexistent.xml" "the error names the file"

"$DDTOPO" --config >"$TMP/out" || fail "--config"
expect_grep "$TMP/out" "DREAMDDP_NET_IFNAME = unset (default)" "--config lists DREAMDDP_NET_IFNAME"
expect_grep "$TMP/out" "DREAMDDP_TOPO_DUMP_FILE" "--config lists DREAMDDP_TOPO_DUMP_FILE"
"$DDTOPO" --config --markdown >"$TMP/out" || fail "--config --markdown"
expect_grep "$TMP/out" "| \`DREAMDDP_NUM_STREAMS\` |" "--config --markdown prints the table"

# This machine: the live probe must prefer a real interface to loopback.
"$DDTOPO" --json >"$TMP/live.json" || fail "ddtopo on this machine"
if grep -q '"name": "eth0"' "$TMP/live.json"; then
    expect_grep "$TMP/live.json" '"chosen": {"name": "eth0"' "this machine chooses eth0"
fi
DREAMDDP_NET_IFNAME=lo "$DDTOPO" --json >"$TMP/lo.json"
expect_grep "$TMP/lo.json" '"chosen": {"name": "lo"' "DREAMDDP_NET_IFNAME=lo chooses lo"
DREAMDDP_TOPO_DUMP_FILE=$TMP/dump.xml "$DDTOPO" >/dev/null || fail "DREAMDDP_TOPO_DUMP_FILE"
"$DDTOPO" --topo "$TMP/dump.xml" --json >"$TMP/out" || fail "reading the dump"
expect_grep "$TMP/out" '"source": "hwloc XML' "the dump reads back offline"

# The devices, through the loader dd_init uses: the fake module's two, and
# for cuda the same reason dd_init would give.
DREAMDDP_DEVICE=fake "$DDTOPO" >"$TMP/dev" 2>&1 || fail "ddtopo with DREAMDDP_DEVICE=fake"
expect_grep "$TMP/dev" "devices (DREAMDDP_DEVICE=fake, loaded as dd_init does): fake: module" "ddtopo loads the device module DREAMDDP_DEVICE names"
expect_grep "$TMP/dev" "  device 1: fake device 1, 1024 MiB" "ddtopo lists the module's devices"
DREAMDDP_DEVICE=cuda "$DDTOPO" --json >"$TMP/cuda.json" 2>/dev/null || fail "ddtopo with DREAMDDP_DEVICE=cuda"
if grep -q '"module": "cuda"' "$TMP/cuda.json"; then
    pass "ddtopo sees the CUDA devices"
else
    expect_grep "$TMP/cuda.json" '"why": "DREAMDDP_DEVICE=cuda: device module cuda is unavailable: no' "ddtopo says why the cuda module cannot run"
fi
# The backends, found, loaded and queried by the registry's code as dd_init
# does: the same modules, the same reasons, DREAMDDP_BACKENDS applied.
"$DDTOPO" --json >"$TMP/be.json" 2>&1 || fail "ddtopo --json for the backends"
DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=backend "$DDRUN" -n 1 --timeout 60 -- \
    "$top_builddir/examples/smoke" >"$TMP/init" 2>&1
if python3 - "$TMP/be.json" "$TMP/init" <<'PY'
import json, re, sys
report = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
assert report["backends_probed"], report
used = re.search(r"INFO backend: backends: (.*)$", log, re.M).group(1).split(", ")
# Available, but left out by this job (one rank: no aggregators, no device).
idle = re.findall(r"INFO backend: backend (\w+) is not started: ", log)
found = {b["name"]: b for b in report["backends"]}
assert sorted(used + idle) == sorted(n for n, b in found.items() if b["available"]), (used, idle, found)
for name, b in found.items():
    if not b["available"]:
        assert f"backend {name} is unavailable: {b['reason']}" in log, (name, b, log)
PY
then
    pass "ddtopo's backends are dd_init's, with dd_init's reasons"
else
    fail "ddtopo's backends against dd_init's"; cat "$TMP/be.json" "$TMP/init"
fi
DREAMDDP_BACKENDS=^gloo "$DDTOPO" >"$TMP/be" 2>&1
if grep -q "^  gloo " "$TMP/be"; then
    fail "DREAMDDP_BACKENDS=^gloo still lists gloo"; cat "$TMP/be"
else
    expect_grep "$TMP/be" "backends (DREAMDDP_BACKENDS=^gloo, loaded and queried as dd_init does, not started):" "DREAMDDP_BACKENDS=^gloo leaves gloo out"
fi
DREAMDDP_BACKENDS=nosuch "$DDTOPO" >"$TMP/be" 2>&1
expect_grep "$TMP/be" "names backend nosuch, but no module dd_backend_nosuch.so" "a DREAMDDP_BACKENDS module that is nowhere is named"
# ddtopo probe measures only what DREAMDDP_NET_IFNAME allows, every
# interface with --all.
DREAMDDP_NET_IFNAME=lo "$DDRUN" -n 2 --timeout 60 -- "$DDTOPO" probe --bytes 64K --pings 3 \
    >"$TMP/probe" 2>&1 || fail "ddtopo probe with DREAMDDP_NET_IFNAME=lo"
if grep -E '^0: [a-z]' "$TMP/probe" | grep -vE '^0: (lo |interface |only |chosen |would )' | grep -q .; then
    fail "ddtopo probe measured an interface DREAMDDP_NET_IFNAME=lo excludes"; cat "$TMP/probe"
else
    expect_grep "$TMP/probe" "0: lo               1  127.0.0.1" "ddtopo probe honours DREAMDDP_NET_IFNAME=lo"
fi
DREAMDDP_NET_IFNAME=lo "$DDRUN" -n 2 --timeout 60 -- "$DDTOPO" probe --bytes 64K --pings 3 --all \
    >"$TMP/probe" 2>&1 || fail "ddtopo probe --all"
expect_grep "$TMP/probe" "0: lo               1  127.0.0.1" "ddtopo probe --all measures lo"
if grep -q '"name": "eth0"' "$TMP/live.json"; then
    expect_grep "$TMP/probe" "0: eth0" "ddtopo probe --all measures eth0 too"
fi
# The transports UCX will use on the chosen interface, started as the UCX
# module starts it; or why there are none.
DREAMDDP_NET_IFNAME=lo "$DDTOPO" --json >"$TMP/tl.json" 2>"$TMP/tl.err" || fail "ddtopo --json for the transports"
if grep -q '"ucx_transports": {"probed": true' "$TMP/tl.json"; then
    expect_grep "$TMP/tl.json" '"net_devices": "lo"' "UCX is handed the chosen interface"
    expect_grep "$TMP/tl.json" '{"name": "tcp/lo", "network": true}' "UCX's network transport on lo is listed"
    UCX_NET_DEVICES=lo DREAMDDP_NET_IFNAME=eth0 "$DDTOPO" >"$TMP/tl" 2>&1
    expect_grep "$TMP/tl" "UCX_NET_DEVICES=lo (the user's), started as the UCX module starts it" "a user's UCX_NET_DEVICES is kept"
else
    expect_grep "$TMP/tl.json" '"why": "UCX not built in (configure found no UCX)"' "without UCX, the transports say why"
fi
finish
