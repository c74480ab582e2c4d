/*
 * The Gloo backend module. All of Gloo's C++ stays in this file: the ops
 * table's extern "C" entry points catch every exception and turn it into a
 * dd_status_t (Gloo's timeouts into DD_ERR_TIMED_OUT). Gloo's collectives
 * block, so they run on the module's threads and requests wait for them
 * there. Each context connects its pairs when first used, their
 * addresses exchanged through dd's store (dd_gloo_mesh), and the TCP device's
 * iface attribute is the user's GLOO_SOCKET_IFNAME, else the topology's
 * interface (services->ifname); without either the device binds the host
 * name's address (loopback when every rank is on this host). It never
 * sets a variable.
 *
 * Three threads take the queue in order, as ProcessGroupGloo's two workers
 * do, so that a collective starts while the one before it drains (the
 * runtime keeps two in flight, three under delayed averaging): every
 * collective has its own tag, and each rank starts them in the same order,
 * so the k-th waits only on collectives that every rank has started.
 *
 * Collectives of at most dd_gloo_control_bytes (the runtime's digests and
 * its agreement on the times, a small layer's average) take a lane of
 * their own: one more thread, in the order they were posted, over a
 * context of their own. On the data lane a 256-byte message waited for a thread
 * while two large ones ran, and then on their sockets behind their data:
 * the workers' agreement at a window's start held the window's first
 * syncs back while one large collective ran alone, 165 to 262 ms a window
 * (train simulator, 4 hosts at 1 Gbit/s, bench/NOTES.md). Each lane
 * keeps the posting order, and which lane a collective takes depends only
 * on its size, so every rank's k-th collective of a lane is the same one.
 *
 * services->streams (N) sets how many contexts the module opens, each over
 * its own TCP device (its own sockets and its own reading thread), as
 * ProcessGroupGloo does with several devices. A collective of at least
 * 2 x dd_gloo_stripe_bytes is cut into min(N, bytes / dd_gloo_stripe_bytes)
 * contiguous slices at element boundaries, slice i run on context i, all at
 * once; every rank cuts the same message the same way, since the slice
 * count depends only on the size and N, which the ranks agreed on. A smaller
 * collective runs whole on context (sequence number mod N), and send and
 * recv on context (tag mod N), which both ends compute alike.
 *
 * Send and recv never wait behind one another or behind a collective:
 * Gloo has no test of an unbound buffer, only a blocking wait, and a
 * receive may be posted long before its message comes (an aggregator
 * keeps its workers' next headers posted, as it does over UCX), so each
 * open one is waited for on a waiter thread of its own, taken from a pool
 * that grows to the number open at once. Their waits have no timeout of
 * Gloo's: a wait that times out in Gloo closes every pair of its context,
 * so the callers' own timeouts end them, through abortWaitSend and
 * abortWaitRecv; a lost peer still ends them with the pair's error.
 */
#include <dreamddp/backend.h>

extern "C" {
#include "backends/coll/coll.h"
#include "backends/netdev.h"
#include "core/reduce.h"
#include "core/time.h"
}

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <unordered_set>
#include <vector>

namespace
{

/* Slots of send and recv: above every prefix Gloo's collectives use. */
const uint64_t dd_gloo_p2p_slot = 0xddull << 56;

/* Slots of the recursive doubling allgather (round in bits 32 to 39). */
const uint64_t dd_gloo_rd_slot = 0xdcull << 56;

/* Each slice of a striped collective carries at least this many bytes:
 * below it, the cost of a slice's own start (a round of handshakes per
 * ring step) outweighs a second connection's bandwidth. */
const size_t dd_gloo_stripe_bytes = DD_NETDEV_GLOO_STRIPE_BYTES;

/* How long a send or recv waits in Gloo: for ever, in effect (see the
 * top); a year keeps the deadline Gloo computes from overflowing. */
const std::chrono::milliseconds dd_gloo_p2p_forever =
    std::chrono::hours(24 * 365);

/* A wait ended by abortWaitSend or abortWaitRecv. */
class dd_gloo_canceled : public std::exception
{
  public:
    const char *what() const noexcept override
    {
        return "canceled";
    }
};

/* Messages up to this size take Gloo's bcube (halving-doubling with base
 * 2) when the world is a power of two; larger ones the ring. */
const size_t dd_gloo_small_bytes = 64 * 1024;

/* Collectives up to this size (the whole buffer) take the control lane. */
const size_t dd_gloo_control_bytes = 64 * 1024;

/* The stream a collective on the control lane names: its own context. */
const int dd_gloo_control = -1;

/* Which rank each peer address Gloo may name in an error belongs to
 * ("[ip]:port", without Gloo's sequence number), one per pair connected. */
struct dd_gloo_peer_names {
    std::mutex mutex;
    std::vector<std::pair<std::string, int>> list;
};

/*
 * A Gloo context whose pairs are connected when first used, as PyTorch's
 * lazy init does with newer Gloo: a full mesh binds a port for each of
 * its world - 1 pairs on every rank (this Gloo listens on a port per
 * pair), and 128 ranks on one host, two contexts each, ran out of
 * ephemeral ports, and took seconds to connect the 8,128 pairs of each.
 * Each operation names the peers its algorithm talks to before it runs
 * (the ring's two neighbours, bcube's and the broadcast tree's partners, a
 * send's or recv's peer: every relation symmetric, so the peer names this
 * rank in the same operation); a pair not connected yet is created, its
 * address published under "p/ME/PEER", the peer's read from
 * "p/PEER/ME", and connected. Peers are connected in increasing rank
 * order, so no two ranks wait for each other (the lowest rank of any
 * cycle would wait on a lower one). A thread that needs a pair another
 * thread is connecting waits for it.
 */
class dd_gloo_mesh : public gloo::Context
{
  public:
    dd_gloo_mesh(const dd_backend_services_t *svc, std::string prefix,
                 std::shared_ptr<gloo::transport::Device> device,
                 std::chrono::milliseconds timeout, dd_gloo_peer_names *names)
        : gloo::Context(svc->rank, svc->world_size), svc_(svc),
          prefix_(std::move(prefix)), names_(names),
          state_((size_t)svc->world_size, dd_gloo_pair_none),
          pending_((size_t)svc->world_size)
    {
        device_ = std::move(device);
        setTimeout(timeout);
        transportContext_ = device_->createContext(rank, size);
        transportContext_->setTimeout(timeout);
    }

