/* The model cache's checksum of a piece of an array (memtui/cache/checksum.py, which has the
 * same sum in numpy for a build without this module): the piece as little-endian 64-bit
 * words, word i mixed as x = fmix64(w ^ i * K1) (MurmurHash3's finalizer: every input bit
 * moves about half the output bits), the sum of every x modulo 2**64. One flipped bit
 * changes its word's x (each step is one-to-one) and so the sum; two or more changed words
 * change it but by chance (a plain multiply, tried first, let half of all pairs of flipped
 * sign bits cancel). Bytes past the buffer, up to the piece's length, are zeros. */
#include "native.h"

#include <stdint.h>
#include <string.h>

#define CHECK_K1 0x9E3779B97F4A7C15ULL

static inline uint64_t check_word(uint64_t w, uint64_t i)
{
    uint64_t x = w ^ (i * CHECK_K1);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    return x ^ (x >> 33);
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

static uint64_t checksum_words(const uint8_t *data, Py_ssize_t nbytes, Py_ssize_t words)
{
    uint64_t sum[4] = {0, 0, 0, 0};  /* four sums, so the multiplies of a word do not wait on the last */
    Py_ssize_t full = nbytes / 8, i = 0;
    for (; i + 4 <= full; i += 4)
        for (int k = 0; k < 4; k++) sum[k] += check_word(load_le64(data + 8 * (i + k)), (uint64_t)(i + k));
    for (; i < full; i++) sum[0] += check_word(load_le64(data + 8 * i), (uint64_t)i);
    if (i < words && nbytes % 8) {  /* the last bytes, and zeros after them */
        uint8_t last[8] = {0};
        memcpy(last, data + 8 * i, (size_t)(nbytes % 8));
        sum[1] += check_word(load_le64(last), (uint64_t)i);
        i++;
    }
    for (; i < words; i++) sum[2] += check_word(0, (uint64_t)i);
    return sum[0] + sum[1] + sum[2] + sum[3];
}

static PyObject *native_checksum(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b;
    long long length;
    if (!PyArg_ParseTuple(args, "y*L", &b, &length)) return NULL;
    if (length < b.len || length % 8 || length - b.len > ((long long)1 << 30)) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError,
                        "a piece's length is a multiple of 8 and holds the buffer, with at most 1 GiB of zeros after it");
        return NULL;
    }
    uint64_t sum;
    Py_BEGIN_ALLOW_THREADS
    sum = checksum_words(b.buf, b.len, (Py_ssize_t)(length / 8));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLongLong(sum);
}
