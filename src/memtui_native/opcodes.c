/* The opcode walk of memtui/load/opcode_check.py in compiled form: the same rules, about a
 * hundred times faster, so the plain and streaming decoders can check every file they read.
 *
 * walk_opcodes(data, pos, base, limit, per_item) walks ``data`` from ``pos``; ``base`` is the
 * stream offset of data[0]. A length is a lie when it passes ``limit - (base + end of its
 * header)`` (limit >= 0: the stream's size plus some slack) or ``per_item`` (limit < 0: a
 * compressed stream of unknown size). It returns (status, pos, a, b):
 *   WALK_END   pos: where the next opcode starts (past len(data) inside a counted object);
 *   WALK_CUT   pos: an opcode whose header the data cuts (walk again from it with more);
 *   WALK_LINE  pos: an opcode followed by text lines (the Python side reads those);
 *   WALK_DONE  pos: after STOP, a byte that is no opcode, or a negative length: the end;
 *   WALK_MEMO  a: the memo index stored to, b: the offset of the opcode;
 *   WALK_LENGTH a: the declared length, b: the offset where its content would start;
 * and, last, how many containers (lists, dicts, sets, tuples) the opcodes walked make. */
#include "native.h"

enum { WALK_END = 0, WALK_CUT, WALK_LINE, WALK_DONE, WALK_MEMO, WALK_LENGTH };
enum { OPK_FIXED = 0, OPK_COUNTED, OPK_LINE, OPK_LONG_BINPUT, OPK_FRAME, OPK_STOP, OPK_UNKNOWN };

typedef struct {
    uint8_t kind[256];
    uint8_t container[256];  /* 1 for an opcode that makes a list, dict, set or tuple */
    uint8_t size[256];  /* fixed: bytes after the opcode; counted: width of the length */
    uint8_t is_signed[256];
} OpTable;

static OpTable optable;

static void optable_init(void)
{
    static const char fixed0[] = "Naeltsdu02(1" "\x85\x86\x87\x88\x89\x8f\x90\x91\x93" "Rbo" "\x81\x92\x94\x97\x98" "Q]})";
    static const char fixed1[] = "Khq" "\x82\x80";
    static const char fixed2[] = "M\x83";
    static const char fixed4[] = "Jj\x84";
    for (int i = 0; i < 256; i++) optable.kind[i] = OPK_UNKNOWN;
    for (const char *p = fixed0; *p; p++) optable.kind[(uint8_t)*p] = OPK_FIXED;
    for (const char *p = fixed1; *p; p++) { optable.kind[(uint8_t)*p] = OPK_FIXED; optable.size[(uint8_t)*p] = 1; }
    for (const char *p = fixed2; *p; p++) { optable.kind[(uint8_t)*p] = OPK_FIXED; optable.size[(uint8_t)*p] = 2; }
    for (const char *p = fixed4; *p; p++) { optable.kind[(uint8_t)*p] = OPK_FIXED; optable.size[(uint8_t)*p] = 4; }
    optable.kind['G'] = OPK_FIXED;
    optable.size['G'] = 8;
    /* counted: 1-byte lengths, 4-byte (signed for BINSTRING and LONG4), 8-byte */
    static const char counted1[] = "\x8a" "U" "C" "\x8c";
    static const char counted4[] = "\x8b" "T" "B" "X";
    static const char counted8[] = "\x8d\x8e\x96";
    for (const char *p = counted1; *p; p++) { optable.kind[(uint8_t)*p] = OPK_COUNTED; optable.size[(uint8_t)*p] = 1; }
    for (const char *p = counted4; *p; p++) { optable.kind[(uint8_t)*p] = OPK_COUNTED; optable.size[(uint8_t)*p] = 4; }
    for (const char *p = counted8; *p; p++) { optable.kind[(uint8_t)*p] = OPK_COUNTED; optable.size[(uint8_t)*p] = 8; }
    optable.is_signed[0x8b] = optable.is_signed['T'] = 1;
    static const char lines[] = "IL" "SVFgpciP";
    for (const char *p = lines; *p; p++) optable.kind[(uint8_t)*p] = OPK_LINE;
    optable.kind['r'] = OPK_LONG_BINPUT;
    optable.size['r'] = 4;
    optable.kind[0x95] = OPK_FRAME;
    optable.size[0x95] = 8;
    optable.kind['.'] = OPK_STOP;
    static const char containers[] = "]}ldt" "\x85\x86\x87\x8f\x91";
    for (const char *p = containers; *p; p++) optable.container[(uint8_t)*p] = 1;
}

static PyObject *walk_result(int status, Py_ssize_t pos, unsigned long long a, long long b, long long containers)
{
    return Py_BuildValue("(inKLL)", status, pos, a, b, containers);
}

static PyObject *native_walk_opcodes(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t pos;
    long long base, limit, per_item;
    if (!PyArg_ParseTuple(args, "y*nLLL", &view, &pos, &base, &limit, &per_item)) return NULL;
    const uint8_t *data = view.buf;
    Py_ssize_t end = view.len;
    int status = WALK_END;
    unsigned long long a = 0;
    long long b = 0, containers = 0;
    while (pos < end) {
        uint8_t op = data[pos];
        uint8_t kind = optable.kind[op];
        Py_ssize_t width = optable.size[op];
        if (kind == OPK_FIXED) {
            if (pos + 1 + width > end) { status = WALK_CUT; break; }
            containers += optable.container[op];
            pos += 1 + width;
            continue;
        }
        if (kind == OPK_COUNTED || kind == OPK_FRAME) {
            if (pos + 1 + width > end) { status = WALK_CUT; break; }
            const uint8_t *p = data + pos + 1;
            uint64_t u = 0;
            for (Py_ssize_t i = width; i-- > 0;) u = (u << 8) | p[i];
            int negative = optable.is_signed[op] && (u & 0x80000000u);
            Py_ssize_t after = pos + 1 + width;
            if (negative) { status = WALK_DONE; pos = after; break; }
            long long content_at = base + (long long)after;
            int lie = limit >= 0 ? (u > (uint64_t)(limit > content_at ? limit - content_at : 0))
                                 : (u > (uint64_t)per_item);
            if (lie) { status = WALK_LENGTH; a = u; b = content_at; break; }
            if (kind == OPK_FRAME) { pos = after; continue; }
            if (u > (uint64_t)(PY_SSIZE_T_MAX - after)) { status = WALK_LENGTH; a = u; b = content_at; break; }
            pos = after + (Py_ssize_t)u;
            continue;
        }
        if (kind == OPK_LONG_BINPUT) {
            if (pos + 5 > end) { status = WALK_CUT; break; }
            const uint8_t *p = data + pos + 1;
            long long index = (long long)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                                          ((uint32_t)p[3] << 24));
            if (index > base + (long long)pos) { status = WALK_MEMO; a = (unsigned long long)index; b = base + (long long)pos; break; }
            pos += 5;
            continue;
        }
        if (kind == OPK_LINE) { status = WALK_LINE; break; }
        status = WALK_DONE;  /* STOP or no opcode at all */
        pos += 1;
        break;
    }
    PyBuffer_Release(&view);
    return walk_result(status, pos, a, b, containers);
}
