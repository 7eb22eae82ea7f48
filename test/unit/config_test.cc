#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runtime/config.h"

using namespace nexar;

TEST(ParseSize, AcceptsPlainAndSuffixedValues) {
    struct { const char* text; uint64_t want; } cases[] = {
        {"0", 0},           {"8388608", 8388608},   {"8M", 8ull << 20},   {"8MiB", 8ull << 20},
        {"8m", 8ull << 20}, {"8MB", 8ull << 20},    {"512K", 512ull << 10}, {"512kib", 512ull << 10},
        {"1G", 1ull << 30}, {"2GiB", 2ull << 30},   {"1T", 1ull << 40},   {"64B", 64},
        {" 16M ", 16ull << 20}, {"3 MiB", 3ull << 20},
    };
    for (const auto& c : cases) {
        uint64_t v = 12345;
        EXPECT_TRUE(parse_size(c.text, &v)) << c.text;
        EXPECT_EQ(v, c.want) << c.text;
    }
}

TEST(ParseSize, RejectsMalformedValuesAndLeavesOutputAlone) {
    for (const char* bad : {"", "M", "-1", "8X", "8MiBs", "1.5M", "0x10", "eight", "8 M B x",
                            "99999999999999999999", "20000000T"}) {
        uint64_t v = 42;
        EXPECT_FALSE(parse_size(bad, &v)) << bad;
        EXPECT_EQ(v, 42u) << bad;
    }
    uint64_t v = 0;
    EXPECT_FALSE(parse_size(nullptr, &v));
}

TEST(ParseBool, KnownWordsOnly) {
    bool b = false;
    for (const char* t : {"1", "yes", "TRUE", "on"}) EXPECT_TRUE(parse_bool(t, &b) && b) << t;
    for (const char* t : {"0", "no", "False", "OFF"}) EXPECT_TRUE(parse_bool(t, &b) && !b) << t;
    for (const char* t : {"", "2", "maybe", "10"}) EXPECT_FALSE(parse_bool(t, &b)) << t;
}

TEST(ParseSeconds, NonNegativeNumbers) {
    double s = -1;
    EXPECT_TRUE(parse_seconds("30", &s));
    EXPECT_EQ(s, 30);
    EXPECT_TRUE(parse_seconds("2.5", &s));
    EXPECT_EQ(s, 2.5);
    EXPECT_TRUE(parse_seconds("0", &s));
    EXPECT_EQ(s, 0);
    for (const char* t : {"-1", "abc", "5s", "", "inf", "nan"}) EXPECT_FALSE(parse_seconds(t, &s)) << t;
}

TEST(ParseLogLevel, Names) {
    LogLevel l;
    EXPECT_TRUE(parse_log_level("debug", &l) && l == LogLevel::debug);
    EXPECT_TRUE(parse_log_level("WARNING", &l) && l == LogLevel::warn);
    EXPECT_FALSE(parse_log_level("verbose", &l));
}

namespace {
Config parse(const std::map<std::string, std::string>& env, std::vector<std::string>* problems) {
    return parse_config(
        [&](const char* name) -> const char* {
            auto it = env.find(name);
            return it == env.end() ? nullptr : it->second.c_str();
        },
        problems);
}
}  // namespace

