// NEXAR_REPORT's table (runtime/report_table.h) and the process's counts
// behind it (runtime/job_report.h): every expected row below is worked out
// by hand from the counts the test puts in.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "runtime/config.h"
#include "runtime/job_report.h"
#include "runtime/report_table.h"

namespace nexar {
namespace {

// Puts counts into one cell (shape 0: out of place, host buffers, unless given).
void put(ReportCounts& c, Collective kind, CallMode mode, int sc, ReportPath path, uint64_t calls, uint64_t bytes,
         uint64_t nanos = 0, int shape = 0) {
    const size_t at = ReportCounts::cell(kind, mode, shape, sc, path);
    c.values[at + ReportCounts::calls] = calls;
    c.values[at + ReportCounts::bytes] = bytes;
    c.values[at + ReportCounts::nanos] = nanos;
}
// One rank's warm MPI trials of a shape and class.
void put_trials(ReportCounts& c, Collective kind, int sc, uint64_t trials, uint64_t nanos, int shape = 0) {
    const size_t at = ReportCounts::trials(kind, shape, sc);
    c.values[at + ReportCounts::mpi_trials] = trials;
    c.values[at + ReportCounts::mpi_trial_nanos] = nanos;
}

TEST(ReportTable, CallNames) {
    EXPECT_EQ(report_call_name(Collective::allreduce, CallMode::blocking), "MPI_Allreduce");
    EXPECT_EQ(report_call_name(Collective::allreduce, CallMode::nonblocking), "MPI_Iallreduce");
    EXPECT_EQ(report_call_name(Collective::allreduce, CallMode::persistent), "MPI_Allreduce_init");
    EXPECT_EQ(report_call_name(Collective::reduce_scatter, CallMode::blocking), "MPI_Reduce_scatter");
    EXPECT_EQ(report_call_name(Collective::reduce_scatter, CallMode::nonblocking), "MPI_Ireduce_scatter");
    EXPECT_EQ(report_call_name(Collective::allgather, CallMode::persistent), "MPI_Allgather_init");
    EXPECT_STREQ(report_path_name(ReportPath::one_shot), "one-shot");
}

TEST(ReportTable, ClassesMergeWhereTheirPathsAreAlike) {
    auto c = std::make_unique<ReportCounts>();
    // 4 B-1 KiB: the MPI only (below the learner's floor), 10 calls each.
    for (int sc = 2; sc <= 10; ++sc) put(*c, Collective::allreduce, CallMode::blocking, sc, ReportPath::mpi, 10, 10u << sc);
    // 2-8 KiB: 8 MPI trials and 100 ring calls each; the MPI's trials took
    // 1 ms each on average (8 ms for the 8).
    for (int sc = 11; sc <= 13; ++sc) {
        put(*c, Collective::allreduce, CallMode::blocking, sc, ReportPath::mpi, 8, 8u << sc);
        put(*c, Collective::allreduce, CallMode::blocking, sc, ReportPath::ring, 100, 100u << sc, 50000000);
        put_trials(*c, Collective::allreduce, sc, 8, 8000000);
    }
    // 16 KiB: the ring only, never estimated.
    put(*c, Collective::allreduce, CallMode::blocking, 14, ReportPath::ring, 5, 5u << 14, 1000000);
    // An allgather of 1 MiB through the one-shot... nonblocking: no time.
    put(*c, Collective::allgather, CallMode::nonblocking, 20, ReportPath::one_shot, 7, 7u << 20);
    fill_estimates(*c);

    const std::vector<ReportRow> rows = report_rows(*c);
    ASSERT_EQ(rows.size(), 5u);
    EXPECT_EQ(rows[0].path, ReportPath::mpi);
    EXPECT_EQ(rows[0].from, 2);
    EXPECT_EQ(rows[0].to, 10);
    EXPECT_EQ(rows[0].calls, 90u);
    EXPECT_LT(rows[0].seconds, 0);
    EXPECT_LT(rows[0].estimate, 0);
    // 2-8 KiB: a row for each path, MPI first.
    EXPECT_EQ(rows[1].path, ReportPath::mpi);
    EXPECT_EQ(rows[1].from, 11);
    EXPECT_EQ(rows[1].to, 13);
    EXPECT_EQ(rows[1].calls, 24u);
    EXPECT_EQ(rows[1].bytes, 8u * ((1u << 11) + (1u << 12) + (1u << 13)));
    EXPECT_EQ(rows[2].path, ReportPath::ring);
    EXPECT_EQ(rows[2].calls, 300u);
    EXPECT_DOUBLE_EQ(rows[2].seconds, 0.15);
    EXPECT_NEAR(rows[2].estimate, 0.3, 1e-12);  // 300 calls at the classes' mean of 1 ms
    EXPECT_EQ(rows[3].path, ReportPath::ring);
    EXPECT_EQ(rows[3].from, 14);
    EXPECT_EQ(rows[3].to, 14);
    EXPECT_DOUBLE_EQ(rows[3].seconds, 0.001);
    EXPECT_LT(rows[3].estimate, 0);
    EXPECT_EQ(rows[4].kind, Collective::allgather);
    EXPECT_EQ(rows[4].mode, CallMode::nonblocking);
    EXPECT_EQ(rows[4].path, ReportPath::one_shot);
    EXPECT_LT(rows[4].seconds, 0);
    EXPECT_LT(rows[4].estimate, 0);

    const ReportTotals t = report_totals(rows);
    EXPECT_EQ(t.calls, 90u + 24 + 300 + 5 + 7);
    EXPECT_EQ(t.nexar_calls, 312u);
    EXPECT_EQ(t.estimated_calls, 300u);
    EXPECT_DOUBLE_EQ(t.nexar_seconds, 0.15);
    EXPECT_NEAR(t.estimate_seconds, 0.3, 1e-12);
    EXPECT_EQ(t.unmeasured_blocking, 5u);
    EXPECT_EQ(t.unmeasured_nonblocking, 7u);

    ReportJob job;
    job.ranks = 2, job.nodes = 1, job.nexar_version = "9.9.9", job.mpi = "Some MPI 1.2";
    const std::string text = report_text(rows, job);
    EXPECT_NE(text.find("nexar report: 2 ranks on 1 node, nexar 9.9.9 on Some MPI 1.2"), std::string::npos) << text;
    EXPECT_NE(text.find("MPI_Allreduce              2KiB-8KiB            300"), std::string::npos) << text;
    EXPECT_NE(text.find("nexar took 312 of 426 calls"), std::string::npos) << text;
    EXPECT_NE(text.find("the 300 of them with an MPI estimate: 150.00 ms on nexar, 300.00 ms estimated for the MPI: "
                        "150.00 ms saved (2.00x)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("not measured: 7 nonblocking or persistent calls"), std::string::npos) << text;
    EXPECT_NE(text.find("5 calls whose buffers and sizes had no warm MPI trial"), std::string::npos) << text;
    const size_t nonblocking = text.find("MPI_Iallgather");
    ASSERT_NE(nonblocking, std::string::npos) << text;
    const std::string line = text.substr(nonblocking, text.find('\n', nonblocking) - nonblocking);
    EXPECT_NE(line.find(" not timed "), std::string::npos) << line;
    EXPECT_NE(line.find(" not measured"), std::string::npos) << line;

    // Unmerged: a row per class and path.
    const std::vector<ReportRow> classes = report_rows(*c, false);
    ASSERT_EQ(classes.size(), 9u + 2 * 3 + 1 + 1);
    EXPECT_EQ(classes[9].from, 11);
    EXPECT_EQ(classes[9].to, 11);
    EXPECT_EQ(classes[10].path, ReportPath::ring);
    EXPECT_NEAR(classes[10].estimate, 0.1, 1e-12);
    const std::string csv = report_csv(rows, job);
    EXPECT_EQ(csv.substr(0, csv.find('\n')),
              "collective,mode,size_from,size_to,calls,bytes,path,seconds,mpi_estimate_seconds,estimated_calls,"
              "estimated_seconds,note");
    EXPECT_NE(csv.find("\nMPI_Allreduce,blocking,4,1024,90,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("\nMPI_Allreduce,blocking,2048,8192,300,1433600,ring,0.15,0.3,300,0.15,\n"), std::string::npos) << csv;
    EXPECT_NE(csv.find("\nMPI_Allreduce,blocking,16384,16384,5,81920,ring,0.001,,0,,no warm trial of the MPI for these "
                       "buffers and sizes\n"),
              std::string::npos)
        << csv;
    EXPECT_NE(csv.find("\nMPI_Iallgather,nonblocking,1048576,1048576,7,7340032,one-shot,,,0,,nonblocking"),
              std::string::npos)
        << csv;
}

TEST(ReportTable, AFixedThresholdSaysItHadNoTrials) {
    auto c = std::make_unique<ReportCounts>();
    put(*c, Collective::reduce_scatter, CallMode::blocking, 20, ReportPath::ring, 3, 3u << 20, 3000);
    fill_estimates(*c);
    ReportJob job;
    job.learnt = false;
    const std::string text = report_text(report_rows(*c), job);
    EXPECT_NE(text.find("3 calls (a fixed threshold: no trials)"), std::string::npos) << text;
    EXPECT_EQ(text.find("saved"), std::string::npos) << text;
}

TEST(ReportTable, NexarDisabledTookNothing) {
    auto c = std::make_unique<ReportCounts>();
    put(*c, Collective::allreduce, CallMode::blocking, 20, ReportPath::mpi, 4, 4u << 20);
    ReportJob job;
    job.enabled = false;
    const std::string text = report_text(report_rows(*c), job);
    EXPECT_NE(text.find("nexar took nothing (NEXAR_ENABLE=0): all 4 calls (4.0 MiB) went to the MPI"), std::string::npos)
        << text;
    EXPECT_EQ(text.find("nexar took 0"), std::string::npos) << text;
    // The closing line comes last, after the table.
    EXPECT_LT(text.find("MPI_Allreduce"), text.find("nexar took nothing")) << text;
}

TEST(JobReport, CountsEachCallInItsClassAndPath) {
    const int in_place_host = ReportCounts::shape(true, false), device = ReportCounts::shape(false, true);
    auto report = std::make_unique<JobReport>();
    report->add_mpi(Collective::allreduce, CallMode::blocking, 100);      // class 6
    report->add_mpi(Collective::allreduce, CallMode::blocking, 127);      // class 6
    report->add_mpi(Collective::allreduce, CallMode::blocking, 1 << 20);  // two MPI trials of 1 MiB, in place
    report->add_mpi_trial(Collective::allreduce, in_place_host, 1 << 20, 0.004);
    report->add_mpi(Collective::allreduce, CallMode::blocking, 1 << 20);
    report->add_mpi_trial(Collective::allreduce, in_place_host, (1 << 20) + 5, 0.006);
    report->add_nexar(Collective::allreduce, CallMode::blocking, in_place_host, 1 << 20, ReportPath::ring, 0.002);
    report->add_nexar(Collective::allreduce, CallMode::blocking, in_place_host, 1 << 20, ReportPath::ring, 0.001);
    // Of device buffers, no MPI trial: no estimate for it.
    report->add_nexar(Collective::allreduce, CallMode::blocking, device, 1 << 20, ReportPath::ring, 0.0005);
    report->add_nexar(Collective::allreduce, CallMode::persistent, 0, 1 << 20, ReportPath::ring, -1);
    auto c = std::make_unique<ReportCounts>();
    report->snapshot(c.get());
    const size_t mpi = ReportCounts::cell(Collective::allreduce, CallMode::blocking, 0, 6, ReportPath::mpi);
    EXPECT_EQ(c->values[mpi + ReportCounts::calls], 2u);
    EXPECT_EQ(c->values[mpi + ReportCounts::bytes], 227u);
    const size_t ring = ReportCounts::cell(Collective::allreduce, CallMode::blocking, in_place_host, 20, ReportPath::ring);
    EXPECT_EQ(c->values[ring + ReportCounts::calls], 2u);
    EXPECT_EQ(c->values[ring + ReportCounts::nanos], 3000000u);
    const size_t trials = ReportCounts::trials(Collective::allreduce, in_place_host, 20);
    EXPECT_EQ(c->values[trials + ReportCounts::mpi_trials], 2u);
    EXPECT_EQ(c->values[trials + ReportCounts::mpi_trial_nanos], 10000000u);
    const size_t persistent = ReportCounts::cell(Collective::allreduce, CallMode::persistent, 0, 20, ReportPath::ring);
    EXPECT_EQ(c->values[persistent + ReportCounts::calls], 1u);
    EXPECT_EQ(c->values[persistent + ReportCounts::nanos], 0u);
    // The in-place calls get their trials' mean (5 ms) each; the device call none.
    fill_estimates(*c);
    EXPECT_EQ(c->values[ring + ReportCounts::estimate_nanos], 10000000u);
    EXPECT_EQ(c->values[ring + ReportCounts::estimated_calls], 2u);
    const size_t dev = ReportCounts::cell(Collective::allreduce, CallMode::blocking, device, 20, ReportPath::ring);
    EXPECT_EQ(c->values[dev + ReportCounts::estimated_calls], 0u);
    EXPECT_EQ(c->values[dev + ReportCounts::estimate_nanos], 0u);
    // The 1 MiB blocking ring row: 3.5 ms on nexar; 2 of its 3 calls
    // estimated (10 ms, against their 3 ms on nexar); marked partial.
    const std::vector<ReportRow> rows = report_rows(*c);
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[2].path, ReportPath::ring);
    EXPECT_EQ(rows[2].mode, CallMode::blocking);
    EXPECT_EQ(rows[2].calls, 3u);
    EXPECT_NEAR(rows[2].seconds, 0.0035, 1e-12);
    EXPECT_EQ(rows[2].estimated_calls, 2u);
    EXPECT_NEAR(rows[2].estimated_seconds, 0.003, 1e-12);
    EXPECT_NEAR(rows[2].estimate, 0.010, 1e-12);
    EXPECT_EQ(rows[3].mode, CallMode::persistent);
    const ReportTotals t = report_totals(rows);
    EXPECT_TRUE(t.partial);
    EXPECT_EQ(t.estimated_calls, 2u);
    EXPECT_EQ(t.unmeasured_blocking, 1u);
    EXPECT_EQ(t.unmeasured_nonblocking, 1u);
    const std::string text = report_text(rows, ReportJob());
    EXPECT_NE(text.find("10.00 ms*"), std::string::npos) << text;
    EXPECT_NE(text.find("the 2 of them with an MPI estimate: 3.00 ms on nexar, 10.00 ms estimated for the MPI: 7.00 ms "
                        "saved (3.33x)"),
              std::string::npos)
        << text;
}

TEST(ReportTable, RangesSkipGapsAndSplitWhereThePathsChange) {
    auto c = std::make_unique<ReportCounts>();
    // MPI at classes 0 (0-1 B) and 3, ring at 5, MPI at 7 and 63: A B A
    // (the gaps between alike classes merge; a change of path splits).
    put(*c, Collective::allgather, CallMode::blocking, 0, ReportPath::mpi, 1, 0);
    put(*c, Collective::allgather, CallMode::blocking, 3, ReportPath::mpi, 1, 8);
    put(*c, Collective::allgather, CallMode::blocking, 5, ReportPath::ring, 1, 32, 100);
    put(*c, Collective::allgather, CallMode::blocking, 7, ReportPath::mpi, 1, 128);
    put(*c, Collective::allgather, CallMode::blocking, 63, ReportPath::mpi, 1, uint64_t(1) << 63);
    fill_estimates(*c);
    const std::vector<ReportRow> rows = report_rows(*c);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].from, 0);
    EXPECT_EQ(rows[0].to, 3);
    EXPECT_EQ(rows[0].calls, 2u);
    EXPECT_EQ(rows[1].path, ReportPath::ring);
    EXPECT_EQ(rows[1].from, 5);
    EXPECT_EQ(rows[2].from, 7);
    EXPECT_EQ(rows[2].to, 63);
    EXPECT_EQ(rows[2].bytes, 128u + (uint64_t(1) << 63));
    const std::string text = report_text(rows, ReportJob());
    EXPECT_NE(text.find("1B-8B"), std::string::npos) << text;
    EXPECT_NE(text.find("128B-8589934592GiB"), std::string::npos) << text;
    // Unmerged: a row per class.
    EXPECT_EQ(report_rows(*c, false).size(), 5u);
}

TEST(ReportTable, FileNamesPlaceholders) {
    EXPECT_EQ(expand_report_path("/r/job-%j-%p.csv", "42", 7), "/r/job-42-7.csv");
    EXPECT_EQ(expand_report_path("100%%-%x-%", "j", 1), "100%-%x-%");
}

TEST(ReportSetting, Parses) {
    ReportSetting r = ReportSetting::off;
    EXPECT_TRUE(parse_report("1", &r));
    EXPECT_EQ(r, ReportSetting::print);
    EXPECT_TRUE(parse_report("no", &r));
    EXPECT_EQ(r, ReportSetting::off);
    EXPECT_TRUE(parse_report("/tmp/report-%j.csv", &r));
    EXPECT_EQ(r, ReportSetting::file);
    EXPECT_TRUE(parse_report("report-%j", &r));
    EXPECT_TRUE(parse_report("job.csv", &r));
    EXPECT_FALSE(parse_report("", &r));
    EXPECT_FALSE(parse_report("ture", &r));  // a typo, not a file
    EXPECT_FALSE(parse_report("2", &r));
    EXPECT_FALSE(parse_report("a.\nb", &r));
    std::vector<std::string> problems;
    Config cfg = parse_config([](const char* n) -> const char* { return std::string(n) == "NEXAR_REPORT" ? "x.\ty" : nullptr; },
                              &problems);
    EXPECT_EQ(cfg.report, ReportSetting::off);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("NEXAR_REPORT='x.\ty' is not valid"), std::string::npos);
}

}  // namespace
}  // namespace nexar
