/* CUPTI activity records -> device records (preload/cupti_record.c), with hand-built CUpti_ActivityMemory4 and
 * CUpti_ActivityMemoryPool3 records (layouts from the installed cupti_activity.h) laid out in a buffer and walked
 * by a stand-in for cuptiActivityGetNextRecord. Needs no CUPTI library and no GPU. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* CUPTI's headers use enumerators beyond int (-Wpedantic under warning_level=3): not our code. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <cupti.h>
#pragma GCC diagnostic pop

#include "cupti_record.h"

static uint8_t buf[4096];
static size_t used;

static void put(const void *rec, size_t size) {
    assert_true(used + size <= sizeof buf);
    memcpy(buf + used, rec, size);
    used += size;
}

static void put_mem(CUpti_ActivityMemoryOperationType op, CUpti_ActivityMemoryKind mk, uint64_t addr, uint64_t bytes,
                    uint32_t dev, uint32_t stream, uint64_t ts) {
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = op;
    m.memoryKind = mk;
    m.address = addr;
    m.bytes = bytes;
    m.deviceId = dev;
    m.streamId = stream;
    m.timestamp = ts;
    m.name = "ignored";
    put(&m, sizeof m);
}

static void put_pool(CUpti_ActivityMemoryPoolOperationType op, uint64_t addr, uint64_t size, uint32_t dev,
                     uint64_t ts) {
    CUpti_ActivityMemoryPool3 p;
    memset(&p, 0, sizeof p);
    p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    p.memoryPoolOperationType = op;
    p.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    p.address = addr;
    p.size = size;
    p.deviceId = dev;
    p.timestamp = ts;
    put(&p, sizeof p);
}

/* Stand-in for cuptiActivityGetNextRecord over our layout: record size by kind; an unknown kind is corrupt. */
static int walk(void *ctx, uint8_t *b, size_t valid, void **cursor) {
    (void)ctx;
    uint8_t *next = b;
    if (*cursor) {
        CUpti_ActivityKind k;
        memcpy(&k, *cursor, sizeof k);
        size_t sz = k == CUPTI_ACTIVITY_KIND_MEMORY2 ? sizeof(CUpti_ActivityMemory4)
                    : k == CUPTI_ACTIVITY_KIND_MEMORY_POOL ? sizeof(CUpti_ActivityMemoryPool3)
                    : k == CUPTI_ACTIVITY_KIND_MEMCPY ? sizeof(CUpti_ActivityMemory4) : 0;
        if (!sz) return -1;
        next = (uint8_t *)*cursor + sz;
    }
    if (next >= b + valid) return 0;
    CUpti_ActivityKind k;
    memcpy(&k, next, sizeof k);
    if (k != CUPTI_ACTIVITY_KIND_MEMORY2 && k != CUPTI_ACTIVITY_KIND_MEMORY_POOL && k != CUPTI_ACTIVITY_KIND_MEMCPY)
        return -1;
    *cursor = next;
    return 1;
}

static pl_trace_record_t got[32];
static int n_got;
static void collect(void *ctx, const pl_trace_record_t *r) {
    assert_ptr_equal(ctx, &n_got);
    assert_true(n_got < 32);
    got[n_got++] = *r;
}

static int setup(void **state) {
    (void)state;
    memset(buf, 0, sizeof buf);
    used = 0;
    n_got = 0;
    return 0;
}

static void assert_dev(int i, pl_rec_type_t type, int32_t device, uint64_t addr, uint64_t size, uint64_t stream,
                       int64_t t_ns) {
    assert_int_equal(got[i].type, type);
    assert_int_equal(got[i].t_ns, t_ns);
    assert_int_equal(got[i].u.device.source, PL_DEV_SRC_CUPTI);
    assert_int_equal(got[i].u.device.device, device);
    assert_int_equal(got[i].u.device.addr, addr);
    assert_int_equal(got[i].u.device.size, size);
    assert_int_equal(got[i].u.device.requested, size);
    assert_int_equal(got[i].u.device.stream, stream);
    assert_int_equal(got[i].u.device.stack_id, 0);
    assert_int_equal(got[i].u.device.pool, 0);
}