    /* Connects every peer in peers not connected yet (see the class);
     * forever: the wait for a peer's address has no timeout (a send's or
     * recv's: the peer may post its first long after, and the caller's
     * own timeout ends it). */
    void connect(std::vector<int> peers, bool forever = false)
    {
        std::vector<int> mine;
        std::sort(peers.begin(), peers.end());
        peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (int p : peers) {
                if (p == rank || state_[(size_t)p] != dd_gloo_pair_none) {
                    continue;
                }
                auto &pair = transportContext_->createPair(p);
                auto bytes = pair->address().bytes();
                std::string key = pair_key(rank, p);
                dd_status_t status = svc_->store_set(
                    svc_->arg, key.c_str(), bytes.data(), bytes.size());
                if (status != DD_OK) {
                    throw gloo::IoException("store key " + key + ": status " +
                                            std::to_string((int)status));
                }
                state_[(size_t)p] = dd_gloo_pair_connecting;
                mine.push_back(p);
            }
        }
        for (int p : mine) {
            connect_one(p, forever);
        }
        std::unique_lock<std::mutex> lock(mutex_);
        for (int p : peers) {
            cond_.wait(lock, [this, p] {
                return p == rank ||
                       state_[(size_t)p] != dd_gloo_pair_connecting;
            });
            if (p != rank && state_[(size_t)p] == dd_gloo_pair_failed) {
                throw gloo::IoException("connecting to rank " +
                                        std::to_string(p) + " failed before");
            }
        }
    }

    /*
     * Runs op, a send's or recv's post to peer, now if the pair is
     * connected, else once it is, after the posts before it: Gloo matches
     * a recv to the sends of its slot in the order they were posted, so
     * the order must be the callers' (posted from the waiters, two pushes
     * of one tag crossed, and an aggregator rejected the second as a
     * duplicate). The post's waiter calls connect.
     */
    void post(int peer, std::function<void()> op)
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (state_[(size_t)peer] != dd_gloo_pair_connected) {
                pending_[(size_t)peer].push_back(std::move(op));
                return;
            }
        }
        op();
    }

    /* Ends the waits for a peer's address (finalize); posts not made are
     * dropped with their requests. */
    void stop()
    {
        stopping_ = true;
    }

  private:
    enum {
        dd_gloo_pair_none,
        dd_gloo_pair_connecting,
        dd_gloo_pair_connected,
        dd_gloo_pair_failed
    };

    std::string pair_key(int from, int to) const
    {
        return prefix_ + "p/" + std::to_string(from) + "/" + std::to_string(to);
    }

    /* Waits for peer p's address, in short waits so that finalize ends
     * it, and connects; the state says how it went. */
    void connect_one(int p, bool forever)
    {
        int state = dd_gloo_pair_failed;
        try {
            std::string key = pair_key(p, rank);
            const char *keys[1] = {key.c_str()};
            auto deadline = std::chrono::steady_clock::now() + getTimeout();
            dd_status_t status;
            while ((status = svc_->store_wait(svc_->arg, keys, 1, 0.1)) ==
                   DD_ERR_TIMED_OUT) {
                if (stopping_) {
                    throw gloo::IoException("finalized while waiting for "
                                            "rank " +
                                            std::to_string(p));
                }
                if (!forever && std::chrono::steady_clock::now() > deadline) {
                    throw gloo::IoException("Timed out waiting for rank " +
                                            std::to_string(p) +
                                            " to connect (DREAMDDP_TIMEOUT_S)");
                }
            }
            void *value = nullptr;
            size_t len = 0;
            if (status == DD_OK) {
                status = svc_->store_get(svc_->arg, key.c_str(), &value, &len);
            }
            if (status != DD_OK) {
                throw gloo::IoException("store key " + key + ": status " +
                                        std::to_string((int)status));
            }
            std::vector<char> bytes((char *)value, (char *)value + len);
            free(value);
            std::string name = gloo::transport::tcp::Address(bytes).str();
            {
                std::lock_guard<std::mutex> lock(names_->mutex);
                names_->list.emplace_back(name.substr(0, name.find('$')), p);
            }
            transportContext_->getPair(p)->connect(bytes);
            state = dd_gloo_pair_connected;
        } catch (...) {
            finish(p, state);
            throw;
        }
        finish(p, state);
    }

    /* The connection's end: the posts that waited for it go out, in their
     * order (an error of one shows in its wait, as the pair's). */
    void finish(int p, int state)
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto &ops = pending_[(size_t)p];
            for (auto &op : ops) {
                try {
                    if (state == dd_gloo_pair_connected) {
                        op();
                    }
                } catch (...) {
                }
            }
            ops.clear();
            state_[(size_t)p] = state;
        }
        cond_.notify_all();
    }

    const dd_backend_services_t *svc_;
    std::string prefix_;
    dd_gloo_peer_names *names_;
    std::mutex mutex_;
    std::condition_variable cond_;
    std::vector<int> state_;
    std::vector<std::deque<std::function<void()>>> pending_;
    std::atomic<bool> stopping_{false};
};

/* The peers of a ring: the ranks either side. */
std::vector<int> dd_gloo_ring_peers(int rank, int size)
{
    return {(rank + 1) % size, (rank + size - 1) % size};
}

/* The peers of bcube with base 2 over a power-of-two world: the ranks
 * that differ from this one in one bit. */
std::vector<int> dd_gloo_bcube_peers(int rank, int size)
{
    std::vector<int> peers;
    for (int d = 1; d < size; d <<= 1) {
        peers.push_back(rank ^ d);
    }
    return peers;
}

