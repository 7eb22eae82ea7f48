// GPU tests (need a CUDA device; exit 77 = skipped, with the reason, when
// there is none): every GPU reduction kernel of the plugin against the host
// reducers for every type and op, bit for bit (16-bit floats included),
// aligned and misaligned, odd lengths; pointer classification of device,
// managed, pinned and pageable memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cudart_loader.h"
#include "memory/device.h"
#include "memory/device_api.h"
#include "reduce/host_reduce.h"

using namespace nexar;

namespace {
const nexar_device_api* g_api = nullptr;
cudart_t g_rt;
}  // namespace

TEST(GpuKernels, EveryTypeAndOpMatchesTheHostBitForBit) {
    std::mt19937_64 rng(99);
    void* stream = nullptr;
    ASSERT_EQ(g_api->stream_create(&stream), 0) << g_api->last_error();
    for (int t = 0; t < int(DataType::count_); ++t)
        for (int o = 0; o < int(ReduceOp::count_); ++o) {
            DataType type = DataType(t);
            ReduceOp op = ReduceOp(o);
            if (!op_supported(type, op)) continue;
            size_t esz = datatype_size(type);
            for (size_t n : {1, 7, 255, 4096 + 3, 1000003})
                for (size_t mis : {0, 1}) {  // misaligned start: the scalar path
                    size_t bytes = (n + 1) * esz;
                    std::vector<uint8_t> a(bytes), b(bytes), want(bytes), got(bytes);
                    for (auto& x : a) x = uint8_t(rng());
                    for (auto& x : b) x = uint8_t(rng());
                    if (type == DataType::f32 || type == DataType::f64 || type == DataType::f16 || type == DataType::bf16)
                        for (size_t i = 0; i < bytes; i += esz) a[i + esz - 1] &= 0x3f, b[i + esz - 1] &= 0x3f;  // no nan/inf
                    ASSERT_EQ(host_reduce(want.data() + mis * esz, a.data() + mis * esz, b.data() + mis * esz, n, type, op),
                              Status::ok);
                    void *da, *db, *dd;
                    ASSERT_EQ(g_api->alloc_device(&da, bytes), 0);
                    ASSERT_EQ(g_api->alloc_device(&db, bytes), 0);
                    ASSERT_EQ(g_api->alloc_device(&dd, bytes), 0);
                    g_rt.Memcpy(da, a.data(), bytes, 4);
                    g_rt.Memcpy(db, b.data(), bytes, 4);
                    g_rt.Memcpy(dd, want.data(), esz * mis, 4);
                    ASSERT_EQ(g_api->reduce_async(static_cast<char*>(dd) + mis * esz, static_cast<char*>(da) + mis * esz,
                                                  static_cast<char*>(db) + mis * esz, n, t, o, stream),
                              0)
                        << g_api->last_error();
                    ASSERT_EQ(g_api->stream_synchronize(stream), 0);
                    g_rt.Memcpy(got.data(), dd, bytes, 4);
                    ASSERT_EQ(memcmp(got.data() + mis * esz, want.data() + mis * esz, n * esz), 0)
                        << datatype_name(type) << " " << reduce_op_name(op) << " n=" << n << " misaligned=" << mis;
                    // In place (dst == a).
                    ASSERT_EQ(g_api->reduce_async(da, da, db, n, t, o, stream), 0);
                    ASSERT_EQ(g_api->stream_synchronize(stream), 0);
                    std::vector<uint8_t> inplace(bytes), want_in(bytes);
                    host_reduce(want_in.data(), a.data(), b.data(), n, type, op);
                    g_rt.Memcpy(inplace.data(), da, bytes, 4);
                    ASSERT_EQ(memcmp(inplace.data(), want_in.data(), n * esz), 0) << "in place " << datatype_name(type);
                    g_api->free_device(da);
                    g_api->free_device(db);
                    g_api->free_device(dd);
                }
        }
    g_api->stream_destroy(stream);
}

TEST(GpuMemory, PointerKinds) {
    void *dev = nullptr, *managed = nullptr, *pinned = nullptr;
    ASSERT_EQ(g_rt.Malloc(&dev, 4096), 0);
    ASSERT_EQ(g_rt.MallocManaged(&managed, 4096, 1), 0);
    ASSERT_EQ(g_rt.MallocHost(&pinned, 4096), 0);
    std::vector<char> pageable(4096);
    int d = -1;
    EXPECT_EQ(classify_pointer(g_api, dev, &d), MemoryType::device);
    EXPECT_EQ(classify_pointer(g_api, static_cast<char*>(dev) + 1000, &d), MemoryType::device);
    EXPECT_EQ(classify_pointer(g_api, managed, &d), MemoryType::managed);
    EXPECT_EQ(classify_pointer(g_api, pinned, &d), MemoryType::host);
    EXPECT_EQ(classify_pointer(g_api, pageable.data(), &d), MemoryType::host);
    // The failed lookup of a pageable pointer must not leave an error behind.
    EXPECT_EQ(g_rt.DeviceSynchronize(), 0);
    g_rt.Free(dev);
    g_rt.Free(managed);
    g_rt.FreeHost(pinned);
}

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    char why[256];
    if (cudart_load(&g_rt, why, sizeof why) != 0) {
        printf("SKIP: GPU tests need a CUDA device: %s\n", why);
        return 77;
    }
    std::string reason;
    if (!ok(load_device_api(&g_api, &reason))) {
        // A GPU is there, so the plugin must work: this is a failure.
        printf("FAIL: the nexar CUDA plugin did not start: %s\n", reason.c_str());
        return 1;
    }
    return RUN_ALL_TESTS();
}