TEST(ParseConfig, DefaultsWhenUnset) {
    std::vector<std::string> problems;
    Config c = parse({}, &problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_TRUE(c == Config());
    EXPECT_TRUE(c.enable);
    EXPECT_TRUE(c.threshold_auto);
    EXPECT_EQ(c.host_setting, HostBuffers::automatic);
    EXPECT_TRUE(c.host_buffers);
    EXPECT_TRUE(c.learn);
}

TEST(ParseConfig, AutoThresholdAndHostBuffers) {
    std::vector<std::string> problems;
    Config c = parse({{"NEXAR_THRESHOLD_BYTES", " AUTO"}, {"NEXAR_HOST_BUFFERS", "Auto "}}, &problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_TRUE(c == Config()) << describe(c);
    EXPECT_NE(describe(c).find("threshold=auto"), std::string::npos) << describe(c);
    EXPECT_NE(describe(c).find("host_buffers=auto"), std::string::npos) << describe(c);
    c = parse({{"NEXAR_THRESHOLD_BYTES", "64K"}, {"NEXAR_HOST_BUFFERS", "0"}}, &problems);
    EXPECT_FALSE(c.threshold_auto);
    EXPECT_FALSE(c.learn);
    EXPECT_EQ(c.threshold_bytes, 64ull << 10);
    EXPECT_EQ(c.host_setting, HostBuffers::off);
    EXPECT_FALSE(c.host_buffers);
    EXPECT_NE(describe(c).find("threshold=64KiB"), std::string::npos) << describe(c);
}

// What the settings come to, in every job (GPU jobs learn too).
TEST(ParseConfig, AutoLearnsAndTakesHostBuffers) {
    std::vector<std::string> problems;
    Config c = parse({}, &problems);
    EXPECT_TRUE(c.host_buffers);
    EXPECT_TRUE(c.learn);
    EXPECT_EQ(c.threshold_bytes, kAutoFloorBytes);
    c = parse({{"NEXAR_HOST_BUFFERS", "1"}}, &problems);
    EXPECT_TRUE(c.host_buffers);
    EXPECT_TRUE(c.learn);
    c = parse({{"NEXAR_THRESHOLD_BYTES", "1M"}}, &problems);
    EXPECT_FALSE(c.learn);
    EXPECT_EQ(c.threshold_bytes, 1u << 20);
    EXPECT_TRUE(c.host_buffers);
    c = parse({{"NEXAR_HOST_BUFFERS", "0"}}, &problems);
    EXPECT_FALSE(c.host_buffers);
    EXPECT_TRUE(problems.empty());
}

// The sentence a job with a GPU logs once (NEXAR_LOG=info) and nexar-info
// prints: each setting that changes what such a job gets is in it.
TEST(ParseConfig, DescribesWhatAGpuJobGets) {
    std::vector<std::string> problems;
    const auto has = [](const std::string& text, const char* part) { return text.find(part) != std::string::npos; };
    std::string d = describe_gpu_job(parse({}, &problems), "staged through pinned host memory", 0);
    EXPECT_TRUE(has(d, "host and device buffers learnt apart, per communicator, collective and size: allreduces of every "
                      "size, reduce-scatters and allgathers from 2KiB")) << d;
    EXPECT_TRUE(has(d, "device ring (staged through pinned host memory)")) << d;
    EXPECT_TRUE(has(d, "GPU to GPU through IPC")) << d;
    EXPECT_TRUE(has(d, "nonblocking and persistent calls of both kinds on nexar")) << d;
    EXPECT_TRUE(has(d, "staged through host memory (it does not know CUDA)")) << d;
    d = describe_gpu_job(parse({}, &problems), nullptr, -1);
    EXPECT_TRUE(has(d, "(NEXAR_CUDA_PATH=auto)")) << d;
    EXPECT_TRUE(has(d, "unless the MPI is CUDA-aware")) << d;
    d = describe_gpu_job(parse({{"NEXAR_THRESHOLD_BYTES", "1M"}, {"NEXAR_HOST_BUFFERS", "0"}, {"NEXAR_CUDA_IPC", "0"},
                                {"NEXAR_NONBLOCKING", "0"}},
                               &problems),
                         "direct (CUDA-aware UCX)", 1);
    EXPECT_TRUE(has(d, "on nexar from 1MiB (NEXAR_THRESHOLD_BYTES)")) << d;
    EXPECT_TRUE(has(d, "host buffers pass through")) << d;
    EXPECT_TRUE(has(d, "no IPC (NEXAR_CUDA_IPC=0)")) << d;
    EXPECT_TRUE(has(d, "go to the MPI (NEXAR_NONBLOCKING=0)")) << d;
    EXPECT_TRUE(has(d, "handed to it as they are")) << d;
    EXPECT_TRUE(has(describe_gpu_job(parse({{"NEXAR_CUDA_IPC", "require"}}, &problems), nullptr, 0), "required")) << d;
    EXPECT_TRUE(has(describe_gpu_job(parse({{"NEXAR_ENABLE", "0"}}, &problems), nullptr, 0), "nexar is off")) << d;
    EXPECT_TRUE(problems.empty());
}

TEST(ParseConfig, ReadsEverySetting) {
    std::vector<std::string> problems;
    Config c = parse({{"NEXAR_ENABLE", "0"},
                      {"NEXAR_THRESHOLD_BYTES", "4MiB"},
                      {"NEXAR_SEGMENT_BYTES", "256K"},
                      {"NEXAR_PIPELINE_DEPTH", "8"},
                      {"NEXAR_HOST_BUFFERS", "1"},
                      {"NEXAR_TIMEOUT_S", "5"},
                      {"NEXAR_STATS", "1"},
                      {"NEXAR_LOG", "info"},
                      {"NEXAR_ALGORITHM", "HIER"},
                      {"NEXAR_SHM_COPY", "Mixed"},
                      {"NEXAR_GPU_PROFILE", "on"},
                      {"NEXAR_STREAM_BYTES", "32M"},
                      {"NEXAR_CUDA_IPC", "0"}},
                     &problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(c.cuda_ipc, nexar::CudaIpc::off);
    EXPECT_EQ(Config().cuda_ipc, nexar::CudaIpc::on);
    EXPECT_TRUE(c != Config());
    EXPECT_TRUE(c.gpu_profile);
    EXPECT_EQ(c.stream_bytes, 32ull << 20);
    EXPECT_EQ(c.algorithm, Algorithm::hier);
    EXPECT_EQ(parse({{"NEXAR_ALGORITHM", "rhd"}}, &problems).algorithm, Algorithm::rhd);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(c.shm_copy, ShmCopySetting::mixed);
    EXPECT_FALSE(c.enable);
    EXPECT_EQ(c.threshold_bytes, 4ull << 20);
    EXPECT_FALSE(c.threshold_auto);
    EXPECT_EQ(c.host_setting, HostBuffers::on);
    EXPECT_EQ(c.segment_bytes, 256ull << 10);
    EXPECT_EQ(c.pipeline_depth, 8u);
    EXPECT_TRUE(c.host_buffers);
    EXPECT_EQ(c.timeout_s, 5);
    EXPECT_TRUE(c.stats);
    EXPECT_EQ(c.log_level, LogLevel::info);
}

TEST(ParseConfig, MalformedValuesKeepDefaultsAndAreReportedOnceEach) {
    std::vector<std::string> problems;
    Config c = parse({{"NEXAR_ENABLE", "maybe"},
                      {"NEXAR_THRESHOLD_BYTES", "8X"},
                      {"NEXAR_SEGMENT_BYTES", "16"},  // below the 256-byte floor
                      {"NEXAR_PIPELINE_DEPTH", "0"},
                      {"NEXAR_HOST_BUFFERS", "2"},
                      {"NEXAR_TIMEOUT_S", "-3"},
                      {"NEXAR_STATS", "y e s"},
                      {"NEXAR_LOG", "loud"},
                      {"NEXAR_ALGORITHM", "tree"},
                      {"NEXAR_SHM_COPY", "zerocopy"},
                      {"NEXAR_GPU_PROFILE", "2"},
                      {"NEXAR_STREAM_BYTES", "never"},
                      {"NEXAR_CUDA_IPC", "sometimes"}},
                     &problems);
    EXPECT_TRUE(c == Config()) << describe(c);
    ASSERT_EQ(problems.size(), 13u);
    EXPECT_NE(problems[12].find("NEXAR_CUDA_IPC='sometimes'"), std::string::npos) << problems[12];
    EXPECT_NE(problems[11].find("NEXAR_STREAM_BYTES='never'"), std::string::npos) << problems[11];
    EXPECT_NE(problems[11].find("default 4MiB"), std::string::npos) << problems[11];
    EXPECT_NE(problems[10].find("NEXAR_GPU_PROFILE='2'"), std::string::npos) << problems[10];
    EXPECT_NE(problems[9].find("NEXAR_SHM_COPY='zerocopy'"), std::string::npos) << problems[9];
    EXPECT_NE(problems[9].find("auto, slots, mixed, cma or push"), std::string::npos) << problems[9];
    EXPECT_NE(problems[8].find("NEXAR_ALGORITHM='tree'"), std::string::npos) << problems[8];
    EXPECT_NE(problems[8].find("auto, ring, hier or rhd"), std::string::npos) << problems[8];
    EXPECT_NE(problems[1].find("NEXAR_THRESHOLD_BYTES='8X'"), std::string::npos) << problems[1];
    EXPECT_NE(problems[1].find("default auto"), std::string::npos) << problems[1];
    EXPECT_NE(problems[3].find("NEXAR_PIPELINE_DEPTH"), std::string::npos);
}

TEST(ParseConfig, YieldIsAutoOneOrZero) {
    std::vector<std::string> problems;
    EXPECT_EQ(Config().yield, YieldSetting::automatic);
    EXPECT_EQ(parse({{"NEXAR_YIELD", "1"}}, &problems).yield, YieldSetting::on);
    EXPECT_EQ(parse({{"NEXAR_YIELD", "no"}}, &problems).yield, YieldSetting::off);
    EXPECT_EQ(parse({{"NEXAR_YIELD", "AUTO"}}, &problems).yield, YieldSetting::automatic);
    EXPECT_TRUE(problems.empty());
    EXPECT_NE(describe(parse({{"NEXAR_YIELD", "0"}}, &problems)).find("yield=0"), std::string::npos);
    const Config c = parse({{"NEXAR_YIELD", "often"}}, &problems);
    EXPECT_EQ(c.yield, YieldSetting::automatic);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("NEXAR_YIELD='often'"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find("auto, 1 or 0"), std::string::npos) << problems[0];
}

TEST(ParseConfig, DepthAboveLimitIsRejected) {
    std::vector<std::string> problems;
    Config c = parse({{"NEXAR_PIPELINE_DEPTH", "65"}, {"NEXAR_SEGMENT_BYTES", "2G"}}, &problems);
    EXPECT_EQ(c.pipeline_depth, Config().pipeline_depth);
    EXPECT_EQ(c.segment_bytes, Config().segment_bytes);
    EXPECT_EQ(problems.size(), 2u);
}

TEST(ParseConfig, OneShotLimit) {
    std::vector<std::string> problems;
    EXPECT_EQ(parse({}, &problems).one_shot_bytes, kOneShotBytes);
    EXPECT_EQ(parse({{"NEXAR_ONE_SHOT_BYTES", "0"}}, &problems).one_shot_bytes, 0u);
    EXPECT_EQ(parse({{"NEXAR_ONE_SHOT_BYTES", "64K"}}, &problems).one_shot_bytes, 64u << 10);
    EXPECT_TRUE(problems.empty());
    for (const char* bad : {"2M", "lots", "-1"}) {
        problems.clear();
        EXPECT_EQ(parse({{"NEXAR_ONE_SHOT_BYTES", bad}}, &problems).one_shot_bytes, kOneShotBytes) << bad;
        ASSERT_EQ(problems.size(), 1u) << bad;
        EXPECT_NE(problems[0].find("NEXAR_ONE_SHOT_BYTES='" + std::string(bad) + "'"), std::string::npos)
            << problems[0];
        EXPECT_NE(problems[0].find("default 32KiB"), std::string::npos) << problems[0];
    }
}

TEST(ParseConfig, SegmentSizeDefaultsPerRingUnlessSet) {
    std::vector<std::string> problems;
    Config d = parse({}, &problems);
    EXPECT_EQ(d.shm_segment_bytes(), kShmSegmentBytes);
    EXPECT_EQ(d.ucx_segment_bytes(), kUcxSegmentBytes);
    EXPECT_NE(describe(d).find("segment=auto"), std::string::npos) << describe(d);
    Config c = parse({{"NEXAR_SEGMENT_BYTES", "512K"}}, &problems);
    EXPECT_EQ(c.shm_segment_bytes(), 512u << 10);
    EXPECT_EQ(c.ucx_segment_bytes(), 512u << 10);
    EXPECT_TRUE(problems.empty());
}

TEST(Config, CudaIpcTakesOnOffOrRequire) {
    CudaIpc i = CudaIpc::off;
    EXPECT_TRUE(parse_cuda_ipc("require", &i));
    EXPECT_EQ(i, CudaIpc::require);
    EXPECT_TRUE(parse_cuda_ipc("REQUIRE", &i));
    EXPECT_EQ(i, CudaIpc::require);
    EXPECT_TRUE(parse_cuda_ipc("on", &i));
    EXPECT_EQ(i, CudaIpc::on);
    EXPECT_TRUE(parse_cuda_ipc("0", &i));
    EXPECT_EQ(i, CudaIpc::off);
    EXPECT_FALSE(parse_cuda_ipc("required", &i));
    EXPECT_FALSE(parse_cuda_ipc("", &i));
    EXPECT_FALSE(parse_cuda_ipc(nullptr, &i));
    EXPECT_STREQ(cuda_ipc_name(CudaIpc::require), "require");
}

namespace nexar {
namespace {

// NEXAR_CUDA_PATH against what UCX moves (runtime and nexar-info both ask this).
TEST(DevicePath, FollowsTheSettingAndWhatUcxMoves) {
    bool direct = true;
    EXPECT_TRUE(choose_device_path(CudaPath::automatic, false, &direct));
    EXPECT_FALSE(direct);
    EXPECT_TRUE(choose_device_path(CudaPath::automatic, true, &direct));
    EXPECT_TRUE(direct);
    EXPECT_TRUE(choose_device_path(CudaPath::staged, true, &direct));
    EXPECT_FALSE(direct);
    EXPECT_TRUE(choose_device_path(CudaPath::direct, true, &direct));
    EXPECT_TRUE(direct);
    // Asked for what this UCX cannot do: no device path (calls go to the MPI).
    EXPECT_FALSE(choose_device_path(CudaPath::direct, false, &direct));
    EXPECT_STREQ(device_path_name(true), "direct (CUDA-aware UCX)");
    EXPECT_STREQ(device_path_name(false), "staged through pinned host memory");
}

}  // namespace
}  // namespace nexar