/* The peers of Gloo's binomial broadcast from root (gloo/broadcast.cc). */
std::vector<int> dd_gloo_tree_peers(int rank, int size, int root)
{
    std::vector<int> peers;
    size_t vsize = (size_t)size;
    size_t vrank = ((size_t)rank + vsize - (size_t)root) % vsize;
    size_t dim = 0;
    while (((size_t)1 << dim) < vsize) {
        dim++;
    }
    size_t mask = ((size_t)1 << dim) - 1;
    for (size_t i = 0; i < dim; i++) {
        mask ^= (size_t)1 << i;
        size_t vpeer = vrank ^ ((size_t)1 << i);
        if ((vrank & mask) == 0 && vpeer < vsize) {
            peers.push_back((int)((vpeer + (size_t)root) % vsize));
        }
    }
    return peers;
}

/* Gloo's errors as statuses: its messages are all we have. */
dd_status_t dd_gloo_translate(const std::string &what, bool io)
{
    if (what.find("Timed out") != std::string::npos ||
        what.find("timed out") != std::string::npos ||
        what.find("Timeout") != std::string::npos) {
        return DD_ERR_TIMED_OUT;
    }
    if (io || what.find("closed") != std::string::npos ||
        what.find("reset") != std::string::npos) {
        return DD_ERR_PEER_LOST;
    }
    return DD_ERR_BACKEND;
}

} // namespace

/* A queued operation; the thread runs fn and fills status and message. */
struct dd_backend_request {
    std::function<void()> fn;
    bool started = false;
    bool done = false;
    bool abandoned = false;
    dd_status_t status = DD_OK;
    std::string message;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    bool send = false;    /* a send's buffer, else a recv's */
    bool control = false; /* on the control lane (see the top) */
    std::vector<char> scratch;
};

struct dd_backend {
    const dd_backend_services_t *svc = nullptr;
    /* One device and one context per stream; [0] is the one p2p and
     * errors' addresses know first. */
    std::vector<std::shared_ptr<gloo::transport::Device>> devices;
    std::vector<std::shared_ptr<dd_gloo_mesh>> contexts;
    /* The control lane's device and context (see the top). */
    std::shared_ptr<gloo::transport::Device> control_device;
    std::shared_ptr<dd_gloo_mesh> control_context;
    std::chrono::milliseconds timeout{0};
    /* The peers' addresses as Gloo writes them in its errors, so that an
     * error names the rank too. */
    dd_gloo_peer_names peer_names;
    uint32_t coll_seq = 0;
    std::mutex mutex;
    std::condition_variable cond;
    std::deque<dd_backend_request *> queue;
    std::deque<dd_backend_request *> control_queue;
    bool stopping = false;
    std::vector<std::thread> threads; /* the data lane's, then the control's */
    /* Sends and recvs: their waiters (each waits for one at a time), the
     * ones not yet taken by a waiter, how many waiters have none, and
     * every one not done, which finalize aborts. */
    std::condition_variable p2p_cond;
    std::deque<dd_backend_request *> p2p_queue;
    size_t p2p_idle = 0;
    std::vector<std::thread> p2p_threads;
    std::unordered_set<dd_backend_request *> p2p_open;
};

/* Collectives in flight at once on the data lane: the engine's deepest
 * pipe (DD_ENGINE_DEPTH_DELAYED); ProcessGroupGloo's default is two. */
static const int dd_gloo_threads = 3;

