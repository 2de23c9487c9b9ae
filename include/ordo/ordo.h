/** @file
 * ordo/ordo.h - everything public in one include. */
#ifndef ORDO_ORDO_H
#define ORDO_ORDO_H

#include "ordo/alloc.h"
#include "ordo/barrier.h"
#include "ordo/buffer.h"
#include "ordo/coordinator.h"
#include "ordo/cuda.h"
#include "ordo/device.h"
#include "ordo/event.h"
#include "ordo/event_pool.h"
#include "ordo/graph.h"
#include "ordo/link.h"
#include "ordo/memory.h"
#include "ordo/metrics.h"
#include "ordo/memory_adaptors.h"
#include "ordo/shared_signal.h"
#include "ordo/signal.h"
#include "ordo/signal_fd.h"
#include "ordo/stall.h"
#include "ordo/status.h"
#include "ordo/stream.h"
#include "ordo/stream_pool.h"
#include "ordo/time.h"
#include "ordo/timepoint.h"
#include "ordo/trace.h"
#include "ordo/tracker.h"
#include "ordo/version.h"
#include "ordo/waiter.h"

#endif
