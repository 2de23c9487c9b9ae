/* oneTBB as a peer of the dag benchmarks: see bench_dag_tbb.h. */
#include "bench_dag_tbb.h"

#include <deque>
#include <memory>
#include <new>
#include <vector>

#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#include <tbb/task_scheduler_observer.h>

namespace {

/* Calls the caller's worker_entry on each worker thread, once. */
class worker_entry_observer : public tbb::task_scheduler_observer {
  public:
    worker_entry_observer(tbb::task_arena &arena, void (*entry)(void))
        : tbb::task_scheduler_observer(arena), entry_(entry) {
        observe(true);
    }
    ~worker_entry_observer() override {
        observe(false);
    }
    void on_scheduler_entry(bool is_worker) override {
        thread_local bool entered = false;
        if (is_worker && !entered) {
            entered = true;
            entry_();
        }
    }

  private:
    void (*entry_)(void);
};

/* global_control keeps oneTBB from starting more workers than the arena
 * uses; the arena's size is given rather than read from the affinity mask
 * (which a pinned caller would make a single CPU). */
struct tbb_peer {
    tbb_peer(unsigned threads, void (*worker_entry)(void))
        : limit(tbb::global_control::max_allowed_parallelism, threads),
          arena(static_cast<int>(threads)), observer(arena, worker_entry) {}
    tbb::global_control limit;
    tbb::task_arena arena;
    worker_entry_observer observer;
};

tbb::task_scheduler_handle scheduler;
std::unique_ptr<tbb_peer> peer;

using node_t = tbb::flow::continue_node<tbb::flow::continue_msg>;

} // namespace

/* Members are destroyed in reverse order: the nodes before their graph. */
struct bench_tbb_graph {
    tbb::flow::graph graph;
    std::deque<node_t> nodes;
    std::vector<node_t *> sources;
};

int bench_tbb_start(unsigned threads, void (*worker_entry)(void)) {
    try {
        scheduler = tbb::task_scheduler_handle(tbb::attach{});
        peer = std::make_unique<tbb_peer>(threads, worker_entry);
        peer->arena.initialize();
        return 0;
    } catch (...) {
        return -1;
    }
}

void bench_tbb_stop(void) {
    peer.reset();
    if (scheduler) {
        (void)tbb::finalize(scheduler, std::nothrow);
    }
}

bench_tbb_graph_t *bench_tbb_graph_create(uint64_t tasks, int chain, bench_tbb_body_t body,
                                          void *ctx) {
    try {
        bench_tbb_graph_t *g = nullptr;
        /* A graph belongs to the arena it is made in. */
        peer->arena.execute([&] {
            auto made = std::make_unique<bench_tbb_graph>();
            for (uint64_t i = 0; i < tasks; ++i) {
                made->nodes.emplace_back(made->graph, [body, ctx, i](tbb::flow::continue_msg) {
                    body(ctx, i);
                    return tbb::flow::continue_msg();
                });
                if (chain && i > 0) {
                    tbb::flow::make_edge(made->nodes[i - 1], made->nodes[i]);
                } else {
                    made->sources.push_back(&made->nodes.back());
                }
            }
            g = made.release();
        });
        return g;
    } catch (...) {
        return nullptr;
    }
}

int bench_tbb_graph_run(bench_tbb_graph_t *g) {
    try {
        peer->arena.execute([g] {
            for (node_t *source : g->sources) {
                source->try_put(tbb::flow::continue_msg());
            }
            g->graph.wait_for_all();
        });
        return 0;
    } catch (...) {
        return -1;
    }
}

void bench_tbb_graph_destroy(bench_tbb_graph_t *g) {
    delete g;
}

int bench_tbb_task_group_run(uint64_t tasks, bench_tbb_body_t body, void *ctx) {
    try {
        peer->arena.execute([=] {
            tbb::task_group group;
            for (uint64_t i = 0; i < tasks; ++i) {
                group.run([=] { body(ctx, i); });
            }
            group.wait();
        });
        return 0;
    } catch (...) {
        return -1;
    }
}