namespace
{

void dd_gloo_run(dd_backend_request *req)
{
    try {
        req->fn();
        req->status = DD_OK;
    } catch (const dd_gloo_canceled &e) {
        req->message = e.what();
        req->status = DD_ERR_CANCELED;
    } catch (const gloo::IoException &e) {
        req->message = e.what();
        req->status = dd_gloo_translate(req->message, true);
    } catch (const std::exception &e) {
        req->message = e.what();
        req->status = dd_gloo_translate(req->message, false);
    } catch (...) {
        req->message = "unknown exception";
        req->status = DD_ERR_INTERNAL;
    }
}

/* With the lock held: the request has run; its owner, waiting or gone,
 * is told. */
static void dd_gloo_finished(dd_backend_t *b, dd_backend_request *req)
{
    req->done = true;
    if (req->abandoned) {
        delete req;
    }
    b->cond.notify_all();
    b->svc->completed(b->svc->arg); /* DD_BACKEND_CAP_NOTIFY */
}

/* A lane's thread: takes its queue in order. */
void dd_gloo_thread(dd_backend_t *b, bool control)
{
    std::unique_lock<std::mutex> lock(b->mutex);
    auto &queue = control ? b->control_queue : b->queue;
    for (;;) {
        b->cond.wait(lock,
                     [b, &queue] { return b->stopping || !queue.empty(); });
        if (queue.empty()) {
            return;
        }
        dd_backend_request *req = queue.front();
        queue.pop_front();
        req->started = true;
        lock.unlock();
        dd_gloo_run(req);
        lock.lock();
        dd_gloo_finished(b, req);
    }
}

/* A send's or recv's waiter: takes one at a time and waits for it. */
void dd_gloo_waiter(dd_backend_t *b)
{
    std::unique_lock<std::mutex> lock(b->mutex);
    for (;;) {
        b->p2p_cond.wait(lock,
                         [b] { return b->stopping || !b->p2p_queue.empty(); });
        if (b->p2p_queue.empty()) {
            return;
        }
        dd_backend_request *req = b->p2p_queue.front();
        b->p2p_queue.pop_front();
        b->p2p_idle--;
        req->started = true;
        lock.unlock();
        dd_gloo_run(req);
        lock.lock();
        b->p2p_idle++;
        b->p2p_open.erase(req);
        dd_gloo_finished(b, req);
    }
}

/* Makes sure a waiter will be free for one more send or recv (so that
 * none waits behind another), starting one if none is; before the
 * operation is posted, so that a thread that cannot start leaves nothing
 * posted behind. */
void dd_gloo_waiter_reserve(dd_backend_t *b)
{
    std::lock_guard<std::mutex> lock(b->mutex);
    if (b->p2p_idle <= b->p2p_queue.size()) {
        b->p2p_threads.emplace_back(dd_gloo_waiter, b);
        b->p2p_idle++;
    }
}

/* Ends a wait on a send's or recv's buffer, or the next one. */
void dd_gloo_abort_wait(dd_backend_request *req)
{
    if (req->send) {
        req->buffer->abortWaitSend();
    } else {
        req->buffer->abortWaitRecv();
    }
}

dd_status_t dd_gloo_enqueue(dd_backend_t *b, dd_backend_request *req,
                            dd_backend_request_t **req_p)
{
    {
        std::lock_guard<std::mutex> lock(b->mutex);
        (req->control ? b->control_queue : b->queue).push_back(req);
    }
    b->cond.notify_all();
    *req_p = req;
    return DD_OK;
}

/* The attributes of the TCP device: which address to bind. */
gloo::transport::tcp::attr dd_gloo_attr(const dd_backend_services_t *svc)
{
    gloo::transport::tcp::attr attr;
    const char *ifname = svc->ifname;
    char host[256] = "";

    /* Gloo itself reads no variable: GLOO_SOCKET_IFNAME is the name
     * PyTorch gave this setting, and users expect it to win. */
    if (dd_netdev_user_set("GLOO_SOCKET_IFNAME")) {
        ifname = getenv("GLOO_SOCKET_IFNAME");
        dd_coll_log(svc, DD_BACKEND_LOG_DEBUG,
                    "GLOO_SOCKET_IFNAME=%s kept as the user set it", ifname);
    }
    if (ifname != nullptr) {
        attr.iface = ifname;
    } else if (svc->local_size == svc->world_size) {
        attr.hostname = "127.0.0.1";
    } else {
        gethostname(host, sizeof(host) - 1);
        attr.hostname = host;
    }
    return attr;
}

/* out = in1 op in2, as Gloo's reduction functions are called. */
template <dd_dtype_t D, dd_reduce_op_t O>
void dd_gloo_reduce(void *out, const void *in1, const void *in2, size_t n)
{
    if (out == in2) {
        dd_coll_reduce(out, in1, n, D, O);
        return;
    }
    if (out != in1) {
        memcpy(out, in1, n * dd_coll_dtype_size(D));
    }
    dd_coll_reduce(out, in2, n, D, O);
}

template <dd_dtype_t D>
gloo::AllreduceOptions::Func dd_gloo_func(dd_reduce_op_t op)
{
    switch (op) {
    case DD_REDUCE_MAX:
        return dd_gloo_reduce<D, DD_REDUCE_MAX>;
    case DD_REDUCE_MIN:
        return dd_gloo_reduce<D, DD_REDUCE_MIN>;
    default:
        return dd_gloo_reduce<D, DD_REDUCE_SUM>;
    }
}

gloo::AllreduceOptions::Func dd_gloo_func(dd_dtype_t dtype, dd_reduce_op_t op)
{
    switch (dtype) {
    case DD_DTYPE_F32:
        return dd_gloo_func<DD_DTYPE_F32>(op);
    case DD_DTYPE_F64:
        return dd_gloo_func<DD_DTYPE_F64>(op);
    case DD_DTYPE_F16:
        return dd_gloo_func<DD_DTYPE_F16>(op);
    case DD_DTYPE_BF16:
        return dd_gloo_func<DD_DTYPE_BF16>(op);
    case DD_DTYPE_I32:
        return dd_gloo_func<DD_DTYPE_I32>(op);
    case DD_DTYPE_I64:
        return dd_gloo_func<DD_DTYPE_I64>(op);
    default:
        return dd_gloo_func<DD_DTYPE_U8>(op);
    }
}

/* Stream s's context, or the control lane's. */
std::shared_ptr<dd_gloo_mesh> dd_gloo_context(const dd_backend_t *b, int s)
{
    return s == dd_gloo_control ? b->control_context : b->contexts[(size_t)s];
}

/*
 * Gloo's options take typed buffers; the element size is what matters.
 * Out of place, Gloo copies each segment of in to buf just before it first
 * sends or reduces it, so the copy overlaps the transfers instead of
 * delaying the first send by a copy of the whole buffer.
 */
template <typename T>
void dd_gloo_allreduce_typed(dd_backend_t *b, int stream, const void *in,
                             void *buf, size_t count, dd_dtype_t dtype,
                             dd_reduce_op_t op, uint32_t tag)
{
    auto context = dd_gloo_context(b, stream);
    gloo::AllreduceOptions opts(context);
    int world = b->svc->world_size;
    bool bcube =
        (world & (world - 1)) == 0 && count * sizeof(T) <= dd_gloo_small_bytes;

    if (in != buf) {
        opts.setInput((T *)const_cast<void *>(in), count);
    }
    opts.setOutput((T *)buf, count);
    opts.setReduceFunction(dd_gloo_func(dtype, op));
    opts.setTag(tag);
    opts.setTimeout(b->timeout);
    opts.setAlgorithm(bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                            : gloo::AllreduceOptions::Algorithm::RING);
    context->connect(bcube ? dd_gloo_bcube_peers(context->rank, world)
                           : dd_gloo_ring_peers(context->rank, world));
    gloo::allreduce(opts);
}

/* One slice of a collective: elements [off, off + n) on stream. */
typedef std::function<void(int stream, size_t off, size_t n)> dd_gloo_slice_fn;

/* How many slices a collective of bytes is cut into (see the top). */
int dd_gloo_slices(const dd_backend_t *b, size_t bytes)
{
    size_t n = bytes / dd_gloo_stripe_bytes;
    size_t streams = b->contexts.size();

    return (int)(n < 1 ? 1 : (n < streams ? n : streams));
}

/*
 * Runs body over count elements of elem bytes: whole on stream `whole`
 * when one slice is all it takes, else slice i on stream i, slice 0 on
 * this thread and the others on threads of their own, each until it ends
 * (so no slice outlives its buffers); then rethrows the first slice's
 * error.
 */
void dd_gloo_stripe(const dd_backend_t *b, int whole, size_t count, size_t elem,
                    const dd_gloo_slice_fn &body)
{
    int n = whole == dd_gloo_control ? 1 : dd_gloo_slices(b, count * elem);

    if (n == 1) {
        body(whole, 0, count);
        return;
    }
    std::vector<std::exception_ptr> errors((size_t)n);
    auto run = [&](int i) {
        size_t off = count * (size_t)i / (size_t)n;
        size_t end = count * (size_t)(i + 1) / (size_t)n;
        try {
            body(i, off, end - off);
        } catch (...) {
            errors[(size_t)i] = std::current_exception();
        }
    };
    std::vector<std::thread> threads;
    for (int i = 1; i < n; i++) {
        threads.emplace_back(run, i);
    }
    run(0);
    for (auto &t : threads) {
        t.join();
    }
    for (auto &e : errors) {
        if (e) {
            std::rethrow_exception(e);
        }
    }
}

/* buf = allreduce(in) over stream's context; in may be buf. */
void dd_gloo_allreduce_slice(dd_backend_t *b, int stream, const void *in,
                             void *buf, size_t count, dd_dtype_t dtype,
                             dd_reduce_op_t op, uint32_t tag)
{
    switch (dd_coll_dtype_size(dtype)) {
    case 1:
        dd_gloo_allreduce_typed<uint8_t>(b, stream, in, buf, count, dtype, op,
                                         tag);
        break;
    case 2:
        dd_gloo_allreduce_typed<uint16_t>(b, stream, in, buf, count, dtype, op,
                                          tag);
        break;
    case 4:
        dd_gloo_allreduce_typed<uint32_t>(b, stream, in, buf, count, dtype, op,
                                          tag);
        break;
    default:
        dd_gloo_allreduce_typed<uint64_t>(b, stream, in, buf, count, dtype, op,
                                          tag);
        break;
    }
}

/* buf = allreduce(in), striped; in may be buf. */
void dd_gloo_allreduce_buf(dd_backend_t *b, int whole, const void *in,
                           void *buf, size_t count, dd_dtype_t dtype,
                           dd_reduce_op_t op, uint32_t tag)
{
    size_t es = dd_coll_dtype_size(dtype);

    if (count == 0) {
        return;
    }
    if (b->svc->world_size == 1 && in != buf) {
        memcpy(buf, in, count * es);
    } else if (b->svc->world_size > 1) {
        dd_gloo_stripe(b, whole, count, es, [&](int s, size_t off, size_t n) {
            dd_gloo_allreduce_slice(b, s, (const char *)in + off * es,
                                    (char *)buf + off * es, n, dtype, op, tag);
        });
    }
    if (op == DD_REDUCE_AVG) {
        dd_coll_divide(buf, count, dtype, b->svc->world_size);
    }
}

/* A tag that ranks posting different collectives do not share, so they
 * time out instead of mixing data. */
uint32_t dd_gloo_tag(dd_backend_t *b, dd_coll_t coll,
                     const dd_backend_args_t *args)
{
    return (dd_coll_signature(coll, args) << 16) | (b->coll_seq & 0xffffu);
}

/* The stream a collective that is not cut runs on, by its sequence number
 * (the same on every rank), and the next number. */
int dd_gloo_next_stream(dd_backend_t *b)
{
    return (int)(b->coll_seq++ % (uint32_t)b->contexts.size());
}

/* Where a collective of bytes (its whole buffer) runs: the control lane
 * when it is that small, else whole on the next stream (or cut). The
 * sequence number advances either way, so that every collective's tag
 * and stream stay what they were without the lane. */
int dd_gloo_lane(dd_backend_t *b, size_t bytes, dd_backend_request *req)
{
    int whole = dd_gloo_next_stream(b);

    if (bytes <= dd_gloo_control_bytes) {
        req->control = true;
        return dd_gloo_control;
    }
    return whole;
}

dd_status_t dd_gloo_check_host(dd_backend_t *b, dd_coll_t coll,
                               const dd_backend_args_t *args)
{
    if (args->mem_type != DD_MEM_HOST) {
        return dd_coll_error(b->svc, DD_ERR_UNSUPPORTED,
                             "%s: Gloo runs on host memory only",
                             dd_coll_kind_name(coll));
    }
    return DD_OK;
}

/* Runs fn, a C++ body, turning any exception into a reported status. */
dd_status_t dd_gloo_guard(const dd_backend_services_t *svc, const char *what,
                          const std::function<dd_status_t()> &fn)
{
    try {
        return fn();
    } catch (const gloo::IoException &e) {
        return dd_coll_error(svc, dd_gloo_translate(e.what(), true), "%s: %s",
                             what, e.what());
    } catch (const std::bad_alloc &) {
        return dd_coll_error(svc, DD_ERR_NO_MEMORY, "%s: no memory", what);
    } catch (const std::exception &e) {
        return dd_coll_error(svc, dd_gloo_translate(e.what(), false), "%s: %s",
                             what, e.what());
    } catch (...) {
        return dd_coll_error(svc, DD_ERR_INTERNAL, "%s: unknown exception",
                             what);
    }
}

/* Gloo names a failed peer by its address: the rank goes beside it. */
std::string dd_gloo_name_peers(dd_backend_t *b, std::string message)
{
    std::lock_guard<std::mutex> lock(b->peer_names.mutex);
    for (const auto &entry : b->peer_names.list) {
        const std::string &addr = entry.first;
        size_t at = addr.empty() ? std::string::npos : message.find(addr);
        if (at != std::string::npos &&
            message.compare(at + addr.size(), 7, " (rank ") != 0) {
            message.insert(at + addr.size(), " (rank " +
                                                 std::to_string(entry.second) +
                                                 " of the communicator)");
        }
    }
    return message;
}

/* A context over a TCP device of its own (*device_p), its keys under
 * prefix in the store; its pairs connect when first used. */
std::shared_ptr<dd_gloo_mesh>
dd_gloo_connect(dd_backend_t *b, const gloo::transport::tcp::attr &attr,
                const std::string &prefix,
                std::shared_ptr<gloo::transport::Device> *device_p)
{
    *device_p = gloo::transport::tcp::CreateDevice(attr);
    return std::make_shared<dd_gloo_mesh>(b->svc, prefix, *device_p, b->timeout,
                                          &b->peer_names);
}

} // namespace