/* Every kind and operation in one buffer: what is converted, in order, with the clock offset applied. */
static void test_cupti_record_buffer_converted_in_order(void **state) {
    (void)state;
    const uint32_t none = CUPTI_INVALID_STREAM_ID;
    put_mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000000, 1000, 0,
            none, 100);
    put_mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 0x7100000, 777, 1, 7,
            110);
    put_mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0x5000, 4096, 0, none,
            120);                                                                  /* host: device -1 */
    put_mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, 0x9000, 64, 0,
            none, 130);                                                            /* module global: skipped */
    put_pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0x20000000, 32 << 20, 0, 140);
    put_pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, 0x20000000, 2 << 20, 0, 150); /* skipped */
    put_mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x1, 1, 0, none, 155);
    CUpti_ActivityMemory4 other;                                                   /* another kind: skipped */
    memset(&other, 0, sizeof other);
    other.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    put(&other, sizeof other);
    put_mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000000, 1000, 0, 3,
            160);
    put_pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, 0x20000000, 32 << 20, 0, 170);

    pl_cupti_counts_t c = {0};
    pl_cupti_record_drain(buf, used, walk, NULL, -50, collect, &n_got, &c);
    assert_int_equal(c.n_records, 10);
    assert_int_equal(c.n_converted, 6);
    assert_int_equal(c.n_errors, 0);
    assert_int_equal(n_got, 6);
    assert_dev(0, PL_REC_DEVICE_ALLOC, 0, 0x7000000, 1000, 0, 50);
    assert_dev(1, PL_REC_DEVICE_ALLOC, 1, 0x7100000, 777, 7, 60);
    assert_dev(2, PL_REC_DEVICE_ALLOC, -1, 0x5000, 4096, 0, 70);
    assert_dev(3, PL_REC_DEVICE_MAP, 0, 0x20000000, 32 << 20, 0, 90);
    assert_dev(4, PL_REC_DEVICE_FREE, 0, 0x7000000, 1000, 3, 110);
    assert_dev(5, PL_REC_DEVICE_UNMAP, 0, 0x20000000, 32 << 20, 0, 120);
}

/* A corrupt record ends the buffer: what came before is kept, the error counted. */
static void test_cupti_record_corrupt_buffer_counted(void **state) {
    (void)state;
    put_mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000000, 1000, 0, 0,
            1);
    uint32_t garbage[8] = {0xdeadbeef};
    put(garbage, sizeof garbage);
    put_mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000000, 1000, 0, 0, 2);
    pl_cupti_counts_t c = {0};
    pl_cupti_record_drain(buf, used, walk, NULL, 0, collect, &n_got, &c);
    assert_int_equal(c.n_records, 1);
    assert_int_equal(c.n_converted, 1);
    assert_int_equal(c.n_errors, 1);
    assert_int_equal(n_got, 1);
    /* An empty buffer or none at all: nothing, no error. */
    pl_cupti_record_drain(buf, 0, walk, NULL, 0, collect, &n_got, &c);
    pl_cupti_record_drain(NULL, 100, walk, NULL, 0, collect, &n_got, &c);
    assert_int_equal(c.n_records, 1);
    assert_int_equal(n_got, 1);
}

/* The conversion reads only the leading fields (an older CUPTI's shorter record ends right after them): a heap
 * block of exactly that size is enough (ASan checks it in the sanitised build). */
static void test_cupti_record_reads_only_leading_fields(void **state) {
    (void)state;
    size_t n = offsetof(CUpti_ActivityMemory4, name);
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.address = 0xabc000;
    m.bytes = 12345;
    m.deviceId = 2;
    m.timestamp = 1000;
    uint8_t *short_rec = malloc(n);
    assert_non_null(short_rec);
    memcpy(short_rec, &m, n);
    pl_trace_record_t r;
    assert_int_equal(pl_cupti_record_convert(short_rec, 5, &r), 1);
    free(short_rec);
    assert_int_equal(r.type, PL_REC_DEVICE_ALLOC);
    assert_int_equal(r.u.device.addr, 0xabc000);
    assert_int_equal(r.u.device.size, 12345);
    assert_int_equal(r.u.device.device, 2);
    assert_int_equal(r.t_ns, 1005);
    assert_int_equal(pl_cupti_record_convert(NULL, 0, &r), -EINVAL);
    assert_int_equal(pl_cupti_record_convert(&m, 0, NULL), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cupti_record_buffer_converted_in_order, setup),
        cmocka_unit_test_setup(test_cupti_record_corrupt_buffer_counted, setup),
        cmocka_unit_test_setup(test_cupti_record_reads_only_leading_fields, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
