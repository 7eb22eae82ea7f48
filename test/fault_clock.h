// The fault tests' clock (test/mpi/fault_check.cc, the emulated GPU's fault
// hook in test/unit/fake_device.cc, test/gpu/allreduce_cuda_check.cc): a
// victim says when it stopped itself, rank 0 when it called and when it got
// the error, all on CLOCK_REALTIME, which every process of this machine reads
// alike (the simulated cluster's nodes are namespaces of one kernel, with no
// time namespace).  test/lib.sh's check_fault_report then measures the
// error from the stall, not from the start of the call: whatever ran before
// the stall (the agreement, a first connection, a busy machine) is not
// nexar's delay.
#ifndef NEXAR_TEST_FAULT_CLOCK_H
#define NEXAR_TEST_FAULT_CLOCK_H

#include <signal.h>
#include <time.h>

#include <cstdio>

// Seconds since the epoch, to the microsecond, as text ("%s" in a report):
// a double would round them.
struct FaultClock {
    char text[32];
    FaultClock() {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(text, sizeof text, "%lld.%06ld", static_cast<long long>(ts.tv_sec), ts.tv_nsec / 1000);
    }
};

// A victim's last words before it raises `sig` at itself: the line
// check_fault_report reads ("fault_check: rank R stops itself (SIGSTOP) at T").
inline void fault_report_stop(int rank, int sig) {
    FaultClock now;
    fprintf(stderr, "fault_check: rank %d stops itself (%s) at %s\n", rank, sig == SIGSTOP ? "SIGSTOP" : "SIGKILL",
            now.text);
    fflush(stderr);
}

#endif