extern "C" {

static dd_status_t dd_gloo_query(char *why, size_t size)
{
    return DD_OK;
}

static dd_status_t dd_gloo_init(const dd_backend_services_t *svc,
                                dd_backend_t **backend_p)
{
    return dd_gloo_guard(svc, "init", [&]() {
        std::unique_ptr<dd_backend_t> b(new dd_backend_t);
        b->svc = svc;
        b->timeout =
            std::chrono::milliseconds((long long)(svc->timeout_s * 1e3));
        auto attr = dd_gloo_attr(svc);
        int streams = svc->streams > 0 ? svc->streams : 1;
        for (int i = 0; i < streams; i++) {
            /* Stream 0 keeps the keys of a single-stream job. */
            b->devices.emplace_back();
            b->contexts.push_back(dd_gloo_connect(
                b.get(), attr, i ? "s" + std::to_string(i) + "/" : "",
                &b->devices.back()));
        }
        b->control_context =
            dd_gloo_connect(b.get(), attr, "c/", &b->control_device);
        for (int t = 0; t < dd_gloo_threads; t++) {
            b->threads.emplace_back(dd_gloo_thread, b.get(), false);
        }
        b->threads.emplace_back(dd_gloo_thread, b.get(), true);
        dd_coll_log(svc, DD_BACKEND_LOG_DEBUG,
                    "connected over %s, %d stream%s (messages of %zu bytes "
                    "and more are cut across them)",
                    b->devices[0]->str().c_str(), streams,
                    streams == 1 ? "" : "s", 2 * dd_gloo_stripe_bytes);
        *backend_p = b.release();
        return DD_OK;
    });
}

static void dd_gloo_finalize(dd_backend_t *b)
{
    {
        /* A recv still open would wait for ever: its waiter is freed. */
        std::lock_guard<std::mutex> lock(b->mutex);
        b->stopping = true;
        for (auto *req : b->p2p_open) {
            dd_gloo_abort_wait(req);
        }
        for (auto &context : b->contexts) {
            context->stop();
        }
        if (b->control_context) {
            b->control_context->stop();
        }
    }
    b->cond.notify_all();
    b->p2p_cond.notify_all();
    for (auto &thread : b->threads) {
        thread.join();
    }
    for (auto &thread : b->p2p_threads) {
        thread.join();
    }
    try {
        b->contexts.clear();
        b->control_context.reset();
        b->devices.clear();
        b->control_device.reset();
    } catch (...) {
    }
    delete b;
}

static int dd_gloo_score(dd_backend_t *b, dd_backend_op_t op,
                         dd_mem_type_t mem_type, size_t bytes)
{
    if (mem_type != DD_MEM_HOST) {
        return 0;
    }
    /* Native collectives beat the shared ones over UCX; UCX's tagged
     * messages beat Gloo's for send and recv. */
    return op == DD_BACKEND_OP_SEND || op == DD_BACKEND_OP_RECV ? 30 : 50;
}

static dd_status_t dd_gloo_allreduce(dd_backend_t *b,
                                     const dd_backend_args_t *args,
                                     dd_backend_request_t **req_p)
{
    dd_status_t status = dd_gloo_check_host(b, DD_COLL_ALLREDUCE, args);
    if (status != DD_OK) {
        return status;
    }
    return dd_gloo_guard(b->svc, "allreduce", [&]() {
        auto *req = new dd_backend_request;
        dd_backend_args_t a = *args;
        uint32_t tag = dd_gloo_tag(b, DD_COLL_ALLREDUCE, args);
        int whole = dd_gloo_lane(b, a.count * dd_coll_dtype_size(a.dtype), req);
        req->fn = [b, a, tag, whole]() {
            dd_gloo_allreduce_buf(b, whole, a.sendbuf, a.recvbuf, a.count,
                                  a.dtype, a.op, tag);
        };
        return dd_gloo_enqueue(b, req, req_p);
    });
}

/* Gloo of this version has no reduce-scatter with options, so this
 * allreduces a copy and keeps this rank's share: twice the traffic of a
 * ring reduce-scatter. */
static dd_status_t dd_gloo_reduce_scatter(dd_backend_t *b,
                                          const dd_backend_args_t *args,
                                          dd_backend_request_t **req_p)
{
    dd_status_t status = dd_gloo_check_host(b, DD_COLL_REDUCE_SCATTER, args);
    if (status != DD_OK) {
        return status;
    }
    return dd_gloo_guard(b->svc, "reduce_scatter", [&]() {
        auto *req = new dd_backend_request;
        dd_backend_args_t a = *args;
        size_t es = dd_coll_dtype_size(a.dtype);
        size_t total = a.count * (size_t)b->svc->world_size;
        uint32_t tag = dd_gloo_tag(b, DD_COLL_REDUCE_SCATTER, args);
        int whole = dd_gloo_lane(b, total * es, req);
        req->scratch.resize(total * es + 1);
        char *tmp = req->scratch.data();
        int rank = b->svc->rank;
        req->fn = [b, a, tag, whole, tmp, total, es, rank]() {
            if (a.count == 0) {
                return;
            }
            dd_gloo_allreduce_buf(b, whole, a.sendbuf, tmp, total, a.dtype,
                                  a.op, tag);
            memcpy(a.recvbuf, tmp + (size_t)rank * a.count * es, a.count * es);
        };
        return dd_gloo_enqueue(b, req, req_p);
    });
}

static dd_status_t dd_gloo_broadcast(dd_backend_t *b,
                                     const dd_backend_args_t *args,
                                     dd_backend_request_t **req_p)
{
    dd_status_t status = dd_gloo_check_host(b, DD_COLL_BROADCAST, args);
    if (status != DD_OK) {
        return status;
    }
    return dd_gloo_guard(b->svc, "broadcast", [&]() {
        auto *req = new dd_backend_request;
        dd_backend_args_t a = *args;
        uint32_t tag = dd_gloo_tag(b, DD_COLL_BROADCAST, args);
        int whole = dd_gloo_lane(b, a.count * dd_coll_dtype_size(a.dtype), req);
        req->fn = [b, a, tag, whole]() {
            size_t bytes = a.count * dd_coll_dtype_size(a.dtype);
            if (bytes == 0 || b->svc->world_size == 1) {
                return;
            }
            dd_gloo_stripe(b, whole, bytes, 1,
                           [&](int s, size_t off, size_t n) {
                               auto context = dd_gloo_context(b, s);
                               gloo::BroadcastOptions opts(context);
                               opts.setOutput((uint8_t *)a.recvbuf + off, n);
                               opts.setRoot(a.root);
                               opts.setTag(tag);
                               opts.setTimeout(b->timeout);
                               context->connect(dd_gloo_tree_peers(
                                   context->rank, context->size, a.root));
                               gloo::broadcast(opts);
                           });
        };
        return dd_gloo_enqueue(b, req, req_p);
    });
}

/*
 * Recursive doubling allgather of n bytes a rank into out, this rank's
 * block already in place, for a power-of-two world: round i swaps the 2^i
 * blocks each side holds with the rank that differs in bit i, so log2 N
 * rounds where Gloo's ring takes N - 1. A small allgather (the workers'
 * agreement) costs a latency a round, so this is what keeps it from
 * growing with the world.
 */
static void dd_gloo_allgather_rd(dd_backend_t *b, int stream, uint8_t *out,
                                 size_t n, uint32_t tag)
{
    auto context = dd_gloo_context(b, stream);
    int rank = context->rank, world = context->size;

    context->connect(dd_gloo_bcube_peers(rank, world));
    auto buffer = context->createUnboundBuffer(out, n * (size_t)world);
    for (int mask = 1, round = 0; mask < world; mask <<= 1, round++) {
        int peer = rank ^ mask;
        uint64_t slot = dd_gloo_rd_slot | ((uint64_t)round << 32) | tag;
        buffer->recv(peer, slot, (size_t)(peer & ~(mask - 1)) * n,
                     (size_t)mask * n);
        buffer->send(peer, slot, (size_t)(rank & ~(mask - 1)) * n,
                     (size_t)mask * n);
        if (!buffer->waitRecv(b->timeout) || !buffer->waitSend(b->timeout)) {
            throw dd_gloo_canceled();
        }
    }
}

/* Bytes [off, off + n) of every rank's contribution of bytes, gathered on
 * stream: in place when it is the whole, else through a scratch buffer,
 * since the slice's place in the output is one piece per rank. */
static void dd_gloo_allgather_slice(dd_backend_t *b, int stream,
                                    const dd_backend_args_t &a, size_t bytes,
                                    size_t off, size_t n, uint32_t tag)
{
    size_t world = (size_t)b->svc->world_size;
    if (n == bytes && (world & (world - 1)) == 0 &&
        n * world <= dd_gloo_small_bytes) {
        uint8_t *out = (uint8_t *)a.recvbuf;
        size_t mine = (size_t)b->svc->rank * n;
        if (out + mine != a.sendbuf) {
            memmove(out + mine, a.sendbuf, n);
        }
        dd_gloo_allgather_rd(b, stream, out, n, tag);
        return;
    }
    std::vector<uint8_t> tmp(n == bytes ? 0 : n * world);
    uint8_t *out = n == bytes ? (uint8_t *)a.recvbuf : tmp.data();
    auto context = dd_gloo_context(b, stream);
    gloo::AllgatherOptions opts(context);

    opts.setInput((uint8_t *)a.sendbuf + off, n);
    opts.setOutput(out, n * world);
    opts.setTag(tag);
    opts.setTimeout(b->timeout);
    context->connect(dd_gloo_ring_peers(context->rank, context->size));
    gloo::allgather(opts);
    for (size_t r = 0; n != bytes && r < world; r++) {
        memcpy((uint8_t *)a.recvbuf + r * bytes + off, out + r * n, n);
    }
}

static dd_status_t dd_gloo_allgather(dd_backend_t *b,
                                     const dd_backend_args_t *args,
                                     dd_backend_request_t **req_p)
{
    dd_status_t status = dd_gloo_check_host(b, DD_COLL_ALLGATHER, args);
    if (status != DD_OK) {
        return status;
    }
    return dd_gloo_guard(b->svc, "allgather", [&]() {
        auto *req = new dd_backend_request;
        dd_backend_args_t a = *args;
        uint32_t tag = dd_gloo_tag(b, DD_COLL_ALLGATHER, args);
        int whole = dd_gloo_lane(b,
                                 a.count * dd_coll_dtype_size(a.dtype) *
                                     (size_t)b->svc->world_size,
                                 req);
        req->fn = [b, a, tag, whole]() {
            size_t bytes = a.count * dd_coll_dtype_size(a.dtype);
            size_t world = (size_t)b->svc->world_size;
            if (bytes == 0) {
                return;
            }
            if (world == 1) {
                memcpy(a.recvbuf, a.sendbuf, bytes);
                return;
            }
            dd_gloo_stripe(
                b, whole, bytes, 1, [&](int s, size_t off, size_t n) {
                    dd_gloo_allgather_slice(b, s, a, bytes, off, n, tag);
                });
        };
        return dd_gloo_enqueue(b, req, req_p);
    });
}

/* Send and recv post at once (Gloo's unbound buffers do not block) and
 * are waited for on a waiter of their own (see the top). */
static dd_status_t dd_gloo_p2p(dd_backend_t *b, const dd_backend_args_t *args,
                               bool send, dd_backend_request_t **req_p)
{
    const char *what = send ? "send" : "recv";
    const dd_backend_services_t *svc = b->svc;

    if (args->peer < 0 || args->peer >= svc->world_size ||
        args->peer == svc->rank || args->mem_type != DD_MEM_HOST ||
        (args->tag >> DD_BACKEND_TAG_BITS) != 0) {
        return dd_coll_error(svc, DD_ERR_INVALID_PARAM,
                             "%s: peer %d, tag %#llx or memory type %d is "
                             "not valid here",
                             what, args->peer, (unsigned long long)args->tag,
                             (int)args->mem_type);
    }
    return dd_gloo_guard(svc, what, [&]() {
        std::unique_ptr<dd_backend_request> req(new dd_backend_request);
        size_t bytes = args->count * dd_coll_dtype_size(args->dtype);
        void *ptr = send ? const_cast<void *>(args->sendbuf) : args->recvbuf;
        auto context = b->contexts[(size_t)(args->tag % b->contexts.size())];
        req->buffer = context->createUnboundBuffer(ptr, bytes);
        req->send = send;
        uint64_t slot = dd_gloo_p2p_slot | args->tag;
        auto *buffer = req->buffer.get();
        int peer = args->peer;
        /* The pair connects on the waiter: a post that waited for its
         * peer to connect would hold its caller. */
        req->fn = [context, buffer, send, peer]() {
            context->connect({peer}, true);
            if (!(send ? buffer->waitSend(dd_gloo_p2p_forever)
                       : buffer->waitRecv(dd_gloo_p2p_forever))) {
                throw dd_gloo_canceled();
            }
        };
        dd_gloo_waiter_reserve(b);
        context->post(peer, [buffer, send, peer, slot]() {
            if (send) {
                buffer->send(peer, slot);
            } else {
                buffer->recv(peer, slot);
            }
        });
        {
            std::lock_guard<std::mutex> lock(b->mutex);
            b->p2p_queue.push_back(req.get());
            b->p2p_open.insert(req.get());
        }
        b->p2p_cond.notify_one();
        *req_p = req.release();
        return DD_OK;
    });
}

static dd_status_t dd_gloo_send(dd_backend_t *b, const dd_backend_args_t *args,
                                dd_backend_request_t **req_p)
{
    return dd_gloo_p2p(b, args, true, req_p);
}

static dd_status_t dd_gloo_recv(dd_backend_t *b, const dd_backend_args_t *args,
                                dd_backend_request_t **req_p)
{
    return dd_gloo_p2p(b, args, false, req_p);
}

/* Reports a finished request on the caller's thread and frees it. */
static dd_status_t dd_gloo_finish(dd_backend_t *b, dd_backend_request *req)
{
    dd_status_t status = req->status;

    if (status != DD_OK) {
        dd_coll_error(b->svc, status, "%s",
                      dd_gloo_name_peers(b, req->message).c_str());
    }
    delete req;
    return status;
}

static dd_status_t dd_gloo_test(dd_backend_t *b, dd_backend_request_t *req)
{
    {
        std::lock_guard<std::mutex> lock(b->mutex);
        if (!req->done) {
            return DD_INPROGRESS;
        }
    }
    return dd_gloo_finish(b, req);
}

static dd_status_t dd_gloo_wait(dd_backend_t *b, dd_backend_request_t *req,
                                double timeout_s)
{
    {
        std::unique_lock<std::mutex> lock(b->mutex);
        auto limit = std::chrono::duration<double>(timeout_s);
        if (!b->cond.wait_for(lock, limit, [req] { return req->done; })) {
            dd_coll_error(b->svc, DD_ERR_TIMED_OUT,
                          "operation timed out after %.1f s "
                          "(Gloo did not finish it)",
                          timeout_s);
            return DD_INPROGRESS;
        }
    }
    return dd_gloo_finish(b, req);
}

static void dd_gloo_cancel(dd_backend_t *b, dd_backend_request_t *req)
{
    std::lock_guard<std::mutex> lock(b->mutex);
    if (req->done) {
        delete req;
        return;
    }
    auto &queue = req->buffer != nullptr ? b->p2p_queue
                  : req->control         ? b->control_queue
                                         : b->queue;
    if (!req->started) {
        for (auto it = queue.begin(); it != queue.end(); ++it) {
            if (*it == req) {
                queue.erase(it);
                b->p2p_open.erase(req);
                delete req;
                return;
            }
        }
    }
    /* Running: the thread frees it once it ends, which a send or recv
     * does at once; a collective at Gloo's own timeout. */
    req->abandoned = true;
    if (req->buffer != nullptr) {
        dd_gloo_abort_wait(req);
    }
}

static void dd_gloo_progress(dd_backend_t *b)
{
}

/* Gloo's threads end the operations and wake b->cond as each does. */
static void dd_gloo_idle(dd_backend_t *b, double timeout_s)
{
    std::unique_lock<std::mutex> lock(b->mutex);
    b->cond.wait_for(lock, std::chrono::duration<double>(timeout_s));
}

static const dd_backend_ops_t dd_gloo_ops = {
    DD_BACKEND_ABI_VERSION,
    "gloo",
    DD_BACKEND_MEM(DD_MEM_HOST),
    DD_BACKEND_CAP_NATIVE_COLL | DD_BACKEND_CAP_ASYNC | DD_BACKEND_CAP_NOTIFY,
    dd_gloo_query,
    dd_gloo_init,
    dd_gloo_finalize,
    dd_gloo_score,
    dd_gloo_allreduce,
    dd_gloo_broadcast,
    dd_gloo_reduce_scatter,
    dd_gloo_allgather,
    dd_gloo_send,
    dd_gloo_recv,
    dd_gloo_test,
    dd_gloo_wait,
    dd_gloo_cancel,
    dd_gloo_progress,
    dd_gloo_test, /* check: its test only looks */
    dd_gloo_idle,
};

DD_API const dd_backend_ops_t *dd_backend_ops_get(void)
{
    return &dd_gloo_ops;
}

} /* extern "C" */
